"""The math Inductor's Triton kernels call through `libdevice`, run by Triton's interpreter on
mtia_sim (mtia_lab/inductor/libdevice.py), against PyTorch's eager CPU kernels.

The oracle is PyTorch's own OpInfo samples for each op that Inductor lowers to a libdevice
call; the coverage check reads the names from Inductor's own code generator, so a function a
new PyTorch emits fails here rather than in a learner's model.
"""

import inspect
import re

import pytest
import torch
from torch.testing._internal.common_methods_invocations import op_db

import mtia_lab  # noqa: F401
from mtia_lab.inductor import InductorDeviceError, libdevice

DEVICE = "mtia_sim"
# OpInfo name -> the libdevice function Inductor's kernel calls for it.
OPS = {
    "tan": "tan", "sinh": "sinh", "cosh": "cosh", "asin": "asin", "acos": "acos",
    "atan": "atan", "asinh": "asinh", "acosh": "acosh", "atanh": "atanh", "atan2": "atan2",
    "hypot": "hypot", "fmod": "fmod", "copysign": "copysign", "nextafter": "nextafter",
    "log10": "log10", "trunc": "trunc", "lgamma": "lgamma", "erfc": "erfc",
    "erfinv": "erfinv", "special.erfcx": "erfcx", "special.bessel_j0": "j0",
    "special.bessel_j1": "j1", "special.bessel_y0": "y0", "special.bessel_y1": "y1",
    "special.i0e": "exp", "i0": "cyl_bessel_i0", "special.i1": "cyl_bessel_i1",
    "ldexp": "ldexp", "pow": "pow", "tanh": "tanh", "expm1": "expm1", "log1p": "log1p",
    "signbit": "signbit",
}
# Names in Inductor's source that are no function of libdevice (a module attribute, a
# format string's field).
NOT_FUNCTIONS = {"is_file", "10"}


def _emitted_by_inductor() -> set[str]:
    from torch._inductor.codegen import triton as triton_codegen

    names = set(re.findall(r"libdevice\.([A-Za-z0-9_]+)", inspect.getsource(triton_codegen)))
    return names - NOT_FUNCTIONS


def test_every_function_inductors_triton_code_calls_is_provided():
    missing = [n for n in sorted(_emitted_by_inductor())
               if not callable(getattr(libdevice.LIBDEVICE, n, None))]
    assert not missing, f"libdevice functions Inductor emits but mtia_lab lacks: {missing}"


def _samples(name: str):
    (info,) = [o for o in op_db if o.name == name and o.variant_test_name == ""]
    return info, list(info.sample_inputs("cpu", torch.float32))[:4]


@pytest.mark.parametrize("name", sorted(OPS))
def test_an_op_inductor_lowers_to_libdevice_matches_cpu_eager(name):
    info, samples = _samples(name)
    for sample in samples:
        args = (sample.input, *sample.args)
        if not all(isinstance(a, torch.Tensor) and a.dtype.is_floating_point or
                   not isinstance(a, torch.Tensor) for a in args) or sample.kwargs:
            continue  # an integer exponent (ldexp) or keyword form: not this kernel
        expected = info.op(*args)
        on_device = [a.to(DEVICE) if isinstance(a, torch.Tensor) else a for a in args]
        torch.compiler.reset()
        got = torch.compile(info.op, dynamic=False)(*on_device)
        torch.testing.assert_close(got.cpu(), expected, equal_nan=True,
                                   msg=lambda m, s=sample: f"{name} on {s}: {m}")


@pytest.mark.parametrize(("name", "fn"), [
    ("pow of a negative base", lambda t: torch.pow(t, 2.5)),
    ("pow of a negative scalar base", lambda t: torch.pow(-2.5, t)),
    ("tanh near zero", torch.tanh),
    ("signbit of -0.0", torch.signbit),
    ("expm1 near zero", torch.expm1),
])
def test_edge_values_are_exactly_the_cpus(name, fn):
    """Composed from exp and log, these were silently wrong: |a|^b for a negative base (NaN in
    eager), tanh(1e-8) = 0, signbit(-0.0) = False."""
    x = torch.tensor([-1.5, 2.0, -3.0, 0.5, 1e-8, -1e-7, -0.0, 0.0, float("nan"), float("inf")])
    torch.compiler.reset()
    got = torch.compile(fn)(x.to(DEVICE)).cpu()
    torch.testing.assert_close(got, fn(x), rtol=0, atol=0, equal_nan=True, msg=name)


def test_a_bfloat16_op_computes_in_float32_as_cpu_inductor_does():
    torch.manual_seed(0)
    x = torch.randn(8, 33)

    def f(t):
        return torch.asinh(t.bfloat16()).float()

    torch.compiler.reset()
    on_device = torch.compile(f)(x.to(DEVICE)).cpu()
    torch.compiler.reset()
    torch.testing.assert_close(on_device, torch.compile(f)(x), rtol=0, atol=1e-6)


def test_a_function_no_table_has_names_itself_in_the_error():
    with pytest.raises(InductorDeviceError, match=r"libdevice\.no_such_function"):
        libdevice.LIBDEVICE.no_such_function  # noqa: B018


@pytest.mark.parametrize("name", ["tanh", "atan2", "lgamma", "pow"])
def test_a_replayed_whole_grid_launch_computes_on_its_own_data(name):
    """A launch run over the whole grid is recorded once and replayed (whole_grid/tape.py): a
    library function must be a step of the tape, or a replay returns the recorded launch's
    values -- silently wrong from the second call on."""
    from mtia_lab.inductor import whole_grid

    fn = {"tanh": lambda t: torch.nn.functional.gelu(t, approximate="tanh"),
          "atan2": lambda t: torch.atan2(t, t[:, :1] + 1),
          "lgamma": lambda t: torch.lgamma(t.abs() + 1).sum(-1),
          "pow": lambda t: torch.pow(t, 2.5)}[name]
    torch.manual_seed(0)
    torch.compiler.reset()
    compiled = torch.compile(fn)
    for _ in range(3):
        x = torch.randn(3, 100)
        whole_grid.STATS.reset()
        torch.testing.assert_close(compiled(x.to(DEVICE)).cpu(), fn(x), equal_nan=True)
        assert whole_grid.STATS.per_program == 0, whole_grid.STATS
    assert whole_grid.STATS.replayed >= 1
