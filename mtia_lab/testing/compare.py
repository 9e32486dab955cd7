"""Comparing a device result with the CPU's: how inputs move, and what "the same" means.

The device must give the CPU's answer: the same structure, and per tensor the same dtype, shape
and values (assert_close's tolerance for the dtype, NaN equal to NaN), on the device. Inputs move
with their layout, so strided views and aliasing are tested too; and a result that views an input
on the CPU must view it on the device, or writes through it would be lost.
"""

from __future__ import annotations

import torch

from .. import DEVICE
from .._compat import pytree, tolerance_override_type
from ..backend import MTIATensor, storage_of


def to_device(value, device: str = DEVICE):
    """Every tensor in a nested structure moved to `device` with the same values *and layout*:
    each CPU storage is copied once, and every tensor becomes the same view (size, strides,
    offset) of the copy. So a slice keeps the rest of its storage (as_strided reads it), and
    tensors that shared memory on the CPU share it on the device."""
    copies: dict[int, torch.Tensor] = {}

    def move(t):
        if not isinstance(t, torch.Tensor):
            return t
        if t.layout != torch.strided or t.is_conj() or t.is_neg():
            return t.to(device)
        storage = t.untyped_storage()
        if storage.data_ptr() == 0 or storage.nbytes() % t.element_size():
            return t.to(device)
        base = copies.get(storage.data_ptr())
        if base is None:
            host_bytes = torch.empty(0, dtype=torch.uint8).set_(storage)
            base = copies[storage.data_ptr()] = host_bytes.to(device)
        return base.view(t.dtype).as_strided(t.shape, t.stride(), t.storage_offset())

    return pytree.tree_map(move, value)


def to_cpu(value):
    return pytree.tree_map(lambda v: v.cpu() if isinstance(v, torch.Tensor) else v, value)


def plain(value):
    """Named tuples (torch.return_types.max, max_out) and torch.Size compare as tuples."""
    if isinstance(value, tuple) and type(value) is not tuple:
        return tuple(plain(v) for v in value)
    if isinstance(value, (list, tuple)):
        return type(value)(plain(v) for v in value)
    return value


def compare(expected, actual, *, check_values: bool = True, check_device: bool = True,
            tolerance: dict | None = None) -> None:
    """Raise AssertionError if the device result differs from the CPU one: structure, then per
    tensor device, dtype, shape and (unless random) values, NaN == NaN, within assert_close's
    default tolerances for the dtype or `tolerance` (atol, rtol)."""
    exp_leaves, exp_spec = pytree.tree_flatten(plain(expected))
    act_leaves, act_spec = pytree.tree_flatten(plain(actual))
    if exp_spec != act_spec:
        raise AssertionError(f"result structure differs: cpu {exp_spec} vs device {act_spec}")
    for i, (exp, act) in enumerate(zip(exp_leaves, act_leaves, strict=True)):
        where = f"result {i}" if len(exp_leaves) > 1 else "result"
        if not isinstance(exp, torch.Tensor):
            if isinstance(act, torch.Tensor) or (check_values and not _same_scalar(exp, act)):
                raise AssertionError(f"{where}: cpu {exp!r} vs device {act!r}")
            continue
        if not isinstance(act, torch.Tensor):
            raise AssertionError(f"{where}: cpu gives a tensor, device {type(act).__name__}")
        if check_device and exp.device.type == "cpu" and act.device.type != DEVICE:
            raise AssertionError(f"{where}: device op returned a tensor on {act.device}")
        if exp.dtype != act.dtype or exp.shape != act.shape:
            raise AssertionError(
                f"{where}: cpu {exp.dtype}{list(exp.shape)} vs device {act.dtype}{list(act.shape)}"
            )
        if check_values:
            torch.testing.assert_close(act.cpu(), exp, equal_nan=True, check_device=False,
                                       msg=lambda m, where=where: f"{where}: {m}",
                                       **(tolerance or {}))


def check_aliasing(expected, actual, cpu_inputs, device_inputs) -> None:
    """A result that is a view of an input on the CPU must be a view of that same input on the
    device: writes through it must reach the input (a copy would silently break that)."""
    owners = {}  # CPU storage pointer -> the device storage its tensor was moved to
    cpu_leaves = pytree.tree_leaves(cpu_inputs)
    dev_leaves = pytree.tree_leaves(device_inputs)
    for cpu, dev in zip(cpu_leaves, dev_leaves, strict=False):
        if isinstance(cpu, torch.Tensor) and isinstance(dev, MTIATensor) and cpu.numel():
            owners[cpu.untyped_storage().data_ptr()] = storage_of(dev)
    exp_leaves = pytree.tree_leaves(plain(expected))
    act_leaves = pytree.tree_leaves(plain(actual))
    for i, (exp, act) in enumerate(zip(exp_leaves, act_leaves, strict=True)):
        if not isinstance(exp, torch.Tensor) or not exp.numel() or exp.layout != torch.strided:
            continue
        owner = owners.get(exp.untyped_storage().data_ptr())
        if owner is not None and (not isinstance(act, MTIATensor) or storage_of(act) is not owner):
            raise AssertionError(
                f"result {i} is a view of an input on the CPU but not on {DEVICE} (a copy)"
            )


def _same_scalar(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    return a == b


def tolerance_for(op, dtype: torch.dtype) -> dict | None:
    """PyTorch's own tolerance for comparing this op across devices (the toleranceOverride its
    OpInfo gives TestCommon, where test_compare_cpu lives), if it sets one for `dtype`."""
    toleranceOverride = tolerance_override_type()

    for info in op.decorators:
        if getattr(info, "cls_name", None) != "TestCommon" or getattr(info, "device_type", None):
            continue
        if getattr(info, "test_name", None) not in (None, "test_compare_cpu"):
            continue
        for decorator in getattr(info, "decorators", ()):
            if isinstance(decorator, toleranceOverride) and dtype in decorator.d:
                tol = decorator.d[dtype]
                return {"atol": tol.atol, "rtol": tol.rtol}
    return None
