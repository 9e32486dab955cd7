"""mtia_lab's widgets and diagrams in a real JupyterLab, in a real (headless) browser.

Unit tests check the views' data and mimebundles; only a browser shows that JupyterLab
actually renders them: that the ipywidgets front end draws the explorer and sends typed
values back to the kernel, and that a diagram's `<img>` decodes and shows the picture of the
snapshot the kernel holds. Expected values come from the page itself (the numbers in the
widget's fields, the text twin the notebook prints) run through mtia_lab's own model in this
process: the browser must show what the model says.

To cover a tutorial notebook, add a `NotebookCase` to CASES with CSS selectors for what must
be visible after Run All Cells.
"""

from __future__ import annotations

import base64
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Locator, expect

from mtia_lab.inspect.layout import LayoutError, strided_layout
from mtia_lab.viz.layout_render import render_svg

HERE = Path(__file__).parent
REPO = HERE.parents[1]
WIDGETS_NOTEBOOK = HERE / "notebooks" / "widgets_and_diagrams.ipynb"

# What a person sees; every selector is looked up inside the notebook's panel.
WIDGET_FIELD = ".jupyter-widgets.widget-text input"
LAYOUT_PICTURE = ".widget-html-content img[alt='stride layout']"
MEMORY_DIAGRAM = ".jp-RenderedHTMLCommon img[alt^='memory snapshot']"
TRACE_EXPLORER = ".mtia-trace-explorer .mtia-trace-rows table"
DATAFLOW_DIAGRAM = ".jp-RenderedHTMLCommon img[alt^='dataflow of trace']"
TOUR_NOTEBOOK = REPO / "notebooks" / "01_tour.ipynb"
SVG = "{http://www.w3.org/2000/svg}"
SVG_URL = "data:image/svg+xml;base64,"


@dataclass(frozen=True)
class NotebookCase:
    notebook: Path
    selectors: tuple[str, ...]  # each must match a visible element after Run All Cells

    def __str__(self) -> str:
        return self.notebook.stem


CASES = [
    NotebookCase(WIDGETS_NOTEBOOK, (WIDGET_FIELD, LAYOUT_PICTURE, MEMORY_DIAGRAM)),
    # The tour: the live trace explorer and a Graphviz dataflow diagram (only the .ipynb is
    # copied to the server's root).
    NotebookCase(TOUR_NOTEBOOK, (TRACE_EXPLORER, DATAFLOW_DIAGRAM)),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_notebook_runs_and_shows_its_views(case: NotebookCase, run_notebook) -> None:
    notebook = run_notebook(case.notebook)
    stderr = notebook.stderr_texts()
    assert not stderr, "a cell wrote to stderr (a traceback or a warning):\n" + "\n".join(stderr)
    for selector in case.selectors:
        expect(notebook.panel.locator(selector).first).to_be_visible()
    images = notebook.panel.locator(".jp-OutputArea-output img")
    for i in range(images.count()):
        assert _natural_width(images.nth(i)) > 0, f"output image {i} did not decode"


def test_layout_explorer_redraws_for_a_typed_stride(run_notebook) -> None:
    notebook = run_notebook(WIDGETS_NOTEBOOK)
    out = notebook.output_of(".widget()")
    size, stride = out.get_by_label("size", exact=True), out.get_by_label("stride", exact=True)
    offset = out.get_by_label("offset", exact=True)
    storage = out.get_by_label("storage", exact=True)
    message = out.locator(".mtia-layout-message pre")  # only a refusal; the summary is drawn
    picture = out.locator(LAYOUT_PICTURE)

    def expected(stride_text: str):
        """The layout mtia_lab's model gives for the numbers now in the fields."""
        return strided_layout(_ints(size.input_value()), _ints(stride_text),
                              int(offset.input_value()), int(storage.input_value()), name="t")

    # What the notebook drew first, then two new strides typed as a person would
    # (the field sends its value on Enter): a transpose-like one and a non-dense one.
    for stride_text in (stride.input_value(), "1, 3", "2, 0"):
        if stride_text != stride.input_value():
            stride.fill(stride_text)
            stride.press("Enter")
        record = expected(stride_text)
        expect(message).to_have_count(0)  # the summary is in the picture, not said twice
        # The message and the picture are two widgets, updated by two messages: wait for each.
        expect(picture).to_have_attribute("src", _data_url(render_svg(record)))
        expect(picture).to_be_visible()
        assert _natural_width(picture) > 0

    # A stride that reads past the storage: the model's error replaces the picture.
    stride.fill("4, 2")
    stride.press("Enter")
    with pytest.raises(LayoutError) as error:
        expected("4, 2")
    expect(message).to_have_text(str(error.value))
    expect(picture).to_have_count(0)

    stride.fill("4, 1")  # back to a valid layout: the picture returns
    stride.press("Enter")
    expect(picture).to_have_attribute("src", _data_url(render_svg(expected("4, 1"))))


def test_memory_diagram_shows_the_segments_the_kernel_printed(run_notebook) -> None:
    notebook = run_notebook(WIDGETS_NOTEBOOK)
    out = notebook.output_of("memory_view()")
    printed = out.locator('[data-mime-type="application/vnd.jupyter.stdout"]').inner_text()
    segments = re.findall(r"^segment 0x([0-9a-f]+) on", printed, flags=re.MULTILINE)
    blocks = re.findall(r"^\s+\+0x[0-9a-f]+\s+(\S+ \S+)\s+(allocated|free)", printed,
                        flags=re.MULTILINE)
    assert segments and blocks, f"the notebook did not print a snapshot:\n{printed}"

    diagram = out.locator(MEMORY_DIAGRAM)
    expect(diagram).to_be_visible()
    assert _natural_width(diagram) > 0
    assert diagram.get_attribute("alt") == printed.splitlines()[0]  # the headline
    svg = ET.fromstring(_svg_of(diagram))
    nodes = [g.findtext(f"{SVG}title") for g in svg.iter(f"{SVG}g") if g.get("class") == "node"]
    assert nodes == [f"seg_{address}" for address in segments]
    texts = [t.text for t in svg.iter(f"{SVG}text")]
    for size, _ in blocks:  # each block's cell shows its size and, when free, "free"
        assert size in texts, f"block of {size} missing from the diagram"
    assert texts.count("free") == sum(state == "free" for _, state in blocks)


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(item) for item in text.split(",") if item.strip())


def _natural_width(image: Locator) -> int:
    """Width of the decoded picture: 0 when the browser could not decode the data URL."""
    return image.evaluate("img => img.complete ? img.naturalWidth : 0")


def _data_url(svg: str) -> str:
    return SVG_URL + base64.b64encode(svg.encode()).decode()


def _svg_of(image: Locator) -> str:
    src = image.get_attribute("src") or ""
    assert src.startswith(SVG_URL), f"not an inline SVG picture: {src[:60]!r}"
    return base64.b64decode(src[len(SVG_URL):]).decode()
