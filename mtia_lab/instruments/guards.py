"""Watch a compiled function: which cache entry served each call, and why Dynamo recompiled.

    watched = watch(fn, backend="mtia_lab", recompile_limit=4)
    for n in (2, 3, 4):
        watched(x, n)
    watched.log                   # CompileLog: calls, cache entries with their guards
    viz.compile_log_view(watched) # the text twin, a picture, rich (mtia_lab.viz)

Every fact comes from Dynamo's own records (see _compat.py): the cache entries on the code
object after each call (most recently used first, so a hit's entry is at the front), the
guard-complete hook (did any entry's guards pass?), the `recompile_reasons` structured
artifact (the guards that failed) and `compilation_metrics` (graph size). Nothing parses logs.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any

import torch

from . import _compat
from .records import CallRecord, CompileEntry, CompileLog, Guard, clean_reason

_KEEP = frozenset({"recompile_reasons", "compilation_metrics"})


class DynamicDimError(ValueError):
    """A dimension marked dynamic that the code needs static (it branches on it, or reshapes
    to a fixed size)."""


def check_recompile_limit(recompile_limit: Any) -> int | None:
    """None (Dynamo's default) or a whole number >= 1; anything else is refused, by name."""
    if recompile_limit is None:
        return None
    if isinstance(recompile_limit, bool) or not isinstance(recompile_limit, int) \
            or recompile_limit < 1:
        raise ValueError(
            f"recompile_limit={recompile_limit!r}: it must be a whole number >= 1 (how many "
            "cache entries Dynamo keeps for one function before it stops compiling and runs "
            "it eagerly). Use 1 to allow no recompile, or leave it out for Dynamo's default "
            f"({_compat.recompile_limit()}).")
    return recompile_limit


def mark_dynamic(tensor: torch.Tensor, *dims: int, name: str = "tensor") -> torch.Tensor:
    """torch._dynamo.mark_dynamic for each dim, checked first: a dim the tensor does not have
    is refused, naming `name`. Returns the tensor."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"mark_dynamic: {name} must be a tensor, got {type(tensor).__name__}")
    if not dims:
        raise ValueError(f"mark_dynamic({name}): name at least one dim, e.g. mark_dynamic(x, 0)")
    for dim in dims:
        if not -tensor.dim() <= dim < tensor.dim():
            raise IndexError(
                f"mark_dynamic({name}, {dim}): {name} has {tensor.dim()} dims "
                f"(shape {list(tensor.shape)}); pick a dim in 0..{tensor.dim() - 1}")
        _compat.mark_dynamic(tensor, dim % tensor.dim())
    return tensor


def describe_args(fn: Callable, args: tuple, kwargs: dict) -> str:
    """"x: float32[4, 8], n=2": tensors by dtype and shape (a dim marked dynamic as `*5`),
    other values by repr; argument names from fn's signature when it has one."""
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
        items = list(bound.arguments.items())
    except (TypeError, ValueError):
        items = [(f"arg{i}", a) for i, a in enumerate(args)] + list(kwargs.items())
    parts = []
    for name, value in items:
        if isinstance(value, torch.Tensor):
            marked = getattr(value, "_dynamo_dynamic_indices", set())
            dims = ", ".join(f"*{s}" if i in marked else str(s) for i, s in enumerate(value.shape))
            parts.append(f"{name}: {str(value.dtype).removeprefix('torch.')}[{dims}]")
        else:
            parts.append(f"{name}={value!r}"[:40])
    return ", ".join(parts)


def _marked_args(fn: Callable, args: tuple, kwargs: dict) -> str:
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs).arguments
    except (TypeError, ValueError):
        bound = {f"arg{i}": a for i, a in enumerate(args)}
    marked = [f"{name} (dim {', '.join(map(str, sorted(v._dynamo_dynamic_indices)))})"
              for name, v in bound.items()
              if isinstance(v, torch.Tensor) and getattr(v, "_dynamo_dynamic_indices", None)]
    return ", ".join(marked) or "an argument"


_GENERATION = [0]  # bumped by every watch(): Dynamo's caches were reset then


class Watched:
    """A compiled function that records every call in `log` (a CompileLog).

    Watching starts from a clean Dynamo (`torch.compiler.reset()`): entries cached before,
    for this function or under another backend, would otherwise serve or fail calls with no
    record of why. So a later watch() supersedes this one (calling it then is refused)."""

    def __init__(self, fn: Callable, *, backend: str | Callable = "mtia_lab",
                 dynamic: bool | None = None, recompile_limit: int | None = None,
                 fullgraph: bool = False, options: dict | None = None,
                 name: str | None = None) -> None:
        limit = check_recompile_limit(recompile_limit)
        torch.compiler.reset()
        _GENERATION[0] += 1
        self.generation = _GENERATION[0]
        self.fn = fn
        self.code = _compat.code_of(fn)
        self.compiled = torch.compile(fn, backend=backend, dynamic=dynamic, fullgraph=fullgraph,
                                      options=options, recompile_limit=limit)
        backend_name = backend if isinstance(backend, str) else getattr(
            backend, "__name__", type(backend).__name__)
        function = getattr(fn, "__name__", type(fn).__name__)
        self.log = CompileLog(name or function, backend_name, dynamic,
                              limit or _compat.recompile_limit(), function=function)

    def __call__(self, *args, **kwargs):
        if self.generation != _GENERATION[0]:
            raise RuntimeError(
                f"this watch() of {self.log.function} was superseded by a later watch(), which "
                "reset Dynamo's caches; its log stays readable. Watch the function again to "
                "record more calls")
        target = self.fn.forward if isinstance(self.fn, torch.nn.Module) else self.fn
        described = describe_args(target, args, kwargs)
        passed: list[bool] = []
        hits_before = _compat.limit_hits()
        with _compat.structured_trace(_KEEP) as records, _compat.guard_results(passed):
            try:
                result = self.compiled(*args, **kwargs)
            except _compat.constraint_violation_error() as error:
                raise DynamicDimError(
                    f"{_marked_args(target, args, kwargs)} was marked dynamic with "
                    "mark_dynamic, but the code needs that size to be a constant (it branches "
                    "on it or reshapes to a fixed size). Fix: drop mark_dynamic for that dim, "
                    "use torch._dynamo.maybe_mark_dynamic (a hint, not a promise), or change "
                    f"the code. Dynamo said:\n{_first_reason(error)}"
                ) from error
        self.log.dynamo_limit_hits += _compat.limit_hits() - hits_before
        self._record(described, passed, records)
        return result

    def _record(self, described: str, passed: list[bool], records: list) -> None:
        entries = _compat.cache_entries(self.code)
        new = [(cid, manager) for cid, manager in entries if cid not in self.log.entries]
        reasons = _reasons_by_compile(records)
        ops = _ops_by_compile(records)
        for cid, manager in new:
            guards = tuple(Guard.from_dynamo(kind, text)
                           for kind, text in _compat.guard_tree(manager))
            self.log.entries[cid] = CompileEntry(cid, guards, reasons.get(cid, ()), ops.get(cid))
        cache = tuple(cid for cid, _ in entries)
        if new:
            cid = new[0][0]
            call = CallRecord(len(self.log.calls), described, "compiled", cid,
                              reasons.get(cid, ()), cache)
        elif passed and passed[0]:
            call = CallRecord(len(self.log.calls), described, "cache hit", cache[0], (), cache)
        else:  # no entry's guards passed and nothing was compiled: Dynamo ran it eagerly
            why = (f"recompile limit ({self.log.recompile_limit}) reached: every cache entry's "
                   "guards failed and Dynamo may not compile another",)
            call = CallRecord(len(self.log.calls), described, "eager (recompile limit)", None,
                              why, cache)
        self.log.calls.append(call)


def _first_reason(error: Exception) -> str:
    """The first "- You marked ..." line of a ConstraintViolationError (or its first line)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return next((line for line in lines if line.startswith("- ")), lines[0] if lines else "")


def _reasons_by_compile(records: list) -> dict[str, tuple[str, ...]]:
    out = {}
    for name, metadata, payload in records:
        if name == "recompile_reasons" and payload:
            # one reason comes as its text, several as a JSON list (trace_structured)
            value = json.loads(payload) if payload.startswith("[") else [payload]
            out[_compat.compile_id_text(metadata)] = tuple(clean_reason(r) for r in value)
    return out


def _ops_by_compile(records: list) -> dict[str, int]:
    out = {}
    for name, metadata, _ in records:
        if name == "compilation_metrics":
            m = metadata["compilation_metrics"]
            cid = m.get("compile_id") or ""
            if m.get("graph_op_count") is not None:
                out[cid] = m["graph_op_count"]
    return out


def watch(fn: Callable, **compile_kwargs) -> Watched:
    """Compile `fn` (a function or an nn.Module) with `torch.compile(**compile_kwargs)` and
    record every call: backend ("mtia_lab" by default, "inductor" for real Inductor),
    dynamic, recompile_limit (>= 1), fullgraph, options, name."""
    return Watched(fn, **compile_kwargs)
