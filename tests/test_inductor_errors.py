"""What Inductor cannot do on mtia_sim fails with one clear error naming the problem and fix."""

import gc

import pytest
import torch
from fresh_python import run_python

from mtia_lab.inductor import InductorDeviceError, errors

DEVICE = "mtia_sim"


def test_a_kernel_the_interpreter_cannot_run_names_the_op_and_the_fix(monkeypatch):
    from mtia_lab.inductor import libdevice

    # Every function Inductor emits is provided (test_inductor_libdevice): take one away, as
    # a newer PyTorch's new function would be missing.
    monkeypatch.delitem(libdevice._FROM_TORCH, "atan")
    x = torch.randn(4, 8)
    before = x.clone()
    torch.compiler.reset()
    with pytest.raises(InductorDeviceError) as info:
        torch.compile(lambda t: torch.atan(t) + 1)(x.to(DEVICE))
    message = str(info.value)
    assert "libdevice.atan" in message and "atan" in message.split("(in Triton kernel")[1]
    assert "torch.compiler.disable" in message and "backend='mtia_lab'" in message
    assert "\n" not in message  # one line, not Inductor's traceback
    torch.testing.assert_close(x, before)


def test_static_recompile_per_size_works():
    torch.compiler.reset()
    f = torch.compile(lambda t: (t * 2).sum(0), dynamic=False)
    for n in (3, 5):
        x = torch.randn(n, 8)
        torch.testing.assert_close(f(x.to(DEVICE)).cpu(), (x * 2).sum(0))


def test_a_triton_that_does_not_match_names_both_versions(monkeypatch):
    monkeypatch.setattr(errors._compat, "triton_version", lambda: "3.8.1")
    with pytest.raises(InductorDeviceError, match=r"triton 3\.8\.1 is installed") as info:
        errors.check_triton()
    assert "pip install triton==3.9.0" in str(info.value)
    monkeypatch.setattr(errors._compat, "triton_version", lambda: None)
    with pytest.raises(InductorDeviceError, match="triton is not installed"):
        errors.check_triton()


def test_import_stays_cheap_and_sets_the_interpreter_switch_only():
    done = run_python(
        "import os, sys, mtia_lab; print('torch._dynamo' in sys.modules, 'triton' in sys.modules,"
        " 'torch._inductor' in sys.modules, os.environ.get('TRITON_INTERPRET'))",
        PYTHONPATH=".")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False", "False", "1"]


def test_a_user_setting_of_the_switch_is_left_alone():
    done = run_python("import os, mtia_lab; print(os.environ['TRITON_INTERPRET'])",
                      PYTHONPATH=".", TRITON_INTERPRET="0")
    assert done.stdout.strip() == "0", done.stderr


def test_out_of_memory_in_a_compiled_call_names_the_holders_and_the_next_call_works():
    import mtia_lab

    def f(x):
        y = (x * 2).relu()
        return ((y @ y.t()).softmax(-1) + 1).sum(0)

    torch.compiler.reset()
    x = torch.randn(512, 512)
    compiled = torch.compile(f)
    expected = compiled(x.to(DEVICE)).cpu()  # compiled and run once with room to spare
    device_x = x.to(DEVICE)
    held = torch.mtia_sim.memory_allocated()
    capacity = mtia_lab.backend.runtime.device_state.RUNTIME.capacity
    torch.mtia_sim.empty_cache()
    try:
        mtia_lab.configure(memory_capacity=held + (1 << 20))  # less than the call's buffers
        with pytest.raises(torch.OutOfMemoryError) as info:
            compiled(device_x)
    finally:
        mtia_lab.configure(memory_capacity=capacity)
    message = str(info.value)
    assert "out of memory" in message and "Largest holders of memory" in message
    assert "memory_capacity" in message  # the fix is named
    assert torch.mtia_sim.memory_allocated() == held  # the failed call's buffers are back
    torch.testing.assert_close(compiled(device_x).cpu(), expected)


@torch.library.custom_op("mtia_lab_tests::twice", mutates_args=())
def _twice(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@_twice.register_fake
def _(x):
    return torch.empty_like(x)


def test_an_op_inductor_cannot_lower_names_the_op_and_what_to_do():
    from torch._inductor import config

    x = torch.randn(4, 8).to(DEVICE)
    torch.compiler.reset()
    gc.collect()  # what earlier tests left for the collector goes now, not during the compile
    before, held = x.cpu(), torch.mtia_sim.memory_allocated()
    with config.patch(implicit_fallbacks=False), pytest.raises(Exception) as info:
        torch.compile(lambda t: _twice(t) + 1)(x)  # no lowering and no fallback allowed
    message = str(info.value)
    assert "cannot lower mtia_lab_tests.twice.default for mtia_sim" in message
    assert "torch.compiler.disable" in message and "backend='mtia_lab'" in message
    assert torch.equal(x.cpu(), before) and torch.mtia_sim.memory_allocated() == held
    torch.compiler.reset()
    torch.testing.assert_close(torch.compile(lambda t: _twice(t) + 1)(x).cpu(), before * 2 + 1)
