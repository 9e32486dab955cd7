"""Views of the fusion scheduler: the plan's graphviz and tree, Inductor side by side, and the
guardrail playground (in pytest and under an in-process IPython shell).

Expected text is built here from the plan's own records, independently of the renderer; the
playground is checked against the scheduler run directly under `config.patch`.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest
import torch
from rich.console import Console

from mtia_lab import compiler
from mtia_lab.compiler import config
from mtia_lab.compiler.config import ConfigError
from mtia_lab.viz import FusionGraph, PlanCompare, fusion_graph, plan_compare, playground
from mtia_lab.viz.fusion_data import REFUSED
from mtia_lab.viz.svg_html import svg_img_html


def mlp(x, w1, b1, w2, b2):
    h = torch.nn.functional.gelu(x @ w1 + b1)
    return (h @ w2 + b2).relu().sum(-1)


def chain(x):
    outs = []  # every sin returned: 80 realized nodes (a single-use chain would be inlined)
    for _ in range(80):
        x = torch.sin(x)
        outs.append(x)
    return tuple(outs)


def independent(a, b):
    return a.sin(), b.cos()


@pytest.fixture(scope="module")
def mlp_args():
    torch.manual_seed(0)
    return [torch.randn(8, 16), torch.randn(16, 32), torch.randn(32), torch.randn(32, 4),
            torch.randn(4)]


@pytest.fixture(scope="module")
def ir(mlp_args):
    return compiler.trace(mlp, *mlp_args)


def _schedule(ir, **settings):
    with config.patch(**settings):
        return compiler.schedule(ir, "mlp")


def _reason(d) -> str:
    return d.reason if d.reason.startswith(d.rule) else f"{d.rule}: {d.reason}"


# ---- the tree (text twin) ----------------------------------------------------------------

def _expected_tree(plan) -> str:
    """The tree written by hand from the plan's records (rich's glyphs, no renderer code)."""
    b, a = plan.before, plan.after
    lines = [f"fusion plan {plan.name!r}: {b.kernels} -> {a.kernels} kernels, "
             f"{b.bytes_moved:,} -> {a.bytes_moved:,} bytes moved, "
             f"{b.time_us:.2f} us -> {a.time_us:.2f} us simulated"]
    refused = plan.refusals()
    entries = [("kernel", g) for g in plan.groups] + ([("refused", refused)] if refused else [])
    for i, (what, item) in enumerate(entries):
        last = i == len(entries) - 1
        lead, pad = ("└── ", "    ") if last else ("├── ", "│   ")
        if what == "kernel":
            g = item
            n = len(g.nodes)
            moved = g.cost.bytes_read + g.cost.bytes_written
            size = f"{moved} B" if moved < 1024 else f"{moved / 1024:.2f} KiB"
            lines.append(f"{lead}kernel {g.index} ({g.kind}): {n} node{'s' * (n != 1)}, {size} "
                         f"moved ({g.cost.bytes_read:,} read, {g.cost.bytes_written:,} "
                         f"written), {g.duration_us:.2f} us")
            leaves = [*g.aten_nodes, f"reads {', '.join(g.inputs)}; writes "
                      f"{', '.join(g.outputs)}"]
        else:
            lines.append(f"{lead}refused fusions ({len(item)})")
            leaves = [f"[{'+'.join(d.first)}] x [{'+'.join(d.second)}]: {_reason(d)}"
                      for d in item]
        for j, leaf in enumerate(leaves):
            lines.append(pad + ("└── " if j == len(leaves) - 1 else "├── ") + leaf)
    return "\n".join(lines)


def test_tree_text_is_the_plan_exactly(ir):
    plan = _schedule(ir, max_fusion_size=1)  # refusals by a guardrail and by a rule
    view = FusionGraph(plan, width=200)
    assert view.to_text() == _expected_tree(plan)
    assert any(d.rule == "max_fusion_size" for d in plan.refusals())


def test_text_twin_in_bundle_rich_and_after_json_round_trip(ir):
    plan = compiler.schedule(ir, "mlp")
    view = fusion_graph(plan)
    bundle = view._repr_mimebundle_()
    assert bundle["text/plain"] == view.to_text()
    assert " at 0x" not in bundle["text/plain"]
    console = Console(width=100, color_system=None, record=True)
    console.print(view)  # the terminal gets the same tree
    assert [line.rstrip() for line in console.export_text().splitlines()] == \
        view.to_text().splitlines()
    loaded = json.loads(json.dumps(plan.to_dict()))
    assert fusion_graph(loaded).to_text() == view.to_text()
    assert fusion_graph(loaded).to_dot() == view.to_dot()


# ---- graphviz -----------------------------------------------------------------------------

def test_dot_clusters_per_kernel_with_cost_and_blocked_edges(ir):
    plan = _schedule(ir, max_fusion_size=1)
    view = FusionGraph(plan)
    dot = view.to_dot()
    assert "newrank=" in dot and '"true"' in dot.split("newrank=")[1][:8]
    for g in plan.groups:
        cluster = dot.split(f"subgraph cluster_k{g.index} {{")[1].split("\n}")[0]
        assert f"{g.duration_us:.2f} us" in cluster
        for node in g.nodes:
            assert f'"n_{node}"' in cluster
    colours = re.findall(r'(?:fillcolor|color|bgcolor)="(#[0-9a-fA-F]+)"', dot)
    assert colours and all(len(c) == 7 for c in colours)
    refused = [line for line in dot.splitlines() if "refused: " in line]

    def pairs(decisions):
        return {(plan.group_of(d.first[0]).index, plan.group_of(d.second[0]).index)
                for d in decisions}

    by_guardrail = [d for d in plan.refusals() if d.rule in config.SETTINGS]
    assert len(refused) == len(pairs(by_guardrail)) < len(pairs(plan.refusals()))
    assert all(f'color="{REFUSED}"' in line for line in refused)
    every = [line for line in FusionGraph(plan, rule_edges=True).to_dot().splitlines()
             if "refused: " in line]
    assert len(every) == len(pairs(plan.refusals()))
    assert any("refused: template_epilogue\"" in line for line in every)  # rule name only
    size_refusal = next(d for d in plan.refusals() if d.rule == "max_fusion_size")
    assert any(size_refusal.reason in line for line in refused)  # guardrail name and numbers
    assert "2 nodes > 1" in size_refusal.reason


def test_svg_draws_every_kernel_and_bundle_holds_the_picture(ir):
    plan = compiler.schedule(ir, "mlp")
    view = FusionGraph(plan)
    svg = view.to_svg()
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    clusters = [g for g in root.iter(f"{ns}g") if g.get("class") == "cluster"]
    assert len(clusters) == plan.kernel_count
    titles = {g.find(f"{ns}title").text for g in root.iter(f"{ns}g") if g.get("class") == "node"}
    assert {f"n_{n}" for g in plan.groups for n in g.nodes} <= titles
    bundle = view._repr_mimebundle_()
    assert bundle["image/svg+xml"] == svg
    assert bundle["text/html"].startswith('<img src="data:image/svg+xml;base64,')


def test_caps_keep_big_plans_drawable():
    ir = compiler.trace(chain, torch.randn(4))
    plan = _schedule(ir, max_fusion_size=1)
    assert plan.kernel_count == 80
    view = FusionGraph(plan, max_kernels=10, max_refusals=5)
    dot = view.to_dot()
    assert dot.count("subgraph cluster_k") == 10
    assert "... 70 more kernels" in dot and "... 70 more kernels" in view.to_text()
    assert sum("refused: " in line for line in dot.splitlines()) <= 5
    one = FusionGraph(compiler.schedule(ir, "chain"), max_nodes=5, width=200)  # 64 + 16
    assert "... 59 more nodes" in one.to_dot() and "... 59 more nodes" in one.to_text()
    assert "[sin+sin_1+...+sin_63 (64 nodes)] x [sin_64+sin_65+...+sin_79 (16 nodes)]: " \
        "max_fusion_size: 80 nodes > 64" in one.to_text()
    assert len(ET.fromstring(view.to_svg()))  # still renders


def test_combo_launches_are_outer_clusters():
    ir = compiler.trace(independent, torch.randn(4, 4), torch.randn(3))
    plan = _schedule(ir, combo_kernels=True)
    assert plan.combos  # the two kernels share one launch
    view = FusionGraph(plan)
    assert "subgraph cluster_combo_0" in view.to_dot()
    assert "combo launch 0" in view.to_text()


def test_bad_input_says_what_to_pass(ir):
    with pytest.raises(TypeError, match="FusionPlan"):
        FusionGraph(42)
    with pytest.raises(ValueError, match="max_kernels=0"):
        FusionGraph(compiler.schedule(ir), max_kernels=0)


# ---- our plan next to Inductor's -----------------------------------------------------------

@pytest.fixture(scope="module")
def comparison(mlp_args):
    from mtia_lab.compare import compare

    return compare(mlp, *[a.to("mtia_sim") for a in mlp_args])[0]


def test_plan_compare_numbers_groups_and_differences(comparison):
    view = plan_compare(comparison)
    ours, priced = comparison.ours, comparison.priced
    rows = dict((r[0], r[1:]) for r in view.rows())
    assert rows["kernels"] == (str(ours.kernel_count), str(comparison.inductor.kernel_count))
    assert rows["bytes moved"] == (f"{ours.bytes_moved:,}", f"{priced.bytes_moved:,}")
    assert rows["kept on chip"] == (f"{ours.sram_bytes:,}", f"{priced.sram_bytes:,}")
    assert rows["simulated"] == (f"{ours.after.time_us:.2f} us", f"{priced.time_us:.2f} us")
    text = view.to_text()
    for group in [g.nodes for g in ours.groups] + [g for g in comparison.groups if g]:
        assert ", ".join(group) in text
    same = {tuple(g.nodes) for g in ours.groups} & set(comparison.groups)
    marked = [line for line in text.splitlines() if re.match(r"^\s*\d+\s+=\s", line)]
    assert len(marked) == 2 * len(same)
    assert f"differences: {len(comparison.differences)}" in text
    for difference in comparison.differences:  # each one, with its rule, nothing hidden
        assert str(difference) in " ".join(text.split())
    svg = ET.fromstring(view.to_svg())
    clusters = [g for g in svg.iter("{http://www.w3.org/2000/svg}g") if g.get("class") ==
                "cluster"]
    assert len(clusters) == 2
    assert view._repr_mimebundle_()["text/plain"] == text


def test_plan_compare_explorer_details_match_the_picture(comparison):
    view = plan_compare(comparison)
    details = view.details()
    svg = ET.fromstring(view.to_svg())
    titles = {g.findtext("{http://www.w3.org/2000/svg}title")
              for g in svg.iter("{http://www.w3.org/2000/svg}g") if g.get("class") == "node"}
    assert set(details) == titles
    same = {tuple(g.nodes) for g in comparison.ours.groups} & \
        {tuple(g) for g in comparison.groups}
    for i, g in enumerate(comparison.ours.groups):
        rows = dict(details[f"mtia_lab_{i}"]["rows"])
        assert rows["nodes"] == ", ".join(g.nodes)
        assert ("too" in rows["other plan"]) == (tuple(g.nodes) in same)


def test_plan_compare_rejects_a_plan():
    with pytest.raises(TypeError, match="Comparison"):
        PlanCompare(object())


# ---- the guardrail playground ------------------------------------------------------------

def test_playground_reschedules_like_the_scheduler(ir):
    before = config.snapshot()
    pg = playground(ir)
    assert [g.nodes for g in pg.baseline.groups] == [g.nodes for g in
                                                     compiler.schedule(ir).groups]
    plan = pg.set(max_fusion_size=1)
    expected = _schedule(ir, max_fusion_size=1)
    assert [g.nodes for g in plan.groups] == [g.nodes for g in expected.groups]
    assert plan.kernel_count > pg.baseline.kernel_count
    flips = pg.flipped
    assert flips and all(b.fused and not a.fused and a.rule == "max_fusion_size"
                         for b, a in flips)
    text = pg.to_text()
    assert f"max_fusion_size=1 (was {before['max_fusion_size']})" in text
    assert f"decisions that flipped: {len(flips)}" in text
    assert config.snapshot() == before  # the playground never changes the global config


def test_playground_keeps_the_last_good_plan_on_invalid_values(ir):
    pg = playground(ir)
    good = pg.set(max_fusion_size=3)
    with pytest.raises(ConfigError) as expected:
        config.patch(max_fusion_size=0)
    assert pg.set(max_fusion_size=0) is good
    assert pg.error == str(expected.value)
    assert "error: " + pg.error in pg.to_text()
    pg.set(on_chip_memory_budget="lots")
    assert "on_chip_memory_budget" in pg.error and "not a whole number" in pg.error
    pg.set(on_chip_memory_budget="")  # empty means None: the chip's own budget
    assert pg.error == "" and pg.settings["on_chip_memory_budget"] is None


def test_playground_widget_changes_update_state_and_output(ir):
    pg = playground(ir)
    w = pg.widget(show_graph=False)
    unfused = _schedule(ir, max_fusion_size=1).kernel_count  # only inlining (lowering) left
    w.controls["max_fusion_size"].value = 1
    assert pg.plan.kernel_count == unfused
    assert f"<b>{unfused}</b>" in w.numbers.value
    assert "max_fusion_size: 2 nodes &gt; 1" in w.flips.value
    assert f"<b>decisions that flipped: {len(pg.flipped)}</b>" in w.flips.value
    w.controls["combo_kernel_max_num_args"].value = 0  # invalid: the config's error is shown
    with pytest.raises(ConfigError) as expected:
        config.patch(combo_kernel_max_num_args=0)
    assert pg.error == str(expected.value)
    assert "combo_kernel_max_num_args = 0 is invalid" in w.error.value
    w.controls["max_fusion_size"].value = 64  # still invalid elsewhere: the error stays
    assert pg.error and pg.plan.kernel_count == unfused
    w.controls["combo_kernel_max_num_args"].value = 250
    assert pg.error == "" and w.error.value == ""
    assert pg.plan.kernel_count == pg.baseline.kernel_count
    w.controls["max_fusion_unique_io_buffers"].value = "2"
    assert pg.settings["max_fusion_unique_io_buffers"] == 2
    assert pg.plan.kernel_count == _schedule(ir, max_fusion_unique_io_buffers=2).kernel_count
    w.reset()
    assert pg.settings == pg.start and w.controls["max_fusion_unique_io_buffers"].value == ""


def test_playground_static_fallback_and_widget_bundle(ir):
    pg = playground(compiler.schedule(ir, "mlp"))
    pg.set(max_fusion_size=2)
    bundle = pg._repr_mimebundle_()
    assert bundle["text/plain"] == pg.to_text()
    assert bundle["image/svg+xml"] == FusionGraph(pg.plan).to_svg()
    assert bundle["text/html"].startswith("<pre>guardrail playground ")  # numbers, then picture
    assert bundle["text/html"].endswith(svg_img_html(bundle["image/svg+xml"], pg.to_text()
                                                     .splitlines()[0]))
    w = pg.widget()
    assert w.picture.value.startswith("<img ")
    widget_bundle = w._repr_mimebundle_()
    assert widget_bundle["text/plain"] == pg.to_text()
    assert "application/vnd.jupyter.widget-view+json" in widget_bundle


def test_playground_inputs_it_cannot_use():
    with pytest.raises(TypeError, match="GraphIR"):
        playground(3)
    plan = compiler.schedule(compiler.trace(chain, torch.randn(2)))
    plan.ir = None
    with pytest.raises(ValueError, match="no scheduler graph"):
        playground(plan)


def test_playground_under_an_ipython_shell(ir):
    from IPython.testing.globalipapp import get_ipython

    ip = get_ipython()
    ip.user_ns["ir"] = ir
    result = ip.run_cell(
        "from mtia_lab.viz import playground\n"
        "pg = playground(ir, name='shell')\n"
        "w = pg.widget(show_graph=False)\n"
        "w.controls['max_fusion_size'].value = 1\n"
        "w.controls['combo_kernels'].value = True\n"
        "w\n")
    result.raise_error()
    pg, w = ip.user_ns["pg"], ip.user_ns["w"]
    assert pg.settings["combo_kernels"] is True
    assert pg.plan.groups == _schedule(ir, max_fusion_size=1, combo_kernels=True).groups
    data, _ = ip.display_formatter.format(w)
    assert data["text/plain"] == pg.to_text()
    assert "guardrail playground 'shell'" in data["text/plain"]


def test_a_plan_without_node_detail_lists_each_kernels_ops_in_one_box(ir):
    """TorchInductor's plans record which buffers a kernel reads and writes, not the dataflow
    between its ops: each kernel is one list of ops, and a click shows the kernel's reads and
    writes (not "-")."""
    data = _schedule(ir).to_dict()
    data.pop("detail", None)
    view = fusion_graph(data)
    dot = view.to_dot()
    for g in data["groups"]:
        assert f'"ops_k{g["index"]}" [label=' in dot
    assert '[style="invis"]' not in dot.split("ops_k0", 1)[1].split("}", 1)[0]  # no chain
    assert "thin: stays on chip" not in dot
    details = view.details()
    fused = max(data["groups"], key=lambda g: len(g["nodes"]))
    rows = dict(details[f"ops_k{fused['index']}"]["rows"])
    assert rows["reads"] == "\n".join(fused["inputs"]) and rows["writes"] != "-"
    assert details[f"cluster_k{fused['index']}"]["members"] == [f"ops_k{fused['index']}"]
    assert set(details) <= set(re.findall(r'"([^"]+)" \[', dot)) | {
        f"cluster_k{g['index']}" for g in data["groups"]}


def test_a_value_recomputed_in_each_reader_is_drawn_in_each_kernel():
    """computed_once=False: the plan names the value in both kernels, and the views draw it
    in each (one graphviz node per kernel, marked recomputed) and the comparison's view puts
    it in both of Inductor's launches too."""
    def fn(a, b, c, d):
        v = a + b + c + d
        return v.sum(-1), v.amax(0)

    xs = [torch.randn(8, 16, device="mtia_sim") for _ in range(4)]
    from mtia_lab.compare import compare

    with config.patch(computed_once=False):
        (comparison,) = compare(fn, *xs)
    plan = comparison.ours
    holders = [g.index for g in plan.groups if "add_2" in g.nodes]
    assert plan.recomputed and len(holders) == 2
    dot = FusionGraph(plan).to_dot()
    for index in holders:
        assert f'"n_add_2_k{index}"' in dot
    assert dot.count("(recomputed)") == 3 * len(holders)  # add, add_1, add_2 in each kernel
    view = PlanCompare(comparison)
    assert [nodes for _, nodes, _, _ in view.theirs] == [g.nodes for g in plan.groups]
    assert view.rows()[-1] == ("same groups", "2", "of 2")
