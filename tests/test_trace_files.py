"""Trace files and checkpoints from elsewhere: bounded reads, every malformed input a clear
TraceFormatError (never a crash, hang or a silently wrong trace), atomic writes; checkpoints
that name devices this process does not have are refused."""

import copy
import json
import os
import threading

import pytest
import torch

import mtia_lab
from mtia_lab.backend.aten.tensor import _rebuild_on_device
from mtia_lab.trace import TraceFormatError
from mtia_lab.trace.io import load_trace, save_chrome_trace, save_trace, trace_to_json


@pytest.fixture(scope="module")
def recorded():
    with mtia_lab.trace() as t:
        x = torch.ones(4, 4, device="mtia_sim")
        (x @ x.t()).relu().sum()
    return t


def _load_with_deadline(path, **kwargs):
    """load_trace in a thread, failing the test (not hanging CI) if it blocks."""
    result = {}

    def run():
        try:
            result["value"] = load_trace(path, **kwargs)
        except BaseException as error:  # noqa: BLE001  (handed to the test)
            result["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(10)
    assert not thread.is_alive(), "load_trace blocked"
    if "error" in result:
        raise result["error"]
    return result["value"]


def test_special_files_are_refused_without_reading_them(tmp_path):
    zero = tmp_path / "zero.json"
    zero.symlink_to("/dev/zero")
    with pytest.raises(TraceFormatError, match="not a regular file"):
        _load_with_deadline(zero)
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    with pytest.raises(TraceFormatError, match="not a regular file"):
        _load_with_deadline(fifo)
    with pytest.raises(TraceFormatError, match="not a regular file"):
        _load_with_deadline(tmp_path)


def test_reads_are_bounded(tmp_path, recorded):
    path = tmp_path / "t.json"
    save_trace(recorded, path)
    size = path.stat().st_size
    with pytest.raises(TraceFormatError, match=f"larger than max_bytes={size - 1}"):
        load_trace(path, max_bytes=size - 1)
    assert len(load_trace(path, max_bytes=size)) == len(recorded)


def _mutations():
    """(name, function that damages the JSON object of a trace)."""

    def event(i, value):
        def damage(d):
            d["events"][0][i] = value
        return damage

    def tensor(i, value):
        def damage(d):
            d["tensors"][0][i] = value
        return damage

    fields = trace_to_json.__globals__["EVENT_FIELDS"]
    at = fields.index
    return [
        ("event index is a string", event(at("index"), "0")),
        ("event op is a number", event(at("op"), 3)),
        ("event device is a bool", event(at("device"), True)),
        ("event sim time is a string", event(at("sim_start_us"), "1.0")),
        ("dispatch ref negative", event(at("dispatch"), -1)),
        ("dispatch ref out of range", event(at("dispatch"), 10**6)),
        ("input ref negative", event(at("inputs"), [-1])),
        ("input refs not a list", event(at("inputs"), 0)),
        ("event too short", lambda d: d["events"][0].pop()),
        ("event not a list", lambda d: d["events"].__setitem__(0, {"op": "x"})),
        ("tensor shape has a string", tensor(0, ["4"])),
        ("tensor device is a number", tensor(6, 0)),
        ("tensor row too long", lambda d: d["tensors"][0].append(1)),
        ("dispatch path steps not strings", lambda d: d["dispatch"][0].__setitem__(2, [1])),
        ("dispatch path not a list", lambda d: d["dispatch"].__setitem__(0, "x")),
        ("events not a list", lambda d: d.__setitem__("events", {"a": 1})),
        ("tensors missing", lambda d: d.pop("tensors")),
        ("metadata not an object", lambda d: d.__setitem__("metadata", [1])),
        ("metadata label not a string", lambda d: d["metadata"].__setitem__("label", ["x"])),
        ("metadata sim start not numbers", lambda d: d["metadata"].__setitem__(
            "sim_start_us", {"0": "zero"})),
        ("metadata sim start infinite", lambda d: d["metadata"].__setitem__(
            "sim_start_us", {"0": float("-inf")})),
        ("wrong version", lambda d: d.__setitem__("version", 99)),
        ("not a trace", lambda d: d.clear()),
    ]


@pytest.mark.parametrize(("name", "damage"), _mutations(), ids=[m[0] for m in _mutations()])
def test_malformed_traces_raise_trace_format_error(tmp_path, recorded, name, damage):
    data = copy.deepcopy(trace_to_json(recorded))
    damage(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(TraceFormatError):
        load_trace(path)


# json.dumps writes float("inf") and float("nan") as Infinity and NaN, and json.loads reads them
# back: a number in a file is not yet a time.
BAD_TIMES = {
    "infinite start": ("sim_start_us", float("inf"), r"sim_start_us must be finite number"),
    "infinite end": ("sim_end_us", float("inf"), r"sim_end_us must be finite number"),
    "NaN end": ("sim_end_us", float("nan"), r"sim_end_us must be finite number"),
    "start without an end": ("sim_end_us", None, r"sim_start_us is .* but sim_end_us is None"),
    "end before start": ("sim_end_us", -1.0, r"sim_end_us -1.0 is before sim_start_us"),
    "infinite host issue": ("host_issue_us", [0.0, float("inf")],
                            r"host_issue_us must be pair of finite numbers"),
    "host issue backwards": ("host_issue_us", [2.0, 1.0], r"host_issue_us ends before it starts"),
}


@pytest.mark.parametrize(("field", "value", "message"), BAD_TIMES.values(), ids=BAD_TIMES.keys())
def test_times_that_are_not_intervals_are_refused_by_name(tmp_path, recorded, field, value,
                                                         message):
    """The views subtract start from end: a loaded trace holds finite, ordered times."""
    timed = next(i for i, e in enumerate(recorded.events) if e.sim_start_us is not None)
    data = copy.deepcopy(trace_to_json(recorded))
    data["events"][timed][trace_to_json.__globals__["EVENT_FIELDS"].index(field)] = value
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(TraceFormatError, match=rf"event {timed}: {message}"):
        load_trace(path)


def test_a_loaded_trace_renders_in_every_trace_view(tmp_path, recorded):
    """What the loader lets through, the views draw as they draw the trace recorded (the
    counterpart of the refusals above)."""
    from mtia_lab import viz

    path = tmp_path / "t.json"
    save_trace(recorded, path)
    loaded = load_trace(path)
    for view in (viz.trace_summary, viz.trace_tree, viz.timeline_view, viz.trace_table,
                 viz.trace_graph):
        text = view(loaded)._repr_mimebundle_()["text/plain"]
        assert text == view(recorded)._repr_mimebundle_()["text/plain"], view.__name__
    assert viz.trace_explorer(loaded) is not None


@pytest.mark.parametrize(
    "content",
    [b"", b"{", b"\xff\xfe not utf-8", b"[" * 100_000 + b"]" * 100_000, b"null", b"42"],
    ids=["empty", "truncated", "not utf-8", "deeply nested", "null", "a number"],
)
def test_files_that_are_not_traces_raise_trace_format_error(tmp_path, content):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(TraceFormatError):
        load_trace(path)


@pytest.mark.parametrize("save", [save_trace, save_chrome_trace])
def test_saving_is_atomic(tmp_path, recorded, save):
    path = tmp_path / "t.json"
    save(recorded, path)
    before = path.read_bytes()
    broken = copy.copy(recorded)
    broken.metadata = dict(recorded.metadata, unserialisable=object())
    with pytest.raises(TypeError):
        save(broken, path)
    assert path.read_bytes() == before  # the old file is whole
    assert [p.name for p in tmp_path.iterdir()] == ["t.json"]  # no temporary left behind


@pytest.mark.parametrize("index", [2, 10**9, -1, True, "0"])
def test_checkpoints_naming_missing_devices_are_refused(index):
    with pytest.raises(RuntimeError, match="mtia_sim device"):
        _rebuild_on_device(torch.ones(2), index, False)


def test_checkpoint_for_a_missing_device_is_refused_on_load(tmp_path):
    path = tmp_path / "w.pt"
    torch.save({"w": torch.ones(3, device="mtia_sim:1")}, path)
    mtia_lab.configure(device_count=1)
    try:
        with pytest.raises(RuntimeError, match="mtia_sim:1, but this process has 1"):
            torch.load(path, weights_only=True)
        assert torch.load(path, map_location="mtia_sim:0", weights_only=True)["w"].sum() == 3
    finally:
        mtia_lab.configure(device_count=2)
