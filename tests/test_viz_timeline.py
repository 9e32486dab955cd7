"""Simulated timeline view: lanes per (device, stream) from a trace, overlap, text twin, SVG."""

from __future__ import annotations

import base64
import re
import xml.etree.ElementTree as ET

import pytest
import torch

import mtia_lab
from mtia_lab.trace.events import DispatchPath, OpEvent, Trace
from mtia_lab.viz.timeline import timeline_of
from mtia_lab.viz.timeline_views import TimelineView, timeline_view

SVG = "{http://www.w3.org/2000/svg}"


def _copy_beside_compute(non_blocking: bool) -> Trace:
    """A host->device copy queued on a side stream while matmuls run on the default stream."""
    a = torch.randn(256, 256, device="mtia_sim")
    host = torch.randn(512, 512)
    torch.mtia_sim.synchronize()
    side = torch.mtia_sim.Stream()
    with mtia_lab.trace("copy beside compute") as t:
        with torch.mtia_sim.stream(side):
            x = host.to("mtia_sim", non_blocking=non_blocking)
        for _ in range(3):
            a = a @ a
        torch.mtia_sim.current_stream().wait_stream(side)
        x.add_(1)
        _ = x.view(-1)  # a view: no device time, no bar
    return t


def _busy_overlap(t: Trace) -> float:
    """Time both streams were busy, computed straight from the events (brute force)."""
    spans = [(e.stream, e.sim_start_us, e.sim_end_us) for e in t if e.sim_start_us is not None]
    total = 0.0
    for sa, a0, a1 in spans:
        for sb, b0, b1 in spans:
            if sa < sb:
                total += max(0.0, min(a1, b1) - max(a0, b0))
    return total


def test_one_lane_per_stream_holding_that_streams_events():
    t = _copy_beside_compute(non_blocking=True)
    tl = timeline_of(t)
    worked = [e for e in t if e.sim_start_us is not None]
    assert {(ln.device, ln.stream) for ln in tl.lanes} == {(e.device, e.stream) for e in worked}
    assert tl.skipped == len(t) - len(worked) >= 1  # the view has no bar
    for ln in tl.lanes:
        mine = sorted(e.index for e in worked if (e.device, e.stream) == (ln.device, ln.stream))
        assert sorted(s.index for s in ln.spans) == mine
        assert [s.start_us for s in ln.spans] == sorted(s.start_us for s in ln.spans)
    assert tl.lane(0, 0).label == "mtia_sim:0 stream 0 (default)"
    with pytest.raises(KeyError, match="no lane for device 0 stream 999"):
        tl.lane(0, 999)


def test_non_blocking_copy_on_side_stream_overlaps_compute():
    t = _copy_beside_compute(non_blocking=True)
    overlaps = timeline_of(t).overlaps()
    expected = _busy_overlap(t)
    assert expected > 0
    assert len(overlaps) == 1
    assert overlaps[0].overlap_us == pytest.approx(expected)
    assert overlaps[0].ops(overlaps[0].a) and overlaps[0].ops(overlaps[0].b)
    text = timeline_view(t).to_text()
    assert f"both busy for {expected:.3f} simulated us" in text
    assert "_to_copy" in text and "mm x3" in text


def test_blocking_copy_does_not_overlap():
    """A blocking copy makes the host wait, so the matmuls are queued after it finishes."""
    t = _copy_beside_compute(non_blocking=False)
    assert _busy_overlap(t) == 0
    assert timeline_of(t).overlaps() == []
    assert "overlaps: none" in timeline_view(t).to_text()


def test_text_twin_is_stable_and_lists_each_event():
    t = _copy_beside_compute(non_blocking=True)
    text = timeline_view(t).to_text()
    assert text == TimelineView(timeline_of(list(t.events)), "copy beside compute").to_text()
    assert text.splitlines()[0].startswith("copy beside compute: ")
    for e in t:
        if e.sim_start_us is not None:
            assert re.search(rf"\b{e.index}\s+{re.escape(e.op[6:])}\s.*"
                             rf"{e.sim_start_us:.3f}\s+{e.sim_end_us:.3f}", text)
    assert "0x" not in text


def test_svg_has_a_bar_per_event_and_overlap_shading():
    t = _copy_beside_compute(non_blocking=True)
    view = timeline_view(t)
    root = ET.fromstring(view.to_svg())
    bars = [r for r in root.iter(f"{SVG}rect") if r.get("class") == "op"]
    assert len(bars) == sum(1 for e in t if e.sim_start_us is not None)
    assert any(r.get("class") == "overlap" for r in root.iter(f"{SVG}rect"))
    bundle = view._repr_mimebundle_()
    data = re.search(r'base64,([^"]+)"', bundle["text/html"]).group(1)
    assert base64.b64decode(data).decode() == bundle["image/svg+xml"]


def _event(index: int, start: float, end: float, stream: int = 0, device: int = 0) -> OpEvent:
    path = DispatchPath((), (), (), "")
    return OpEvent(index, "aten::add.Tensor", "native", "forward", "", path, (), (), 0, 0, 0,
                   0, 0, start, end, stream, device, "", "", "", index)


def test_many_tiny_events_draw_a_bounded_picture():
    events = [_event(i, i * 0.01, i * 0.01 + 0.01) for i in range(20_000)]
    tl = timeline_of(events)
    root = ET.fromstring(TimelineView(tl).to_svg())
    bars = [r for r in root.iter(f"{SVG}rect") if r.get("class") == "op"]
    assert 1 <= len(bars) < 1000
    assert tl.lane(0, 0).busy_us == pytest.approx(200.0)
    assert "... 19988 more" in TimelineView(tl).to_text()


def test_streams_of_different_devices_never_count_as_overlap():
    events = [_event(0, 0.0, 10.0, stream=0, device=0), _event(1, 0.0, 10.0, stream=0, device=1),
              _event(2, 5.0, 8.0, stream=3, device=1)]
    overlaps = timeline_of(events).overlaps()
    assert [(o.a.device, o.a.stream, o.b.stream, o.overlap_us) for o in overlaps] == [
        (1, 0, 3, 3.0)
    ]


def test_empty_trace_says_so():
    view = TimelineView(timeline_of([]))
    assert "no device work recorded" in view.to_text()
    ET.fromstring(view.to_svg())


def test_copy_on_an_idle_stream_starts_when_the_host_issues_it():
    """A side stream made long ago is idle; its copy starts at the device's "now", not at the
    stream's old clock (the trace span must match the stream's real queue)."""
    side = torch.mtia_sim.Stream()
    a = torch.randn(128, 128, device="mtia_sim")
    for _ in range(3):
        a = a @ a
    torch.mtia_sim.synchronize()
    now = torch.mtia_sim.current_stream().clock_us
    with mtia_lab.trace() as t:
        with torch.mtia_sim.stream(side):
            torch.randn(256, 256).to("mtia_sim", non_blocking=True)
    (copy,) = [e for e in t if e.op == "aten::_to_copy"]
    assert copy.sim_start_us == pytest.approx(now)
    assert copy.sim_end_us == pytest.approx(side.clock_us)


# -- the host lane: a profile that prices issuing an op on the host (issue 21) ----------------
def _small_ops(profile, ops: int = 20) -> Trace:
    """`ops` small in-place adds under `profile` (the previous profile restored after)."""
    from mtia_lab.backend import RUNTIME

    previous = RUNTIME.profile
    x = torch.ones(16, device="mtia_sim")
    mtia_lab.configure(profile=profile)
    try:
        torch.mtia_sim.synchronize()
        with mtia_lab.trace("small ops") as t:
            for _ in range(ops):
                x.add_(1)
    finally:
        mtia_lab.configure(profile=previous)
    return t


def test_a_gpu_profile_shows_small_ops_host_bound_in_a_host_lane(tmp_path):
    from mtia_lab.calibration import gpu_profile

    h100 = gpu_profile("h100")
    t = _small_ops(h100)
    assert [e.op for e in t] == ["aten::add_.Tensor"] * 20
    for e in t:  # each op: the host issues it for host_op_us, then the device runs it
        start, end = e.host_issue_us
        assert end - start == pytest.approx(h100.host_op_us)
        assert e.sim_start_us >= end and e.host_issue_span_us > e.sim_us
    tl = timeline_of(t)
    (host,) = tl.host_lanes
    assert host.label == "mtia_sim:0 host" and [s.index for s in host.spans] == list(range(20))
    assert tl.lanes[0] is host  # drawn above the device's streams
    assert host.busy_us > tl.device_busy_us(0)  # host-bound: the device waits for the host
    assert not [o for o in tl.overlaps() if host in (o.a, o.b)]  # overlaps are of streams
    text = timeline_view(t).to_text()
    assert "mtia_sim:0 host: 20 ops, issuing for" in text and "host-bound" in text
    root = ET.fromstring(timeline_view(t).to_svg())
    host_bars = root.findall(f".//{SVG}rect[@class='host']")
    op_bars = root.findall(f".//{SVG}rect[@class='op']")
    assert host_bars and op_bars
    assert max(float(r.get("y")) for r in host_bars) < min(float(r.get("y")) for r in op_bars)
    assert any("host issuing ops" in (node.text or "") for node in root.iter(f"{SVG}text"))
    # saved and loaded, the host intervals and the picture stay
    mtia_lab.trace.io.save_trace(t, tmp_path / "host.json")
    again = mtia_lab.load_trace(tmp_path / "host.json")
    assert again.events == t.events
    assert timeline_view(again).to_text() == text


def test_mtia_profiles_draw_no_host_lane():
    t = _small_ops(mtia_lab.MTIA_V2, ops=3)
    assert all(e.host_issue_us is None for e in t)
    tl = timeline_of(t)
    assert not tl.host_lanes and tl.lanes == tl.stream_lanes
    assert "host" not in timeline_view(t).to_text()
    assert "class=\"host\"" not in timeline_view(t).to_svg()


def test_a_trace_saved_before_the_host_interval_loads(tmp_path):
    """A file whose events lack `host_issue_us` (written before it was added) still loads."""
    import json

    from mtia_lab.trace import io

    t = _small_ops(mtia_lab.MTIA_V2, ops=2)
    data = io.trace_to_json(t)
    data["event_fields"] = data["event_fields"][:-1]
    data["events"] = [row[:-1] for row in data["events"]]
    (tmp_path / "old.json").write_text(json.dumps(data))
    assert mtia_lab.load_trace(tmp_path / "old.json").events == t.events
    data["event_fields"] = data["event_fields"][:-1]  # a field of the first layout missing
    (tmp_path / "bad.json").write_text(json.dumps(data))
    with pytest.raises(mtia_lab.trace.TraceFormatError, match="event_fields"):
        mtia_lab.load_trace(tmp_path / "bad.json")
