"""Text views fit the width they are given (80, 100 and 160 columns): columns drop or narrow,
long names end in a visible `...`, lines break between words; nothing is cut silently.

JupyterLab breaks a line longer than its output column wherever it reaches the edge
("native_layer_norm_backwa/rd"), and a rich table squeezed past its width cuts numbers
("129.0 Ki"): so every line must fit, and every name shown must be whole or visibly shortened.
"""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F

import mtia_lab
from mtia_lab.tour import _setup
from mtia_lab.viz import trace_summary, trace_tree
from mtia_lab.viz.text_fit import abbreviate, wrap_line
from mtia_lab.viz.trace_format import op_short, rich_text
from mtia_lab.viz.trace_pages import event_details, page_text

WIDTHS = [80, 100, 160]
SUMMARY_COLUMNS = {"op", "events", "native", "fallback", "view", "comp.", "bwd", "host", "sim",
                   "bytes", "alloc"}


@pytest.fixture(scope="module")
def step():
    """One training step of notebook 01's model: op names up to 26 characters."""
    model, x, y = _setup()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with mtia_lab.trace("one SGD step") as t:
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    return t


def _fits(text: str, width: int) -> None:
    too_long = [line for line in text.splitlines() if len(line) > width]
    assert not too_long, f"lines over {width} columns: {too_long}"


def _shown_whole_or_shortened(shown: str, names: set[str]) -> bool:
    return shown in names or (shown.endswith("...") and any(
        n.startswith(shown[:-3]) and len(n) > len(shown) - 3 for n in names))


@pytest.mark.parametrize("width", WIDTHS)
def test_summary_drops_columns_and_shortens_names_visibly(step, width):
    text = rich_text(trace_summary(step, times=True).to_rich(), width)  # host and sim: widest
    _fits(text, width)
    lines = text.splitlines()
    header = next(line for line in lines if line.split()[:2] == ["op", "events"])
    assert set(header.split()) <= SUMMARY_COLUMNS, f"a column name was cut: {header}"
    names = {op_short(e.op) for e in step}
    body = lines[lines.index(header) + 2:]
    shown = [line.split()[0] for line in body if line.strip() and not line.startswith(" total")]
    shown = [s for s in shown if s not in ("total",)][:len(names)]
    assert all(_shown_whole_or_shortened(s, names) for s in shown), shown
    units = re.findall(r"\d+(?:\.\d+)? ?(\S+)", " ".join(body))
    assert not {u for u in units if u.rstrip() in {"Ki", "Mi", "u", "m"}}, "a number lost its unit"
    if width >= 160:  # room for everything
        assert set(header.split()) >= SUMMARY_COLUMNS - {"fallback"} and set(shown) == names


@pytest.mark.parametrize("width", WIDTHS)
def test_tree_keeps_op_names_whole(step, width):
    text = rich_text(trace_tree(step, times=True).to_rich(), width)
    _fits(text, width)
    flat = " ".join(text.split())
    for name in {op_short(e.op) for e in step}:
        assert f" {name} x" in flat, f"{name} is not shown whole"


@pytest.mark.parametrize("width", WIDTHS)
def test_event_table_narrows_its_widest_columns(step, width):
    rows = list(step.events)
    text = page_text(rows, 0, len(rows), times=True, total=len(rows), width=width)
    _fits(text, width)
    names = {op_short(e.op) for e in step}
    body = text.splitlines()[3:]
    ops = [line[4:].split()[0] for line in body]
    assert all(_shown_whole_or_shortened(op, names) for op in ops), ops
    if width >= 160:  # only the inputs -> outputs of the widest rows give way
        assert set(ops) == names


@pytest.mark.parametrize("width", WIDTHS)
def test_event_details_wrap_between_words(step, width):
    e = max(step, key=lambda ev: len(event_details(ev, width=10_000)))
    full = event_details(e, width=10_000)
    text = event_details(e, width=width)
    _fits(text, width)
    assert text.split() == full.split(), "a word was cut or split across lines"


def test_wrap_line_keeps_a_number_with_its_unit_and_marks_what_it_shortens():
    lines = wrap_line("memory: allocated 128.00 KiB, freed 0 B, total 532.00 KiB", 24)
    assert all(len(line) <= 24 for line in lines)
    assert "128.00 KiB," in " ".join(lines) and "532.00 KiB" in " ".join(lines)
    assert abbreviate("native_layer_norm_backward", 12) == "native_la..."
    assert wrap_line("x" * 30, 10) == ["xxxxxxx..."]


def test_timeline_rows_shorten_long_names_visibly(step):
    from mtia_lab.viz import timeline_view

    long_name = "inductor.inference_1.triton_poi_fused_add_gelu_0"
    events = [e._replace(op=long_name) if e.sim_start_us is not None else e for e in step]
    rows = [line for line in timeline_view(events).to_text().splitlines()
            if "inductor." in line]
    assert rows and all("inductor.inference_1.trit... " in row for row in rows)
