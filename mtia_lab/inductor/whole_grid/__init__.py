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
descriptors, atomic_cas) raises `NotVectorizable`; triton_launch.py then restores what it wrote and
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

from .. import _compat
from .builder import GridBuilder, NotVectorizable
from .codegen import Memory
from .reduce import _patch_lang
from .tape import Recorder, RecordingBuilder, Tape, TapeMiss, optimize, replay

tri = _compat.triton_interpreter()  # Triton's interpreter: what the whole-grid launch builds on

__all__ = ["CHUNK_ELEMENTS", "ENABLED", "STATS", "GridBuilder", "GridStats", "NotVectorizable",
           "TapeMiss", "launch", "run", "run_per_program"]

# Elements a chunk of programs may hold per value (programs x block): bounds host memory.
CHUNK_ELEMENTS = 1 << 22
# False: every launch runs program by program, Triton's own way (to compare the two)
ENABLED = True


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


_BUILDER = GridBuilder()


@functools.lru_cache(maxsize=256)
def _program_ids(grid: tuple[int, int, int], start: int, stop: int) -> tuple:
    """Program ids of programs start..stop in Triton's order (x outermost, z innermost); made
    once per grid and chunk, read-only (kernels compute new arrays from them)."""
    flat = np.arange(start, stop, dtype=np.int64)
    _, gy, gz = grid
    ids = ((flat // (gy * gz)).astype(np.int32), ((flat // gz) % gy).astype(np.int32),
           (flat % gz).astype(np.int32))
    for axis in ids:
        axis.setflags(write=False)
    return ids


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
    constexprs = frozenset(n for n, t in annotations.items()
                           if _compat.triton_type_name(t) == "constexpr")
    return inspect.signature(fn), constexprs


@functools.cache
def _pointer_type(dtype) -> tl.dtype:
    """Triton's pointer type for a tensor of `dtype` (`*fp32`...), as its launcher names it."""
    import torch

    return tl.str_to_ty(_compat.triton_arg_type(torch.empty(0, dtype=dtype)), None)


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
