"""What a tutorial's prose says about the output beside it is true of the stored output.

Read as a learner reads: a sentence next to a picture ("collectives in brown", "the text twin
below", "the axis starts at about 15.6 simulated milliseconds", "40 kernels") is checked
against the outputs stored in the notebook (nbval checks that a fresh run gives the same
outputs). Colour words come from mtia_lab.viz.palette, the module the pictures take their
colours from; a colour word it does not know ("purple") is refused, so prose and pictures
cannot drift apart by naming.

"Beside" is the nearest code cell above and below a markdown cell (prose introduces the output
below it, or explains the one above).
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest

from mtia_lab.viz import palette

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
OTHER_COLOUR_WORDS = {"purple", "violet", "gray", "pink", "mauve", "cyan", "magenta", "teal",
                      "black", "salmon", "gold", "tan"}
COLOUR_WORD = re.compile(
    r"\b(" + "|".join(sorted(palette.WORDS | OTHER_COLOUR_WORDS)) + r")\b", re.IGNORECASE)
HEX = re.compile(r"#[0-9a-fA-F]{6}\b")
SVG_IMG = re.compile(r'src="data:image/svg\+xml;base64,([^"]+)"')
ABOUT_TIME = re.compile(
    r"about (\d+(?:\.\d+)?) (?:simulated )?(milliseconds|microseconds|ms|us)\b")
COUNT = re.compile(r"\b(\d+) (kernels|ops|events|lanes|chips)\b")
TEXT_TWIN = re.compile(r"text twin|the table\b", re.IGNORECASE)
MS_PER_UNIT = {"milliseconds": 1.0, "ms": 1.0, "microseconds": 1e-3, "us": 1e-3}


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def _prose(cell: dict) -> str:
    """The markdown as one line, without code spans (`x = 3 ops` is not a claim)."""
    return re.sub(r"`[^`]*`", "", " ".join("".join(cell["source"]).split()))


def _neighbours(cells: list[dict], i: int) -> list[dict]:
    """The nearest code cell above and the nearest below markdown cell `i`."""
    above = next((c for c in reversed(cells[:i]) if c["cell_type"] == "code"), None)
    below = next((c for c in cells[i + 1:] if c["cell_type"] == "code"), None)
    return [c for c in (above, below) if c is not None]


def _svgs(cell: dict) -> list[str]:
    """The SVG pictures of the cell's outputs (inline, or as the `<img>` the HTML holds)."""
    found = []
    for out in cell.get("outputs", []):
        data = out.get("data", {})
        if "image/svg+xml" in data:
            found.append("".join(data["image/svg+xml"]))
        else:
            found += [base64.b64decode(b).decode() for b in
                      SVG_IMG.findall("".join(data.get("text/html", "")))]
    return found


def _colours(cell: dict) -> set[str | None]:
    """Palette words of the colours drawn beside: in pictures, and in HTML tables' styles."""
    drawn = "".join(_svgs(cell)) + "".join(
        re.sub(SVG_IMG, "", "".join(out.get("data", {}).get("text/html", "")))
        for out in cell.get("outputs", []))
    return {palette.word_of(h) for h in HEX.findall(drawn)}


def _all_text(cell: dict) -> list[str]:
    """Every text form of the cell's outputs (a picture's text twin says what it draws)."""
    return ["".join(out.get("text") or out.get("data", {}).get("text/plain", ""))
            for out in cell.get("outputs", [])]


def _texts(cell: dict) -> list[str]:
    """Text a learner sees under the cell: printed text, and text or tables displayed."""
    shown = []
    for out in cell.get("outputs", []):
        if out["output_type"] == "stream":
            shown.append("".join(out["text"]))
            continue
        data = out.get("data", {})
        html = "".join(data.get("text/html", ""))
        if ("text/html" not in data or "<pre" in html or "<table" in html) and not _svgs(
                {"outputs": [out]}):
            shown.append("".join(data.get("text/plain", "")))
    return shown


def _claims(path: Path):
    cells = _cells(path)
    for i, cell in enumerate(cells):
        if cell["cell_type"] == "markdown":
            yield i, _prose(cell), _neighbours(cells, i)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_colour_words_name_colours_of_the_picture_beside_them(path: Path) -> None:
    wrong = []
    for i, prose, beside in _claims(path):
        words = {w.lower() for w in COLOUR_WORD.findall(prose)}
        if not words:
            continue
        unknown = words - palette.WORDS
        drawn = set().union(*(_colours(c) for c in beside))
        missing = words - drawn - unknown
        if unknown:
            wrong.append(f"cell {i}: {sorted(unknown)} is no colour of mtia_lab.viz.palette "
                         f"(its words: {sorted(palette.WORDS)})")
        if missing:
            wrong.append(f"cell {i}: says {sorted(missing)}, but the picture beside it has "
                         f"only {sorted(w for w in drawn if w)}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_picture_names_only_colours_it_draws(path: Path) -> None:
    """A legend or caption inside a picture ("yellow: the same group in both plans") is prose
    too: the colour it names must be drawn in that picture."""
    wrong = []
    for n, cell in enumerate(_cells(path)):
        for svg in _svgs(cell):
            said = {w.lower() for text in re.findall(r"<text[^>]*>([^<]*)</text>", svg)
                    for w in COLOUR_WORD.findall(text)}
            drawn = {palette.word_of(h) for h in HEX.findall(svg)}
            if said - drawn:
                wrong.append(f"cell {n}: the picture says {sorted(said - drawn)} but draws "
                             f"only {sorted(w for w in drawn if w)}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_promised_text_or_table_is_shown(path: Path) -> None:
    wrong = [f"cell {i}: {TEXT_TWIN.search(prose)[0]!r}, but no text or table is shown beside it"
             for i, prose, beside in _claims(path)
             if TEXT_TWIN.search(prose) and not any(t.strip() for c in beside for t in _texts(c))]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_stated_times_and_counts_match_the_outputs(path: Path) -> None:
    everything = "\n".join(t for c in _cells(path) for t in _all_text(c))
    wrong = []
    for i, prose, beside in _claims(path):
        for number, unit in ABOUT_TIME.findall(prose):
            decimals = len(number.partition(".")[2])
            said = float(number) * MS_PER_UNIT[unit]  # in ms
            shown = [float(n) for c in beside for t in _texts(c)
                     for n in re.findall(r"\d+\.\d+|\d+", t)]
            close = [n for n in shown for scale in (1.0, 1e-3)  # a number in ms or in us
                     if abs(n * scale - said) <= 0.5 * 10 ** -decimals * MS_PER_UNIT[unit]]
            if not close:
                wrong.append(f"cell {i}: 'about {number} {unit}' is no time shown beside it")
        for count, noun in COUNT.findall(prose):
            if not re.search(rf"\b{count} {noun}\b", everything):
                wrong.append(f"cell {i}: '{count} {noun}' appears in no output")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_outputs_cite_only_cells_that_had_run(path: Path) -> None:
    """`In [n], line 3` in an output names the cell that ran that line: never a cell after the
    one showing it (the stored outputs are what nbval, which counts cells as Jupyter does,
    compares a fresh run with)."""
    wrong = []
    for cell in _cells(path):
        count = cell.get("execution_count")
        if cell["cell_type"] != "code" or count is None:
            continue
        cited = {int(n) for text in _all_text(cell) for n in re.findall(r"In \[(\d+)\]", text)}
        if any(n > count for n in cited):
            wrong.append(f"In [{count}] cites {sorted(n for n in cited if n > count)}")
    assert not wrong, "\n".join(wrong)
