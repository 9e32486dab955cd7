"""A host tensor, even a 0-dim one, is refused as what a device op writes (`out=`), as CUDA
refuses it: a 0-dim host tensor may ride along only as an input scalar."""

from __future__ import annotations

import pytest
import torch

OUT_CALLS = {
    "masked_select": lambda x, z: torch.masked_select(x, x > 0, out=z()),
    "argmax": lambda x, z: torch.argmax(x, out=z(torch.long)),
    "sort (values, indices)": lambda x, z: torch.sort(x, out=(z(), z(torch.long))),
    "mul of a 0-dim device tensor": lambda x, z: torch.mul(x[0], 2, out=z()),
    "index_select": lambda x, z: torch.index_select(x, 0, x.long()[:1], out=z()),
}


@pytest.mark.parametrize("call", OUT_CALLS.values(), ids=OUT_CALLS.keys())
def test_a_0dim_host_out_is_refused_with_cudas_words(device, call):
    x = torch.tensor([1.0, 0.0, 2.0], device=device)

    def host_scalar(dtype=torch.float):
        return torch.tensor(0, dtype=dtype)

    with pytest.raises(RuntimeError, match=f"Expected out tensor to have device {device}, "
                       "but got cpu instead"):
        call(x, host_scalar)


def test_a_0dim_host_tensor_is_still_a_valid_input(device):
    x = torch.tensor([1.0, 0.0, 2.0], device=device)
    assert torch.equal((x * torch.tensor(2.0)).cpu(), torch.tensor([2.0, 0.0, 4.0]))


@pytest.mark.parametrize("shape", [(), (3, 1)], ids=["0-dim", "sized"])
def test_nonzero_into_a_host_out_is_refused_with_cudas_nonzero_words(device, shape):
    """CUDA's nonzero checks its `out` itself, in its own words (PyTorch's test_shape_ops
    matches "on the same device"); the CPU accepts the same call."""
    x = torch.tensor([1.0, 0.0, 2.0], device=device)
    torch.nonzero(x.cpu(), out=torch.empty(shape, dtype=torch.long))  # the host takes it
    with pytest.raises(RuntimeError, match="expected self and out to be on the same device, "
                       f"but got out on cpu and self on {device}"):
        torch.nonzero(x, out=torch.empty(shape, dtype=torch.long))
