"""Faults that must leave nothing behind: a graph deleted mid-capture, wrong-type arguments
(a TypeError naming the argument, before any state changes)."""

from __future__ import annotations

import gc

import pytest
import torch
from fresh_python import run_python

from mtia_lab.backend.aten import dispatch, graph_capture, tensor


def test_a_graph_deleted_mid_capture_gives_the_device_back(device, clean_memory):
    before = torch.mtia_sim.memory_reserved(device)
    g = torch.mtia_sim.MTIAGraph()
    g.capture_begin()
    captured = torch.ones(4, device=device) * 2
    del g, captured
    gc.collect()
    assert graph_capture._ACTIVE is None and dispatch._CAPTURE is None
    assert tensor._ALLOCATION_ROUTE is None
    assert not torch.mtia_sim.is_current_stream_capturing()
    assert torch.ones(3, device=device).sum().item() == 3.0  # a host sync: refused in capture
    torch.mtia_sim.empty_cache()
    assert torch.mtia_sim.memory_reserved(device) == before
    other = torch.mtia_sim.MTIAGraph()  # a new capture can start
    with torch.mtia_sim.graph(other):
        torch.ones(2, device=device).add_(1)


@pytest.mark.parametrize("pool", ["abc", (1, 2, 3), (1.0, 2), 7, (True, 0)])
def test_capture_begin_refuses_a_pool_of_the_wrong_kind(device, pool):
    g = torch.mtia_sim.MTIAGraph()
    with pytest.raises(TypeError, match="pool must be a pool id"):
        g.capture_begin(pool=pool)
    with pytest.raises(TypeError, match="pool must be a pool id"):
        torch.mtia_sim.graph(g, pool=pool)
    assert graph_capture._ACTIVE is None and not g._capturing


WRONG_STREAMS = {
    "stream(x)": lambda: torch.mtia_sim.stream("x"),
    "Event.wait(stream=x)": lambda: torch.mtia_sim.Event().wait(stream="x"),
    "Event.record(stream=x)": lambda: torch.mtia_sim.Event().record(stream="x"),
    "graph(g, stream=x)": lambda: torch.mtia_sim.graph(torch.mtia_sim.MTIAGraph(), stream="x"),
    "Stream.wait_event(x)": lambda: torch.mtia_sim.Stream().wait_event("x"),
    "Stream.wait_stream(x)": lambda: torch.mtia_sim.Stream().wait_stream("x"),
    "Event.elapsed_time(x)": lambda: torch.mtia_sim.Event(enable_timing=True).elapsed_time("x"),
    "Stream(priority=x)": lambda: torch.mtia_sim.Stream(priority="x"),
}


@pytest.mark.parametrize("call", WRONG_STREAMS.values(), ids=WRONG_STREAMS.keys())
def test_a_wrong_type_stream_argument_is_a_type_error_naming_it(device, call):
    with pytest.raises(TypeError, match=r"(?i)(stream|event)\b.*got 'x' \(str\)"):
        call()
    assert torch.mtia_sim.current_stream() == torch.mtia_sim.default_stream()


def _trace_readers() -> dict:
    """Every public function that reads a whole trace, by the name its error gives."""
    from mtia_lab import viz
    from mtia_lab.trace import io

    return {"trace_summary": viz.trace_summary, "trace_tree": viz.trace_tree,
            "timeline_of": viz.timeline_of, "timeline_view": viz.timeline_view,
            "trace_table": viz.trace_table, "trace_explorer": viz.trace_explorer,
            "trace_graph": viz.trace_graph, "trace_to_json": io.trace_to_json,
            "to_chrome_trace": io.to_chrome_trace,
            "save_trace": lambda t: io.save_trace(t, "/nonexistent/never-written.json")}


@pytest.mark.parametrize("wrong", ["x", 3, None], ids=["str", "int", "None"])
def test_views_name_a_wrong_type_argument(wrong):
    from mtia_lab.viz import activation_view, layout_view, trade_view

    kind = type(wrong).__name__
    for name, reader in _trace_readers().items():
        with pytest.raises(TypeError, match=rf"^{name}\(trace\): expected a Trace.*got {kind}$"):
            reader(wrong)
    with pytest.raises(TypeError, match=rf"layout_view\(tensor\): expected a tensor.*got {kind}"):
        layout_view(wrong)
    with pytest.raises(TypeError, match=rf"activation_view\(timeline\): expected an "
                                        rf"ActivationTimeline.*got {kind}$"):
        activation_view(wrong)
    with pytest.raises(TypeError, match=rf"trade_view\(trade\): expected a CheckpointTrade.*"
                                        rf"got {kind}$"):
        trade_view(wrong)


def test_trace_views_still_take_traces_and_lists_of_events(device):
    import mtia_lab
    from mtia_lab.viz import timeline_of

    with mtia_lab.trace("events") as t:
        torch.ones(4, device=device).add_(1)
    assert timeline_of(t).lanes and timeline_of(list(t.events)) == timeline_of(t)
    with pytest.raises(TypeError, match=r"^trace\(label\): expected a string, got 1 \(int\)$"):
        mtia_lab.trace(1)


def test_a_checkpoint_bigger_than_the_device_is_out_of_memory(tmp_path):
    """In a fresh process: a device this test process shares with earlier tests may hold
    segments their leftover tensors keep, and the caching allocator serves the load from
    their free room without reaching the capacity (so no error, or blocks left counted)."""
    result = run_python(
        "import gc, torch, mtia_lab\n"
        f"path = {str(tmp_path / 'big.pt')!r}\n"
        "torch.save([torch.zeros(1 << 16) for _ in range(6)], path)  # 6 x 256 KiB\n"
        "mtia_lab.configure(memory_capacity=1 << 20)\n"
        "try:\n"
        "    torch.load(path, map_location='mtia_sim')\n"
        "    print('NO ERROR')\n"
        "except torch.OutOfMemoryError as error:\n"
        "    assert 'out of memory' in str(error), error\n"
        "gc.collect()\n"
        "print('ALLOCATED', torch.mtia_sim.memory_allocated('mtia_sim'))\n")
    assert result.returncode == 0, result.stderr
    assert "NO ERROR" not in result.stdout, result.stdout
    assert "ALLOCATED 0" in result.stdout, result.stdout
