"""bfloat16 through real Inductor on mtia_sim: Triton's interpreter cut float32 to bfloat16
toward zero; a GPU (and PyTorch) round to nearest even (inductor/_compat.py,
`round_bfloat16_to_nearest_even`)."""

import copy

import pytest
import torch

import mtia_lab  # noqa: F401

DEVICE = "mtia_sim"


def test_a_float32_to_bfloat16_conversion_rounds_to_nearest_even_as_eager():
    # -8.4999 is nearer -8.5 than -8.4375; 1 + 2^-8 is a tie, which goes to the even 1.0;
    # 1 + 3 * 2^-8 is a tie going up; the largest float32 overflows to inf; NaN stays NaN
    x = torch.tensor([-8.4999, 0.3, 1 + 2**-8, 1 + 3 * 2**-8, 3.4e38, -1e-40, float("nan")])
    torch.compiler.reset()
    got = torch.compile(lambda t: t.bfloat16())(x.to(DEVICE)).cpu()
    torch.testing.assert_close(got, x.bfloat16(), rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("width", [16, 33])
def test_a_bfloat16_block_matches_cpu_inductor_bit_for_bit(width):
    """A bf16 MLP block (the cast back to bf16 after each fused kernel is where it rounded):
    the device's Triton and CPU Inductor's C++ compute in float32 and round alike."""
    torch.manual_seed(0)
    block = torch.nn.Sequential(torch.nn.LayerNorm(width), torch.nn.Linear(width, 2 * width),
                                torch.nn.GELU(), torch.nn.Linear(2 * width, width)).bfloat16()
    x = torch.randn(4, width, dtype=torch.bfloat16)
    on_device = copy.deepcopy(block).to(DEVICE)

    def step(module, t):
        return module(t) + t

    torch.compiler.reset()
    expected = torch.compile(step)(block, x)
    torch.compiler.reset()
    got = torch.compile(step)(on_device, x.to(DEVICE)).cpu()
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
