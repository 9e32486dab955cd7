"""Progress bars for long work, through `tqdm.auto`, whose saved notebook output ends at 100%.

`tqdm.auto` draws an ipywidgets bar in a notebook and a text bar in a terminal, as users
expect. One thing it does not do: the output a notebook saves holds the bar's *first* frame
as its text and HTML forms ("0%| | 0/150"), so GitHub, nbconvert or a reader without the
widget state sees a loop that never started. `progress` displays the same bar under a
display id and, when it closes, updates that output with its final frame: the widget view,
the text and a `<pre>` of the last line ("100%|##########| 150/150").

    for batch in progress(loader, desc="training"):
        ...

`min_total`: work with fewer steps shows no bar at all (a 20-event trace loads without one).
"""

from __future__ import annotations

import functools
import html
from collections.abc import Iterable
from typing import Any


def progress(iterable: Iterable | None = None, *, desc: str = "", total: int | None = None,
             min_total: int = 0, **options: Any):
    """A `tqdm.auto.tqdm` over `iterable` (same options); see the module doc."""
    from tqdm.auto import tqdm as auto_tqdm
    from tqdm.notebook import tqdm as notebook_tqdm

    if total is None and hasattr(iterable, "__len__"):
        total = len(iterable)
    if total is not None and total < min_total:
        options["disable"] = True
    cls = saved_class(auto_tqdm) if issubclass(auto_tqdm, notebook_tqdm) else auto_tqdm
    return cls(iterable, desc=desc, total=total, **options)


@functools.cache
def saved_class(notebook_tqdm: type) -> type:
    """`notebook_tqdm` (tqdm.auto's class in a notebook) with its final frame saved."""
    from IPython.display import display

    class SavedProgress(notebook_tqdm):
        """tqdm.auto's notebook bar, shown under a display id and updated when it closes."""

        def __init__(self, *args, **kwargs) -> None:
            kwargs["display"] = False  # we display it ourselves, with an id
            self._handle = None
            super().__init__(*args, **kwargs)
            if not self.disable:
                self._handle = display(self._bundle(), raw=True, display_id=True)

        def _bundle(self) -> dict:
            text = repr(self.container)  # tqdm's text form of the bar, as its widget shows it
            return {"application/vnd.jupyter.widget-view+json": {
                        "version_major": 2, "version_minor": 0,
                        "model_id": self.container.model_id},
                    "text/plain": text, "text/html": f"<pre>{html.escape(text)}</pre>"}

        def close(self) -> None:
            super().close()
            handle, self._handle = self._handle, None
            if handle is not None:  # the final frame replaces the first in the saved output
                handle.update(self._bundle(), raw=True)

    return SavedProgress
