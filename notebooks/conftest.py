"""nbval runs the tutorials cell by cell as Jupyter does, execution counts included.

nbval (0.11) sends each cell with `store_history=False`, so IPython's execution count stays at 1
and every cell is `In [1]`; Jupyter and `jupyter execute` (which made the stored outputs) count
the cells. mtia_lab names a notebook's source lines by cell, as IPython's tracebacks do
(`In [5], line 3`, in tables, trees, and diagrams' tooltips that nbval compares inside base64
`<img>`s where no sanitizer reaches), so the counts must match: run cells with history, as a
notebook does.
"""

from __future__ import annotations

from nbval import kernel

_original = kernel.RunningKernel.execute_cell_input


def _execute_with_history(self, cell_input, allow_stdin=None):
    return self.kc.execute(cell_input, store_history=True, allow_stdin=allow_stdin,
                           stop_on_error=False)


_execute_with_history.__doc__ = _original.__doc__
kernel.RunningKernel.execute_cell_input = _execute_with_history
