"""Traces on disk: the mtia_lab JSON format (save/load); Chrome's export is re-exported.

The JSON format is documented in docs/trace-format.md. It is a header (`"format":
"mtia_lab.trace"`, `"version": 1`), the trace's metadata and three tables of rows: tensor
records and dispatch paths are stored once and referenced by position from the events, which
keeps a 100,000-event file small and quick to write and read.

Chrome's trace event format (`to_chrome_trace`, `save_chrome_trace`) is chrome.py's; both are
importable from here too, as `mtia_lab.trace.io.to_chrome_trace`.
"""

from __future__ import annotations

import json
import math
import os
import stat
from dataclasses import fields

from ..progress import progress
from .chrome import save_chrome_trace, to_chrome_trace  # noqa: F401  (re-exported)
from .events import DispatchPath, OpEvent, TensorRecord, Trace, require_trace
from .files import write_atomically

PROGRESS_FROM = 50_000  # events: a load this long shows a progress bar (tqdm.auto)

FORMAT = "mtia_lab.trace"
VERSION = 1
TENSOR_FIELDS = [f.name for f in fields(TensorRecord)]
DISPATCH_FIELDS = [f.name for f in fields(DispatchPath)]
EVENT_FIELDS = list(OpEvent._fields)
# Event fields added to version 1 since it was fixed, at the end of the row: a file written
# before one of them has a shorter event_fields list, and its events load with the default.
ADDED_EVENT_FIELDS = ["host_issue_us"]
_FIRST_EVENT_FIELDS = EVENT_FIELDS[:len(EVENT_FIELDS) - len(ADDED_EVENT_FIELDS)]
_HOST_ISSUE_AT = EVENT_FIELDS.index("host_issue_us")
_SIM_START_AT, _SIM_END_AT = EVENT_FIELDS.index("sim_start_us"), EVENT_FIELDS.index("sim_end_us")
_DISPATCH_AT = EVENT_FIELDS.index("dispatch")
_INPUTS_AT = EVENT_FIELDS.index("inputs")
_OUTPUTS_AT = EVENT_FIELDS.index("outputs")
MAX_BYTES = 1 << 30  # load_trace reads at most this much unless told otherwise


class TraceFormatError(ValueError):
    """A file is not a trace this version of mtia_lab can read."""

    def __init__(self, path, problem: str, fix: str) -> None:
        super().__init__(f"cannot load trace {os.fspath(path)!r}: {problem}\n{fix}")
        self.path, self.problem, self.fix = os.fspath(path), problem, fix


# -- the mtia_lab format ---------------------------------------------------------------------
def trace_to_json(trace: Trace) -> dict:
    """The JSON object of a trace (what `save_trace` writes): of `trace.to_plain()`, so a Trace
    subclass whose events hold more (a RankedTrace's ranks) saves itself as OpEvents and
    metadata."""
    require_trace(trace, "trace_to_json")
    trace = trace.to_plain()
    tensor_ids: dict[int, int] = {}  # id(record) -> row; equal records are shared objects
    tensors: list[list] = []
    path_ids: dict[int, int] = {}
    paths: list[list] = []

    def tensor_row(record: TensorRecord) -> int:
        row = tensor_ids.get(id(record))
        if row is None:
            row = tensor_ids[id(record)] = len(tensors)
            tensors.append([getattr(record, name) for name in TENSOR_FIELDS])
        return row

    events = []
    for event in trace.events:
        row = list(event)  # an OpEvent is a NamedTuple: its values in EVENT_FIELDS order
        path = event.dispatch
        at = path_ids.get(id(path))
        if at is None:
            at = path_ids[id(path)] = len(paths)
            paths.append([path.arg_keys, path.merged, path.steps, path.chosen])
        row[_DISPATCH_AT] = at
        row[_INPUTS_AT] = [tensor_row(t) for t in event.inputs]
        row[_OUTPUTS_AT] = [tensor_row(t) for t in event.outputs]
        events.append(row)
    return {
        "format": FORMAT,
        "version": VERSION,
        "metadata": trace.metadata,
        "tensor_fields": TENSOR_FIELDS,
        "tensors": tensors,
        "dispatch_fields": DISPATCH_FIELDS,
        "dispatch": paths,
        "event_fields": EVENT_FIELDS,
        "events": events,
    }


def save_trace(trace: Trace, path) -> None:
    """Write `trace` to `path` in the mtia_lab trace format (docs/trace-format.md), atomically."""
    require_trace(trace, "save_trace")
    write_atomically(path, trace_to_json(trace))


def _read_bounded(path, max_bytes: int) -> bytes:
    """The bytes of a regular file of at most `max_bytes`. Opened without blocking (a FIFO
    would wait for a writer) and checked to be a regular file (a FIFO, /dev/zero or a directory
    behind a symlink is refused), then read no further than the limit."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise TraceFormatError(
            path,
            "it is not a regular file (a FIFO, a device such as /dev/zero, a directory or "
            "a socket, possibly behind a symlink)",
            "Load a .json file written by mtia_lab.trace.io.save_trace.",
        )
    with os.fdopen(descriptor, "rb") as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise TraceFormatError(
            path,
            f"it is larger than max_bytes={max_bytes}",
            "Pass a larger max_bytes to load_trace if the file is a trace you trust.",
        )
    return data


def load_trace(path, *, max_bytes: int = MAX_BYTES) -> Trace:
    """Read a trace written by `save_trace`; a TraceFormatError says what is wrong and the fix.
    At most `max_bytes` are read; only a regular file is opened."""
    data = _read_bounded(path, max_bytes)
    try:
        data = json.loads(data.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as error:
        raise TraceFormatError(
            path,
            f"the file is not JSON ({type(error).__name__}: {error})",
            "Check that the file is complete (not truncated while writing) and was written by "
            "mtia_lab.trace.io.save_trace; Chrome trace exports cannot be loaded back.",
        ) from None
    return trace_from_json(data, path)


def trace_from_json(data, path="<data>") -> Trace:
    """A Trace from the JSON object of `trace_to_json` (checked: header, version, fields)."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        if isinstance(data, dict) and "traceEvents" in data:
            problem = "this is a Chrome trace event file (an export), not an mtia_lab trace"
            fix = "Open it in https://ui.perfetto.dev; load the .json saved by save_trace instead."
        else:
            problem = f'it has no "format": "{FORMAT}" header'
            fix = "Load a file written by mtia_lab.trace.io.save_trace."
        raise TraceFormatError(path, problem, fix)
    version = data.get("version")
    if version != VERSION:
        raise TraceFormatError(
            path,
            f"it is version {version!r} of the format; this mtia_lab reads version {VERSION}",
            "Load it with the mtia_lab release that wrote it (its metadata names the release), "
            "or record the trace again.",
        )
    known = _known_event_fields(data.get("event_fields"))
    for key, expected in (
        ("tensor_fields", TENSOR_FIELDS),
        ("dispatch_fields", DISPATCH_FIELDS),
        ("event_fields", EVENT_FIELDS[:known]),
    ):
        if data.get(key) != expected:
            raise TraceFormatError(
                path,
                f"its {key} are {data.get(key)!r}, expected {expected!r}",
                "The file was edited or written by another mtia_lab; record the trace again.",
            )
    try:
        return _build(data, known)
    except (KeyError, IndexError, TypeError, ValueError, AttributeError, RecursionError) as error:
        raise TraceFormatError(
            path,
            f"a table is malformed ({type(error).__name__}: {error})",
            "The file was edited or damaged; record the trace again.",
        ) from None


def _known_event_fields(names) -> int:
    """How many of EVENT_FIELDS a file's events hold: all of them, or all but some of the
    fields added since (ADDED_EVENT_FIELDS); anything else is reported as a mismatch."""
    if (isinstance(names, list) and len(_FIRST_EVENT_FIELDS) <= len(names) <= len(EVENT_FIELDS)
            and names == EVENT_FIELDS[:len(names)]):
        return len(names)
    return len(EVENT_FIELDS)


def _tuple(value):
    return tuple(value) if isinstance(value, list) else value


# The JSON type of every value in the tables, checked on load: a view reading a trace trusts them.
_INT, _STR, _NUMBER = "int", "str", "number"
_TENSOR_TYPES = {"shape": "ints", "dtype": _STR, "strides": "ints", "storage_offset": _INT,
                 "storage": _INT, "storage_nbytes": _INT, "device": _STR,
                 "view_of": "int|None", "nbytes": _INT}
_EVENT_TYPES = {"index": _INT, "op": _STR, "kind": _STR, "phase": _STR, "reason": _STR,
                "dispatch": _INT, "inputs": "ints", "outputs": "ints", "allocated": _INT,
                "freed": _INT, "device_bytes": _INT, "host_start_ns": _INT, "host_ns": _INT,
                "sim_start_us": "number|None", "sim_end_us": "number|None",
                "stream": "int|None", "device": _INT, "source": _STR, "module": _STR,
                "call": _STR, "call_id": _INT, "host_issue_us": "pair|None"}


def _is(value, kind: str) -> bool:
    if kind.endswith("|None"):
        return value is None or _is(value, kind[:-5])
    if kind == _INT:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == _NUMBER:  # JSON from Python may hold Infinity and NaN: no time is either
        return (isinstance(value, (int, float)) and not isinstance(value, bool)
                and math.isfinite(value))
    if kind == _STR:
        return isinstance(value, str)
    if kind == "ints":  # lists from JSON; tuples from trace_to_json used in memory
        return isinstance(value, (list, tuple)) and all(_is(v, _INT) for v in value)
    if kind == "pair":  # (start, end): two numbers
        return isinstance(value, (list, tuple)) and len(value) == 2 and all(
            _is(v, _NUMBER) for v in value)
    if kind == "strs":
        return isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)
    raise AssertionError(kind)


def _row(row, types: dict, what: str, at: int) -> list:
    if not isinstance(row, (list, tuple)) or len(row) != len(types):
        raise ValueError(f"{what} {at} is not a list of {len(types)} values")
    for value, (name, kind) in zip(row, types.items(), strict=True):
        if not _is(value, kind):
            expected = kind.replace(_NUMBER, "finite number").replace("pair", "pair of "
                                                                      "finite numbers")
            raise TypeError(f"{what} {at}: {name} must be {expected.replace('|', ' or ')}, "
                            f"got {value!r}")
    return row


def _check_intervals(row: list, at: int) -> None:
    """The simulated times of event `at` form intervals: start and end both set or both None
    (the views subtract one from the other), and no end before its start."""
    start, end = row[_SIM_START_AT], row[_SIM_END_AT]
    if (start is None) != (end is None):
        raise ValueError(f"event {at}: sim_start_us is {start!r} but sim_end_us is {end!r}; "
                         "both are numbers or both None")
    if start is not None and end < start:
        raise ValueError(f"event {at}: sim_end_us {end!r} is before sim_start_us {start!r}")
    issue = row[_HOST_ISSUE_AT]
    if issue is not None and issue[1] < issue[0]:
        raise ValueError(f"event {at}: host_issue_us ends before it starts ({issue!r})")


def _list(data: dict, key: str) -> list:
    value = data[key]
    if not isinstance(value, list):
        raise TypeError(f"{key} is not a list")
    return value


def _refs(indices: list, table: list, what: str, at: int) -> list:
    for i in indices:
        if not 0 <= i < len(table):  # a negative index would silently count from the end
            raise IndexError(f"event {at} refers to {what} {i}, which does not exist")
    return [table[i] for i in indices]


def _build(data: dict, known: int) -> Trace:
    """The Trace of checked tables; events have the first `known` fields of EVENT_FIELDS (the
    rest, added since the file was written, take their defaults)."""
    event_types = dict(list(_EVENT_TYPES.items())[:known])
    missing = [OpEvent._field_defaults[name] for name in EVENT_FIELDS[known:]]
    tensors = []
    for at, row in enumerate(_list(data, "tensors")):
        shape, dtype, strides, offset, storage, storage_nbytes, device, view_of, nbytes = _row(
            row, _TENSOR_TYPES, "tensor", at)
        tensors.append(TensorRecord(
            tuple(shape), dtype, tuple(strides), offset, storage, storage_nbytes, device,
            view_of, nbytes,
        ))
    paths = []
    for at, row in enumerate(_list(data, "dispatch")):
        if not isinstance(row, (list, tuple)) or len(row) != 4:
            raise ValueError(f"dispatch path {at} is not a list of 4 values")
        arg_keys, merged, steps, chosen = row
        if not (isinstance(arg_keys, (list, tuple)) and all(_is(keys, "strs") for keys in arg_keys)
                and _is(merged, "strs") and _is(steps, "strs") and isinstance(chosen, str)):
            raise TypeError(f"dispatch path {at} must hold lists of strings and a string")
        paths.append(DispatchPath(tuple(tuple(keys) for keys in arg_keys), tuple(merged),
                                  tuple(steps), chosen))
    events = []
    for at, row in enumerate(progress(_list(data, "events"), desc="loading trace",
                                      min_total=PROGRESS_FROM)):
        row = list(_row(row, event_types, "event", at)) + missing
        _check_intervals(row, at)
        row[_DISPATCH_AT] = _refs([row[_DISPATCH_AT]], paths, "dispatch path", at)[0]
        row[_INPUTS_AT] = tuple(_refs(row[_INPUTS_AT], tensors, "tensor", at))
        row[_OUTPUTS_AT] = tuple(_refs(row[_OUTPUTS_AT], tensors, "tensor", at))
        if row[_HOST_ISSUE_AT] is not None:
            row[_HOST_ISSUE_AT] = tuple(row[_HOST_ISSUE_AT])
        events.append(OpEvent._make(row))
    metadata = data.get("metadata", {})
    if not isinstance(metadata, dict):
        raise TypeError("metadata is not an object")
    for key in ("label", "error", "created", "torch", "mtia_lab", "profile"):
        if key in metadata and not isinstance(metadata[key], str):
            raise TypeError(f"metadata {key} must be a string, got {metadata[key]!r}")
    starts = metadata.get("sim_start_us", {})
    if not isinstance(starts, dict) or not all(_is(v, _NUMBER) for v in starts.values()):
        raise TypeError("metadata sim_start_us must map device indices to finite numbers")
    return Trace(events, metadata)
