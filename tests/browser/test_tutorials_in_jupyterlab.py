"""Every tutorial in notebooks/, run in a real JupyterLab in headless Chromium, as a learner would.

For each notebook (a glob: tutorials added later are covered without editing this file):
Run All Cells, then check what is on the screen:

- no output is an error or a warning (stderr), and none is a raw repr where a view should be
  (`LayoutExplorer(children=...`, "Error displaying widget", `<... object at 0x...>`);
- every diagram (an SVG `<img>` the kernel sent, or the live explorer's inline SVG) draws its
  smallest text at >= 10 px *as rendered* (the font size times the scale the browser applied,
  read from the SVG's own transform), and fits in the notebook column or sits in a box that
  scrolls sideways;
- an explorable diagram (`view.explore()`) answers a click: the details of what was clicked
  are shown, and the kernel's reply to the selection arrives; hovering highlights neighbours;
  the zoom buttons and a drag move the picture; a collapsed module opens when clicked.

Screenshots of every diagram output (and of the explorer after the click) are saved under
build/browser-screenshots/<notebook>/ (build/ is gitignored) whether the test passes or not,
so a reviewer can look at what a learner sees.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from lab_page import NotebookPage
from playwright.sync_api import expect

REPO = Path(__file__).parents[2]
TUTORIALS = sorted((REPO / "notebooks").glob("*.ipynb"))
ARTIFACTS = REPO / "build" / "browser-screenshots"
MIN_TEXT_PX = 10.0
RAW_REPR = re.compile(
    r"\b[A-Z]\w*\((?:children|layout|value|description)=|Error displaying widget|"
    r"model not found|<[\w.]+ object at 0x[0-9a-f]+>"
)

# Measures every diagram of the panel. An <img> of an SVG: the SVG is parsed again and laid
# out off screen at the size the <img> is shown, so each <text>'s font size times its screen
# transform is the size it renders at. Inline SVG (the explorer): measured where it is.
_MEASURE = r"""panel => {
  const decode = src => {
    const [head, body] = src.split(',', 2);
    if (head.endsWith(';base64')) {
      const bytes = Uint8Array.from(atob(body), c => c.charCodeAt(0));
      return new TextDecoder().decode(bytes);
    }
    return decodeURIComponent(body);
  };
  const smallest = svg => {
    let min = Infinity, count = 0;
    for (const t of svg.querySelectorAll('text')) {
      if (!t.textContent.trim()) continue;
      const m = t.getScreenCTM();
      if (!m) continue;
      min = Math.min(min, parseFloat(getComputedStyle(t).fontSize) * Math.hypot(m.a, m.b));
      count++;
    }
    return [count ? min : null, count];
  };
  const placement = (el, area) => {
    const r = el.getBoundingClientRect(), a = area.getBoundingClientRect();
    let scroller = null;
    for (let e = el.parentElement; e && e !== area; e = e.parentElement) {
      const o = getComputedStyle(e).overflowX;
      if (o === 'auto' || o === 'scroll') { scroller = e; break; }
    }
    const inside = box => box.left >= a.left - 1 && box.right <= a.right + 1;
    return {width: Math.round(r.width), height: Math.round(r.height),
            column: Math.round(a.width), fits: inside(r),
            scrolls: Boolean(scroller) && inside(scroller.getBoundingClientRect())};
  };
  const out = [];
  const outputs = [...panel.querySelectorAll('.jp-OutputArea-output')];
  outputs.forEach((area, index) => {
    for (const img of area.querySelectorAll('img')) {
      if (!img.src.startsWith('data:image/svg+xml')) continue;
      const doc = new DOMParser().parseFromString(decode(img.src), 'image/svg+xml');
      const svg = document.importNode(doc.documentElement, true);
      const r = img.getBoundingClientRect();
      const holder = document.createElement('div');
      holder.style.cssText = 'position:absolute; left:-30000px; top:0;';
      svg.setAttribute('width', r.width);
      svg.setAttribute('height', r.height);
      holder.appendChild(svg);
      document.body.appendChild(holder);
      const [min, count] = smallest(svg);
      holder.remove();
      out.push({output: index, what: 'img: ' + (img.alt || '').slice(0, 70),
                natural: img.naturalWidth, minPx: min, texts: count, ...placement(img, area)});
    }
    for (const view of area.querySelectorAll('.mtia-diagram-view')) {
      const svg = view.querySelector('svg');
      if (!svg) continue;
      const [min, count] = smallest(svg);
      out.push({output: index, what: 'explorer', minPx: min, texts: count,
                ...placement(view, area)});
    }
  });
  return out;
}"""


@pytest.fixture
def tutorial(request, lab_server, browser):
    """The notebook opened in its own page, all cells run; its kernel ended afterwards."""
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    context.set_default_timeout(30_000)
    notebook = NotebookPage(context.new_page(), request.param.name)
    try:
        notebook.open(lab_server.notebook_url(lab_server.add(request.param)))
        notebook.run_all()
        yield notebook
    finally:
        context.close()
        lab_server.shutdown_kernels()


def _artifacts(name: str) -> Path:
    folder = ARTIFACTS / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


@pytest.mark.parametrize("tutorial", TUTORIALS, ids=[p.stem for p in TUTORIALS], indirect=True)
def test_tutorial_runs_clean_and_its_diagrams_are_legible(tutorial: NotebookPage) -> None:
    folder = _artifacts(Path(tutorial.name).stem)
    outputs = tutorial.panel.locator(".jp-OutputArea-output")
    diagrams = tutorial.panel.evaluate(_MEASURE)
    for d in diagrams:  # pictures first: a failing check below still leaves them to look at
        _screenshot(tutorial, outputs.nth(d["output"]), folder / f"output-{d['output']:02d}.png")
    (folder / "diagrams.json").write_text(json.dumps(diagrams, indent=1))

    stderr = tutorial.stderr_texts()
    assert not stderr, "a cell wrote to stderr (a traceback or a warning):\n" + "\n".join(stderr)
    raw = [text[:200] for text in outputs.all_inner_texts() if RAW_REPR.search(text)]
    assert not raw, f"outputs show a raw repr instead of a view: {raw}"

    small = [d for d in diagrams if d["texts"] and d["minPx"] < MIN_TEXT_PX]
    assert not small, f"diagram text under {MIN_TEXT_PX} px: {small}"
    cramped = [d for d in diagrams if not (d["fits"] or d["scrolls"])]
    assert not cramped, f"diagrams neither fit the column nor scroll: {cramped}"

    explorers = tutorial.panel.locator(".mtia-diagram")
    for i in range(explorers.count()):
        _explorer_answers_a_click(explorers.nth(i), folder / f"explorer-{i}-clicked.png")


def _screenshot(tutorial: NotebookPage, output, path: Path) -> None:
    """The first screenful of an output at its true size, as a learner scrolling to it sees it
    (JupyterLab scrolls inside the notebook panel, so an element taller than the window cannot
    be photographed whole)."""
    output.evaluate("e => e.scrollIntoView({block: 'start'})")
    box = output.bounding_box()
    viewport = tutorial.page.viewport_size
    top, bottom = max(box["y"], 0), min(box["y"] + box["height"], viewport["height"])
    if bottom - top < 1:
        return
    tutorial.page.screenshot(path=path, clip={"x": box["x"], "y": top, "width": box["width"],
                                              "height": bottom - top})


def _explorer_answers_a_click(explorer, screenshot: Path) -> None:
    svg = explorer.locator(".mtia-diagram-svg")
    node = svg.locator("g.node.mtia-item").first
    title = node.locator("title").first.text_content()
    node.hover()
    expect(svg).to_have_class(re.compile(r"\bmtia-dim\b"))  # the rest dims, neighbours stay
    node.click()
    expect(node).to_have_class(re.compile(r"\bmtia-selected\b"))
    details = explorer.locator(".mtia-diagram-details")
    expect(details.locator(".mtia-diagram-details-title")).not_to_be_empty()
    expect(details.locator("table")).to_be_visible()
    # The selection went to the kernel, and the kernel's answer came back to the page.
    expect(details.locator(".mtia-diagram-message")).to_contain_text(
        f"explorer.selected == {title!r}")
    explorer.screenshot(path=screenshot)
    # Zoom with the buttons, pan by dragging, back to the drawn size.
    zoom, stage = explorer.locator(".mtia-diagram-zoom"), explorer.locator(".mtia-diagram-stage")
    explorer.get_by_title("zoom in").click()
    expect(zoom).to_have_text("125%")
    view = explorer.locator(".mtia-diagram-view").bounding_box()
    before = stage.evaluate("e => e.style.transform")
    mouse = explorer.page.mouse
    mouse.move(view["x"] + 10, view["y"] + view["height"] - 10)
    mouse.down()
    mouse.move(view["x"] + 90, view["y"] + view["height"] - 50, steps=5)
    mouse.up()
    assert stage.evaluate("e => e.style.transform") != before, "dragging did not pan"
    explorer.get_by_title("actual size").click()
    expect(zoom).to_have_text("100%")
    # A collapsed module (fusion_graph(..., collapse=)) opens in place when clicked.
    boxes = svg.locator("g.node.mtia-item").filter(
        has=explorer.page.locator("title", has_text=re.compile(r"^module ")))
    if boxes.count():
        box = boxes.first
        name = box.locator("title").first.text_content()
        box.click()
        expect(svg.locator("g.node title", has_text=re.compile(f"^{re.escape(name)}$"))) \
            .to_have_count(0)
        expect(details.locator(".mtia-diagram-message")).to_contain_text("drawn open")
        explorer.screenshot(path=screenshot.with_name(screenshot.stem + "-opened.png"))
