"""Trace renderers: the summary table, the module tree, the dataflow graph and the explorer.

Each renderer is checked against the recorded events it reads (counted here independently),
on a trace recorded from a real model and on the same trace after a JSON round trip; text
twins are compared exactly where their input is fixed.
"""

from __future__ import annotations

import html
import xml.etree.ElementTree as ET

import pytest
import torch
from models import MLP
from rich.console import Console

import mtia_lab
from mtia_lab.backend import KERNELS
from mtia_lab.backend.aten.registry import resolve_overloads
from mtia_lab.trace import DispatchPath, OpEvent, TensorRecord, Trace
from mtia_lab.trace.io import load_trace, save_trace
from mtia_lab.viz import (
    TraceExplorer,
    trace_explorer,
    trace_graph,
    trace_summary,
    trace_table,
    trace_tree,
)
from mtia_lab.viz.trace_format import tensor_brief
from mtia_lab.viz.trace_graph import FALLBACK_FILL, dataflow
from mtia_lab.viz.trace_summary import op_rows

DEV = "mtia_sim:0"


@pytest.fixture(scope="module")
def recorded():
    """An MLP forward and backward, then a cumsum served by the CPU fallback."""
    saved = {op: KERNELS.pop(op) for op in resolve_overloads("aten::cumsum") if op in KERNELS}
    try:
        torch.manual_seed(0)
        model, host = MLP(), torch.randn(3, 4)
        dev_model, x = MLP().to(DEV), host.to(DEV)
        dev_model.load_state_dict({k: v.to(DEV) for k, v in model.state_dict().items()})
        with mtia_lab.trace("mlp") as t:
            y = dev_model(x)
            y.sum().backward()
            c = torch.cumsum(x, 0)
    finally:
        KERNELS.update(saved)
    torch.testing.assert_close(y.cpu(), model(host))  # tracing does not change results
    torch.testing.assert_close(c.cpu(), torch.cumsum(host, 0))
    return t


@pytest.fixture(scope="module")
def reloaded(recorded, tmp_path_factory):
    path = tmp_path_factory.mktemp("trace") / "mlp.json"
    save_trace(recorded, path)
    return load_trace(path)


# -- hand-made events, for exact text ---------------------------------------------------------
PATH = DispatchPath((("Python",),), ("Python",), ("Python: call __torch_dispatch__",), "test")


def rec(shape, storage, strides=None, offset=0, view_of=None) -> TensorRecord:
    if strides is None:
        strides, step = [], 1
        for n in reversed(shape):
            strides.insert(0, step)
            step *= n
    numel = 1
    for n in shape:
        numel *= n
    return TensorRecord(tuple(shape), "float32", tuple(strides), offset, storage, 4 * numel,
                        DEV, view_of, 4 * numel)


def ev(index, op, kind, inputs, outputs, call_id, module="", phase="forward", sim=1.0,
       reason="", allocated=0) -> OpEvent:
    start = None if kind == "view" else 10.0 * index
    end = None if kind == "view" else 10.0 * index + sim
    return OpEvent(index, op, kind, phase, reason, PATH, tuple(inputs), tuple(outputs),
                   allocated, 0, 0, 1000 * index, 777, start, end, None if start is None else 0,
                   0, "/home/me/train.py:7", module, "F.linear", call_id)


def tiny_trace() -> Trace:
    w, b, x = rec((2, 4), 0x100), rec((2,), 0x200), rec((3, 4), 0x300)
    wt = rec((4, 2), 0x100, (1, 4), view_of=0x100)
    y = rec((3, 2), 0x400)
    z = rec((3, 2), 0x500)
    return Trace([
        ev(0, "aten::t", "view", [w], [wt], 1, "Net.fc"),
        ev(1, "aten::addmm", "native", [b, x, wt], [y], 1, "Net.fc", sim=4.0, allocated=512),
        ev(2, "aten::cumsum", "fallback", [y], [z], 2, sim=2.5, allocated=512,
           reason="no native kernel for aten::cumsum on mtia_sim"),
    ], {"label": "tiny"})


def test_summary_text_is_exact_for_fixed_events():
    # by hand: addmm reads 8 + 48 + 32 B and writes 24 B; t reads and "writes" 32 B each
    assert trace_summary(tiny_trace(), times="sim").to_text() == "\n".join([
        "trace 'tiny': 3 events (native 1, fallback 1, view 1), 3 ops, 2 calls; simulated 6.50 "
        "us; allocated",
        "1.00 KiB",
        "",
        " op      events  native  fallback  view  comp.  bwd      sim  bytes    alloc",
        " ───────────────────────────────────────────────────────────────────────────",
        " addmm        1       1         .     .      1    .  4.00 us  112 B    512 B",
        " cumsum       1       .         1     .      .    .  2.50 us   48 B    512 B",
        " t            1       .         .     1      1    .  0.00 us   64 B      0 B",
        "",
        " total        3       1         1     1      2    .  6.50 us  224 B  1.0 KiB",
        "",
        "comp.: events of calls that became several aten ops (F.linear -> t, addmm);",
        "bwd: run by autograd; bytes: read and written",
        "fallback cumsum: no native kernel for aten::cumsum on mtia_sim",
    ])


def test_tree_text_is_exact_for_fixed_events():
    assert trace_tree(tiny_trace(), times=False).to_text() == "\n".join([
        "trace 'tiny': 3 events (native 1, fallback 1, view 1), 3 ops, 2 calls; allocated 1.00"
        " KiB",
        "└── forward  3 events (native 1, fallback 1, view 1)",
        "    ├── Net  2 events (native 1, view 1)",
        "    │   └── fc  2 events (native 1, view 1)  @ train.py:7",
        "    │       ├── addmm x1  native",
        "    │       └── t x1  view",
        "    └── (outside any module)  1 event (fallback 1)  @ train.py:7",
        "        └── cumsum x1  fallback",
    ])


# -- the summary and the tree on a recorded trace --------------------------------------------
def test_summary_rows_add_up_the_events(recorded):
    rows = {r.op: r for r in op_rows(recorded)}
    assert set(rows) == {e.op for e in recorded}
    calls: dict[int, int] = {}
    for e in recorded:
        calls[e.call_id] = calls.get(e.call_id, 0) + 1
    for op, row in rows.items():
        events = [e for e in recorded if e.op == op]
        assert row.count == len(events)
        for kind in ("native", "fallback", "view"):
            assert row.kinds[kind] == sum(e.kind == kind for e in events)
        assert row.backward == sum(e.phase == "backward" for e in events)
        assert row.composite == sum(calls[e.call_id] > 1 for e in events)
        assert row.sim_us == pytest.approx(sum(e.sim_us for e in events))
        assert row.nbytes == sum(t.nbytes for e in events for t in (*e.inputs, *e.outputs))
    # F.linear became t + addmm: both are parts of a composite call
    assert rows["aten::addmm"].composite == rows["aten::addmm"].count == 2
    assert rows["aten::cumsum"].kinds["fallback"] == 1 and rows["aten::cumsum"].composite == 0


def test_summary_text_lists_each_op_and_the_fallback_reason(recorded):
    text = trace_summary(recorded, times="sim").to_text()
    lines = text.splitlines()
    assert f"{len(recorded)} events" in lines[0]
    for row in op_rows(recorded):
        name = row.op.removeprefix("aten::")
        line = next(line for line in lines if line.split()[:1] == [name])
        assert line.split()[1] == str(row.count)
    assert any(line.startswith("fallback cumsum: ") for line in lines)
    assert " us" in text and " ms" not in lines[0]
    # host times are only shown when asked: times="sim" and times=False give stable text
    assert "host" not in text and "host" in trace_summary(recorded).to_text()
    assert " us" not in trace_summary(recorded, times=False).to_text().split("\n", 2)[2]


def test_text_is_the_same_after_a_json_round_trip(recorded, reloaded):
    assert trace_summary(reloaded, times="sim").to_text() == \
        trace_summary(recorded, times="sim").to_text()
    assert trace_tree(reloaded, times="sim").to_text() == \
        trace_tree(recorded, times="sim").to_text()
    assert trace_graph(reloaded).to_text() == trace_graph(recorded).to_text()
    assert trace_table(reloaded, times=False).to_text() == \
        trace_table(recorded, times=False).to_text()


def test_tree_groups_events_by_module_and_phase(recorded):
    tree = trace_tree(recorded, times=False)
    assert list(tree.roots) == ["forward", "backward"]
    for phase, root in tree.roots.items():
        mlp = root.children["MLP"]
        assert set(mlp.children) == {"fc1", "act", "fc2"}
        for name, node in mlp.children.items():
            expected = recorded.filter(module=f"MLP.{name}", phase=phase)
            assert node.total.count == len(expected) > 0
            assert {op: r.count for op, r in node.ops.items()} == expected.counts()
    # the gradient of GELU is computed under MLP.act in backward
    assert "aten::gelu_backward" in tree.roots["backward"].children["MLP"].children["act"].ops
    text = tree.to_text()
    assert "forward" in text and "backward" in text and "(outside any module)" in text


def test_views_follow_the_display_protocol(recorded):
    for view in (trace_summary(recorded, times=False), trace_tree(recorded, times=False),
                 trace_table(recorded, times=False)):
        bundle = view._repr_mimebundle_()
        assert bundle["text/plain"] == view.to_text() == repr(view)
        assert "<pre" in bundle["text/html"] or "<table" in bundle["text/html"]
        assert " at 0x" not in bundle["text/plain"]
        console = Console(width=100, record=True, color_system=None)
        console.print(view)
        assert console.export_text().splitlines()[0].strip() == view.to_text().splitlines()[0]


def test_bad_options_say_what_to_use(recorded):
    with pytest.raises(ValueError, match="times='yes'.*True"):
        trace_summary(recorded, times="yes")
    with pytest.raises(ValueError, match="sort='speed'.*sim, host, count, op"):
        trace_summary(recorded, sort="speed")
    with pytest.raises(ValueError, match="sort='speed'"):
        trace_table(recorded, sort="speed")


# -- the dataflow graph ----------------------------------------------------------------------
def test_graph_links_each_input_to_the_op_that_wrote_it(recorded):
    g = dataflow(recorded)
    tensors = {t.id: t for t in g.tensors}
    by_index = {op.event.index: op for op in g.ops}
    gelu = next(op for op in g.ops if op.event.op == "aten::gelu")
    fc1 = next(op for op in g.ops if op.event.op == "aten::addmm" and op.event.module == "MLP.fc1")
    fc2 = next(op for op in g.ops if op.event.op == "aten::addmm" and op.event.module == "MLP.fc2")
    assert tensors[gelu.inputs[0]].producer == fc1.event.index  # fc1's result feeds GELU
    assert tensors[fc2.inputs[1]].producer == gelu.event.index  # GELU's result feeds fc2
    # fc2's weight enters as `t` of a parameter: an alias of a tensor from outside the trace
    weight_t = tensors[fc2.inputs[2]]
    assert weight_t.alias_op == "aten::t" and weight_t.record.is_view
    base = tensors[weight_t.alias_of]
    assert base.producer is None and base.record.storage == weight_t.record.storage
    # every input is either from outside, an alias, or written by an earlier drawn op
    for op in g.ops:
        for i in op.inputs:
            t = tensors[i]
            assert t.producer is None or t.producer in by_index or t.alias_of is not None
            assert t.producer is None or t.producer < op.event.index
    # view ops are not boxes: they are the dashed alias edges
    assert all(op.event.kind != "view" for op in g.ops)
    assert sum(t.alias_of is not None for t in g.tensors) > 0


def test_graph_follows_versions_of_a_storage_written_in_place():
    x = torch.randn(4, device=DEV)
    with mtia_lab.trace() as t:
        y = x + 1
        y.add_(2)
        z = y * 3
    torch.testing.assert_close(z.cpu(), (x.cpu() + 3) * 3)
    g = dataflow(t)
    add, add_, mul = g.ops
    tensors = {n.id: n for n in g.tensors}
    assert tensors[add_.inputs[0]].producer == add.event.index
    assert tensors[mul.inputs[0]].producer == add_.event.index  # the newer version
    assert add_.outputs[0] != add.outputs[0]  # a new version is a new tensor node


def test_graph_draws_fallbacks_and_aliases(recorded):
    view = trace_graph(recorded)
    dot = view.to_dot()
    cumsum = next(e for e in recorded if e.op == "aten::cumsum")
    node_line = next(line for line in dot.splitlines() if line.strip().startswith(
        f"e{cumsum.index} ["))
    assert FALLBACK_FILL in node_line and "no native kernel" in node_line
    assert "style=dashed, dir=back" in dot
    svg = view.to_svg()
    root = ET.fromstring(svg)
    g = view.graph
    nodes = root.findall(".//{http://www.w3.org/2000/svg}g[@class='node']")
    assert len(nodes) == len(g.ops) + len(g.tensors)
    bundle = view._repr_mimebundle_()
    assert bundle["image/svg+xml"] == svg and bundle["text/html"].startswith("<img src=")


def test_graph_of_a_long_trace_is_cut_with_a_note(recorded):
    view = trace_graph(recorded, max_events=5)
    assert view.graph.shown == 5 and view.graph.total == len(recorded)
    assert f"first 5 of {len(recorded)} events drawn" in view.to_text().splitlines()[0]
    drawn = {op.event.index for op in view.graph.ops}
    assert drawn and max(drawn) < 5


# -- the explorer ----------------------------------------------------------------------------
def test_explorer_filters_sort_and_pages(recorded):
    ex = trace_explorer(recorded, page_size=4)
    assert [e.index for e in ex.rows] == list(range(len(recorded)))
    ex.kind.value = "fallback"
    assert [e.op for e in ex.rows] == ["aten::cumsum"]
    ex.kind.value = "(all)"
    ex.module.value = "MLP"  # a module keeps its submodules' events
    assert ex.rows == recorded.filter(module="MLP").events
    ex.phase.value = "backward"
    assert ex.rows == recorded.filter(module="MLP", phase="backward").events
    ex.sort.value = "simulated time"
    sims = [e.sim_us for e in ex.rows]
    assert sims == sorted(sims, reverse=True)
    assert ex.page == 0 and ex.prev.disabled
    ex.next.click()
    assert ex.page == 1 and ex.page_rows == ex.rows[4:8]
    assert f"page 2 of {ex.pages} (rows 5..8)" in ex.status.value
    assert [value for _, value in ex.event.options] == list(range(4, 4 + len(ex.page_rows)))
    for _ in range(ex.pages + 2):  # past the end: stays on the last page
        ex.next.click()
    assert ex.page == ex.pages - 1 and ex.next.disabled
    ex.set_filters(op="aten::addmm", module=None, phase=None, sort="order")
    assert [e.op for e in ex.rows] == ["aten::addmm", "aten::addmm"] and ex.page == 0
    with pytest.raises(ValueError, match="not in this trace"):
        ex.set_filters(op="aten::nope")


def test_explorer_shows_an_event_and_its_tensor_layouts(recorded):
    ex = trace_explorer(recorded)
    addmm = next(e for e in recorded if e.op == "aten::addmm")
    ex.select(addmm.index)
    assert ex.selected is addmm
    details = " ".join(ex.details.split())  # wrapped between words at 100 columns
    assert addmm.dispatch.route in details and f"module: {addmm.module}" in details
    for record in (*addmm.inputs, *addmm.outputs):
        assert f"{record.dtype}{list(record.shape)} stride={list(record.strides)}" in details
    # the first input is shown first; choosing another tensor redraws its layout
    first = addmm.inputs[0]
    assert ex.layout_record.size == first.shape and ex.layout_record.stride == first.strides
    ex.tensor.value = ("in", 2)  # the transposed weight: a view with swapped strides
    weight_t = addmm.inputs[2]
    assert ex.layout_record.stride == weight_t.strides == (1, 4)
    assert ex.picture.value.startswith("<img src=\"data:image/svg+xml;base64,")
    assert "stride" in ex.detail_html.value


def test_a_click_on_a_row_opens_its_event(recorded):
    ex = trace_explorer(recorded, page_size=5)
    ex.turn(+1)  # page 2: rows 5..9
    third = ex.rows[7]
    assert 'data-position="7"' in ex.table.value
    ex.table.clicked = 7  # what the front end sends for a click on that row
    assert ex.selected is third and ex.details.startswith(f"#{third.index} ")
    assert ex.table.clicked == -1  # a second click on the same row is a change again
    ex.table.clicked = 99  # a row of no page shown: nothing happens
    assert ex.selected is third


def test_explorer_without_a_front_end_shows_the_page_as_html(recorded):
    ex = trace_explorer(recorded, page_size=5, times=False)
    bundle = ex._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    html = bundle["text/html"]
    assert html.count("<tr data-position=") == 5 and "<table" in html
    assert bundle["text/plain"] == trace_table(recorded, page_size=5, times=False).to_text()
    assert len(bundle["text/plain"].splitlines()) == 1 + 2 + 5  # title, header, rule, rows
    live = trace_table(recorded, kind="view", page_size=5).widget()
    assert isinstance(live, TraceExplorer) and {e.kind for e in live.rows} == {"view"}


def test_explorer_pages_a_100k_event_trace(recorded):
    """100,000 events: filters are one pass, a page turn formats only that page."""
    events = recorded.events
    big = Trace([events[i % len(events)]._replace(index=i) for i in range(100_000)],
                dict(recorded.metadata))
    ex = TraceExplorer(big, page_size=50)
    assert ex.pages == 2000 and len(ex.event.options) == 50
    ex.kind.value = "native"
    assert all(e.kind == "native" for e in ex.rows)
    assert len(ex.rows) == sum(e.kind == "native" for e in big)
    ex.turn(+500)
    assert ex.page_rows == ex.rows[25_000:25_050]
    ex.event.value = 25_010
    assert ex.selected is ex.rows[25_010]
    assert len(trace_table(big, page=3, page_size=50).to_text().splitlines()) == 53


def test_long_tables_and_trees_are_cut_with_their_totals():
    x = rec((3,), 0x100)
    events = [ev(i, f"aten::op{i}", "native", [x], [rec((3,), 0x1000 + i)], i,
                 module=f"Net.layer{i}", sim=1.0) for i in range(30)]
    trace = Trace(events, {})
    lines = trace_summary(trace, times="sim", max_rows=25).to_text().splitlines()
    rest = next(line for line in lines if "... 5 more ops" in line)
    assert rest.split()[4:6] == ["5", "5"]  # events, native
    assert "5.00 us" in rest
    text = trace_tree(trace, times="sim").to_text()
    assert "... 6 more modules  6 events (native 6)  sim 6.00 us" in text
    assert text.count("layer") == 24


def test_explorer_device_selector_shows_a_choice_and_filters(recorded):
    ex = trace_explorer(recorded)
    # A Dropdown whose value is None draws an empty box: "(all)" must be a real choice.
    assert ex.device.label == "(all)" and ex.device.value is not None
    assert [label for label, _ in ex.device.options] == ["(all)", "mtia_sim:0"]
    ex.device.value = 0
    assert ex.filters()["device"] == 0 and ex.rows == recorded.filter(device=0).events
    ex.set_filters(device=None)
    assert ex.device.label == "(all)" and ex.filters()["device"] is None


def test_explorer_details_follow_the_filters(recorded):
    ex = trace_explorer(recorded, page_size=4)
    assert ex.selected is recorded.events[0]  # the first event is open from the start
    addmm = next(e for e in recorded if e.op == "aten::addmm")
    ex.select(addmm.index)
    ex.kind.value = "native"  # addmm is still listed on the first page: it stays open
    assert ex.selected is addmm and ex.event.value == ex.rows.index(addmm)
    ex.kind.value = "view"  # addmm is filtered out: the details show the first view instead
    assert ex.selected is ex.rows[0] and ex.selected.kind == "view"
    assert ex.details.startswith(f"#{ex.rows[0].index} {ex.rows[0].op}")
    ex.next.click()  # a page turn opens an event of the new page
    assert ex.selected is ex.page_rows[0]
    ex.set_filters(kind="fallback", phase="backward")  # nothing matches
    assert ex.rows == [] and ex.selected is None and ex.details == ""
    assert "no event matches" in ex.detail_html.value and ex.tensor.options == ()


def test_explorer_table_has_aligned_uncut_columns(recorded):
    ex = trace_explorer(recorded)
    addmm = next(e for e in recorded if e.op == "aten::addmm")
    ex.select(addmm.index)
    table = ex.table.value
    assert table.count("<tr") == 1 + len(ex.page_rows) and "overflow-x:auto" in table
    assert "<p>" not in table  # the status line above says which page this is, once
    assert 'white-space:pre;' in ex.detail_html.value  # long lines scroll, words stay whole
    full = ", ".join(tensor_brief(t) for t in addmm.inputs)  # the whole cell, no "..."
    assert html.escape(full) in table
    assert "background:#fff3b0" in table and table.count("background:#fff3b0") == 1
    assert table.count("white-space:nowrap") == len(ex.page_rows) * 3  # #, sim, host
