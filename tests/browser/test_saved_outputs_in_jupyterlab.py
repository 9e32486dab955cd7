"""A tutorial opened from disk in JupyterLab, nothing run: every widget output shows its static
form (the table, the picture, the final progress), never "Error displaying widget: model not
found" or a raw `VBox(children=...` repr. (The outputs are stored frozen: see
mtia_lab/static_outputs.py; test_notebook_exports.py checks the nbconvert export.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from mtia_lab.static_outputs import WIDGET_VIEW

REPO = Path(__file__).resolve().parents[2]
RAW_REPR = re.compile(r"\b[A-Z]\w*\(children=\(")


def _frozen_cells(path: Path) -> list[tuple[str, str]]:
    """(a line of the cell's source, what its static form is) for cells with frozen widgets."""
    found = []
    for cell in json.loads(path.read_text())["cells"]:
        for out in cell.get("outputs", []):
            if out.get("metadata", {}).get("mtia_lab", {}).get("frozen_widget"):
                html = "".join(out["data"]["text/html"])
                kind = "img" if "<img" in html else "table" if "<table" in html else "pre"
                line = next(ln for ln in "".join(cell["source"]).splitlines() if ln.strip())
                found.append((line.strip(), kind))
                break
    return found


TUTORIALS = [p for p in sorted((REPO / "notebooks").glob("*.ipynb")) if _frozen_cells(p)]


@pytest.fixture
def open_notebook(lab_server, browser):
    """Open a notebook in a page of its own; nothing runs: the saved outputs alone must show."""
    from lab_page import NotebookPage

    contexts = []

    def open_(path: Path) -> NotebookPage:
        context = browser.new_context(viewport={"width": 1280, "height": 1000})
        context.set_default_timeout(30_000)
        contexts.append(context)
        notebook = NotebookPage(context.new_page(), path.name)
        return notebook.open(lab_server.notebook_url(lab_server.add(path)))

    yield open_
    for context in contexts:
        context.close()


@pytest.mark.parametrize("path", TUTORIALS, ids=lambda p: p.stem)
def test_saved_widget_outputs_show_their_static_form(path: Path, open_notebook) -> None:
    assert WIDGET_VIEW not in path.read_text()
    notebook = open_notebook(path)
    outputs = notebook.panel.locator(".jp-OutputArea-output")
    expect(outputs.first).to_be_visible()
    for line, kind in _frozen_cells(path):
        area = notebook.output_of(line)
        shown = area.locator(f".jp-RenderedHTMLCommon {kind}").first
        shown.scroll_into_view_if_needed()
        expect(shown).to_be_visible()
        if kind == "img":
            assert shown.evaluate("img => img.naturalWidth") > 0, f"{line}: image not decoded"
        if "progress(" in line or "train" in line:
            assert "100%" in area.inner_text(), f"{line}: progress not saved at its end"
    text = notebook.panel.inner_text()
    assert "Error displaying widget" not in text and "Loading widget" not in text
    assert not RAW_REPR.search(text), RAW_REPR.search(text)
