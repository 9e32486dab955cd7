"""How an op on device tensors is served: `MTIATensor.__torch_dispatch__`.

For every aten op that reaches the device (after autograd and autocast have had their turn):

1. unwrap: replace each device tensor by its inner CPU tensor, and check that the tensors agree on
   one device (CPU scalars may ride along, as on CUDA);
2. choose: the op's native kernel from the registry; or, for a view op with no entry, the view
   itself (views move no data); or the CPU fallback -- unless strict mode forbids it;
3. run the kernel, then wrap: results that are an argument the op wrote to come back as that same
   tensor object; results that share an input's storage become views of it; fresh results get a
   new block from the device's caching allocator.
"""

from __future__ import annotations

import contextlib
import threading

import torch

from .._compat import DEVICE_NAME
from . import cost, fallback
from .registry import Kernel, kernel_for, run_on_device
from .runtime import RUNTIME, DeviceState
from .schema import facts
from .streams import charge
from .tensor import MTIATensor, wrap

_VIEW_KERNEL = Kernel(run_on_device, "view")
_CPU = torch.device("cpu")
_state = threading.local()


class StrictModeError(NotImplementedError):
    """An op has no native kernel and strict mode forbids the CPU fallback."""


# Process-wide, not per thread: autograd runs the backward ops of device tensors on its own
# worker thread, and a trace must see those too.
_OBSERVER = None


def _observer():
    return _OBSERVER


def set_observer(observer) -> object:
    """Install the object told about every op (the trace recorder); returns the previous one."""
    global _OBSERVER
    previous, _OBSERVER = _OBSERVER, observer
    return previous


def _device_error(first: torch.device, second: torch.device) -> RuntimeError:
    return RuntimeError(
        "Expected all tensors to be on the same device, but found at least two devices, "
        f"{first} and {second}!"
    )


def _unwrap(value, devices: list):
    """Inner tensor of a device tensor; lists and tuples of tensors too (cat, stack, index)."""
    if type(value) is MTIATensor:
        devices.append(value._storage.device_index)
        return value._inner
    if isinstance(value, torch.Tensor):
        if value.dim() != 0 or value.device.type != "cpu":
            devices.append(value.device)
        return value
    if isinstance(value, (list, tuple)) and value and not isinstance(value[0], (int, float)):
        return type(value)(_unwrap(item, devices) for item in value)
    return value


def _target_device(kernel: Kernel | None, devices: list, kwargs: dict) -> int | torch.device:
    """The device index the results belong to (or a torch.device for results off the device)."""
    requested = kwargs.get("device")
    if requested is not None:
        requested = torch.device(requested)
        if requested.type == DEVICE_NAME:
            index = requested.index if requested.index is not None else RUNTIME.current_index
        else:
            index = requested
        if kernel is not None and kernel.cross_device:
            return index
    else:
        index = None
    first = None
    for device in devices:
        if first is None:
            first = device
        elif device != first and not (kernel is not None and kernel.cross_device):
            raise _device_error(_as_device(first), _as_device(device))
    if index is not None:
        return index
    return first if first is not None else RUNTIME.current_index


def _as_device(device) -> torch.device:
    return torch.device(DEVICE_NAME, device) if isinstance(device, int) else device


def torch_dispatch(cls, func, types, args=(), kwargs=None):
    kwargs = kwargs or {}
    devices: list = []
    inner_args = tuple(_unwrap(a, devices) for a in args)
    inner_kwargs = {k: _unwrap(v, devices) for k, v in kwargs.items()} if kwargs else {}
    kernel = kernel_for(func)
    op_facts = facts(func)
    target = _target_device(kernel, devices, kwargs)
    device_index = target if isinstance(target, int) else (devices[0] if devices else 0)
    if not isinstance(device_index, int):
        device_index = next(d for d in devices if isinstance(d, int))
    device = RUNTIME.device(device_index)
    if "device" in inner_kwargs:
        inner_kwargs["device"] = _CPU
    if op_facts.has_generator and inner_kwargs.get("generator") is None:
        inner_kwargs["generator"] = device.generator
    observer = _OBSERVER
    if kernel is None and op_facts.is_view:
        kernel = _VIEW_KERNEL
    if kernel is None:
        if RUNTIME.strict:
            raise StrictModeError(_strict_message(op_facts.name))
        if observer is not None:
            observer.before_op(func, "fallback", args, kwargs, device)
        out = fallback.run(func, op_facts, inner_args, inner_kwargs, device)
        kind = "fallback"
        # The op ran on the host: its inputs went up the host link and its results came back.
        price = cost.transfer(cost._nbytes(inner_args) + cost._nbytes(out))
    else:
        if observer is not None:
            observer.before_op(func, kernel.kind, args, kwargs, device)
        out = kernel.fn(func, inner_args, inner_kwargs, device)
        kind = kernel.kind
        price = None if kind == "view" else cost.estimate(func, inner_args, out)
        if kernel.cross_device and not (isinstance(target, int) and devices and all(
            isinstance(d, int) for d in devices
        )):
            price = cost.transfer(cost._nbytes(out) or cost._nbytes(inner_args[1:2]))
    span = charge(device, price.duration_us(device.profile)) if price is not None else None
    result = _rewrap(out, op_facts, args, kwargs, target, func)
    if observer is not None:
        observer.after_op(func, kind, result, price, span)
    return result


def _rewrap(out, op_facts, args, kwargs, target, func):
    if not isinstance(target, int):  # e.g. _to_copy(device="cpu"): the result lives on the host
        return out
    name = op_facts.name
    if isinstance(out, torch.Tensor):
        alias = op_facts.return_aliases[0] if op_facts.return_aliases else None
        if alias is not None:
            return _written_arg(op_facts, args, kwargs, alias, out, target, name)
        return wrap(out, target, name)
    if isinstance(out, (tuple, list)):
        results = []
        for i, item in enumerate(out):
            alias = op_facts.return_aliases[i] if i < len(op_facts.return_aliases) else None
            if alias is not None:
                results.append(_written_arg(op_facts, args, kwargs, alias, item, target, name))
            elif isinstance(item, torch.Tensor):
                results.append(wrap(item, target, name))
            elif isinstance(item, (list, tuple)):
                results.append(type(item)(wrap(t, target, name) for t in item))
            else:
                results.append(item)
        return type(out)(results)
    return out


def _written_arg(op_facts, args, kwargs, where, inner_result, target, name):
    """An op that writes to an argument returns that argument, the same Python object."""
    original = op_facts.arg(args, kwargs, where)
    if type(original) is MTIATensor:
        _sync_metadata(original, name)
        return original
    return inner_result if not isinstance(inner_result, torch.Tensor) else original


def _sync_metadata(tensor: MTIATensor, name: str) -> None:
    """After `out=` resized the inner tensor (`torch.arange(n, device=...)` is `empty(0)` then
    `arange.out`), make the wrapper follow: `.data =` swaps its metadata and storage in place,
    so the caller's tensor object stays the same."""
    inner = tensor._inner
    if (
        inner.shape == tensor.shape
        and inner.stride() == tensor.stride()
        and inner.storage_offset() == tensor.storage_offset()
        and inner.untyped_storage().nbytes() == tensor._storage.nbytes
    ):
        return
    resized = wrap(inner, tensor._storage.device_index, name)
    tensor.data = resized
    tensor._inner, tensor._storage = resized._inner, resized._storage


def _strict_message(name: str) -> str:
    return (
        f"{name} has no native kernel on {DEVICE_NAME}, and strict mode forbids the CPU "
        "fallback.\nAdd a kernel:\n"
        f'    @mtia_lab.register_kernel("{name}")\n'
        "    def my_kernel(func, args, kwargs, device):\n"
        "        return func(*args, **kwargs)  # args hold the device's memory as CPU tensors\n"
        "or allow the fallback for this region: `with mtia_lab.strict(False): ...`."
    )


@contextlib.contextmanager
def strict(enabled: bool = True):
    """Within the block, an op without a native kernel raises StrictModeError."""
    previous = RUNTIME.strict
    RUNTIME.strict = enabled
    try:
        yield
    finally:
        RUNTIME.strict = previous


def set_strict(enabled: bool) -> None:
    RUNTIME.strict = enabled


MTIATensor.__torch_dispatch__ = classmethod(torch_dispatch)
DeviceState  # re-exported for type hints in kernels
