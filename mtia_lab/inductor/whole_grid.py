"""One launch grid as one NumPy program: Triton's interpreter, run once for all programs.

Triton's interpreter runs a kernel program by program: for a grid of 128 programs it calls the
kernel's Python function 128 times, and each call pays Triton's front end (type checks,
broadcasting rules, handle wrapping) for every `tl.*` operation -- about 2.5 ms a program here,
whatever the block holds. That cost, not the arithmetic, made interpreted Inductor code
10x-260x slower than eager. Two changes of *how* a kernel is evaluated remove it:

1. **The program axis.** Every value a kernel computes carries one more, leading axis: the
   programs. A value that is the same in every program (a kernel argument, `tl.arange`, a
   constant) has a leading axis of 1 and broadcasts; one that depends on `tl.program_id` has
   one entry per program. The kernel's function runs once for the whole grid (once per chunk
   of programs, to bound memory), and NumPy does the per-program work as array work.
2. **The tape.** That one run goes through Triton's front end, which calls the interpreter's
   builder (`create_add`, `create_masked_load`, ...) for every operation; the builder calls are
   recorded. Later launches of the kernel replay the recorded calls on the new arguments and
   program ids, without the front end. Where the kernel's Python took a branch or a loop bound
   from a value (`range(0, r0_numel, R0_BLOCK)`), the tape holds a *guard*: a replay that sees
   another value stops, and the launch is run and recorded afresh.

What does not change: the kernel source, its launch grid and block sizes are exactly Inductor's
(the trace records them as launched); each program computes what it computed alone -- loads,
stores and elementwise math are the same NumPy calls over more rows, reductions reduce the
same axis of each program's block (`tl.sum`, `tl.max` with NumPy as before; a reduction or
scan with its own combine function -- Inductor's welford, argmax with ties -- as a tree over
the axis, log2(n) calls of the combine function instead of one per element: the order a GPU
uses). A kernel that branches in Python on a value that differs between programs (a combo
kernel's `if pid < ...`) or uses an operation without a grid form here (histogram, tensor
descriptors, atomic_cas) raises `NotVectorizable`; launch.py then restores what it wrote and
runs it program by program, as Triton does (`STATS` counts both, with each reason).

Tied to Triton's interpreter (triton/runtime/interpreter.py) of the pinned Triton 3.9.0.
"""

from __future__ import annotations

import functools
import inspect
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import triton.language as tl
from triton.runtime import interpreter as tri
from triton.runtime.jit import _normalize_ty

from .tape_code import Memory, compile_tape

# Elements a chunk of programs may hold per value (programs x block): bounds host memory.
CHUNK_ELEMENTS = 1 << 22
# False: every launch runs program by program, Triton's own way (to compare the two)
ENABLED = True


class NotVectorizable(Exception):
    """The kernel needs to run program by program (the reason is the message)."""


class TapeMiss(Exception):
    """A guard of the tape saw another value: record the launch afresh."""


@dataclass
class GridStats:
    """How launches ran: replayed, recorded, or program by program (and why)."""

    replayed: int = 0
    recorded: int = 0
    per_program: int = 0
    reasons: Counter = field(default_factory=Counter)  # "kernel: reason" -> launches

    @property
    def whole(self) -> int:
        return self.replayed + self.recorded

    def reset(self) -> None:
        self.replayed = self.recorded = self.per_program = 0
        self.reasons.clear()


STATS = GridStats()


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


# --- the tape: the builder calls of one whole-grid run, replayed -------------------------------
_RECORDED = tuple(sorted(
    name for name in dir(GridBuilder)
    if (name.startswith("create_") or name in ("check_uniform", "get_null_value",
                                              "get_all_ones_value") or
        (name.startswith("get_") and not name.endswith("_ty") and name not in
         ("get_cache_policy", "get_element_ty"))) and callable(getattr(GridBuilder, name))))


@dataclass
class Tape:
    """Builder calls in order; each reads slots (earlier results, arguments, constants) and
    fills slots. `guards` are calls whose Python value the kernel acted on."""

    inputs: dict = field(default_factory=dict)  # kernel argument name -> slot
    constants: dict = field(default_factory=dict)  # slot -> handle made outside the builder
    steps: list = field(default_factory=list)  # (method name, args, kwargs, out slots, guard)
    slots: int = 0
    run: Callable | None = None  # the steps as one function (tape_code.py), once optimized


_SLOT = object()  # marks an argument read from a slot


class Recorder:
    """Watches one whole-grid run and writes its tape (see GridBuilder: RecordingBuilder)."""

    def __init__(self) -> None:
        self.tape = Tape()
        self.slot_of: dict[int, int] = {}
        self.alive: list = []  # keeps recorded handles alive: their ids stay theirs
        self.valid = True
        self.depth = 0

    def slot(self, handle) -> int:
        slot = self.slot_of.get(id(handle))
        if slot is None:  # made outside the builder: a constant of the kernel
            slot = self._new(handle)
            self.tape.constants[slot] = handle
        return slot

    def _new(self, handle) -> int:
        slot = self.tape.slots
        self.tape.slots += 1
        self.slot_of[id(handle)] = slot
        self.alive.append(handle)
        return slot

    def _arg(self, value):
        if isinstance(value, tri.TensorHandle):
            return (_SLOT, self.slot(value))
        if isinstance(value, (list, tuple)) and any(isinstance(v, tri.TensorHandle)
                                                    for v in value):
            self.valid = False  # handles inside containers: not recorded
        return value

    def add(self, name: str, args: tuple, kwargs: dict, result) -> None:
        spec = tuple(self._arg(a) for a in args)
        kw = {k: self._arg(v) for k, v in kwargs.items()}
        results = result if isinstance(result, tuple) else (result,)
        outs = tuple(self._new(r) for r in results if isinstance(r, tri.TensorHandle))
        guard = result if name == "check_uniform" else None
        self.tape.steps.append((name, spec, kw, outs, guard))


def _recorded(name: str):
    method = getattr(GridBuilder, name)

    @functools.wraps(method)
    def call(self, *args, **kwargs):
        recorder = self.recorder
        recorder.depth += 1
        try:
            result = method(self, *args, **kwargs)
        finally:
            recorder.depth -= 1
        if recorder.depth == 0:  # nested calls (get_bf16 -> create_fp_trunc) replay inside
            recorder.add(name, args, kwargs, result)
        return result

    return call


RecordingBuilder = type("RecordingBuilder", (GridBuilder,),
                        {name: _recorded(name) for name in _RECORDED})


def _is_slot(value) -> bool:
    return type(value) is tuple and len(value) == 2 and value[0] is _SLOT


_EFFECTS = ("create_masked_store", "create_store", "create_atomic", "create_assert",
            "create_assume", "create_print", "check_uniform", "create_barrier",
            "create_descriptor_store", "create_descriptor_scatter")
_PER_LAUNCH = ("create_get_program_id", "create_get_num_programs")


def _reads(step) -> list[int]:
    _, spec, kw, _, _ = step
    return [a[1] for a in (*spec, *kw.values()) if _is_slot(a)]


def optimize(tape: Tape, recorded: list) -> Tape:
    """Fold what no launch changes (steps reading only constants: ranges, constant blocks,
    their casts and broadcasts) into constants, with the values of the recording run
    (`recorded`: slot -> handle), drop steps whose results nothing uses, and write the rest as
    one function (tape_code.py)."""
    launch_slots = set(tape.inputs.values())
    kept = []
    for step in tape.steps:
        name, _, _, outs, _ = step
        if (name.startswith(_EFFECTS) or name in _PER_LAUNCH
                or any(s in launch_slots for s in _reads(step))):
            launch_slots.update(outs)
            kept.append(step)
        else:
            for slot in outs:
                tape.constants[slot] = recorded[slot]
    needed: set[int] = set()
    live = []
    for step in reversed(kept):
        if step[0].startswith(_EFFECTS) or any(s in needed for s in step[3]):
            live.append(step)
            needed.update(_reads(step))
    tape.constants = {s: h for s, h in tape.constants.items() if s in needed}
    tape.steps = live[::-1]
    tape.run = compile_tape(tape.steps, tape.inputs, tape.constants, recorded)
    return tape


def replay(tape: Tape, builder: GridBuilder, arguments: dict, memory: Memory) -> None:
    """Run the tape's builder calls on new arguments (name -> handle) and program ids: the
    function tape_code.py wrote for it (TapeMiss when a guard reads another value)."""
    tape.run(arguments, builder, memory)


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


_BUILDER = GridBuilder()


def _program_ids(grid: tuple[int, int, int], start: int, stop: int) -> tuple:
    """Program ids of programs start..stop in Triton's order (x outermost, z innermost)."""
    flat = np.arange(start, stop, dtype=np.int64)
    _, gy, gz = grid
    return ((flat // (gy * gz)).astype(np.int32), ((flat // gz) % gy).astype(np.int32),
            (flat % gz).astype(np.int32))


def _elements_per_program(constexprs: dict) -> int:
    size = 1
    for name, value in constexprs.items():
        if name.endswith("BLOCK") and isinstance(value, int):
            size *= max(1, value)
    return size


@functools.cache
def _signature(fn) -> tuple[inspect.Signature, frozenset]:
    """A kernel function's signature and its constexpr parameters (read once per kernel)."""
    annotations = inspect.get_annotations(fn)
    constexprs = frozenset(n for n, t in annotations.items() if _normalize_ty(t) == "constexpr")
    return inspect.signature(fn), constexprs


@functools.cache
def _pointer_type(dtype) -> tl.dtype:
    import torch

    return tl.str_to_ty(triton_mangle(torch.empty(0, dtype=dtype)), None)


def triton_mangle(value) -> str:
    from triton.runtime.jit import mangle_type

    return mangle_type(value)


def _convert(value):
    """A kernel argument's handle, as Triton's interpreter makes it (`_implicit_cvt`); a host
    tensor becomes a pointer to its memory (no copy: the interpreter's own launch copies each
    argument's storage to the host and back, which host memory does not need). Arguments with
    no handle (tuples, None) are returned as they are: a kernel taking them is not recorded."""
    import torch

    if isinstance(value, torch.Tensor):
        return tri.TensorHandle(np.array([value.data_ptr()], dtype=np.uint64),
                                _pointer_type(value.dtype))
    converted = tri._implicit_cvt(value)
    return converted.handle if isinstance(converted, tl.tensor) else converted


def _arguments(kernel, args: tuple, constexprs: dict) -> tuple[dict, dict]:
    """(constexpr values, argument handles) of a launch, as Triton's GridExecutor makes them."""
    signature, fixed_names = _signature(kernel.fn)
    names = list(signature.parameters)
    if len(args) + len(constexprs) == len(names) and all(
            n in constexprs for n in names[len(args):]):  # Inductor's launches: the fast way
        arguments = dict(zip(names, args, strict=False)) | constexprs
    else:
        bound = signature.bind(*args, **constexprs)
        bound.apply_defaults()
        arguments = bound.arguments
    fixed, handles = {}, {}
    for name, value in arguments.items():
        if name in fixed_names:
            fixed[name] = value
        else:
            handles[name] = _convert(value)
    return fixed, handles


def _record(kernel, fixed: dict, handles: dict, programs: tuple) -> Tape | None:
    """Run the kernel through Triton's front end for `programs`, recording its tape (None when
    the run cannot be replayed)."""
    builder = RecordingBuilder()
    builder.recorder = recorder = Recorder()
    values = {}
    for name, value in handles.items():
        if isinstance(value, tri.TensorHandle):
            recorder.tape.inputs[name] = recorder._new(value)
            value = tl.tensor(value, value.dtype)
        elif isinstance(value, tuple):
            recorder.valid = False
        values[name] = value
    builder.set_grid_dim(*_BUILDER.grid_dim)
    builder.set_programs(programs)
    semantic = tri.interpreter_semantic
    scope = _patch_lang(kernel.fn)
    default, semantic.builder = semantic.builder, builder
    try:
        kernel.rewrite()(**fixed, **values)
    finally:
        semantic.builder = default
        scope.restore()
    return optimize(recorder.tape, recorder.alive) if recorder.valid else None


def _tape_key(fixed: dict, handles: dict) -> tuple:
    """A tape per constexprs, argument types and scalar values: scalars are sizes (xnumel...),
    which loop bounds read, so a kernel launched at several sizes keeps a tape for each."""
    def part(value):
        if isinstance(value, tri.TensorHandle):
            return (str(value.dtype), None if value.dtype.is_ptr() else value.data.item())
        return (repr(value),)

    return (tuple(sorted((k, repr(v)) for k, v in fixed.items())),
            tuple(sorted((k, part(v)) for k, v in handles.items())))


def run(kernel, grid, args: tuple, constexprs: dict, tapes: dict) -> None:
    """Run interpreted `kernel` (a Triton InterpretedFunction) over `grid` on host tensors, all
    programs at once: replaying its tape from `tapes` (per kernel, filled here) when there is
    one. Raises NotVectorizable (possibly after writing: the caller restores)."""
    fixed, handles = _arguments(kernel, args, constexprs)
    grid = tuple(grid) + (1,) * (3 - len(grid))
    total = grid[0] * grid[1] * grid[2]
    chunk = max(1, CHUNK_ELEMENTS // _elements_per_program(constexprs))
    key = _tape_key(fixed, handles)
    arguments = {k: v for k, v in handles.items() if isinstance(v, tri.TensorHandle)}
    memory = Memory(dict(zip(_signature(kernel.fn)[0].parameters, args, strict=False)))
    _BUILDER.set_grid_dim(*grid)
    with np.errstate(all="ignore"):  # masked lanes compute garbage, as on a GPU
        for start in range(0, total, chunk):
            programs = _program_ids(grid, start, min(total, start + chunk))
            _BUILDER.set_programs(programs)
            tape = tapes.get(key)
            if tape is not None:
                try:
                    replay(tape, _BUILDER, arguments, memory)
                    STATS.replayed += start == 0
                    continue
                except TapeMiss:  # a guard saw another value: the caller restores, records
                    del tapes[key]
                    raise
            tape = _record(kernel, fixed, handles, programs)
            STATS.recorded += start == 0
            if tape is not None:
                tapes[key] = tape


def run_per_program(name: str, reason: str, per_program: Callable[[], object]):
    """Launch program by program (Triton's interpreter), counted with its reason."""
    STATS.per_program += 1
    STATS.reasons[f"{name}: {reason}"] += 1
    return per_program()


def launch(kernel, name: str, grid, args: tuple, constexprs: dict, written: list, state: dict,
           per_program: Callable[[], object]):
    """One launch of `kernel` (`name`, for STATS): its whole grid at once when it can be,
    else `per_program()`. `written`: the host tensors it may write (restored before falling
    back, so nothing is written twice); `state`: what this kernel's launches keep (its tapes,
    or why it runs per program)."""
    reason = state.get("reason") if ENABLED else "whole-grid runs are switched off"
    if reason is None:
        saved = [w.clone() for w in written]
        tapes = state.setdefault("tapes", {})
        for attempt in range(2):  # a replay whose guard fails is recorded afresh, once
            try:
                return run(kernel, grid, args, constexprs, tapes)
            except Exception as error:  # what it wrote is restored; per program below
                for tensor, before in zip(written, saved, strict=True):
                    tensor.copy_(before)
                if isinstance(error, TapeMiss) and attempt == 0:
                    continue
                reason = state["reason"] = (f"{type(error).__name__}: "
                                            f"{(str(error) or ' ').splitlines()[0]}")
                break
    return run_per_program(name, reason, per_program)
