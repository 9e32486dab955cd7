"""How a line of the user's code is named on screen: `model.py:12`, or for a notebook cell
`In [5], line 3`, as IPython's own tracebacks say it.

A cell's code is compiled under a temporary file name (`/tmp/ipykernel_4733/2951069589.py`) that
changes at every kernel start, so it must never reach a saved output. Records (allocator blocks,
fusion decisions, trace events) and renderers all name sources through `short_source`; it needs
nothing but IPython's running shell, if there is one.
"""

from __future__ import annotations

import inspect
import re
import sys

_IPYKERNEL_CELL = re.compile(r"/ipykernel_\d+/\d+\.py:(\d+)$")
_IPYTHON_INPUT = re.compile(r"<ipython-input-(\d+)-[0-9a-f]+>:(\d+)$")


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
