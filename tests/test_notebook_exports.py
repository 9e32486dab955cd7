"""Every tutorial exported with nbconvert (HTML), as a reader without a kernel gets it: each
widget output shows its static form (table, picture, final progress), never a live widget
view that needs JavaScript from a CDN (an empty `Out[n]` offline), a raw `VBox(children=...`
repr, or a progress bar stopped at its first frame. See mtia_lab/static_outputs.py."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
from nbconvert import HTMLExporter

from mtia_lab.static_outputs import WIDGET_VIEW, freeze

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
RAW_WIDGET_REPR = re.compile(r"\b[A-Z]\w*\(children=\(")
PROGRESS = re.compile(r"(\d+)%\|")


class _Visible(HTMLParser):
    """What a reader sees of some HTML: its text (whitespace collapsed) and its images."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.texts: list[str] = []
        self.images: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag, attrs) -> None:
        if tag == "img":
            self.images.append(dict(attrs).get("src", ""))

    def handle_data(self, data) -> None:
        self.texts.append(data)

    @property
    def text(self) -> str:
        return " ".join(" ".join(self.texts).split())


def _outputs(nb):
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            if output.output_type in ("display_data", "execute_result"):
                yield index, output


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_export_shows_a_static_form_for_every_widget_output(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    live = sorted({index for index, out in _outputs(nb) if WIDGET_VIEW in out.data})
    assert not live, (
        f"{path.name}: cells {live} hold live widget views, which an nbconvert export draws "
        "only with JavaScript from a CDN; after re-executing the notebook, run "
        f"`python -m mtia_lab.static_outputs {path.relative_to(REPO)}`")
    assert "widgets" not in nb.metadata, f"{path.name} keeps widget state that no output uses"
    exported, _ = HTMLExporter().from_notebook_node(nb)
    seen = _Visible(exported)
    assert 'type="application/vnd.jupyter.widget-view+json"' not in exported
    assert not RAW_WIDGET_REPR.search(exported), RAW_WIDGET_REPR.search(exported).group(0)
    for index, out in _outputs(nb):
        shown = {k for k in out.data if k in ("text/html", "image/svg+xml", "image/png",
                                               "text/plain")}
        assert shown, f"{path.name} cell {index}: an output nbconvert cannot show ({set(out.data)})"
        if not out.metadata.get("mtia_lab", {}).get("frozen_widget"):
            continue
        static = _Visible(out.data["text/html"])
        assert static.text in seen.text and set(static.images) <= set(seen.images), (
            f"{path.name} cell {index}: the widget's static form is not in the export")
        assert static.text or static.images, f"{path.name} cell {index}: an empty static form"
        text = out.data.get("text/plain", "")
        assert not RAW_WIDGET_REPR.search(text), f"{path.name} cell {index}: {text[:80]}"
        for done in PROGRESS.findall(text):
            assert done == "100", f"{path.name} cell {index}: progress saved at {done}%: {text}"


def test_freeze_keeps_widgets_without_a_static_form_live() -> None:
    view = {"model_id": "abc", "version_major": 2, "version_minor": 0}
    nb = nbformat.v4.new_notebook(metadata={"widgets": {"state": {}}})
    nb.cells.append(nbformat.v4.new_code_cell(outputs=[
        nbformat.v4.new_output("display_data", {WIDGET_VIEW: view, "text/plain": "Slider()"}),
        nbformat.v4.new_output("display_data", {WIDGET_VIEW: view, "text/plain": "t",
                                                "text/html": "<table></table>"}),
    ]))
    assert freeze(nb) == (1, 1)
    first, second = nb.cells[0].outputs
    assert WIDGET_VIEW in first.data and WIDGET_VIEW not in second.data
    assert second.metadata["mtia_lab"]["frozen_widget"] and "widgets" in nb.metadata
    nb.cells[0].outputs.pop(0)
    assert freeze(nb) == (0, 0) and "widgets" not in nb.metadata
