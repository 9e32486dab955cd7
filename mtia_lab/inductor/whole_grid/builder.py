"""The interpreter's builder with the program axis in front of every value (see __init__.py)."""

from __future__ import annotations

import numpy as np
import triton.language as tl

from .. import _compat

tri = _compat.triton_interpreter()  # Triton's interpreter: what the whole-grid launch builds on


class NotVectorizable(Exception):
    """The kernel needs to run program by program (the reason is the message)."""


def _lead(*arrays: np.ndarray) -> list[np.ndarray]:
    """Arrays of one block shape with leading (program) axes of 1 or G, made alike."""
    return list(np.broadcast_arrays(*arrays))


def _handle(data: np.ndarray, dtype) -> tri.TensorHandle:
    return tri.TensorHandle(data, dtype)


_SHAPES: dict[int, tuple] = {}


def _shape_of(block_type) -> tuple[int, ...]:
    """A block type's shape as ints (types are made once per kernel and kept by its tape)."""
    shape = _SHAPES.get(id(block_type))
    if shape is None or shape[0] is not block_type:
        shape = _SHAPES[id(block_type)] = (block_type, tuple(int(s) for s in block_type.shape))
    return shape[1]


class GridBuilder(tri.InterpreterBuilder):
    """Triton's interpreter builder, with the program axis in front of every value.

    Only the operations whose meaning depends on a value's shape or axes are redefined; the
    elementwise ones (casts, arithmetic, comparisons, math) broadcast over the leading axis as
    they are. `create_np` and `check_uniform` are this module's own: the NumPy steps of
    reductions and scans, and the values the kernel's Python reads (so the tape sees them)."""

    program_ids: tuple = ()

    def set_programs(self, ids: tuple) -> None:
        self.program_ids = ids
        self.grid_idx = (0, 0, 0)  # create_print names a program; this one prints them all

    # programming model
    def create_get_program_id(self, axis):
        return _handle(self.program_ids[axis], tl.int32)

    def create_make_range(self, ret_ty, start, stop):
        return _handle(np.arange(start, stop, dtype=np.int32)[None], tl.int32)

    # shapes: the block axes start at 1
    def create_splat(self, ret_ty, arg):
        lead = arg.data.shape[0]
        shape = _shape_of(ret_ty)
        data = arg.data.reshape((lead,) + (1,) * len(shape))
        return _handle(np.broadcast_to(data, (lead,) + shape), arg.dtype.scalar)

    def create_unsplat(self, arg):
        return _handle(arg.data.reshape(arg.data.shape[0]), arg.dtype.scalar)

    def create_expand_dims(self, arg, axis):
        axis = axis if axis >= 0 else axis + arg.data.ndim
        return _handle(np.expand_dims(arg.data, axis + 1), arg.dtype.scalar)

    def create_broadcast(self, arg, shape):
        return _handle(np.broadcast_to(arg.data, (arg.data.shape[0],) + tuple(shape)),
                       arg.dtype.scalar)

    def create_reshape(self, arg, shape, allow_reorder):
        return _handle(arg.data.reshape((arg.data.shape[0],) + tuple(shape)), arg.dtype.scalar)

    def create_trans(self, arg, perm):
        return _handle(np.transpose(arg.data, (0, *[p + 1 for p in perm])), arg.dtype.scalar)

    def create_cat(self, lhs, rhs):
        a, b = _lead(lhs.data, rhs.data)
        return _handle(np.concatenate([a, b], axis=1), lhs.dtype.scalar)

    def create_join(self, lhs, rhs):
        a, b = _lead(lhs.data, rhs.data)
        return _handle(np.stack([a, b], axis=-1), lhs.dtype.scalar)

    def create_gather(self, src, indices, axis):
        data, index = _lead(src.data, indices.data)
        return _handle(np.take_along_axis(data, index, axis=axis + 1), src.dtype.scalar)

    # memory: pointers, masks and values of one block shape may differ in the program axis
    def create_masked_load(self, ptrs, mask, other, cache_policy, is_volatile):
        arrays = _lead(ptrs.data, mask.data, *([] if other is None else [other.data]))
        other = None if other is None else _handle(arrays[2], other.dtype)
        return super().create_masked_load(_handle(arrays[0], ptrs.dtype),
                                          _handle(arrays[1], mask.dtype), other, cache_policy,
                                          is_volatile)

    def create_masked_store(self, ptrs, value, mask, cache_policy):
        p, v, m = _lead(ptrs.data, value.data, mask.data)
        return super().create_masked_store(_handle(p, ptrs.dtype),
                                           _handle(np.ascontiguousarray(v), value.dtype),
                                           _handle(m, mask.dtype), cache_policy)

    def create_atomic_rmw(self, rmwOp, ptr, val, mask, sem, scope):  # noqa: N803 (Triton's name)
        p, v, m = _lead(ptr.data, val.data, mask.data)
        return super().create_atomic_rmw(rmwOp, _handle(p, ptr.dtype),
                                         _handle(np.ascontiguousarray(v), val.dtype),
                                         _handle(m, mask.dtype), sem, scope)

    def create_atomic_cas(self, ptr, cmp, val, sem, scope):
        raise NotVectorizable("atomic_cas (programs may wait on each other)")

    def create_atomic_poll(self, ptr, expected, timeout_ns, sem, scope):
        raise NotVectorizable("atomic_poll (programs may wait on each other)")

    def create_histogram(self, data, bins, mask):
        raise NotVectorizable("histogram")

    def create_make_tensor_descriptor(self, *args, **kwargs):
        raise NotVectorizable("tensor descriptors")

    def create_erf(self, arg):
        # Triton's interpreter calls math.erf element by element (np.vectorize); torch's erf is
        # the same function, vectorized (and the one CPU eager uses)
        import torch

        data = torch.special.erf(torch.from_numpy(np.ascontiguousarray(arg.data))).numpy()
        return _handle(data, arg.dtype.scalar)

    # this module's own steps
    def create_np(self, fn, dtypes, *handles):
        """`fn` on the handles' arrays: one array per dtype in `dtypes` (a tuple)."""
        out = fn(*[h.data for h in handles])
        out = out if isinstance(out, tuple) else (out,)
        return tuple(_handle(np.asarray(o).astype(tri._get_np_dtype(t), copy=False), t.scalar)
                     for o, t in zip(out, dtypes, strict=True))

    def check_uniform(self, handle):
        """The value of a scalar that every program holds alike (else NotVectorizable)."""
        data = handle.data
        first = data.reshape(-1)[0]
        if data.size > 1 and not (data == first).all():
            raise NotVectorizable("a Python branch or index on a value that differs by program")
        return first.item()
