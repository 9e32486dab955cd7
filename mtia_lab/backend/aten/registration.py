"""Plugging the device into PyTorch: the PrivateUse1 backend and its few kernels.

Device tensors carry the Python dispatch key, so every op on them goes to
`MTIATensor.__torch_dispatch__` (dispatch.py). What reaches the PrivateUse1 key itself is only
what has no device tensor among its arguments yet: factories called with `device="mtia_sim"`
(`torch.empty`, and through them `zeros`, `randn`, `arange`, ...) and host-to-device copies
(`cpu_tensor.to("mtia_sim")`); factories with `layout=torch.sparse_coo` reach SparsePrivateUse1
(sparse.py holds the sparse tensor). Those few kernels live here; anything else arriving at
PrivateUse1 is computed on the host and moved to the device by one boxed fallback.
"""

from __future__ import annotations

import math

import torch

from ... import _compat
from ..._compat import DEVICE_NAME, overload_name
from ..runtime import cost, oom
from ..runtime.device_state import RUNTIME
from ..runtime.streams import Charge, charge, current_stream
from . import dispatch, fallback, sparse
from .tensor import MTIATensor, device_of, wrap

_LIBRARIES: list[torch.library.Library] = []
_registered = False


def _index(device) -> int:
    if device is None:
        return RUNTIME.current_index
    device = torch.device(device)
    index = device.index if device.index is not None else RUNTIME.current_index
    RUNTIME.device(index)  # raises a clear error for an index that does not exist
    return index


def _empty_memory_format(
    size, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None
):
    index = _index(device)
    nbytes = math.prod(size) * (dtype or torch.get_default_dtype()).itemsize
    host = oom.on_host(  # the device's capacity is checked before the host allocates
        index, nbytes, "aten::empty.memory_format", torch.empty, size, dtype=dtype,
        layout=layout, memory_format=memory_format or torch.contiguous_format,
    )
    return wrap(host, index, "aten::empty.memory_format")


def _empty_strided(size, stride, dtype=None, layout=None, device=None, pin_memory=None):
    index = _index(device)
    nbytes = oom.strided_bytes(size, stride, (dtype or torch.get_default_dtype()).itemsize)
    host = oom.on_host(  # the device's capacity is checked before the host allocates
        index, nbytes, "aten::empty_strided", torch.empty_strided, size, stride, dtype=dtype,
        layout=layout,
    )
    return wrap(host, index, "aten::empty_strided")


def _sparse_empty(size, dtype=None, layout=None, device=None, pin_memory=None,
                  memory_format=None):
    """`torch.empty(..., layout=torch.sparse_coo, device="mtia_sim")` (`zeros` and
    `torch.sparse_coo_tensor(size=...)` come here too): a COO tensor with no elements yet."""
    host = torch.empty(size, dtype=dtype, layout=torch.sparse_coo)
    return sparse.wrap_sparse(host, _index(device), "aten::empty.memory_format")


def _sparse_with_dims(sparse_dim, dense_dim, size, dtype=None, layout=None, device=None,
                      pin_memory=None):
    """`aten::_sparse_coo_tensor_with_dims`: an empty COO tensor of given dimensions."""
    host = torch.ops.aten._sparse_coo_tensor_with_dims(sparse_dim, dense_dim, size, dtype=dtype,
                                                       layout=torch.sparse_coo)
    return sparse.wrap_sparse(host, _index(device), "aten::_sparse_coo_tensor_with_dims")


def _refuse_compressed_empty(size, dtype=None, layout=None, device=None, pin_memory=None,
                             memory_format=None):
    """`torch.empty(..., layout=torch.sparse_csr, device="mtia_sim")` (and CSC, BSR, BSC)."""
    raise sparse.refuse_layout(layout, "aten::empty.memory_format")


def _quantized_factory(op):
    """A factory of quantized tensors with `device="mtia_sim"` (`torch._empty_affine_quantized`,
    `torch.empty(n, dtype=torch.qint8)`, and `empty_quantized`, which `q.to("mtia_sim")` calls):
    these reach QuantizedPrivateUse1. The CPU's factory makes the integers and the quantizer
    (quantized.py), in memory the device's capacity was checked for."""
    name = str(op).replace("aten.", "aten::", 1).removesuffix(".default")

    def factory(*args, **kwargs):
        index = _index(kwargs.get("device"))
        like = args[1] if len(args) > 1 else None  # empty_quantized(size, qtensor)
        # No dtype at all: the CPU's factory refuses it, in its words, after this estimate.
        dtype = kwargs.get("dtype") or getattr(like, "dtype", None) or torch.quint8
        nbytes = math.prod(args[0]) * dtype.itemsize
        host = oom.on_host(index, nbytes, name, op, *args, **{**kwargs, "device": "cpu"})
        return wrap(host, index, name)

    return factory


def _to_copy(x, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False,
             memory_format=None):
    """Host -> device: the copy keeps dense layouts (transposed, channels_last) as `.to` does."""
    index = _index(device)
    host = oom.on_host(
        index, x.numel() * (dtype or x.dtype).itemsize, "aten::_to_copy",
        torch.ops.aten._to_copy.default, x, dtype=dtype, layout=layout,
        memory_format=memory_format,
    )
    if host is x:
        host = x.clone(memory_format=torch.preserve_format)
    result = wrap(host, index, "aten::_to_copy")
    # The copy crosses the host link on the current stream; a blocking copy makes the host
    # wait for it (and so for everything queued before it), a non_blocking one does not.
    state = RUNTIME.devices[index]
    stream = charge(state, cost.transfer(host.numel() * host.element_size()).duration_us(
        state.profile
    )).stream
    if not non_blocking:
        stream.synchronize()
    return result


def _copy_from(src, dst, non_blocking=False):
    dst_inner = dst._inner if isinstance(dst, MTIATensor) else dst
    dst_inner.copy_(src._inner if isinstance(src, MTIATensor) else src)
    return dst


def _boxed_fallback(keyset, op, *args, **kwargs):
    """An op reached PrivateUse1 with no kernel: a factory we did not write. Compute it on the
    host with the same arguments, then move the result to the requested device."""
    name = op.name() + (f".{overload_name(op)}" if overload_name(op) != "default" else "")
    _refuse_foreign_tensors(name, args, kwargs)
    if RUNTIME.strict:
        raise dispatch.StrictModeError(dispatch._strict_message(name))
    fallback._COUNTS[name] += 1
    index = _index(kwargs.get("device"))
    host_kwargs = dict(kwargs, device=torch.device("cpu"))
    try:
        out = op(*args, **host_kwargs)
    except RuntimeError as error:  # a host allocation failure is the device's OOM
        raise oom.device_error(error, index, name)  # noqa: B904
    if isinstance(out, torch.Tensor):
        if out._is_zerotensor():
            out = _materialized_zeros(out)
        return wrap(out.clone() if out._base is not None else out, index, name)
    return out


def _materialized_zeros(zero: torch.Tensor) -> torch.Tensor:
    """Real zeros in place of a *ZeroTensor* (`torch._efficientzerotensor`, which autograd and
    forward-mode AD make for a gradient or tangent known to be zero): a tensor with no memory,
    whose ZeroTensor dispatch key answers every op on it. Wrapped as a device tensor's inner,
    that key is never reached -- the wrapper does not carry it, and under functorch's
    transforms it is excluded where the device computes -- so a host kernel would read its
    null data pointer and kill the process. Zeros cost the memory a ZeroTensor saves, and
    give the same results."""
    return torch.zeros(zero.size(), dtype=zero.dtype)


def _refuse_foreign_tensors(name: str, args, kwargs) -> None:
    """A plain tensor that says mtia_sim but is no device tensor of ours (made by DLPack's
    from_dlpack or torch.from_blob from a foreign pointer) has no memory we know: say so."""
    for value in (*args, *kwargs.values()):
        if type(value) is torch.Tensor and value.device.type == DEVICE_NAME:
            raise RuntimeError(
                f"{name}: this tensor reports {value.device} but is not a device tensor made by "
                "mtia_lab (it was built from a raw pointer, e.g. by DLPack's from_dlpack or "
                "torch.from_blob), so it has no device memory behind it. Make device tensors "
                f"with torch factories or `.to('{DEVICE_NAME}')`."
            )


def _observed(fn, op, kind: str):
    """`fn`, telling the dispatcher's observer (a trace) about its op, as dispatch.py does for
    ops on device tensors: factories and host->device copies reach only this key."""

    def kernel(*args, **kwargs):
        observer = dispatch._OBSERVER
        if observer is None:
            return fn(*args, **kwargs)
        func = op if op is not None else args[1]  # the boxed fallback gets (keyset, op, ...)
        state = RUNTIME.device(_index(kwargs.get("device")))
        stream = current_stream(state.index)
        before, now = stream.clock_us, state.now_us
        observer.before_op(func, kind, args if op is not None else args[2:], kwargs, state)
        result = fn(*args, **kwargs)
        # Work queued now starts when the stream is free AND the host issued it (streams.charge).
        span = (Charge(stream, max(before, now), stream.clock_us, now,
                       now + state.profile.host_op_us) if stream.clock_us > before else None)
        observer.after_op(func, kind, result, None, span)
        return result

    return kernel


def register_backend(device_module) -> None:
    """Rename PrivateUse1 to mtia_sim and install the kernels above. Idempotent."""
    global _registered
    if _registered:
        return
    _compat.check_torch_version()
    if _compat.privateuse1_name() != DEVICE_NAME:
        _compat.setup_python_backend(DEVICE_NAME, device_module)
    _compat.keep_device_tensors_out_of_fake_constants()  # `torch.tensor(c).to(x.device)` compiles
    _compat.run_fake_fallbacks_on_host()  # ops without a meta kernel (geqrf) compile
    lib = torch.library.Library("aten", "IMPL")
    aten = torch.ops.aten
    lib.impl("empty.memory_format", _observed(
        _empty_memory_format, aten.empty.memory_format, "native"), "PrivateUse1")
    lib.impl("empty_strided", _observed(_empty_strided, aten.empty_strided.default, "native"),
             "PrivateUse1")
    lib.impl("_to_copy", _observed(_to_copy, aten._to_copy.default, "native"), "PrivateUse1")
    lib.impl("_copy_from", _copy_from, "PrivateUse1")
    # Factories of sparse COO tensors (layout=torch.sparse_coo) reach SparsePrivateUse1.
    lib.impl("empty.memory_format", _observed(
        _sparse_empty, aten.empty.memory_format, "native"), "SparsePrivateUse1")
    lib.impl("_sparse_coo_tensor_with_dims", _observed(
        _sparse_with_dims, aten._sparse_coo_tensor_with_dims.default, "native"),
        "SparsePrivateUse1")
    lib.impl("empty.memory_format", _refuse_compressed_empty, "SparseCsrPrivateUse1")
    # Factories of quantized tensors (a quantized dtype, device="mtia_sim"): quantized.py.
    for op in (aten.empty.memory_format, aten.empty_strided.default, aten.empty_quantized.default,
               aten._empty_affine_quantized.default,
               aten._empty_per_channel_affine_quantized.default):
        lib.impl(op.__name__.replace(".default", ""),
                 _observed(_quantized_factory(op), op, "native"), "QuantizedPrivateUse1")
    # `q.to("mtia_sim")` of a CPU quantized tensor: BackendSelect sends it here. PyTorch's own
    # kernel would set the result's quantizer in C++, which a device tensor (a Python wrapper,
    # the quantizer in its inner tensor) does not have: the host -> device copy instead.
    lib.impl("_to_copy", _observed(_to_copy, aten._to_copy.default, "native"),
             "QuantizedPrivateUse1")
    _LIBRARIES.append(lib)
    _LIBRARIES.append(_compat.register_fallback(
        _observed(_boxed_fallback, None, "fallback"), "PrivateUse1"))
    _registered = True
    device_of(63)  # torch.device objects for every index, made once
