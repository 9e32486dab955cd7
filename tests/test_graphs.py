"""Device graphs: capture, replay on static buffers, reset/destroy, shared pools, refusals."""

import gc

import pytest
import torch
import torch.nn.functional as F

import mtia_lab
from mtia_lab.backend import RUNTIME
from mtia_lab.backend.aten import dispatch
from mtia_lab.backend.aten.graph_capture import GraphCaptureError
from mtia_lab.backend.aten.registry import KERNELS, resolve_overloads
from mtia_lab.backend.runtime.allocator import DEFAULT_POOL, SMALL_SEGMENT, CachingAllocator

mtia = torch.mtia_sim
DEV = "mtia_sim:0"
two_devices = pytest.mark.skipif(
    torch.mtia_sim.device_count() < 2, reason="needs two simulated devices"
)


def _mlp(seed=0):
    torch.manual_seed(seed)
    cpu = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    device = torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)
    ).to(DEV)
    device.load_state_dict(cpu.state_dict())
    return cpu, device


def _capture(fn, *args, pool=None):
    g = mtia.MTIAGraph()
    with torch.no_grad(), mtia.graph(g, pool=pool):
        out = fn(*args)
    return g, out


@pytest.fixture(autouse=True)
def _no_capture_left():
    yield
    assert not mtia.is_current_stream_capturing()
    gc.collect()


def test_replay_recomputes_the_mlp_on_new_static_input_values():
    cpu_model, model = _mlp()
    static_x = torch.randn(8, 16, device=DEV)
    g, static_y = _capture(model, static_x)
    assert [n.op for n in g.nodes] == ["aten::addmm", "aten::relu", "aten::addmm"]
    for seed in (1, 2):
        batch = torch.randn(8, 16, generator=torch.Generator().manual_seed(seed))
        static_x.copy_(batch)
        g.replay()
        with torch.no_grad():
            torch.testing.assert_close(static_y.cpu(), cpu_model(batch))


def test_replay_runs_no_python_dispatch():
    class Count:
        ops = 0

        def before_op(self, *args):
            self.ops += 1

        def after_op(self, *args):
            pass

    _, model = _mlp()
    x = torch.randn(8, 16, device=DEV)
    g, _ = _capture(model, x)
    counter = Count()
    previous = dispatch.set_observer(counter)
    try:
        with torch.no_grad():
            model(x)
        eager_ops = counter.ops
        g.replay()
    finally:
        dispatch.set_observer(previous)
    assert eager_ops >= len(g.nodes) == 3
    assert counter.ops == eager_ops  # the replay added none


def test_a_captured_training_step_trains_like_cpu():
    cpu_model, model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, foreach=False)
    opt_cpu = torch.optim.SGD(cpu_model.parameters(), lr=0.1, foreach=False)
    gen = torch.Generator().manual_seed(3)
    batches = [
        (torch.randn(8, 16, generator=gen), torch.randn(8, 4, generator=gen)) for _ in range(5)
    ]
    static_x = torch.zeros(8, 16, device=DEV)
    static_t = torch.zeros(8, 4, device=DEV)

    def step(net, optimizer, x, t):
        optimizer.zero_grad(set_to_none=False)
        loss = F.mse_loss(net(x), t)
        loss.backward()  # autograd runs these kernels on its own thread: recorded too
        optimizer.step()
        return loss

    def load(batch):
        static_x.copy_(batch[0])
        static_t.copy_(batch[1])

    load(batches[0])  # warm-up outside the graph: the .grad buffers exist before capture
    step(model, opt, static_x, static_t)
    step(cpu_model, opt_cpu, *batches[0])
    load(batches[1])
    g = mtia.MTIAGraph()
    with mtia.graph(g):
        static_loss = step(model, opt, static_x, static_t)
    step(cpu_model, opt_cpu, *batches[1])  # capturing ran the step once, as eager would
    assert {"aten::mse_loss_backward", "aten::threshold_backward"} <= {n.op for n in g.nodes}
    for batch in batches[2:]:
        load(batch)
        g.replay()
        loss = step(cpu_model, opt_cpu, *batch)
        torch.testing.assert_close(static_loss.detach().cpu(), loss.detach())
    for p_device, p_cpu in zip(model.parameters(), cpu_model.parameters(), strict=True):
        torch.testing.assert_close(p_device.detach().cpu(), p_cpu.detach())


def test_in_place_and_random_ops_are_redone_at_each_replay():
    x = torch.zeros(4, device=DEV)
    g, noise = _capture(lambda t: (t.add_(1.5), torch.rand(1000, device=DEV))[1], x)
    first = noise.cpu().clone()
    g.replay()
    g.replay()
    torch.testing.assert_close(x.cpu(), torch.full((4,), 4.5))
    assert not torch.equal(noise.cpu(), first)  # fresh numbers from the device generator
    assert 0 <= noise.cpu().min() and noise.cpu().max() < 1


def _chain(t, steps=20):
    kept = []
    for i in range(steps):
        t = torch.tanh(t * 1.1 + 0.1)
        if i == steps // 2:
            kept.append(t)  # an intermediate the caller keeps: it must keep its own memory
    return t, kept[0]


def test_intermediates_share_host_memory_as_their_blocks_share_the_pool():
    x = torch.randn(1000, device=DEV)
    g, (y, middle) = _capture(_chain, x)
    assert len(g.nodes) == 60
    buffers = {out.untyped_storage().data_ptr() for node in g.nodes for out in node.outputs}
    assert len(buffers) <= 4  # not 60: y, middle and a few that take turns
    batch = torch.randn(1000)
    x.copy_(batch)
    g.replay()
    want_y, want_middle = _chain(batch)
    torch.testing.assert_close(y.cpu(), want_y)
    torch.testing.assert_close(middle.cpu(), want_middle)


def test_a_copy_from_a_host_tensor_is_redone_at_replay():
    host = torch.zeros(5)
    static = torch.empty(5, device=DEV)
    g, doubled = _capture(lambda: static.copy_(host) * 2)
    assert g.nodes[0].op == "aten::copy_" and g.nodes[0].how == "in-place"
    host.copy_(torch.arange(5.0))  # the graph reads the host tensor's memory at each replay
    g.replay()
    torch.testing.assert_close(doubled.cpu(), torch.arange(5.0) * 2)


def test_outputs_come_from_the_graph_private_pool():
    x = torch.randn(4, 4, device=DEV)
    g, y = _capture(lambda t: (t * 2).sum(0), x)
    assert mtia_lab.storage_of(y).block.pool == g.pool() != DEFAULT_POOL
    assert mtia_lab.storage_of(x).block.pool == DEFAULT_POOL
    z = x + 1  # after capture, memory comes from the shared cache again
    assert mtia_lab.storage_of(z).block.pool == DEFAULT_POOL


def test_keep_graph_instantiates_on_first_replay():
    x = torch.ones(3, device=DEV)
    g = mtia.MTIAGraph(keep_graph=True)
    assert not mtia.is_current_stream_capturing()
    with torch.no_grad(), mtia.graph(g):
        assert mtia.is_current_stream_capturing()
        y = x * 3
    x.fill_(2.0)
    g.replay()
    torch.testing.assert_close(y.cpu(), torch.full((3,), 6.0))


def test_reset_drops_the_recording_and_the_graph_can_capture_again():
    x = torch.ones(3, device=DEV)
    g, y = _capture(lambda t: t * 2, x)
    reserved = mtia.memory_reserved()
    g.reset()
    assert g.nodes == ()
    with pytest.raises(RuntimeError, match="holds no capture"):
        g.replay()
    assert mtia.memory_reserved() == reserved  # reset keeps the pool
    with torch.no_grad(), mtia.graph(g):
        z = x + 10
    x.fill_(5.0)
    g.replay()
    torch.testing.assert_close(z.cpu(), torch.full((3,), 15.0))
    torch.testing.assert_close(y.cpu(), torch.full((3,), 2.0))  # the old graph no longer runs


@pytest.mark.parametrize("free_outputs_first", [True, False])
def test_destroy_gives_the_private_pool_back(free_outputs_first):
    x = torch.randn(64, 64, device=DEV)
    gc.collect()
    mtia.empty_cache()
    before = mtia.memory_reserved()
    g, y = _capture(lambda t: torch.tanh(t @ t) + 1, x)
    assert mtia.memory_reserved() > before
    if free_outputs_first:
        del y
        g.destroy()
    else:
        g.destroy()
        assert mtia.memory_reserved() > before  # y still lives in the pool's segment
        del y
    gc.collect()
    assert mtia.memory_reserved() == before
    mtia.empty_cache()  # nothing of the pool is left to release
    assert mtia.memory_reserved() == before


def test_empty_cache_keeps_a_live_graphs_pool():
    x = torch.randn(8, device=DEV)
    g, y = _capture(lambda t: t.exp(), x)
    pool_bytes = RUNTIME.device(0).allocator.pool_reserved_bytes(g.pool())
    del y
    gc.collect()
    mtia.empty_cache()
    assert RUNTIME.device(0).allocator.pool_reserved_bytes(g.pool()) == pool_bytes > 0
    g.destroy()


def test_a_private_pool_serves_only_its_own_requests():
    alloc = CachingAllocator(0, 64 << 20)
    alloc.retain_pool((7, 0))
    a = alloc.malloc(1000, pool=(7, 0))
    alloc.free(a)  # cached in the pool, not in the shared cache
    b = alloc.malloc(1000)
    assert b.pool == DEFAULT_POOL and b.segment is not a.segment
    c = alloc.malloc(1000, pool=(7, 0))
    assert c.address == a.address and c.pool == (7, 0)
    alloc.free(b)
    assert alloc.empty_cache() == SMALL_SEGMENT  # the pool's segment stays reserved
    alloc.free(c)
    assert alloc.release_pool((7, 0)) == SMALL_SEGMENT
    assert alloc.reserved_bytes == 0
    with pytest.raises(ValueError, match="no memory pool"):
        alloc.malloc(10, pool=(7, 0))


def test_two_graphs_share_one_pool():
    x = torch.randn(16, device=DEV)
    gc.collect()
    mtia.empty_cache()
    before = mtia.memory_reserved()

    handle = mtia.graph_pool_handle()
    g1, y1 = _capture(lambda t: t * 2, x, pool=handle)
    g2, y2 = _capture(lambda t: t + 3, y1, pool=g1.pool())
    assert g1.pool() == g2.pool() == handle
    shared = mtia.memory_reserved() - before
    assert mtia_lab.storage_of(y1).block.segment is mtia_lab.storage_of(y2).block.segment

    g3, y3 = _capture(lambda t: t * 2, x)  # its own pool: a segment of its own
    g4, y4 = _capture(lambda t: t + 3, y3)
    assert mtia.memory_reserved() - before - shared == 2 * shared

    x.copy_(torch.arange(16.0))
    g1.replay()
    g2.replay()
    torch.testing.assert_close(y2.cpu(), torch.arange(16.0) * 2 + 3)

    for graph in (g3, g4):
        graph.destroy()
    del y3, y4, y1
    g1.destroy()
    gc.collect()
    assert mtia.memory_reserved() - before == shared  # g2 still uses the pool (and y2 lives)
    g2.replay()  # and still works
    g2.destroy()
    del y2
    gc.collect()
    assert mtia.memory_reserved() == before


def _assert_device_usable():
    assert not mtia.is_current_stream_capturing()
    z = torch.ones(3, device=DEV) * 2
    assert mtia_lab.storage_of(z).block.pool == DEFAULT_POOL
    g, y = _capture(lambda t: t + 1, z)
    g.replay()
    torch.testing.assert_close(y.cpu(), torch.full((3,), 3.0))


def _item(x):
    return (x.sum() * 2).item()


def _fallback_neg(x):
    saved = {op: KERNELS[op] for op in resolve_overloads("aten::neg") if op in KERNELS}
    mtia_lab.unregister_kernel("aten::neg")
    try:
        return -x
    finally:
        KERNELS.update(saved)


UNCAPTURABLE = {
    "item": (_item, r"aten::_local_scalar_dense.*host sync"),
    "cpu": (lambda x: (x + 1).cpu(), r"aten::_to_copy to cpu.*host sync"),
    "synchronize": (lambda x: mtia.synchronize(), r"synchronize\(\).*host sync"),
    "fallback": (_fallback_neg, r"aten::neg.*CPU fallback"),
    "boolean mask": (lambda x: x[x > 0], r"aten::index.*depends on the data"),
    "host to device": (lambda x: x + torch.ones(4).to(DEV), r"aten::_to_copy.*host-to-device"),
}


@pytest.mark.parametrize("case", list(UNCAPTURABLE))
def test_uncapturable_work_raises_naming_the_op_and_leaves_the_device_usable(case):
    fn, pattern = UNCAPTURABLE[case]
    x = torch.randn(4, device=DEV)
    g = mtia.MTIAGraph()
    with pytest.raises(GraphCaptureError, match=pattern) as error:
        with torch.no_grad(), mtia.graph(g):
            fn(x)
    assert "cannot be captured" in str(error.value)
    with pytest.raises(RuntimeError, match="holds no capture"):
        g.replay()
    _assert_device_usable()
    g.destroy()


@two_devices
@pytest.mark.parametrize(
    "fn, pattern",
    [
        (lambda x, y: torch.empty(4, device="mtia_sim:1"), r"allocating .* on mtia_sim:1.*outside"),
        (lambda x, y: x.to("mtia_sim:1"), r"aten::_to_copy.*between mtia_sim:0 and mtia_sim:1"),
        (lambda x, y: y.copy_(x), r"aten::copy_.*between mtia_sim:0 and mtia_sim:1"),
        (lambda x, y: x.copy_(y), r"aten::copy_.*between mtia_sim:0 and mtia_sim:1"),
        (lambda x, y: y * 2, r"aten::mul.Tensor.*runs on mtia_sim:1"),
    ],
    ids=["allocation outside the pool", "to other device", "copy_ to", "copy_ from", "other"],
)
def test_cross_device_work_is_refused(fn, pattern):
    x = torch.randn(4, device=DEV)
    y = torch.randn(4, device="mtia_sim:1")
    g = mtia.MTIAGraph()
    with pytest.raises(GraphCaptureError, match=pattern):
        with torch.no_grad(), mtia.graph(g):
            fn(x, y)
    _assert_device_usable()


def test_an_error_of_the_users_own_abandons_the_capture():
    g = mtia.MTIAGraph()
    with pytest.raises(KeyError):
        with mtia.graph(g):
            torch.ones(2, device=DEV) + 1
            {}["missing"]
    _assert_device_usable()


def test_replaying_a_graph_inside_a_capture_is_refused():
    x = torch.ones(2, device=DEV)
    inner, y = _capture(lambda t: t * 2, x)
    with pytest.raises(GraphCaptureError, match=rf"replay\(\) of graph {inner.id}.*not record"):
        with mtia.graph(mtia.MTIAGraph()):
            inner.replay()
    _assert_device_usable()


def test_one_capture_at_a_time():
    g1, g2 = mtia.MTIAGraph(), mtia.MTIAGraph()
    g1.capture_begin()
    try:
        with pytest.raises(RuntimeError, match="already capturing"):
            g2.capture_begin()
    finally:
        g1.capture_end()


def _fresh_stream_delta(fn) -> float:
    """Simulated microseconds `fn` adds to a new, idle stream."""
    stream = mtia.Stream()
    start = stream.clock_us
    with mtia.stream(stream):
        fn()
    return stream.clock_us - start


def test_replay_charges_one_launch_plus_the_kernels_device_time():
    _, model = _mlp()
    x = torch.randn(256, 16, device=DEV)
    clock = mtia.current_stream()
    before_capture = clock.clock_us
    g, _ = _capture(model, x)
    assert clock.clock_us == before_capture  # capturing records, it runs nothing on the clock

    replay_us = _fresh_stream_delta(g.replay)
    with torch.no_grad():
        eager_us = _fresh_stream_delta(lambda: model(x))
    launch = RUNTIME.device(0).profile.kernel_launch_us
    assert replay_us == pytest.approx(g.replay_duration_us())
    assert replay_us > launch  # the kernels' own time is charged too
    # Eager launches each kernel; the graph launches once.
    assert eager_us - replay_us == pytest.approx((len(g.nodes) - 1) * launch)
