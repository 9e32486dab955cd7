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

import torch

from ..._compat import (
    DEVICE_NAME,
    ExcludeDispatchKeys,
    OpOverload,
    dispatch_key_set,
    has_composite_implicit,
    op_schema,
)
from ..._compat import compile_session as _session
from ..._compat import make_fx_watching as _make_fx_watching
from ..runtime import cost, oom
from ..runtime.device_state import RUNTIME, DeviceState
from ..runtime.streams import charge
from . import fallback, host_indices, layouts
from .quantized import makes_quantized, refuse_compile
from .registry import KERNELS, WHOLE_OPS, Kernel, run_on_device
from .schema import facts
from .sparse import MTIASparseTensor, resync
from .tensor import MTIATensor, wrap

_VIEW_KERNEL = Kernel(run_on_device, "view")
_CPU = torch.device("cpu")
_META = torch.device("meta")


class UntrackedByMakeFx(RuntimeError):
    """make_fx (real tracing) met a device op it does not track: its graph would be wrong."""


def _untracked_message(func) -> str:
    return (f"{func}: make_fx (tracing real tensors, as torch.func.linearize does) cannot "
            "follow this op: a device tensor is a Python wrapper subclass, and one that make_fx "
            "was not given as an input (a closure, a constant) leaves the op untracked, so its "
            "graph would hold the result as a constant and ignore its inputs -- silently wrong "
            "(PyTorch does the same for any wrapper subclass). Pass every device tensor as an "
            "input, or use torch.func.jvp in place of linearize")


class StrictModeError(NotImplementedError):
    """An op has no native kernel and strict mode forbids the CPU fallback."""


# Process-wide, not per thread: autograd runs the backward ops of device tensors on its own
# worker thread, and a trace must see those too.
_OBSERVER = None


def set_observer(observer) -> object:
    """Install the object told about every op (the trace recorder); returns the previous one.

    An observer with `wants_prices = False` gets `price=None` for kernels: the dispatcher then
    skips building a KernelCost nobody would read (a trace records the simulated span only)."""
    global _OBSERVER
    previous, _OBSERVER = _OBSERVER, observer
    return previous


# The graph being captured (graph_capture.py), told about every op; None when no capture is
# underway.
_CAPTURE = None


def set_capture(capture) -> object:
    """Install the capture that records every op (graph_capture.py); returns the previous one."""
    global _CAPTURE
    previous, _CAPTURE = _CAPTURE, capture
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
    if type(value) is MTIASparseTensor:
        devices.append(value.device_index)
        return value._inner
    if isinstance(value, torch.Tensor):
        device = value.device
        if device.type == DEVICE_NAME:  # not a wrapper, but on the device (a fake while compiling)
            devices.append(device.index or 0)
        elif value.dim() != 0 or device.type != "cpu":
            devices.append(device)
        return value
    if isinstance(value, (list, tuple)) and value and not isinstance(value[0], (int, float)):
        return type(value)([_unwrap(item, devices) for item in value])
    return value


def _inner_device(requested) -> torch.device:
    """Where the inner op puts its result: on the host (the device's memory, or a copy that
    leaves the device), except on `meta` -- no memory at all, which the inner op can make as
    well. (`x.to("meta")`: PyTorch's ZeroTensor kernels ask it of every operand, to compute an
    output's shape, and forward-over-reverse AD makes ZeroTensors.)"""
    if requested is not None and torch.device(requested).type == "meta":
        return _META
    return _CPU


def _target_device(kernel: Kernel | None, devices: list, kwargs: dict) -> int | torch.device:
    """The device index the results belong to (or a torch.device for results off the device)."""
    cross_device = kernel is not None and kernel.cross_device
    requested = kwargs.get("device") if kwargs else None
    index = None
    if requested is not None:
        requested = torch.device(requested)
        if requested.type == DEVICE_NAME:
            index = requested.index if requested.index is not None else RUNTIME.current_index
        else:
            index = requested
        if cross_device:
            return index
    if not devices:
        return index if index is not None else RUNTIME.current_index
    first = devices[0]
    if not cross_device:
        for device in devices:
            if device != first:
                raise _device_error(_as_device(first), _as_device(device))
    return index if index is not None else first


# Ops whose CUDA kernel checks `out`'s device itself, in its own words (TensorIterator's
# "Expected out tensor to have device ..." serves the rest).
_CUDA_OUT_DEVICE_WORDS = {
    "aten::nonzero.out": "expected self and out to be on the same device, but got out on "
                         "{out} and self on {target}.",
}


def _check_written_on_device(op_facts, args, kwargs, target: int) -> None:
    """A host scalar may ride along as an input, but never as what the op writes (`out=`,
    in-place `self`): CUDA refuses it too, else the result would land on the host."""
    for where in op_facts.mutated:
        written = op_facts.arg(args, kwargs, where)
        for tensor in written if isinstance(written, (list, tuple)) else (written,):
            if isinstance(tensor, torch.Tensor) and tensor.device.type != DEVICE_NAME:
                cuda_words = _CUDA_OUT_DEVICE_WORDS.get(
                    op_facts.name, "Expected out tensor to have device {target}, but got "
                    "{out} instead.")
                raise RuntimeError(  # CUDA's words first: PyTorch's tests match them
                    cuda_words.format(out=tensor.device, target=f"{DEVICE_NAME}:{target}")
                    + " "
                    f"{op_facts.name}: expected '{where[1]}' to be on {DEVICE_NAME}:{target}, "
                    f"but got a tensor on {tensor.device} (the op runs on {DEVICE_NAME}:{target} "
                    f"and writes its result there). Pass a tensor made on the device, e.g. "
                    f"torch.empty(..., device='{DEVICE_NAME}:{target}'), or omit out=."
                )


def _as_device(device) -> torch.device:
    return torch.device(DEVICE_NAME, device) if isinstance(device, int) else device


class _OpPlan:
    """What the dispatcher needs about one overload, worked out on its first call and cached:
    its kernel (the registered one, the view kernel, or None for the fallback) and its schema
    facts. `registered` is the registry entry it was made from: registering or removing a kernel
    later makes the plan stale, and the next call makes a new one."""

    __slots__ = ("registered", "kernel", "facts", "name", "first_alias", "host_sync",
                 "before_run", "layout", "whole")

    def __init__(self, func: OpOverload, registered: Kernel | None) -> None:
        self.registered = registered
        self.facts = facts(func)
        self.name = self.facts.name
        if registered is None and self.facts.is_view:
            self.kernel = _VIEW_KERNEL  # a view moves no data: run it on the device memory
        else:
            self.kernel = registered
        aliases = self.facts.return_aliases
        self.first_alias = aliases[0] if aliases else None
        # Asked once here, not per call: hashing an OpOverload runs Python code (torch/_ops.py)
        self.host_sync = func in _HOST_SYNCS
        self.before_run = _BEFORE_RUN.get(func)
        # The layout the fake kernel promises, where the CPU's kernel gives another (layouts.py)
        self.layout = layouts.RULES.get(func)
        # An op PyTorch writes out of other ops (`linear`, `layer_norm`, `reshape`) reaches the
        # device whole only where autograd's keys are off (inference mode): run its pieces, as
        # a CUDA tensor does, instead of sending the whole op to the CPU fallback. Not an op that
        # writes its arguments (`out=`): the fallback keeps their semantics (out_on_host.py). Not
        # a factory taking a layout: its pieces would build a sparse CSR tensor that is not ours.
        composite = (registered is None and not self.facts.mutated
                     and has_composite_implicit(func)
                     and not any(a.name == "layout" for a in op_schema(func).arguments))
        self.whole = WHOLE_OPS.get(func) or (func.decompose if composite else None)


# Keyed by id(func): overloads are interned (torch.ops.aten.add.Tensor is always the same object,
# alive as long as the process) and an int hashes in C, an OpOverload in Python.
_PLANS: dict[int, _OpPlan] = {}
# What a few ops need before they run: host index tensors copied to the device, as CUDA does
# (host_indices.py); the capacity checked for results sized by their arguments (oom.py).
_BEFORE_RUN = dict.fromkeys(host_indices.INDEX_OPS, host_indices.indices_to_device)
_BEFORE_RUN.update(dict.fromkeys(oom.RESULT_BYTES, oom.check_result))


def _plan_of(func, registered: Kernel | None) -> _OpPlan:
    """The cached plan of `func`, made anew when its registry entry changed."""
    plan = _PLANS.get(id(func))
    if plan is None or plan.registered is not registered:
        plan = _PLANS[id(func)] = _OpPlan(func, registered)
    return plan


_aten = torch.ops.aten
_PYTHON_KEY = dispatch_key_set("Python")
_inference_mode_enabled = torch.is_inference_mode_enabled
_COPY = _aten.copy_.default
_HOST_SYNCS = frozenset(
    {_aten._local_scalar_dense.default, _aten.equal.default, _aten.is_nonzero.default}
)


def torch_dispatch(cls, func, types, args=(), kwargs=None):
    if _session._is_compiling_flag:  # torch.compile is tracing (fake tensors): see _traced
        return _traced(func, args, kwargs)
    if _make_fx_watching():
        raise UntrackedByMakeFx(_untracked_message(func))
    registered = KERNELS.get(func)
    if registered is not None and registered.kind == "query":
        return _answer_query(registered, func, args, kwargs)
    plan = _PLANS.get(id(func))
    if plan is None or plan.registered is not registered:
        plan = _plan_of(func, registered)
    if plan.whole is not None:
        return plan.whole(*args, **(kwargs or {}))
    op_facts, kernel = plan.facts, plan.kernel
    if plan.before_run is not None:
        args = plan.before_run(func, args, kwargs)
    # 1. unwrap, and find the one device the op runs on
    devices: list = []
    inner_args = tuple([_unwrap(a, devices) for a in args])
    if kwargs:
        inner_kwargs = {k: _unwrap(v, devices) for k, v in kwargs.items()}
        if "device" in inner_kwargs:
            inner_kwargs["device"] = _inner_device(inner_kwargs["device"])
    else:
        kwargs, inner_kwargs = {}, {}
    try:
        target = _target_device(registered, devices, kwargs)
    except RuntimeError:  # mixed devices; an op that checks its `out` first says so first
        if op_facts.name in _CUDA_OUT_DEVICE_WORDS:
            on_device = next((d for d in devices if type(d) is int), RUNTIME.current_index)
            _check_written_on_device(op_facts, args, kwargs, on_device)
        raise
    if op_facts.mutated and type(target) is int and not (kernel and kernel.cross_device):
        _check_written_on_device(op_facts, args, kwargs, target)
    if type(target) is int:
        device_index = target
    else:  # the results leave the device; the work is still the device's
        device_index = next((d for d in devices if type(d) is int), 0)
    states = RUNTIME.devices
    if 0 <= device_index < len(states):
        device = states[device_index]
    else:
        device = RUNTIME.device(device_index)  # raises, naming the devices that exist
    if op_facts.has_generator and inner_kwargs.get("generator") is None:
        inner_kwargs["generator"] = device.generator
    observer = _OBSERVER  # process-wide (see set_observer)
    # 2. run the kernel (or the fallback) and 3. price it on the simulated clock
    price = None
    if kernel is None:
        if RUNTIME.strict:
            raise StrictModeError(_strict_message(plan.name))
        if observer is not None:
            observer.before_op(func, "fallback", args, kwargs, device)
        if _CAPTURE is not None:  # a graph cannot replay host work: it raises, naming the op
            _CAPTURE.refuse_fallback(func)
        try:
            out = fallback.run(func, op_facts, inner_args, inner_kwargs, device)
        except RuntimeError as error:  # a host allocation failure is the device's OOM
            raise oom.device_error(error, device.index, plan.name)  # noqa: B904
        if plan.layout is not None:
            out = plan.layout(func, inner_args, inner_kwargs, out)
        kind = "fallback"
        # The op ran on the host: its inputs went up the host link and its results came back.
        price = cost.transfer(cost.tensor_bytes(inner_args) + cost.tensor_bytes(out))
        duration = price.duration_us(device.profile)
    else:
        kind = kernel.kind
        if observer is not None:
            observer.before_op(func, kind, args, kwargs, device)
        try:
            out = kernel.fn(func, inner_args, inner_kwargs, device)
        except RuntimeError as error:  # a host allocation failure is the device's OOM
            raise oom.device_error(error, device.index, plan.name)  # noqa: B904
        if plan.layout is not None:
            out = plan.layout(func, inner_args, inner_kwargs, out)
        if kernel.cross_device and target != _META and not (
            type(target) is int and devices and all(d == target for d in devices)
        ):  # a copy between host and device, or between two devices: it crosses the link
            price = cost.transfer(cost.tensor_bytes(out) or cost.tensor_bytes(inner_args[1:2]))
            duration = price.duration_us(device.profile)
        elif kind == "view" or target == _META:
            duration = None  # views (and shapes computed on `meta`) move no data: no work
        elif kind == "collective":  # mtia_ccl charges the interconnect (distributed/)
            duration = None
        elif observer is not None and getattr(observer, "wants_prices", True):
            price = cost.estimate(func, inner_args, out)
            duration = price.duration_us(device.profile)
        else:  # the same figure, without building a KernelCost nobody will read
            duration = cost.estimate_us(func, inner_args, out, device.profile)
    if _CAPTURE is not None:  # capturing: record the kernel; the clock moves at replay
        duration = _CAPTURE.record(
            func, kernel, inner_args, inner_kwargs, out, devices, target, device, duration
        )
    span = charge(device, duration) if duration is not None else None
    if span is not None and (type(target) is not int or plan.host_sync):
        # The host reads the result (`.cpu()`, `.item()`): it waits for the stream to finish,
        # unless the copy was non_blocking.
        if not (kwargs.get("non_blocking") or (func is _COPY and len(args) > 2 and args[2])):
            span[0].synchronize()
    # 4. wrap the results back onto the device
    if type(target) is not int:  # e.g. _to_copy(device="cpu"): the result lives on the host
        result = out
    elif kind == "view" and _inference_mode_enabled() and not args[0].is_inference():
        # Under inference_mode a view of a normal tensor is a normal tensor (it shares its
        # base's version counter); a wrapper made here would be an inference tensor.
        with torch.inference_mode(False):
            result = _rewrap(out, op_facts, args, kwargs, target)
    elif isinstance(out, torch.Tensor) and plan.first_alias is None:
        result = wrap(out, target, plan.name)  # the common case: one fresh or view result
    else:
        result = _rewrap(out, op_facts, args, kwargs, target)
    if observer is not None:
        observer.after_op(func, kind, result, price, span)
    return result


def _answer_query(registered: Kernel, func, args, kwargs):
    """A metadata question about the tensors themselves, not their memory: PyTorch's own
    answer, from the wrappers (kernels.METADATA_QUERIES) or from the inner tensor
    (sparse.QUERIES, quantized.QUERIES: registry.ask_inner), on any mix of devices. No data
    moves: no price, no trace event."""
    with ExcludeDispatchKeys(_PYTHON_KEY):
        return registered.fn(func, args, kwargs or {}, None)


def _traced(func, args, kwargs):
    """An op while torch.compile traces (Dynamo, then AOTAutograd): the inner tensors are fake
    or functional, so only the results' metadata is computed. Nothing runs on the device: no
    price, no clock, no allocator block, no fallback count, no observer, no strict-mode error
    (a compiled graph has no CPU fallback: every op becomes part of a generated kernel, which
    compiler/runner.py charges when it runs). Random ops still get the device's generator: the
    graph keeps it as a constant, so compiled code draws from it too."""
    registered = KERNELS.get(func)
    if registered is not None and registered.kind == "query":
        return _answer_query(registered, func, args, kwargs)
    plan = _plan_of(func, registered)
    if makes_quantized(plan.name, args, kwargs or {}):  # fakes carry no quantizer (quantized.py)
        raise refuse_compile(plan.name)
    devices: list = []
    if func in host_indices.INDEX_OPS:
        inner_args = host_indices.unwrap_traced(args, _unwrap_traced, devices)
    else:
        inner_args = tuple([_unwrap_traced(a, devices) for a in args])
    kwargs = kwargs or {}
    inner_kwargs = {k: _unwrap_traced(v, devices) for k, v in kwargs.items()}
    if "device" in inner_kwargs:
        inner_kwargs["device"] = _inner_device(inner_kwargs["device"])
    target = _target_device(registered, devices, kwargs)  # still raises on mixed devices
    index = target if type(target) is int else next((d for d in devices if type(d) is int), 0)
    if plan.facts.has_generator and inner_kwargs.get("generator") is None:
        inner_kwargs["generator"] = RUNTIME.device(index).generator
    kernel = plan.kernel
    if kernel is None:
        out = func(*inner_args, **inner_kwargs)
    else:
        out = kernel.fn(func, inner_args, inner_kwargs, RUNTIME.device(index))
    if plan.layout is not None:
        out = plan.layout(func, inner_args, inner_kwargs, out)
    if type(target) is not int:  # the result leaves the device
        return out
    # Fake results have no memory: `wrap` gives them a storage without an allocator block.
    return _rewrap(out, plan.facts, args, kwargs, target)


def _unwrap_traced(value, devices: list):
    """`_unwrap` while tracing, where a plain tensor can be on the device too: a factory called
    with `device=mtia_sim` under FakeTensorMode makes a plain fake there, not a wrapper. Its
    "inner" is a host copy with the same metadata, so the op meets host tensors only (the
    compiler's passes turn the copy into a no-op: compiler/factories.py)."""
    if type(value) is not MTIATensor and isinstance(value, torch.Tensor):
        device = value.device
        if device.type == DEVICE_NAME:
            devices.append(device.index or 0)
            return value.to(_CPU)
        return _unwrap(value, devices)
    if isinstance(value, (list, tuple)) and value and not isinstance(value[0], (int, float)):
        return type(value)([_unwrap_traced(item, devices) for item in value])
    return _unwrap(value, devices)


def _rewrap(out, op_facts, args, kwargs, target: int):
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
    if type(original) is MTIASparseTensor:
        resync(original, name)
        return original
    if not isinstance(inner_result, torch.Tensor):
        return inner_result
    if (isinstance(original, torch.Tensor) and inner_result is not original
            and original.device.type == DEVICE_NAME):
        original.copy_(inner_result)  # tracing: the op wrote the host copy (_unwrap_traced)
    return original


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
        and _same_memory(inner, tensor._storage)  # set_(other) rebinds to other's memory
    ):
        return
    resized = wrap(inner, tensor._storage.device_index, name)
    tensor.data = resized
    tensor._inner, tensor._storage = resized._inner, resized._storage


def _same_memory(inner: torch.Tensor, storage) -> bool:
    try:
        return inner.untyped_storage().data_ptr() == storage.host_ptr or not storage.nbytes
    except RuntimeError:  # a fake tensor while torch.compile traces: no memory
        return True


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
    _check_strict(enabled)
    previous = RUNTIME.strict
    RUNTIME.strict = enabled
    try:
        yield
    finally:
        RUNTIME.strict = previous


def set_strict(enabled: bool) -> None:
    _check_strict(enabled)
    RUNTIME.strict = enabled


def _check_strict(enabled) -> None:
    if not isinstance(enabled, bool):  # set_strict("no") must not turn strict mode on
        raise TypeError(f"strict mode is True or False, got {enabled!r}")


MTIATensor.__torch_dispatch__ = classmethod(torch_dispatch)
MTIASparseTensor.__torch_dispatch__ = classmethod(torch_dispatch)
DeviceState  # noqa: B018  (re-exported for type hints in kernels)
