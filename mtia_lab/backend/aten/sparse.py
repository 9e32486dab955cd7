"""Sparse COO tensors on the simulated device.

A sparse device tensor is a wrapper like MTIATensor, with layout `torch.sparse_coo`: its inner
tensor is a CPU sparse COO tensor whose indices and values are the device's memory. CUDA keeps a
COO tensor as two dense allocations (indices and values), and so does the simulator: each is a
`DeviceStorage` with its own allocator block, shared with the dense tensors that alias it
(`s.values()`, or the `indices`/`values` a `torch.sparse_coo_tensor` was built from).

Ops reach the same `__torch_dispatch__` as dense device tensors (dispatch.py): the wrapper's key
set is SparsePrivateUse1 with the Python key above it, so every sparse op is served by running
the CPU's sparse kernel on the inner tensor. Only COO is supported; CSR, CSC, BSR and BSC
results are refused with an error naming the fix (`refuse_layout`).
"""

from __future__ import annotations

import torch

from ... import _compat
from ..._compat import DEVICE_NAME
from .tensor import DeviceStorage, device_of, repr_on_device, set_sparse_wrap, storage_for

# The sparse kernels CUDA has, run on the device's memory like every native kernel.
SPARSE_OPS = ["_to_sparse", "_to_dense", "_coalesce", "_coalesced_",
              "_sparse_coo_tensor_with_dims_and_tensors", "_sparse_coo_tensor_unsafe",
              "sparse_resize_", "sparse_resize_and_clear_", "sparse_mask"]
# Metadata of a sparse tensor, answered by its inner tensor (registry.ask_inner): no data moves.
QUERIES = ["_nnz", "sparse_dim", "dense_dim", "is_coalesced", "_dimI", "_dimV"]


class MTIASparseTensor(torch.Tensor):
    """A sparse COO tensor on `mtia_sim:N` (see the module docstring)."""

    _inner: torch.Tensor  # CPU sparse COO: its indices and values are the device's memory
    _memory: tuple[DeviceStorage, DeviceStorage]  # the allocations of indices and values
    __torch_function__ = _compat.disabled_torch_function

    @staticmethod
    def __new__(cls, inner: torch.Tensor, device_index: int,
                memory: tuple[DeviceStorage, DeviceStorage]) -> MTIASparseTensor:
        tensor = _compat.make_wrapper_subclass(
            cls,
            inner.size(),
            dtype=inner.dtype,
            device=device_of(device_index),
            layout=torch.sparse_coo,
            requires_grad=False,
            # stride() is asked of the inner tensor: a sparse tensor's strides are all 0.
            dispatch_sizes_strides_policy="strides",
        )
        tensor._inner = inner
        tensor._memory = memory
        return tensor

    @property
    def device_index(self) -> int:
        return self._memory[0].device_index

    def __repr__(self, *, tensor_contents=None) -> str:
        return repr_on_device(self, repr(self._inner.detach()))

    def __deepcopy__(self, memo):
        """A clone in fresh device memory. torch.Tensor.__deepcopy__ would also deep-copy our
        `__dict__`, whose allocations must never be copied (each is freed exactly once)."""
        if id(self) in memo:
            return memo[id(self)]
        with torch.no_grad():
            new = self.clone()
        new.requires_grad_(self.requires_grad)
        memo[id(self)] = new
        return new

    def __reduce_ex__(self, protocol):
        """torch.save / pickle, as PyTorch saves a CPU or CUDA COO tensor: its indices and
        values (device tensors, saved as any other) and how to rebuild it from them."""
        data = (self._indices(), self._values(), self.size(), self.is_coalesced())
        return (_compat.rebuild_sparse_tensor, (self.layout, data))

    def data_ptr(self) -> int:
        raise RuntimeError("Cannot access data pointer of Tensor that doesn't have storage")

    def untyped_storage(self) -> torch.UntypedStorage:
        """A sparse tensor has two allocations, not one storage: PyTorch's own refusal."""
        raise NotImplementedError("Cannot access storage of SparseTensorImpl")


def refuse_layout(layout: torch.layout, op: str) -> NotImplementedError:
    """The error for a result in a sparse layout other than COO."""
    return NotImplementedError(
        f"{op} returns a {layout} tensor, and {DEVICE_NAME} stores strided (dense) tensors and "
        "sparse COO tensors only. Convert with `.to_sparse()` (COO) or `.to_dense()` on the "
        "device, or run it on the CPU (`x.cpu()`) and keep the result there."
    )


def wrap_sparse(inner: torch.Tensor, device_index: int, op: str) -> MTIASparseTensor:
    """Put a CPU sparse COO tensor on the device: its indices and values share the allocation
    of a device tensor they alias (a view, an input of sparse_coo_tensor), else get their own."""
    if inner.layout != torch.sparse_coo:
        raise refuse_layout(inner.layout, op)
    return MTIASparseTensor(inner, device_index, _memory_of(inner, device_index, op))


def _memory_of(inner: torch.Tensor, device_index: int, op: str):
    return (storage_for(inner._indices(), device_index, op),
            storage_for(inner._values(), device_index, op))


def resync(tensor: MTIASparseTensor, op: str) -> None:
    """After an in-place op (`s.add_(t)`, `s.resize_as_(t)`): the CPU kernel may have given the
    inner tensor new indices and values, or a new size; the wrapper follows."""
    inner = tensor._inner
    tensor._memory = _memory_of(inner, tensor.device_index, op)
    if inner.shape != tensor.shape:
        resized = wrap_sparse(inner, tensor.device_index, op)
        _compat.tensor_data_descriptor.__set__(tensor, resized)


set_sparse_wrap(wrap_sparse)
