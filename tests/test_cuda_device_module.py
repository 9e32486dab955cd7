"""torch.mtia_sim against torch.cuda: the same names, signatures and behaviour (CUDA's documented
behaviour, read from its Python sources, since no CUDA device is at hand), and PyTorch's own
tools (torch.cuda._memory_viz, torch.accelerator) working on the simulated device."""

import inspect
import pickle

import pytest
import torch
from torch.cuda import _memory_viz

import mtia_lab

mt = torch.mtia_sim
DEVICE = "mtia_sim"
_QUANTIZED_DTYPES = (torch.qint8, torch.quint8, torch.qint32, torch.quint4x2, torch.quint2x4)

SAME_SIGNATURE = [
    "set_device", "device_of", "stream", "set_stream", "seed", "seed_all", "manual_seed",
    "manual_seed_all", "init", "synchronize", "current_stream", "default_stream",
    "memory_allocated", "max_memory_allocated", "memory_reserved", "memory_stats",
    "memory_summary", "memory_stats_as_nested_dict", "make_graphed_callables", "use_mem_pool",
    "empty_cache", "mem_get_info", "get_device_properties", "get_device_name",
    "get_device_capability", "get_rng_state", "set_rng_state", "initial_seed",
    "reset_peak_memory_stats", "set_per_process_memory_fraction", "current_device",
    "device_count", "is_available", "is_initialized", "MemPool",
]


@pytest.mark.parametrize("name", SAME_SIGNATURE)
def test_signatures_match_torch_cuda(name):
    ours = list(inspect.signature(getattr(mt, name)).parameters)
    cuda = list(inspect.signature(getattr(torch.cuda, name)).parameters)
    assert ours[: len(cuda)] == cuda


def test_memory_snapshot_takes_cuda_arguments_first():
    cuda = list(inspect.signature(torch.cuda.memory_snapshot).parameters)
    assert list(inspect.signature(mt.memory_snapshot).parameters)[:2] == cuda


def test_set_device_and_device_ignore_negative_indices():
    mt.set_device(1)
    try:
        mt.set_device(-1)  # torch.cuda.set_device: "a no-op if this argument is negative"
        assert mt.current_device() == 1
        with mt.device(-1), mt.device(None):
            assert mt.current_device() == 1
        x = torch.ones(1, device=f"{DEVICE}:0")
        with mt.device_of(x):
            assert mt.current_device() == 0
        with mt.device_of(torch.ones(1)):  # not on the device: no-op
            assert mt.current_device() == 1
    finally:
        mt.set_device(0)


def test_seed_and_seed_all_return_the_seed():
    seed = mt.seed()
    assert isinstance(seed, int) and seed == mt.initial_seed()
    seed = mt.seed_all()
    assert all(mt.get_rng_state(i).equal(mt.get_rng_state(0)) for i in range(mt.device_count()))
    assert mt.initial_seed() == seed
    mt.manual_seed_all(0)
    mt.init()  # nothing to do, but it exists
    assert mt.is_initialized()


def test_streams_as_context_managers_and_set_stream_like_cuda():
    mt.set_stream(None)  # no-op, as torch.cuda.set_stream(None)
    side = mt.Stream()
    assert side.device_type == int(torch._C._autograd.DeviceType.PrivateUse1)
    assert isinstance(side.stream_id, int) and side.stream_id != mt.default_stream().stream_id
    with side:
        assert mt.current_stream() is side
        torch.ones(4, device=DEVICE).mul_(2)
    assert mt.current_stream() is mt.default_stream()
    with mt.StreamContext(side) as entered:
        assert entered is side and mt.current_stream() is side
    with mt.stream(None):
        assert mt.current_stream() is mt.default_stream()
    other = mt.Stream(1)
    try:
        mt.set_stream(other)  # CUDA's set_stream makes the stream's device current
        assert mt.current_device() == 1 and mt.current_stream() is other
    finally:
        mt.set_stream(mt.default_stream(1))
        mt.set_device(0)
    with mt.stream(other):  # a stream of another device: device and stream come back after
        assert mt.current_device() == 1
    assert mt.current_device() == 0 and mt.current_stream(1) is mt.default_stream(1)
    assert mt.Stream(device=-1).device == torch.device(DEVICE, 0)  # negative: current device


def test_events_report_device_and_id():
    event = mt.Event()
    assert event.device is None and event.event_id == 0
    event.record(mt.Stream(1))
    assert event.device == torch.device(DEVICE, 1) and event.event_id > 0
    with pytest.raises(RuntimeError, match="one event per device"):
        event.record(mt.default_stream(0))


def test_memory_stats_as_nested_dict_matches_the_flat_stats():
    x = torch.ones(1000, device=DEVICE)
    nested = mt.memory_stats_as_nested_dict()
    flat = mt.memory_stats()
    assert nested["allocated_bytes"]["all"]["current"] == flat["allocated_bytes.all.current"] > 0
    assert nested["num_ooms"] == flat["num_ooms"]
    del x


def test_snapshot_and_history_read_by_torch_memory_viz(clean_memory):
    # "segment_alloc" is recorded only if `keep` takes a new segment: clean_memory returns
    # every free segment first, and `keep` (16 MiB) is larger than the room a segment that
    # tensors of earlier tests in this process still hold could have left.
    mt.memory._record_memory_history(max_entries=1000)
    try:
        keep = torch.ones(1 << 22, device=DEVICE)  # this line is the allocation's frame
        line = inspect.currentframe().f_lineno - 1
        freed = torch.ones(1 << 10, device=DEVICE)
        del freed
        with pytest.raises(torch.OutOfMemoryError):
            torch.empty(1 << 40, device=DEVICE)
        snapshot = mt.memory._snapshot()
    finally:
        mt.memory._record_memory_history(enabled=None)
    # `keep`'s block (tensors left alive by earlier tests may share the device)
    address = mtia_lab.storage_of(keep).address
    segment, block = next((s, b) for s in snapshot["segments"] if s["device"] == 0
                          for b in s["blocks"] if b["address"] == address)
    assert segment["stream"] == 0 and segment["segment_pool_id"] == (0, 0)
    assert block["state"] == "active_allocated"
    assert any(f["filename"] == __file__ and f["line"] == line for f in block["frames"])
    actions = [e["action"] for e in snapshot["device_traces"][0]]
    for action in ("segment_alloc", "alloc", "free_requested", "free_completed", "oom"):
        assert action in actions
    # PyTorch's own readers of CUDA snapshots
    assert "alloc" in _memory_viz.trace(snapshot) or "=" in _memory_viz.trace(snapshot)
    assert "OutOfMemoryError" in _memory_viz.trace(snapshot)
    lines = _memory_viz.segments(snapshot, format_flamegraph=lambda lines: lines)
    # the flame graph's input names the allocating line and function
    assert f"test_cuda_device_module.py:{line}:test_snapshot_and_history" in lines
    assert _memory_viz.memory(snapshot, format_flamegraph=lambda lines: lines)
    assert "segment" in _memory_viz.segsum(snapshot)
    assert "<html>" in _memory_viz.trace_plot(snapshot)
    assert "<html>" in _memory_viz.segment_plot(snapshot)
    assert pickle.loads(pickle.dumps(snapshot)) == snapshot  # what memory_viz files hold
    del keep


def test_dump_snapshot_writes_what_memory_viz_opens(tmp_path):
    path = tmp_path / "snap.pickle"
    keep = torch.ones(1000, device=DEVICE)
    mt.memory._dump_snapshot(str(path))
    with open(path, "rb") as f:
        loaded = pickle.load(f)
    assert set(loaded) >= {"segments", "device_traces"}
    on_0 = [s for s in loaded["segments"] if s["device"] == 0]
    assert sum(s["allocated_size"] for s in on_0) == mt.memory_allocated(0)
    del keep


def test_out_of_memory_observer_sees_every_oom():
    seen = []
    mt.attach_out_of_memory_observer(lambda *args: seen.append(args))
    try:
        with pytest.raises(torch.OutOfMemoryError):
            torch.empty(1 << 40, device=DEVICE)
    finally:
        mtia_lab.backend.module.memory._OOM_OBSERVERS.clear()
        mtia_lab.backend.module.memory._unwatch_if_idle()
    device, requested, allocated, free = seen[-1]
    assert (device, requested) == (0, 4 << 40) and free <= mt.mem_get_info()[0] + 1
    with pytest.raises(TypeError, match="callable"):
        mt.attach_out_of_memory_observer("not a function")


def test_mem_pool_keeps_its_allocations_apart(clean_memory):
    pool = mt.MemPool()
    assert len(pool.id) == 2 and pool.use_count() == 1
    with mt.use_mem_pool(pool):
        inside = torch.ones(1000, device=DEVICE)
        assert pool.use_count() == 2
    outside = torch.ones(1000, device=DEVICE)
    pools = {s["segment_pool_id"] for s in mt.memory_snapshot() if s["allocated_size"]}
    assert pool.id in pools and (0, 0) in pools
    assert {s["segment_pool_id"] for s in pool.snapshot()} == {pool.id}
    assert mt.memory_snapshot(pool.id) == pool.snapshot()
    torch.testing.assert_close((inside + outside).cpu(), torch.full((1000,), 2.0))
    del inside, pool
    with pytest.raises(NotImplementedError, match="not simulated"):
        mt.MemPool(use_on_oom=True)


def test_make_graphed_callables_replays_inference():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).to(DEVICE)
    sample = torch.randn(4, 8, device=DEVICE)
    with torch.no_grad():
        expected = model(sample * 2)
        graphed = mt.make_graphed_callables(model, (sample,), num_warmup_iters=1)
        got = graphed(sample * 2)
    torch.testing.assert_close(got.cpu(), expected.cpu())
    fn = mt.make_graphed_callables(lambda a: a * 3 + 1, (sample,), num_warmup_iters=0)
    torch.testing.assert_close(fn(sample + 1).cpu(), ((sample + 1) * 3 + 1).cpu())
    with pytest.raises(NotImplementedError, match="forward work only"):
        mt.make_graphed_callables(torch.nn.Linear(8, 8).to(DEVICE), (sample,))


def test_generator_on_the_device_is_a_clear_pytorch_error():
    """PyTorch 2.13 asks a C++ hook (getNewGenerator) that a Python backend cannot provide."""
    with pytest.raises(RuntimeError, match="getNewGenerator"):
        torch.Generator(device=DEVICE)


def test_torch_accelerator_answers_for_the_device():
    acc = torch.accelerator
    assert acc.current_accelerator().type == DEVICE and acc.device_count() == mt.device_count()
    x = torch.ones(1000, device=DEVICE)
    assert acc.memory_allocated() == mt.memory_allocated() > 0
    assert acc.memory.memory_reserved() == mt.memory_reserved()
    assert acc.memory_stats()["allocated_bytes.all.current"] == mt.memory_allocated()
    assert acc.get_memory_info() == mt.mem_get_info()
    assert acc.max_memory_allocated() == mt.max_memory_allocated()
    acc.reset_peak_memory_stats()
    acc.reset_accumulated_memory_stats()
    acc.empty_cache()
    acc.empty_host_cache()  # crashed the process before
    mt.set_device(1)
    try:
        assert acc.current_device_index() == 1  # was silently 0
    finally:
        mt.set_device(0)
    acc.set_device_index(1)
    try:
        assert mt.current_device() == 1
    finally:
        acc.set_device_index(0)
    with acc.device_index(1):
        assert torch.empty(1, device=DEVICE).device.index == 1
    assert acc.current_stream(1) is mt.current_stream(1)
    acc.synchronize()
    with pytest.raises(TypeError, match="takes a stream of the device"):
        acc.set_stream(torch.Stream(device="cpu"))
    dtypes = acc.get_device_capability()["supported_dtypes"]
    for dtype in dtypes:  # each one allocates and converts on the device, as documented
        if dtype in _QUANTIZED_DTYPES:  # zeros has no scale to quantize with: the next test
            continue
        t = torch.zeros(2, dtype=dtype, device=DEVICE)
        back = t.to(torch.complex64 if dtype.is_complex else torch.float32).cpu()
        assert t.dtype == dtype and back.tolist() == [0, 0]
    with pytest.raises(RuntimeError, match="not supported on device type: mtia_sim"):
        acc.Graph()
    del x


def test_the_capability_lists_complex32_and_the_quantized_dtypes():
    """complex32 (chalf) and quantized tensors work on the device, so the capability lists
    their dtypes, as torch_openreg's (and CUDA's) does (backend/aten/quantized.py)."""
    dtypes = torch.accelerator.get_device_capability(DEVICE)["supported_dtypes"]
    chalf = torch.tensor([1 + 2j], dtype=torch.complex32, device=DEVICE)
    assert (chalf * 2).cpu().to(torch.complex64).tolist() == [2 + 4j]
    assert torch.complex32 in dtypes
    x = torch.linspace(-1, 1, 8)
    for qdtype in _QUANTIZED_DTYPES:
        assert qdtype in dtypes
        on_device = torch.quantize_per_tensor(x.to(DEVICE), 0.25, 2, qdtype)
        assert on_device.dtype == qdtype and on_device.device.type == DEVICE
        assert torch.equal(on_device.dequantize().cpu(),
                           torch.quantize_per_tensor(x, 0.25, 2, qdtype).dequantize())


def test_dynamo_knows_the_device_interface_without_inductor():
    """As for CUDA, `get_interface_for_device` answers as soon as Dynamo's registry is imported
    (torch_openreg's test_compile asks it directly), not only once Inductor has been loaded."""
    from fresh_python import run_python

    done = run_python(
        "import sys, mtia_lab\n"
        "from torch._dynamo.device_interface import get_interface_for_device\n"
        "iface = get_interface_for_device('mtia_sim')\n"
        "print(iface.device_count(), iface.current_device(), iface.is_available())\n"
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["2", "0", "True"]
