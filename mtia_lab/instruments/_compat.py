"""The private Dynamo / compiled-autograd APIs the compile instruments read, in one room.

Everything here was checked on torch 2.13.0: tests/test_compat.py pins each name against the
private API it wraps, and tests/test_instruments_*.py say whether the instruments still behave.
A module of its own (beside mtia_lab/_compat.py, PyTorch core, and mtia_lab/inductor/_compat.py)
because these are Dynamo's introspection records, read by the compile instruments only: their
churn between releases is the instruments' alone. The instruments read:

- the structured trace (`torch._logging`'s `torch.__trace` logger): `compilation_metrics`
  (per compile: guard count, op count, phase times, failure), the `recompile_reasons`
  artifact (the guards that failed, as Dynamo words them);
- the cache entries on a code object (`_debug_get_cache_entry_list`): most recently used
  first, each with its compile id and its guard manager (a tree of accessors and leaf guards);
- the guard-complete hook (`set_guard_complete_hook`): told, for every call that found cached
  code, whether a cache entry's guards passed (a hit) or not;
- `torch._dynamo.utils.counters` (the "unimplemented" counter records a recompile-limit hit).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import Any

import torch

# -- the structured trace ---------------------------------------------------------------------


class _StructuredSink(logging.Handler):
    """Collects torch's structured trace records as (name, metadata, payload)."""

    def __init__(self, keep: frozenset[str] | None) -> None:
        super().__init__(logging.DEBUG)
        self.keep = keep
        self.records: list[tuple[str, dict, str | None]] = []

    def emit(self, record: logging.LogRecord) -> None:
        metadata = getattr(record, "metadata", None)
        if not metadata:
            return
        name = next(iter(metadata))
        if name == "artifact":
            name = metadata["artifact"].get("name", "artifact")
        if self.keep is None or name in self.keep:
            self.records.append((name, metadata, getattr(record, "payload", None)))


@contextlib.contextmanager
def structured_trace(keep: frozenset[str] | None = None) -> Iterator[list]:
    """Collect Dynamo's structured trace while inside; yields the list it fills with
    (name, metadata, payload). An artifact's name is its own (`recompile_reasons`).
    With a handler present, Dynamo also renders the payloads it would log (graphs as text):
    a cost paid only inside this context."""
    from torch._logging._internal import trace_log

    sink = _StructuredSink(keep)
    trace_log.addHandler(sink)
    try:
        yield sink.records
    finally:
        trace_log.removeHandler(sink)


def compile_id_text(metadata: dict) -> str:
    """A structured record's compile id as Dynamo prints it: "0/1" (frame / recompile);
    compiled autograd's graphs get a "!<n>/" prefix."""
    frame, attempt = metadata.get("frame_id"), metadata.get("frame_compile_id")
    prefix = (f"!{metadata['compiled_autograd_id']}/"
              if metadata.get("compiled_autograd_id") is not None else "")
    return f"{prefix}{frame}/{attempt}" if frame is not None else ""


# -- the cache on a code object ------------------------------------------------------------------


def code_of(fn: Callable) -> Any:
    """The code object Dynamo caches compiled code on: a function's, or a module's forward."""
    if isinstance(fn, torch.nn.Module):
        fn = type(fn).forward
    fn = getattr(fn, "__func__", fn)
    code = getattr(fn, "__code__", None)
    if code is None:
        raise TypeError(f"expected a Python function or an nn.Module, got {type(fn).__name__}")
    return code


def cache_entries(code) -> list[tuple[str, Any]]:
    """(compile id "0/1", guard manager) of every cache entry on `code`, most recently used
    first: a cache hit moves its entry to the front, a new compile goes in at the front."""
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    return [(str(entry.compile_id.frame_id) + "/" + str(entry.compile_id.frame_compile_id),
             entry.guard_manager) for entry in _debug_get_cache_entry_list(code)]


def guard_tree(guard_manager) -> list[tuple[str, str]]:
    """Every guard of a cache entry as (kind, verbose text), in Dynamo's tree order: the leaf
    guards of each manager (TENSOR_MATCH, EQUALS_MATCH, TYPE_MATCH...), then its children;
    the shape guards (symbolic sizes) last, as SHAPE_ENV."""
    out: list[tuple[str, str]] = []

    def walk(manager) -> None:
        for leaf in manager.get_leaf_guards():
            parts = leaf.verbose_code_parts()
            out.append((type(leaf).__name__, parts[0] if parts else ""))
        for child in manager.get_child_managers():
            walk(child)

    root = guard_manager.root
    walk(root)
    for leaf in root.get_epilogue_lambda_guards():
        out.extend(("SHAPE_ENV", part) for part in leaf.verbose_code_parts())
    return out


@contextlib.contextmanager
def guard_results(sink: list[bool]) -> Iterator[None]:
    """Append, for every frame entry that looked in a non-empty cache, whether a cache entry's
    guards passed (True: a hit). The hook is process-wide; the previous one is restored."""
    from torch._C._dynamo.eval_frame import set_guard_complete_hook

    def hook(passed: bool) -> bool:
        sink.append(bool(passed))
        return passed

    previous = set_guard_complete_hook(hook)
    try:
        yield
    finally:
        set_guard_complete_hook(previous)


def recompile_limit() -> int:
    """Dynamo's recompile limit: compiles per code object before it runs eagerly."""
    return torch._dynamo.config.recompile_limit


def limit_hits() -> int:
    """How many times Dynamo gave up compiling a frame because of the recompile limit."""
    from torch._dynamo.utils import counters

    return sum(n for key, n in counters["unimplemented"].items()
               if key.startswith("Dynamo recompile limit exceeded"))


def mark_dynamic(tensor: torch.Tensor, dim: int) -> None:
    """Have Dynamo treat dimension `dim` of `tensor` as a symbolic size."""
    torch._dynamo.mark_dynamic(tensor, dim)


def constraint_violation_error() -> type[Exception]:
    """The error Dynamo raises when a dimension marked dynamic was specialised."""
    from torch.fx.experimental.symbolic_shapes import ConstraintViolationError

    return ConstraintViolationError


@contextlib.contextmanager
def inductor_without_cache() -> Iterator[None]:
    """Inductor with its FX graph cache off: a graph seen before (the same two ops at every
    nesting depth) is scheduled again instead of loaded, so its compile time is measured."""
    import torch._inductor.config as inductor_config

    with inductor_config.patch(fx_graph_cache=False, autotune_local_cache=False):
        yield


# -- compiled autograd --------------------------------------------------------------------------


@contextlib.contextmanager
def compiled_autograd(compiler_fn: Callable) -> Iterator[None]:
    """`torch._dynamo.compiled_autograd._enable(compiler_fn)`, with one addition for wrapper
    subclasses: while compiled autograd captures the backward (begin_capture .. end_capture),
    torch.compile's `_is_compiling_flag` is held True, as Dynamo holds it while it traces. The
    device dispatcher reads that flag to compute only metadata for fake tensors (capture runs
    the autograd nodes on fake, symbolic-size tensors: there is nothing to run or charge)."""
    from torch._dynamo import compiled_autograd as ca

    cls = ca.AutogradCompilerInstance
    begin, end = cls.begin_capture, cls.end_capture
    flags: list[bool] = []

    def begin_capture(self, *args, **kwargs):
        flags.append(torch.compiler._is_compiling_flag)
        torch.compiler._is_compiling_flag = True
        return begin(self, *args, **kwargs)

    def end_capture(self, *args, **kwargs):
        try:
            return end(self, *args, **kwargs)
        finally:
            torch.compiler._is_compiling_flag = flags.pop() if flags else False

    cls.begin_capture, cls.end_capture = begin_capture, end_capture
    try:
        with ca._enable(compiler_fn):
            yield
    finally:
        cls.begin_capture, cls.end_capture = begin, end


def compiled_autograd_captures() -> int:
    """How many backward graphs compiled autograd has captured in this process."""
    from torch._dynamo.utils import counters

    return counters["compiled_autograd"]["captures"]


def reset_compiled_autograd() -> None:
    """Forget compiled autograd's captured graphs (the next backward captures again)."""
    from torch._dynamo import compiled_autograd as ca

    ca.reset()

