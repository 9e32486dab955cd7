"""Where the user's code is: the one definition of "the user's line", and how it is named.

Two questions, one rule (`is_user_file`: not torch, not mtia_lab, not the standard library):

- `user_source()`: the user's line in the live stack, "file:line" -- who asked for this memory,
  which line issued this op, this launch, this collective (backend, trace, both compilers'
  trace listeners, distributed);
- `node_source(node)`: the user's line that made an FX node, "file:line: code", read from the
  stack Dynamo kept in `node.meta["stack_trace"]` (both compile paths name kernels by it).

How a line of the user's code is named on screen: `model.py:12`, or for a notebook cell
`In [5], line 3`, as IPython's own tracebacks say it.

A cell's code is compiled under a temporary file name (`/tmp/ipykernel_4733/2951069589.py`) that
changes at every kernel start, so it must never reach a saved output. Records (allocator blocks,
fusion decisions, trace events) and renderers all name sources through `short_source`; it needs
nothing but IPython's running shell, if there is one.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import os
import re
import sys
import sysconfig
from types import FrameType
from typing import Any

_IPYKERNEL_CELL = re.compile(r"/ipykernel_\d+/\d+\.py:(\d+)$")
_IPYTHON_INPUT = re.compile(r"<ipython-input-(\d+)-[0-9a-f]+>:(\d+)$")
_TORCH_SPEC = importlib.util.find_spec("torch")  # its folder, without importing it
_TORCH_DIR = os.path.dirname(_TORCH_SPEC.origin) if _TORCH_SPEC and _TORCH_SPEC.origin else ""
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))  # mtia_lab
_LIBRARY_DIRS = tuple(d for d in (_TORCH_DIR, sysconfig.get_paths()["stdlib"], "<frozen") if d)


# -- the rule -----------------------------------------------------------------------------------
@functools.cache
def is_user_file(filename: str, *, package_is_user: bool = False) -> bool:
    """Is `filename` the user's code: not torch (its folder, or any `/torch/` path), not the
    standard library, not mtia_lab itself.

    `package_is_user=True` counts mtia_lab's own files as the user's: for FX nodes, whose stack
    holds only the traced model's frames, so a demo model defined in mtia_lab (the tour's, the
    distributed examples') is named by its own line rather than by torch's."""
    if filename.startswith(_LIBRARY_DIRS) or "/torch/" in filename:
        return False
    return package_is_user or not filename.startswith(_PACKAGE_DIR)


def user_source(frame: FrameType | None = None, *,
                cache: dict[tuple[int, int], tuple[Any, str]] | None = None) -> str:
    """"file:line" of the innermost frame of the user's code, walking out from `frame` (default:
    the caller); "" when none is (a hook torch runs, such as DDP's).

    `cache`, for a hot path (the trace recorder asks once per user call): the answer per
    instruction, (id(code), f_lasti) -> (code, "file:line" or ""), the code kept so that its
    id stays taken. The caller owns it and clears it when it may go stale."""
    if frame is None:
        frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if cache is None:
            if is_user_file(code.co_filename):
                return f"{code.co_filename}:{frame.f_lineno}"
        else:
            known = cache.get((id(code), frame.f_lasti))
            if known is None:
                text = (f"{code.co_filename}:{frame.f_lineno}" if is_user_file(code.co_filename)
                        else "")
                known = cache[id(code), frame.f_lasti] = (code, text)
            if known[1]:
                return known[1]
        frame = frame.f_back
    return ""


def node_source(node: Any) -> str:
    """"file:line: code" of the innermost user frame in an FX node's stack trace (Dynamo keeps
    it in `node.meta["stack_trace"]`); a model made only of torch.nn modules has no user frame,
    so torch's own line is named instead. "" when the node carries no stack trace."""
    lines = (node.meta.get("stack_trace") or "").strip().splitlines()
    best = innermost = ""
    for i, line in enumerate(lines):
        line = line.strip()
        if line.startswith("File ") and ", line " in line:
            parts = line.split(", ")
            filename = parts[0][6:-1]
            where = short_source(filename + ":" + parts[1].removeprefix("line "))
            code = lines[i + 1].strip() if i + 1 < len(lines) else ""
            innermost = f"{where}: {code}" if code else where
            if is_user_file(filename, package_is_user=True):
                best = innermost
    return best or innermost


# -- how a source is named on screen --------------------------------------------------------------


def short_source(source: str) -> str:
    """file:line without the folder; a line of a notebook cell reads as IPython's tracebacks
    say it, `In [5], line 3` (the cell's temporary file name changes at every kernel start, so
    saved output stays the same). A cell this kernel did not run reads `In [?], line 3`."""
    if not source:
        return ""
    filename, _, line = source.rpartition(":")
    number = cell_number(filename)
    if number is not None:
        return f"In [{number}], line {line}"
    if _IPYKERNEL_CELL.search(source):
        return f"In [?], line {line}"
    cell = _IPYTHON_INPUT.search(source)
    if cell:
        return f"In [{cell.group(1)}], line {cell.group(2)}"
    return source.rsplit("/", 1)[-1]


def cell_number(filename: str) -> int | None:
    """The execution count of the notebook cell whose code IPython compiled under `filename`
    (the `In [n]` its tracebacks show), or None outside IPython / for other files."""
    ipython = sys.modules.get("IPython")  # never import IPython just to ask
    shell = ipython.get_ipython() if ipython is not None else None
    label = getattr(getattr(shell, "compile", None), "format_code_name", lambda _: None)(filename)
    if not label:
        return None
    digits = label[1].removeprefix("In[").removesuffix("]")
    return int(digits) if digits.isdigit() else None


def running_cell_number(shell) -> int:
    """The `In [n]` of the cell running now, for code a magic compiles on the cell's behalf.

    Not `shell.execution_count`: IPython advances that counter *before* it runs a cell that is
    stored in the history (as ipykernel's cells are, under JupyterLab and nbval alike), so the
    magic would credit the next cell. The cell that called the magic is on the stack, compiled
    under a file name IPython knows the number of; outside a cell (a magic called from Python)
    the counter is all there is."""
    frame = inspect.currentframe()
    try:
        while frame is not None:
            number = cell_number(frame.f_code.co_filename)
            if number is not None:
                return number
            frame = frame.f_back
    finally:
        del frame
    return shell.execution_count
