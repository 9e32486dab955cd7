"""Diagrams a learner can explore and read: the explorer widget's data, users' names in fusion
graphs, dataflow inside kernels, the legend, wide pictures, timelines by purpose and scale.

Expected names come from what the user holds (`model.named_parameters()`, the argument names),
expected edges from the plan's own records; the browser side (pan, hover, click) is checked in
tests/browser/test_tutorials_in_jupyterlab.py.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch
from torch import nn

import mtia_lab
from mtia_lab.backend.runtime.allocator import format_bytes
from mtia_lab.compiler.aot import COMPILED
from mtia_lab.records.input_names import user_name
from mtia_lab.viz import DiagramExplorer, fusion_graph, timeline_view, trace_graph
from mtia_lab.viz.fusion_data import KIND_FILL
from mtia_lab.viz.fusion_dot import KIND_MEANING, op_of
from mtia_lab.viz.svg_html import WIDE_PX, WINDOW_PX, svg_figure_html, svg_width_px
from mtia_lab.viz.timeline_views import PURPOSE_FILL

SVG = "{http://www.w3.org/2000/svg}"
DEV = "mtia_sim"


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(8, 32), nn.Linear(32, 8)

    def forward(self, x):
        return self.fc2(torch.nn.functional.gelu(self.fc1(x))).tanh() + x


@pytest.fixture(scope="module")
def trained():
    """A compiled training step: its forward and backward plans, and the model."""
    torch.manual_seed(0)
    model = Block().to(DEV)
    x = torch.randn(4, 8, device=DEV)
    torch.compiler.reset()
    first = len(COMPILED)
    torch.compile(model, backend="mtia_lab")(x).sum().backward()
    forward, backward = (g.plan for g in COMPILED[first:first + 2])
    return model, forward, backward


def _titles(svg: str, cls: str) -> list[str]:
    root = ET.fromstring(svg)
    return [g.findtext(f"{SVG}title") for g in root.iter(f"{SVG}g") if g.get("class") == cls]


def _texts(svg: str) -> list[str]:
    return [t.text for t in ET.fromstring(svg).iter(f"{SVG}text") if t.text]


@pytest.mark.parametrize("source, expected", [
    ("L['self']._modules['fc1']._parameters['weight']", "fc1.weight"),
    ("L['model']._modules['blocks']._modules['0']._buffers['pos']", "model.blocks.0.pos"),
    ("L['x']", "x"),
    ("L['xs'][1]", "xs[1]"),
    ("L['cfg'].scale", "cfg.scale"),
    ("something Dynamo may write one day", "something Dynamo may write one day"),
])
def test_dynamo_sources_read_as_the_user_writes_them(source, expected):
    assert user_name(source) == expected


def test_fusion_graph_names_inputs_as_the_user_does(trained):
    model, forward, backward = trained
    svg = fusion_graph(forward).to_svg()
    texts = " ".join(_texts(svg))
    params = [name for name, _ in model.named_parameters()]
    names = {b["user_name"] for b in forward.to_dict()["detail"]["buffers"].values()}
    assert set(params) | {"x"} <= names
    for name in params:  # drawn as "fc1" over ".weight  f32[32, 8]", or whole when short
        head, _, last = name.rpartition(".")
        assert name in texts or (head in texts and f".{last}" in texts), name
    assert "primals_" not in texts and "arg0_1" not in texts
    back = fusion_graph(backward).to_text()  # the backward graph's inputs, as the user knows them
    assert "grad of output 0" in back and "primals_" not in back


def test_fusion_graph_draws_the_dataflow_inside_each_kernel(trained):
    _, forward, _ = trained
    detail = forward.to_dict()["detail"]
    svg = fusion_graph(forward).to_svg()
    edges = set(_titles(svg, "edge"))
    inside = 0
    for g in forward.groups:
        for node in g.nodes:
            for buf in detail["nodes"][node]["reads"]:
                producer = detail["buffers"][buf]["producer"]
                if producer is None:
                    assert f"in_{buf}->n_{node}" in edges
                else:  # inside the kernel or from another one: from the op that wrote it
                    assert f"n_{producer}->n_{node}" in edges
                    inside += producer in g.nodes
    assert inside >= 2  # gelu after addmm, tanh/add after the second addmm


def test_one_spelling_per_op_and_a_legend_that_matches_the_colours(trained):
    _, forward, _ = trained
    view = fusion_graph(forward)
    svg = view.to_svg()
    detail = forward.to_dict()["detail"]["nodes"]
    texts = _texts(svg)
    for g in forward.groups:
        for node in g.nodes:
            assert op_of(detail[node]["target"]) in texts
            assert detail[node]["target"] not in texts  # not "aten.addmm.default" as well
    kinds = {g.kind for g in forward.groups}
    dot = view.to_dot()
    legend = dot.split("legend [")[1]
    for kind, fill in KIND_FILL.items():  # every kind used is explained, and no other
        assert (f'bgcolor="{fill}"' in legend) == (kind in kinds)
        assert (KIND_MEANING[kind] in " ".join(texts)) == (kind in kinds)


def test_explorer_carries_the_picture_and_details_for_every_clickable_name(trained):
    _, forward, _ = trained
    view = fusion_graph(forward)
    explorer = view.explore()
    assert isinstance(explorer, DiagramExplorer)
    assert explorer.svg == view.to_svg()
    names = set(_titles(explorer.svg, "node")) | set(_titles(explorer.svg, "cluster"))
    assert set(explorer.details) <= names
    assert {f"cluster_k{g.index}" for g in forward.groups} <= set(explorer.details)
    kernel = explorer.details["cluster_k0"]
    rows = dict(kernel["rows"])
    assert rows["simulated"] == f"{forward.groups[0].duration_us:.2f} us"
    assert set(kernel["members"]) <= names
    node = forward.groups[0].nodes[0]
    shape = forward.to_dict()["detail"]["buffers"][node]["shape"]
    writes = dict(explorer.details[f"n_{node}"]["rows"])["writes"]
    assert f"[{', '.join(map(str, shape))}]" in writes
    explorer.select("cluster_k0")  # as a click in the browser would
    assert explorer.selected == "cluster_k0" and "cluster_k0" in explorer.message
    with pytest.raises(KeyError, match="no node or cluster"):
        explorer.select("kernel 0")
    bundle = explorer._repr_mimebundle_()
    data = bundle[0] if isinstance(bundle, tuple) else bundle
    assert "application/vnd.jupyter.widget-view+json" in data
    assert data["text/plain"] == view.to_text()
    assert "data:image/svg+xml;base64," in data["text/html"]


def test_explorer_javascript_ships_in_the_package_and_fetches_nothing():
    static = Path(mtia_lab.__file__).parent / "viz" / "static"
    for name in ("diagram.js", "diagram.css"):
        text = (static / name).read_text()
        assert not re.search(r"https?://|import\s+.*\sfrom\s", text), name


def test_dataflow_explorer_details_name_shapes_and_strides():
    x = torch.randn(3, 4, device=DEV)
    with mtia_lab.trace() as t:
        (x.t() @ x).relu()
    view = trace_graph(t)
    details = view.details()
    mm = next(e for e in t if e.op.startswith("aten::mm"))
    rows = dict(details[f"e{mm.index}"]["rows"])
    assert "stride=[1, 4]" in rows["inputs"]  # x.t(): what a click shows
    assert rows["op"] == mm.op
    assert set(details) <= set(_titles(view.to_svg(), "node"))


def test_wide_pictures_keep_their_drawn_size_and_scroll():
    narrow = '<svg xmlns="http://www.w3.org/2000/svg" width="600pt" height="10pt"></svg>'
    wide = '<svg xmlns="http://www.w3.org/2000/svg" width="1317pt" height="10pt"></svg>'
    assert svg_width_px(wide) == pytest.approx(1756) and svg_width_px(narrow) == 800
    assert svg_figure_html(narrow).startswith("<img ")
    html = svg_figure_html(wide, "big")
    assert WIDE_PX < 1756
    assert 'overflow: auto' in html and '<img style="max-width: none" ' in html
    assert f"max-height: {WINDOW_PX}px" in html and "big: 1756 px wide" in html


def _training_step():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).to(DEV)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    host = torch.randn(4, 8)
    with mtia_lab.trace("step") as t:
        model(host.to(DEV)).sum().backward()
        opt.step()
    return t


def test_timeline_colours_forward_backward_optimizer_and_copies_apart():
    t = _training_step()
    root = ET.fromstring(timeline_view(t).to_svg())
    bars = [r for r in root.iter(f"{SVG}rect") if r.get("class") == "op"]
    assert all(r.findtext(f"{SVG}title") for r in bars)  # every bar has a hover title
    fill_of = {r.findtext(f"{SVG}title").split(" ")[0]: r.get("fill") for r in bars}
    assert fill_of["_to_copy"] == PURPOSE_FILL["copy"]
    assert fill_of["threshold_backward"] == PURPOSE_FILL["backward"]
    assert fill_of["relu"] == PURPOSE_FILL["forward"]
    # SGD's in-place update (`add_`, or `_foreach_add_` on the foreach path), after backward
    updates = [op for op in fill_of if op.split(".")[0].endswith("_")]
    assert updates and all(fill_of[op] == PURPOSE_FILL["optimizer"] for op in updates)
    assert len(set(PURPOSE_FILL.values())) == len(PURPOSE_FILL)
    legend = " ".join(_texts(ET.tostring(root, encoding="unicode")))
    for word in ("forward", "backward", "optimizer", "copy"):
        assert word in legend


def test_timeline_labels_bars_with_room_and_two_timelines_share_a_scale():
    a = torch.randn(256, 256, device=DEV)
    torch.mtia_sim.synchronize()
    with mtia_lab.trace("long") as long:
        for _ in range(4):
            a = a @ a
    with mtia_lab.trace("short") as short:
        a = a @ a
    alone = ET.fromstring(timeline_view(short).to_svg())
    shared = ET.fromstring(timeline_view(short, same_scale_as=long).to_svg())
    assert "mm" in _texts(ET.tostring(alone, encoding="unicode"))  # one wide bar: labelled

    def widths(root):
        return [float(r.get("width")) for r in root.iter(f"{SVG}rect") if r.get("class") == "op"]

    ratio = (long.events[-1].sim_end_us - long.events[0].sim_start_us) / \
        (short.events[-1].sim_end_us - short.events[0].sim_start_us)
    assert widths(alone)[0] / widths(shared)[0] == pytest.approx(ratio, rel=0.02)
    long_bar = widths(ET.fromstring(timeline_view(long).to_svg()))[0]
    assert widths(shared)[0] == pytest.approx(long_bar, rel=0.02)  # one us, one width


class Wrapped(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block, self.head = Block(), nn.Linear(8, 4)

    def forward(self, x):
        return self.head(self.block(x))


def test_collapsed_modules_draw_one_box_and_open_on_click():
    torch.manual_seed(0)
    model = Wrapped().to(DEV)
    torch.compiler.reset()
    first = len(COMPILED)
    with torch.no_grad():
        torch.compile(model, backend="mtia_lab")(torch.randn(4, 8, device=DEV))
    plan = COMPILED[first].plan
    modules = plan.to_dict()["detail"]["nodes"]
    in_block = [g for g in plan.groups if all(modules[n]["module"].startswith("block")
                                              for n in g.nodes)]
    assert len(in_block) >= 2
    view = fusion_graph(plan, collapse=1)
    svg = view.to_svg()
    assert "module block" in _titles(svg, "node")
    clusters = set(_titles(svg, "cluster"))
    assert clusters == {f"cluster_k{g.index}" for g in plan.groups} - \
        {f"cluster_k{g.index}" for g in in_block}  # head's one kernel is drawn, not boxed
    assert f"kernels {in_block[0].index}..{in_block[-1].index}" in " ".join(_texts(svg))
    assert set(view.details()) <= set(_titles(svg, "node")) | clusters
    opened = view.expand("block").to_svg()
    assert {f"cluster_k{g.index}" for g in plan.groups} == set(_titles(opened, "cluster"))
    explorer = view.explore()
    explorer.select("module block")  # a click on the box opens it in place
    assert explorer.svg == opened and "drawn open" in explorer.message
    assert "cluster_k0" in explorer.details
    with pytest.raises(ValueError, match="collapse=0"):
        fusion_graph(plan, collapse=0)


def test_memory_explorer_details_name_every_block_of_a_segment():
    from mtia_lab.viz import memory_view

    keep = [torch.empty(1000, device=DEV), torch.empty(3 << 18, device=DEV)]
    view = memory_view(torch.mtia_sim.memory_snapshot())
    details = view.details()
    assert set(details) == set(_titles(view.to_svg(), "node"))  # one entry per segment drawn
    for seg in view.snapshot.segments:
        _assert_rows_name_blocks(details[f"seg_{seg.address:x}"]["rows"], seg, view.max_blocks)
    del keep


def _assert_rows_name_blocks(rows, seg, max_blocks):
    """The first `max_blocks` blocks get a row each, by offset; the rest one summary row."""
    shown, hidden = seg.blocks[:max_blocks], seg.blocks[max_blocks:]
    assert [r[0] for r in rows[:len(shown)]] == [f"+{b.offset:#x}" for b in shown]
    assert [r[1].endswith("cached, free") for r in rows[:len(shown)]] == \
        [not b.allocated for b in shown]
    if hidden:  # what the other tests of this process left live can fill a segment
        assert rows[len(shown):] == [["...", f"... {len(hidden)} more blocks "
                                      f"({sum(b.allocated for b in hidden)} allocated, "
                                      f"{format_bytes(sum(b.size for b in hidden))})"]]
    else:
        assert len(rows) == len(shown)


def test_memory_explorer_details_summarise_the_blocks_past_the_limit():
    from mtia_lab.viz import memory_view

    keep = [torch.empty(1000, device=DEV) for _ in range(5)]
    view = memory_view(torch.mtia_sim.memory_snapshot(), max_blocks=2)
    details = view.details()
    crowded = [seg for seg in view.snapshot.segments if len(seg.blocks) > 2]
    assert crowded  # five small tensors share a small-pool segment
    for seg in crowded:
        rows = details[f"seg_{seg.address:x}"]["rows"]
        assert len(rows) == 3 and rows[2][0] == "..."
        _assert_rows_name_blocks(rows, seg, 2)
    del keep
