"""Reductions and scans over a block axis (1 + the kernel's axis), and the language patches of a
whole-grid run."""

from __future__ import annotations

import functools

import numpy as np
import triton.language as tl

from .. import _compat
from .builder import _lead

tri = _compat.triton_interpreter()  # Triton's interpreter: what the whole-grid launch builds on


# --- reductions and scans over a block axis (1 + the kernel's axis) ----------------------------
def _builder():
    return tri.interpreter_semantic.builder


def _tensor(handle, dtype) -> tl.tensor:
    """A tl.tensor whose type is the block shape (the program axis is not part of it)."""
    data = handle.data
    ty = tl.block_type(dtype, list(data.shape[1:])) if data.ndim > 1 else dtype
    return tl.core.tensor(handle, ty)


def _np(fn, dtypes, *tensors) -> list[tl.tensor]:
    handles = _builder().create_np(fn, tuple(dtypes), *[t.handle for t in tensors])
    return [_tensor(h, t) for h, t in zip(handles, dtypes, strict=True)]


def _to_last(axis: int | None):
    """Move the reduced axis (all block axes when None) last."""
    def move(data):
        if axis is None:
            return data.reshape(data.shape[0], -1)
        return np.moveaxis(data, axis + 1, -1)
    return move


def _pairs(data):
    return np.ascontiguousarray(data[..., 0::2]), np.ascontiguousarray(data[..., 1::2])


def _pairwise(combine_fn, values: list[tl.tensor]) -> list[tl.tensor]:
    """Reduce the last axis by combining neighbours, log2(n) rounds (left always before right;
    block sizes are powers of 2, so every round halves the axis exactly)."""
    dtypes = [v.dtype for v in values]
    while values[0].shape[-1] > 1:
        halves = [_np(_pairs, (t, t), v) for v, t in zip(values, dtypes, strict=True)]
        merged = combine_fn.fn(*[h[0] for h in halves], *[h[1] for h in halves])
        merged = merged if isinstance(merged, tuple) else (merged,)
        like = halves[0][0]
        values = [_np(lambda m, ref: np.broadcast_to(m, ref.shape), (t,), m, like)[0]
                  for m, t in zip(merged, dtypes, strict=True)]
    return values


class GridReduce(tri.ReduceOps):
    """tl.reduce with the program axis in front: the kernel's `axis` is axis + 1 here."""

    def _finish(self, data: np.ndarray, rank: int):
        if self.keep_dims:
            if self.axis is None:
                return data.reshape((data.shape[0],) + (1,) * rank)
            return np.expand_dims(data, self.axis + 1)
        return data

    def _reduce(self, op, input, dtype):
        rank, move = len(input.shape), _to_last(self.axis)
        return _np(lambda d: self._finish(op(move(d), axis=-1), rank), (dtype,), input)[0]

    def min_max(self, input, val_reduce_op, idx_reduce_op=None):
        input = input[0] if isinstance(input, tuple) else input
        val = self._reduce(val_reduce_op, input, input.dtype) if val_reduce_op else None
        idx = self._reduce(idx_reduce_op, input, tl.int32) if idx_reduce_op else None
        if val is not None and idx is not None:
            return val, idx
        return val if val is not None else idx

    def sum(self, input):
        return self._reduce(np.sum, input, input.dtype)

    def generic_reduce(self, input):
        rank, move = len(input[0].shape), _to_last(self.axis)
        moved = [_np(move, (v.dtype,), v)[0] for v in input]
        moved = [_np(lambda d, *others: _lead(d, *others)[0], (m.dtype,), m, *moved)[0]
                 for m in moved]
        out = _pairwise(self.combine_fn, moved)
        return [_np(lambda d: self._finish(d[..., 0], rank), (o.dtype,), o)[0] for o in out]


class GridScan(tri.ScanOps):
    """tl.associative_scan with the program axis in front (Hillis-Steele for own combines)."""

    def cumsum(self, input):
        return _np(lambda d: np.cumsum(d, axis=self.axis + 1), (input.dtype,), input)

    def cumprod(self, input):
        return _np(lambda d: np.cumprod(d, axis=self.axis + 1), (input.dtype,), input)

    def generic_scan(self, input):
        axis = self.axis + 1
        values = [_np(lambda d: np.moveaxis(d, axis, -1), (v.dtype,), v)[0] for v in input]
        values = [_np(lambda d, *others: _lead(d, *others)[0], (v.dtype,), v, *values)[0]
                  for v in values]
        n, step = int(values[0].shape[-1]), 1
        while step < n:  # x[i] = combine(x[i - step], x[i]) where i >= step; shapes stay
            source = np.maximum(np.arange(n) - step, 0)  # (powers of 2, as Triton requires)
            earlier = [_np(lambda d, s=source: d[..., s], (v.dtype,), v)[0] for v in values]
            merged = self.combine_fn.fn(*earlier, *values)
            merged = merged if isinstance(merged, tuple) else (merged,)
            keep = np.arange(n) >= step
            values = [_np(lambda m, d, k=keep: np.where(k, m, d), (v.dtype,), m, v)[0]
                      for m, v in zip(merged, values, strict=True)]
            step *= 2
        return [_np(lambda d: np.moveaxis(d, -1, axis), (v.dtype,), v)[0] for v in values]

    def apply_impl(self, input):
        if not self.reverse:
            return super().apply_impl(input)
        flip = functools.partial(np.flip, axis=self.axis + 1)
        input = [_np(flip, (a.dtype,), a)[0] for a in input]
        self.reverse = False
        try:
            out = super().apply_impl(input)
        finally:
            self.reverse = True
        return [_np(flip, (o.dtype,), o)[0] for o in out]


# --- the patches of a whole-grid run ------------------------------------------------------------
def _bool(tensor) -> bool:
    if tensor.type.is_block():
        return True  # Triton's interpreter: only scalars convert to bool
    return bool(_builder().check_uniform(tensor.handle))


def _transpose(tensor):
    rank = len(tensor.type.shape)
    perm = list(range(rank))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    return tl.core.tensor(_builder().create_trans(tensor.handle, perm),
                          tl.core.block_type(tensor.dtype, [tensor.type.shape[p] for p in perm]))


def _patch_grid(scope) -> None:
    """On top of Triton's own interpreter patches: reductions, scans and the conversions of a
    tensor to a Python value, with the program axis in mind."""

    def reduce(input, axis, combine_fn, keep_dims=False, **kwargs):
        return GridReduce(axis, combine_fn, keep_dims).apply(input)

    def associative_scan(input, axis, combine_fn, reverse=False, **kwargs):
        return GridScan(axis, combine_fn, reverse).apply(input)

    for module in (tl, tl.core):
        scope.set_attr(module, "reduce", reduce)
        scope.set_attr(module, "associative_scan", associative_scan)
    scope.set_attr(tl.core.tensor, "__bool__", _bool)
    scope.set_attr(tl.core.tensor, "__index__",
                   lambda self: int(_builder().check_uniform(self.handle)))
    scope.set_attr(tl.core.tensor, "T", property(_transpose))


def _patch_lang(fn):
    """Triton's interpreter patches for `fn`, for `triton.language.core` too (the module that
    Triton's own library functions see: patched now, their nested calls leave it alone), then
    ours (_patch_grid) on top."""
    scope = tri._patch_lang(fn)
    core = tl.core
    if core.is_builtin(getattr(core, "program_id", None)):
        tri._patch_builtin(core, None, scope)
        tri._patch_lang_core(core, scope)
    _patch_grid(scope)
    return scope
