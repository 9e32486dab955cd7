"""Each Triton launch of Inductor-compiled code is a device event: charged, traced, drawn."""

import json

import pytest
import torch
from torch import nn

import mtia_lab
from mtia_lab.backend.runtime.device_state import RUNTIME
from mtia_lab.inductor import trace_events, triton_launch
from mtia_lab.trace.io import load_trace, save_trace, to_chrome_trace
from mtia_lab.viz import timeline_view, trace_explorer, trace_summary, trace_table
from mtia_lab.viz.trace_graph import dataflow

DEVICE = "mtia_sim"


@pytest.fixture(scope="module")
def traced_step():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4)).to(DEVICE)
    x = torch.randn(4, 8).to(DEVICE)
    torch.compiler.reset()
    run = torch.compile(lambda x: model(x).relu().sum())
    run(x).backward()  # compile forward and backward outside the trace
    costs = []
    listener = triton_launch.LISTENERS.append(
        lambda lnch, cost, span: costs.append((lnch, cost, span)))
    stream = torch.mtia_sim.Stream()
    try:
        with mtia_lab.trace("inductor step") as t, torch.mtia_sim.stream(stream):
            run(x).backward()
    finally:
        triton_launch.LISTENERS.pop()
    assert listener is None
    return t, costs, stream


def test_each_launch_is_a_compiled_event_charged_to_the_current_stream(traced_step):
    t, costs, stream = traced_step
    events = [e for e in t.events if e.kind == "compiled"]
    assert len(events) == len(costs) >= 3
    assert {e.phase for e in events} == {"forward", "backward"}
    profile = RUNTIME.device(0).profile
    for e, (lnch, cost, span) in zip(events, costs, strict=True):
        if e.phase == "forward":  # the user's current stream, not the default
            assert e.stream == stream.stream_id
        assert e.sim_us == pytest.approx(cost.duration_us(profile))  # the roofline price
        assert (e.sim_start_us, e.sim_end_us) == (span[1], span[2])
        assert e.op.endswith(lnch.kernel.name) and lnch.kernel.aten_nodes
        assert e.dispatch.steps == lnch.kernel.aten_nodes  # the aten nodes it came from
        assert f"grid {lnch.grid}" in e.reason
        source = trace_events.kernel_source(e)
        assert "@triton.jit" in source
        assert lnch.blocks and all(f"{name} : tl.constexpr" in source for name in lnch.blocks)
        assert all(f"{name}={size}" in e.reason for name, size in lnch.blocks.items())
        assert cost.bytes_read + cost.bytes_written > 0
    externs = [e for e in t.events if e.kind == "native" and "mm" in e.op]
    assert externs, "matmuls run as extern ATen calls on the device"


def test_bytes_come_from_inductors_own_estimate(traced_step):
    _, costs, _ = traced_step
    for lnch, cost, _ in costs:
        written = sum(o.nbytes for o in lnch.outputs)
        assert written > 0, f"{lnch.kernel.name} wrote nothing"  # out_ptr* are outputs too
        assert cost.bytes_written == written


def test_existing_views_draw_the_launches(traced_step, tmp_path):
    t, _, _ = traced_step
    events = [e for e in t.events if e.kind == "compiled"]
    summary = trace_summary(t, times="sim").to_text()
    assert f"compiled {len(events)}" in summary.splitlines()[0]
    timeline = timeline_view(t).to_text()
    assert sum(" compiled " in line for line in timeline.splitlines()) == len(events)
    assert "compiled" in trace_table(t).to_text()
    assert trace_explorer(t) is not None
    flow = dataflow(t)  # real device addresses: a kernel reads what an extern mm wrote
    first = next(op for op in flow.ops if op.event is events[0])
    producers = {flow.tensors[i].producer for i in first.inputs}
    assert any(t.events[p].kind == "native" for p in producers if p is not None)
    path = tmp_path / "t.json"
    save_trace(t, path)
    assert trace_summary(load_trace(path), times="sim").to_text() == summary
    chrome = to_chrome_trace(t)["traceEvents"]
    forward = [e for e in events if e.phase == "forward"]  # backward ones show as "backward"
    assert sum(ev.get("cat") == "compiled" for ev in chrome) == 2 * len(forward)
    json.dumps(chrome)


def test_a_persistent_column_sum_is_priced_by_the_config_it_launched_with():
    """The second step of a split column sum (32 partial rows, OUTER hint) launches with 128
    columns a program, the config Inductor's rule gives: the launch hook reads the same from
    the kernel's hint and source (on a GPU profile it takes that config's own floor)."""
    x = torch.randn(4096, 1024)
    torch.compiler.reset()
    run = torch.compile(lambda x: x.sum(0))
    costs = []
    triton_launch.LISTENERS.append(lambda lnch, cost, span: costs.append((lnch, cost)))
    try:
        out = run(x.to(DEVICE))
    finally:
        triton_launch.LISTENERS.pop()
    torch.testing.assert_close(out.cpu(), x.sum(0), rtol=1e-4, atol=1e-3)
    persistent = [(lnch, cost) for lnch, cost in costs
                  if lnch.kernel.name.startswith("triton_per_")]
    assert persistent and all(cost.block_columns == lnch.blocks["XBLOCK"] == 128
                              for lnch, cost in persistent)
    assert all(cost.block_columns == 0 for lnch, cost in costs
               if not lnch.kernel.name.startswith("triton_per_"))  # the looped first step
