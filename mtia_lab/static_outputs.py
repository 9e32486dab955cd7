"""Saved notebooks that show every widget without a kernel: freeze widget outputs to their
static form.

A widget output holds `application/vnd.jupyter.widget-view+json` (a model id) and, for every
mtia_lab widget and `mtia_lab.progress` bar, the static form beside it: `text/html` (the table,
the picture, the last frame of a progress bar) and `text/plain` (the text twin). Which one a
reader sees depends on where the notebook is opened, and the widget view wins wherever the
model id is known:

- nbconvert's HTML export and nbviewer draw a widget whose state the notebook saved (as
  `jupyter execute` saves it) with JavaScript fetched from a CDN: offline, an empty `Out[n]`;
- JupyterLab, reopening a notebook saved without the state (its default; the JupyterLab
  `make lab` starts saves it: jupyter/lab/settings/), shows "Error displaying widget: model
  not found".

`freeze(nb)` drops the widget view from every output that has a static form (and the saved
widget state once no output needs it), so every reader gets the table, picture or final
progress; running the cell again brings the live widget back. It marks each frozen output
(`metadata["mtia_lab"]["frozen_widget"]`) so tests can find them. The tutorials are stored
frozen:

    jupyter execute --inplace notebooks/01_tour.ipynb
    python -m mtia_lab.static_outputs notebooks/01_tour.ipynb

nbval compares the frozen outputs with a fresh run as before: it never compares the widget
view (its model ids are random).
"""

from __future__ import annotations

import sys

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
STATIC = ("text/html", "image/svg+xml", "image/png")  # forms a reader can see without a kernel


def freeze(nb) -> tuple[int, int]:
    """Freeze `nb` (a dict or NotebookNode) in place: (outputs frozen, widget outputs left
    live because they carry no static form)."""
    frozen = live = 0
    for cell in nb.get("cells", []):
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if WIDGET_VIEW not in data:
                continue
            if any(key in data for key in STATIC):
                del data[WIDGET_VIEW]
                output.setdefault("metadata", {}).setdefault("mtia_lab", {})[
                    "frozen_widget"] = True
                frozen += 1
            else:
                live += 1
    if not live:
        nb.get("metadata", {}).pop("widgets", None)
    return frozen, live


def main(paths: list[str]) -> int:
    import nbformat

    if not paths:
        print("usage: python -m mtia_lab.static_outputs NOTEBOOK.ipynb ...", file=sys.stderr)
        return 2
    status = 0
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        frozen, live = freeze(nb)
        nbformat.write(nb, path)
        note = f"; {live} widget outputs have no static form and stay live" if live else ""
        print(f"{path}: {frozen} widget outputs frozen to their static form{note}")
        status = status or (1 if live else 0)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
