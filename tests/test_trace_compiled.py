"""Compiled regions in `mtia_lab.trace()`: one "compiled" event per fused kernel of the plan.

The plan that ran is found in `compiler.COMPILED` by the graph name each event carries; its
kernels, costs and buffers are what the events must show. Outputs are compared with eager.
"""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

import mtia_lab
from mtia_lab import compiler
from mtia_lab.compiler import trace_listener as compiled_trace
from mtia_lab.trace.io import load_trace, save_trace, to_chrome_trace
from mtia_lab.viz import timeline_view, trace_graph, trace_summary, trace_table
from mtia_lab.viz.trace_graph import dataflow

DEV = "mtia_sim:0"


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(16, 32), nn.Linear(32, 8)

    def forward(self, x):
        return self.fc2(torch.nn.functional.gelu(self.fc1(x))).relu()


def _graph_of(events):
    names = {e.op.rsplit(".", 1)[0] for e in events}
    assert len(names) == 1, names
    name = names.pop()
    return next(c for c in reversed(compiler.COMPILED) if c.name == name)


@pytest.fixture(scope="module")
def traced_mlp():
    torch.manual_seed(0)
    model = MLP().to(DEV)
    x = torch.randn(4, 16, device=DEV)
    torch.compiler.reset()
    run = torch.compile(lambda x: model(x), backend="mtia_lab")
    with torch.no_grad():
        run(x)  # compile outside the trace
        with mtia_lab.trace("compiled mlp") as t:
            y = run(x)
        expected = model(x)
    return t, y, expected


def test_compiled_mlp_shows_one_event_per_fused_kernel(traced_mlp):
    t, y, expected = traced_mlp
    torch.testing.assert_close(y.cpu(), expected.cpu())  # compiled against eager
    events = [e for e in t.events if e.kind == "compiled"]
    graph = _graph_of(events)
    plan = graph.plan
    assert not plan.combos
    assert len(events) == plan.kernel_count < plan.before.kernels
    assert [e.op for e in events] == [f"{graph.name}.kernel_{g.index}" for g in plan.groups]
    for e, g in zip(events, plan.groups, strict=True):
        assert e.sim_us == pytest.approx(g.duration_us)
        assert e.phase == "forward" and e.device == 0 and e.stream is not None
        assert e.reason.endswith(", ".join(g.nodes))
        assert e.dispatch.steps == g.aten_nodes
        ir = plan.ir
        kernel = graph.program.kernels[g.index]
        assert [r.shape for r in e.inputs] == [ir.buffers[b].shape for b in kernel.inputs]
        assert [r.nbytes for r in e.outputs] == [ir.buffers[b].nbytes for b in g.outputs]
    assert sum(e.sim_us for e in events) == pytest.approx(plan.after.time_us)
    for a, b in zip(events, events[1:], strict=False):  # back to back on one stream
        assert b.sim_start_us == pytest.approx(a.sim_end_us)
    assert len({e.call_id for e in events}) == 1


def test_trace_renderers_show_compiled_kernels(traced_mlp, tmp_path):
    t, _, _ = traced_mlp
    events = [e for e in t.events if e.kind == "compiled"]
    summary = trace_summary(t, times="sim").to_text()
    assert f"compiled {len(events)}" in summary.splitlines()[0]
    header = next(line for line in summary.splitlines() if line.strip().startswith("op "))
    assert "compiled" in header.split()
    timeline = timeline_view(t).to_text()
    assert sum(" compiled " in line for line in timeline.splitlines()) == len(events)
    assert "compiled kernel" in timeline_view(t).to_svg()
    flow = dataflow(t)
    second = next(op for op in flow.ops if op.event is events[1])
    producers = {flow.tensors[i].producer for i in second.inputs}
    assert events[0].index in producers  # kernel 1 reads what kernel 0 wrote
    assert "[compiled/forward]" in trace_graph(t).to_text()
    assert "compiled" in trace_table(t).to_text()
    path = tmp_path / "t.json"
    save_trace(t, path)
    assert trace_summary(load_trace(path), times="sim").to_text() == summary
    chrome = to_chrome_trace(t)["traceEvents"]
    assert sum(ev.get("cat") == "compiled" for ev in chrome) == 2 * len(events)  # host + sim
    json.dumps(chrome)


def test_training_step_kernels_run_in_backward():
    torch.manual_seed(1)
    model = MLP().to(DEV)
    x = torch.randn(4, 16, device=DEV)
    torch.compiler.reset()
    run = torch.compile(lambda x: model(x).sum(), backend="mtia_lab")
    run(x).backward()
    model.zero_grad()
    with mtia_lab.trace() as t:
        run(x).backward()
    compiled = [e for e in t.events if e.kind == "compiled"]
    forward = [e for e in compiled if e.phase == "forward"]
    backward = [e for e in compiled if e.phase == "backward"]
    assert len(forward) == _graph_of(forward).plan.kernel_count
    assert len(backward) == _graph_of(backward).plan.kernel_count > 0
    assert forward[-1].index < backward[0].index


def test_nothing_recorded_without_a_trace_or_without_the_device():
    assert compiler.LISTENERS.count(compiled_trace.on_kernel) == 1
    compiled_trace.install()
    assert compiler.LISTENERS.count(compiled_trace.on_kernel) == 1
    torch.compiler.reset()
    run = torch.compile(lambda a: (a * 2).relu(), backend="mtia_lab")
    x = torch.randn(8)
    run(x)
    with mtia_lab.trace() as t:  # host tensors: nothing ran on the device
        y = run(x)
    torch.testing.assert_close(y, (x * 2).relu())
    assert not [e for e in t.events if e.kind == "compiled"]
