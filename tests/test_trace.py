"""Recording traces: what each event says about an op, and traces on disk.

Every test that traces a computation also checks that the traced result matches the CPU: the
recorder watches, it must not change what runs.
"""

import inspect
import json

import pytest
import torch
import torch.nn.functional as F
from models import MLP

import mtia_lab
from mtia_lab import _compat
from mtia_lab.backend import KERNELS, storage_of
from mtia_lab.backend.aten import dispatch
from mtia_lab.backend.aten.registry import resolve_overloads
from mtia_lab.trace import OpEvent, Trace, TraceFormatError
from mtia_lab.trace.io import load_trace, save_trace, to_chrome_trace, trace_to_json

DEV = "mtia_sim:0"


def here() -> int:
    """The line number of the caller's next line."""
    return inspect.currentframe().f_back.f_lineno + 1


@pytest.fixture
def no_cumsum_kernel():
    """Make aten::cumsum a fallback op for the test, whatever the registry holds."""
    saved = {op: KERNELS.pop(op) for op in resolve_overloads("aten::cumsum") if op in KERNELS}
    yield
    KERNELS.update(saved)


def only(trace: Trace, op: str) -> OpEvent:
    events = [e for e in trace if e.op == op]
    assert len(events) == 1, [e.op for e in trace]
    return events[0]


def test_native_view_and_fallback_events(no_cumsum_kernel):
    host = torch.randn(3, 4)
    x = host.to(DEV)
    with mtia_lab.trace() as t:
        y = x + 1
        v = x.t()
        c = torch.cumsum(x, 0)
    torch.testing.assert_close(y.cpu(), host + 1)
    torch.testing.assert_close(v.cpu(), host.t())
    torch.testing.assert_close(c.cpu(), torch.cumsum(host, 0))
    add, t_, cumsum = only(t, "aten::add.Tensor"), only(t, "aten::t"), only(t, "aten::cumsum")
    assert (add.kind, t_.kind, cumsum.kind) == ("native", "view", "fallback")
    assert {e.phase for e in t} == {"forward"}
    assert add.reason == "" and "aten::cumsum" in cumsum.reason
    assert "CPU fallback" in cumsum.dispatch.chosen and "native" in add.dispatch.chosen
    # a view: same storage, marked as a view of its base; the base is not a view
    address = storage_of(x).address
    assert t_.inputs[0].storage == address and t_.inputs[0].view_of is None
    assert t_.outputs[0].storage == address and t_.outputs[0].view_of == address
    assert t_.outputs[0].strides == v.stride() and t_.sim_start_us is None
    # fresh results live in new blocks
    assert add.outputs[0].storage == storage_of(y).address != address
    assert t.kinds() == {"native": 1, "view": 1, "fallback": 1}


def test_tensor_records_describe_the_tensors():
    x = torch.arange(24.0).reshape(4, 6).to(DEV)
    with mtia_lab.trace() as t:
        s = x[1:, ::2]
        r = s * 2
    torch.testing.assert_close(r.cpu(), torch.arange(24.0).reshape(4, 6)[1:, ::2] * 2)
    mul = only(t, "aten::mul.Tensor")
    rec = mul.inputs[0]
    assert rec.shape == tuple(s.shape) and rec.strides == s.stride()
    assert rec.storage_offset == s.storage_offset() == 6
    assert rec.dtype == "float32" and rec.device == "mtia_sim:0"
    assert rec.nbytes == s.numel() * 4 and rec.storage_nbytes == 24 * 4
    assert rec.view_of == storage_of(x).address  # s is a view of x
    out = mul.outputs[0]
    assert out.view_of is None and out.shape == (3, 3) and out.strides == (3, 1)


def test_in_place_and_out_ops():
    a, b = torch.randn(5), torch.randn(5)
    x, y = a.to(DEV), b.to(DEV)
    out = torch.empty(5, device=DEV)
    with mtia_lab.trace() as t:
        x.add_(1)
        torch.mul(x, y, out=out)
    torch.testing.assert_close(out.cpu(), (a + 1) * b)
    add_ = only(t, "aten::add_.Tensor")
    assert add_.outputs[0].storage == add_.inputs[0].storage == storage_of(x).address
    assert add_.allocated == 0  # in place: no new memory
    mul_out = only(t, "aten::mul.out")
    assert mul_out.outputs[0].storage == storage_of(out).address
    assert mul_out.allocated == 0 and mul_out.kind == "native"
    assert "version counter" in " ".join(add_.dispatch.steps)


def test_metadata_changed_in_place_shows_in_later_events():
    host = torch.randn(2, 3)
    x = host.to(DEV)
    with mtia_lab.trace() as t:
        x + 1
        x.t_()  # in place: x itself becomes 3x2 with strides (1, 3)
        x * 2
    torch.testing.assert_close(x.cpu(), host.t())
    first, last = only(t, "aten::add.Tensor"), only(t, "aten::mul.Tensor")
    assert only(t, "aten::t_").outputs[0].strides == (1, 3)
    assert first.inputs[0].shape == (2, 3) and first.inputs[0].strides == (3, 1)
    assert last.inputs[0].shape == (3, 2) and last.inputs[0].strides == (1, 3)


def test_dispatch_path_names_each_arguments_keys():
    x = torch.randn(3, device=DEV, requires_grad=True)
    with torch.inference_mode():
        frozen = torch.randn(3, device=DEV)
    with mtia_lab.trace() as t:
        (x * 2).sum()
        with torch.inference_mode():
            frozen + 1
    mul = only(t, "aten::mul.Tensor")
    assert set(mul.dispatch.arg_keys[0]) == set(_compat.dispatch_keys_of(x))
    assert mul.dispatch.merged[0] == "PythonTLSSnapshot"  # highest priority first
    assert "AutogradPrivateUse1" in mul.dispatch.merged
    steps = mul.dispatch.steps
    assert any("requires grad" in s and "record" in s for s in steps)
    assert steps.index(next(s for s in steps if s.startswith("Python:"))) < steps.index(
        next(s for s in steps if s.startswith("__torch_dispatch__"))
    )
    assert mul.dispatch.route.startswith("AutogradPrivateUse1 -> Python -> MTIATensor.")
    assert mul.dispatch.route.endswith(mul.dispatch.chosen)
    add = only(t, "aten::add.Tensor")
    assert "AutogradPrivateUse1" not in add.dispatch.arg_keys[0]  # an inference tensor
    assert add.dispatch.route.startswith("Python -> ")
    assert set(add.dispatch.arg_keys[0]) == set(_compat.dispatch_keys_of(frozen))


def test_dispatch_keys_are_listed_in_the_dispatchers_priority_order():
    x = torch.randn(3, device=DEV, requires_grad=True)
    # Ask the dispatcher itself: peel off the key it would visit first, again and again.
    keyset, visited = torch._C._dispatch_keys(x), []
    while keyset.highestPriorityTypeId().name != "Undefined":
        visited.append(keyset.highestPriorityTypeId().name)
        keyset = keyset.remove(keyset.highestPriorityTypeId())
    assert _compat.dispatch_keys_of(x) == visited
    with mtia_lab.trace() as t:
        y = x * 2
    torch.testing.assert_close(y.detach().cpu(), x.detach().cpu() * 2)
    path = only(t, "aten::mul.Tensor").dispatch
    assert list(path.merged) == visited == list(path.arg_keys[0])
    walked = [step.split(":", 1)[0].split(" ")[0] for step in path.steps]
    assert [k for k in walked if k != "__torch_dispatch__"] == visited


def test_dispatch_path_says_when_autocast_cast_the_op():
    a, b = torch.randn(4, 8), torch.randn(8, 3)
    x, w = a.to(DEV), b.to(DEV)
    with mtia_lab.trace() as t:
        with torch.autocast("mtia_sim", dtype=torch.bfloat16):
            low = torch.mm(x, w)
        full = torch.mm(x, w)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = torch.mm(a, b)
    assert low.dtype == expected.dtype == torch.bfloat16
    torch.testing.assert_close(low.cpu(), expected)
    torch.testing.assert_close(full.cpu(), a @ b)
    cast_mm, plain_mm = [e for e in t if e.op == "aten::mm"]
    autocast_step = next(s for s in cast_mm.dispatch.steps if s.startswith("Autocast"))
    assert "lower_precision_fp" in autocast_step and "aten::mm" in autocast_step
    assert cast_mm.dispatch.route.startswith("AutocastPrivateUse1 -> ")
    assert cast_mm.inputs[0].dtype == "bfloat16"
    casts = [e for e in t if e.op == "aten::_to_copy" and e.call_id == cast_mm.call_id]
    assert len(casts) == 2  # x and w were cast for the mm
    for cast in casts:
        step = next(s for s in cast.dispatch.steps if s.startswith("Autocast"))
        assert "cast made by" in step and "aten::mm" in step
    plain_step = next(s for s in plain_mm.dispatch.steps if s.startswith("Autocast"))
    assert "fall through" in plain_step and "Autocast" not in plain_mm.dispatch.route
    assert plain_mm.inputs[0].dtype == "float32"


def test_metadata_queries_are_not_recorded_as_device_work():
    host = torch.randn(2, 3)
    x = host.to(DEV)
    with mtia_lab.trace() as t:
        x.t_()  # in place: dispatch swaps the wrapper's metadata, asking a metadata query first
        x.unsqueeze_(0)
    torch.testing.assert_close(x.cpu(), host.t().unsqueeze(0))
    assert [(e.op, e.kind) for e in t] == [("aten::t_", "view"), ("aten::unsqueeze_", "view")]
    # the query is still answered, as on the CPU
    y = torch.randn(3, device=DEV)
    assert torch._has_compatible_shallow_copy_type(x, y) == (
        torch._has_compatible_shallow_copy_type(x.cpu(), y.cpu()))
    assert torch._has_compatible_shallow_copy_type(x, host) == (
        torch._has_compatible_shallow_copy_type(host.to("meta"), host))


def test_memory_time_stream_and_source():
    x = torch.randn(256, device=DEV)
    stream = torch.mtia_sim.Stream()
    with mtia_lab.trace() as t:
        line = here()
        y = x * 2
        after_mul = torch.mtia_sim.memory_allocated(0)
        with torch.mtia_sim.stream(stream):
            z = y + 1
    torch.testing.assert_close(z.cpu(), x.cpu() * 2 + 1)
    mul, add = only(t, "aten::mul.Tensor"), only(t, "aten::add.Tensor")
    assert mul.allocated >= 256 * 4 and mul.allocated % 512 == 0  # allocator blocks
    assert mul.device_bytes == after_mul
    assert mul.source.endswith(f"test_trace.py:{line}")
    assert mul.host_ns > 0 and mul.sim_end_us > mul.sim_start_us
    assert mul.stream == torch.mtia_sim.current_stream().stream_id
    assert add.stream == stream.stream_id != mul.stream
    assert add.host_start_ns >= mul.host_start_ns + mul.host_ns


def test_module_paths_forward_and_backward():
    torch.manual_seed(0)
    host = MLP()
    model = MLP().to(DEV)
    model.load_state_dict({k: v.to(DEV) for k, v in host.state_dict().items()})
    xh = torch.randn(3, 4)
    with mtia_lab.trace() as t:
        model(xh.to(DEV)).sum().backward()
    host(xh).sum().backward()
    torch.testing.assert_close(model.fc1.weight.grad.cpu(), host.fc1.weight.grad)
    forward, backward = t.filter(phase="forward"), t.filter(phase="backward")
    assert {e.module for e in forward if e.op == "aten::addmm"} == {"MLP.fc1", "MLP.fc2"}
    assert only(forward, "aten::gelu").module == "MLP.act"
    assert only(backward, "aten::gelu_backward").module == "MLP.act"
    mm_modules = [e.module for e in backward if e.op == "aten::mm"]
    assert set(mm_modules) == {"MLP.fc1", "MLP.fc2"}
    assert mm_modules.index("MLP.fc2") < mm_modules.index("MLP.fc1")  # backward runs in reverse
    assert all(e.call.endswith("Backward0") for e in backward if e.op == "aten::mm")
    assert only(forward, "aten::sum").module == ""  # .sum() ran outside the model
    assert len(t.filter(module="MLP")) == len([e for e in t if e.module.startswith("MLP")])


def test_composite_calls_group_their_aten_ops():
    x = torch.randn(2, 4, device=DEV)
    w = torch.randn(3, 4, device=DEV)
    with mtia_lab.trace() as t:
        F.linear(x, w)
        torch.relu(x)
    groups = t.calls()
    linear = next(g for g in groups if g.call == "F.linear")
    assert [e.op for e in linear.events] == ["aten::t", "aten::mm"]
    assert linear.kind == "composite"
    relu = next(g for g in groups if g.call == "torch.relu")
    assert relu.kind == "native" and len(relu.events) == 1
    assert len({g.call_id for g in groups}) == len(groups)


def test_nested_traces_and_a_previous_observer():
    seen = []

    class Counter:
        def before_op(self, func, kind, args, kwargs, device):
            seen.append(str(func))

        def after_op(self, func, kind, result, price, span):
            pass

    x = torch.randn(4, device=DEV)
    previous = dispatch.set_observer(Counter())
    try:
        with mtia_lab.trace("outer") as outer:
            x + 1
            with mtia_lab.trace("inner") as inner:
                x * 2
            x - 3
    finally:
        assert dispatch.set_observer(previous).__class__ is Counter  # restored after the traces
    assert [e.op for e in outer] == ["aten::add.Tensor", "aten::mul.Tensor", "aten::sub.Tensor"]
    assert [e.op for e in inner] == ["aten::mul.Tensor"]
    assert [e.index for e in outer] == [0, 1, 2] and inner[0].index == 0
    assert len(seen) == 3  # the observer installed before the traces still saw every op
    with mtia_lab.trace() as again:
        pass
    x + 1
    assert len(again) == 0 and len(outer) == 3  # closed traces record nothing more


def test_two_devices():
    a = torch.randn(4, device="mtia_sim:0")
    with mtia_lab.trace() as t:
        b = a.to("mtia_sim:1")
        c = b * 2
        d = a * 3
    torch.testing.assert_close(c.cpu(), a.cpu() * 2)
    torch.testing.assert_close(d.cpu(), a.cpu() * 3)
    copy = only(t, "aten::_to_copy")
    assert copy.device == 1 and copy.inputs[0].device == "mtia_sim:0"
    muls = [e for e in t if e.op == "aten::mul.Tensor"]
    assert [e.device for e in muls] == [1, 0]
    assert muls[0].outputs[0].device == "mtia_sim:1" and muls[1].outputs[0].device == "mtia_sim:0"
    assert t.devices() == [0, 1]
    assert len(t.filter(device=1)) == 2


def test_decorator_form():
    @mtia_lab.trace()
    def step(x):
        return (x * 2).sum()

    x = torch.randn(3, device=DEV)
    first = step(x)
    torch.testing.assert_close(first.cpu(), (x.cpu() * 2).sum())
    trace_one = step.last_trace
    step(x)
    assert trace_one is not step.last_trace
    assert [e.op for e in step.last_trace] == ["aten::mul.Tensor", "aten::sum"]
    assert step.last_trace.metadata["label"].endswith("step")


def test_an_error_keeps_what_was_recorded_and_uninstalls(no_cumsum_kernel):
    x = torch.randn(3, device=DEV)
    before = dispatch._OBSERVER
    with pytest.raises(mtia_lab.StrictModeError):
        with mtia_lab.trace() as t, mtia_lab.strict():
            x + 1
            torch.cumsum(x, 0)  # no kernel, and strict mode forbids the fallback
            x * 2  # never runs
    assert [e.op for e in t] == ["aten::add.Tensor"]
    assert "StrictModeError" in t.metadata["error"] and "aten::cumsum" in t.metadata["error"]
    assert dispatch._OBSERVER is before


def test_summary_counts_and_times():
    x = torch.randn(8, 8, device=DEV)
    with mtia_lab.trace() as t:
        for _ in range(3):
            x = (x @ x).relu()
            x.t()
    rows = {row.op: row for row in t.summary()}
    assert rows["aten::mm"].count == 3 and rows["aten::t"].kinds == {"view": 3}
    assert sum(r.count for r in rows.values()) == len(t) == 9
    assert rows["aten::mm"].sim_us == pytest.approx(sum(e.sim_us for e in t if e.op == "aten::mm"))
    assert t.host_ns() == sum(r.host_ns for r in rows.values())
    assert rows["aten::mm"].bytes_out == 3 * 8 * 8 * 4
    assert t.counts() == {"aten::mm": 3, "aten::relu": 3, "aten::t": 3}


def recorded_training_step() -> Trace:
    model = MLP().to(DEV)
    x = torch.randn(3, 4, device=DEV)
    with mtia_lab.trace("round trip") as t:
        loss = model(x).sum()
        loss.backward()
        torch.cumsum(x.t(), 0)
    return t


def test_save_load_round_trip(tmp_path, no_cumsum_kernel):
    t = recorded_training_step()
    assert {"fallback", "view", "native"} <= set(t.kinds()) and t.phases()["backward"] > 0
    path = tmp_path / "trace.json"
    save_trace(t, path)
    loaded = load_trace(path)
    assert loaded == t
    assert loaded.events[3].dispatch == t.events[3].dispatch
    assert loaded.summary() == t.summary()
    data = json.loads(path.read_text())
    assert data["format"] == "mtia_lab.trace" and data["version"] == 1
    assert len(data["tensors"]) < sum(len(e.inputs) + len(e.outputs) for e in t)  # shared
    assert mtia_lab.load_trace is load_trace


def test_chrome_trace_is_valid(tmp_path):
    a = torch.randn(16, 16, device="mtia_sim:0")
    with mtia_lab.trace() as t:
        b = a.to("mtia_sim:1")
        for _ in range(3):
            a = a @ a
            b = b + 1
        a.t()
    chrome = json.loads(json.dumps(to_chrome_trace(t)))
    events = chrome["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    for e in complete:
        assert {"name", "ph", "ts", "dur", "pid", "tid", "args"} <= set(e)
        assert e["dur"] >= 0
    host = [e for e in complete if e["pid"] == 0]
    assert len(host) == len(t)
    tracks = {}
    for e in complete:
        tracks.setdefault((e["pid"], e["tid"]), []).append(e["ts"])
    assert all(ts == sorted(ts) for ts in tracks.values())
    device_pids = {pid for pid, _ in tracks if pid != 0}
    assert device_pids == {1, 2}  # mtia_sim:0 and mtia_sim:1, each on its own track
    views = [e for e in complete if e["name"] == "aten::t"]
    assert [e["pid"] for e in views] == [0]  # a view moved no data: no device time
    mm = next(e for e in complete if e["name"] == "aten::mm" and e["pid"] == 1)
    assert mm["args"]["inputs"][0].startswith("float32[16x16]")
    names = {e["args"]["name"] for e in events if e["ph"] == "M"}
    assert {"host (wall clock)", "mtia_sim:0 (simulated)", "mtia_sim:1 (simulated)"} <= names


def test_bad_files_say_what_is_wrong(tmp_path):
    x = torch.randn(2, device=DEV)
    with mtia_lab.trace() as t:
        x + 1
    good = tmp_path / "good.json"
    save_trace(t, good)

    truncated = tmp_path / "truncated.json"
    truncated.write_text(good.read_text()[:-20])
    with pytest.raises(TraceFormatError) as error:
        load_trace(truncated)
    assert "truncated.json" in str(error.value) and "not JSON" in str(error.value)

    future = tmp_path / "future.json"
    data = trace_to_json(t)
    data["version"] = 2
    future.write_text(json.dumps(data))
    with pytest.raises(TraceFormatError, match="version 2") as error:
        load_trace(future)
    assert "future.json" in str(error.value) and "record the trace again" in str(error.value)

    chrome = tmp_path / "chrome.json"
    chrome.write_text(json.dumps(to_chrome_trace(t)))
    with pytest.raises(TraceFormatError, match="Chrome trace"):
        load_trace(chrome)

    other = tmp_path / "other.json"
    other.write_text(json.dumps({"hello": 1}))
    with pytest.raises(TraceFormatError, match='"format"'):
        load_trace(other)

    damaged = tmp_path / "damaged.json"
    data = trace_to_json(t)
    data["events"][0][data["event_fields"].index("inputs")] = [99]
    damaged.write_text(json.dumps(data))
    with pytest.raises(TraceFormatError, match="malformed"):
        load_trace(damaged)


def test_factories_and_host_to_device_copies():
    host = torch.randn(3, 4)
    with mtia_lab.trace() as t:
        x = torch.empty(2, 3, device=DEV)
        y = host.to("mtia_sim:1")
    torch.testing.assert_close(y.cpu(), host)
    empty = only(t, "aten::empty.memory_format")
    assert empty.inputs == () and empty.outputs[0].storage == storage_of(x).address
    assert empty.allocated >= 2 * 3 * 4 and empty.call == "torch.empty"
    copy = only(t, "aten::_to_copy")
    assert copy.inputs[0].device == "cpu" and copy.outputs[0].device == "mtia_sim:1"
    assert copy.device == 1 and copy.sim_end_us > copy.sim_start_us  # crossed the host link


def test_compiled_code_inside_a_trace_records_only_real_ops():
    def f(x):
        return (x * 2).sin().sum()

    x = torch.randn(8, device=DEV)
    compiled = torch.compile(f, backend="aot_eager")
    with mtia_lab.trace() as t:
        result = compiled(x)
        x + 1
    torch.testing.assert_close(result.cpu(), f(x.cpu()))
    # tracing with fake tensors runs no op on the device; compiled code bypasses dispatch
    assert [e.op for e in t] == ["aten::add.Tensor"]


def test_an_op_that_raises_is_recorded_with_the_error():
    a, b = torch.randn(2, 3, device=DEV), torch.randn(2, 3, device=DEV)
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        with mtia_lab.trace() as t:
            a + b
            torch.mm(a, b)  # shapes do not fit: the kernel raises on the device
    assert [e.op for e in t] == ["aten::add.Tensor", "aten::mm"]
    failed = t[1]
    assert failed.reason.startswith("raised RuntimeError") and failed.outputs == ()
    assert failed.inputs[0].shape == (2, 3)


def test_format_document_lists_the_fields_the_writer_uses():
    import pathlib
    import re

    from mtia_lab.trace import io

    doc = (pathlib.Path(__file__).parents[1] / "docs" / "trace-format.md").read_text()
    for key, fields in (("tensor_fields", io.TENSOR_FIELDS), ("dispatch_fields",
                        io.DISPATCH_FIELDS), ("event_fields", io.EVENT_FIELDS)):
        listed = re.search(rf'"{key}": (\[[^\]]*\])', doc)
        assert listed is not None and json.loads(listed.group(1)) == fields, key
        for name in fields:
            assert f"`{name}`" in doc, f"docs/trace-format.md does not describe {name}"


def test_a_compiled_function_compiles_at_most_once_more_for_traces():
    from mtia_lab.compiler.aot import mtia_lab_backend

    compiles = []

    def counting_backend(gm, example_inputs):
        compiles.append(gm)
        return mtia_lab_backend(gm, example_inputs)

    def f(x):
        return (x * 2).relu() + 1

    compiled = torch.compile(f, backend=counting_backend)
    host = torch.randn(8)
    x = host.to(DEV)
    compiled(x)
    assert len(compiles) == 1
    for _ in range(3):  # the trace's mode changes Dynamo's guards: one compile more, then cached
        with mtia_lab.trace() as t:
            y = compiled(x)
        torch.testing.assert_close(y.cpu(), f(host))
        assert len(t) > 0
    compiled(x)
    assert len(compiles) <= 2


def test_argument_keys_match_the_tensors_in_and_out_of_inference_mode():
    with torch.inference_mode():
        frozen = torch.randn(2, 3, device=DEV)
    with mtia_lab.trace() as t:
        with torch.inference_mode():
            y = frozen + 1  # made in inference mode: an inference tensor
            yt = y.t()
            z = yt * 2
        w = frozen.t()  # a new wrapper made outside inference mode
        q = w - 1
    torch.testing.assert_close(q.cpu(), frozen.cpu().t() - 1)
    torch.testing.assert_close(z.cpu(), (frozen.cpu() + 1).t() * 2)
    for op, tensor in (("aten::mul.Tensor", yt), ("aten::sub.Tensor", w)):
        assert only(t, op).dispatch.arg_keys[0] == tuple(_compat.dispatch_keys_of(tensor))


def test_factories_and_host_copies_are_explained_as_privateuse1_kernels():
    with mtia_lab.trace() as t:
        torch.zeros(3, device="mtia_sim")
        torch.ones(5).to("mtia_sim")
    served = {e.op: e.dispatch for e in t.events if "Python" not in e.dispatch.merged}
    assert set(served) == {"aten::empty.memory_format", "aten::_to_copy"}
    for path in served.values():
        assert "__torch_dispatch__" not in path.route
        assert path.steps[-1].startswith("PrivateUse1 (mtia_sim): registration.py")
        assert any(step.startswith("BackendSelect") for step in path.steps)
    assert "host link" in served["aten::_to_copy"].chosen
