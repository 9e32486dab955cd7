"""torch.compile's modes and graph breaks on mtia_sim: results match eager, and each mode does
what it does for a GPU-like device (graph capture and replay on the device's graph API) or says
what it skips and why."""

import copy
import gc

import pytest
import torch
from torch import nn

import mtia_lab
from mtia_lab.inductor import InductorDeviceError, _compat, modes, triton_launch

DEVICE = "mtia_sim"


@pytest.fixture(autouse=True)
def fresh_compiles(monkeypatch):
    """Each test compiles afresh, and hears the once-per-process warnings again."""
    monkeypatch.setattr(modes, "_WARNED", set())
    torch.compiler.reset()
    yield
    torch.compiler.reset()


def _models():
    torch.manual_seed(0)
    host = nn.Sequential(nn.Linear(16, 16), nn.LayerNorm(16), nn.GELU(), nn.Linear(16, 4))
    return host, copy.deepcopy(host).to(DEVICE)


def _head(model):
    return lambda x: torch.softmax(model(x), -1) + 1


def test_reduce_overhead_captures_a_device_graph_then_replays_it():
    host, dev = _models()
    start = len(modes.GRAPHED)
    run = torch.compile(_head(dev), mode="reduce-overhead", dynamic=False)
    inputs = [torch.randn(8, 16) for _ in range(4)]
    with torch.no_grad():
        outs = [run(x.to(DEVICE)) for x in inputs]  # warm-up, capture, replay, replay
        for x, out in zip(inputs, outs, strict=True):  # earlier outputs are not overwritten
            torch.testing.assert_close(out.cpu(), _head(host)(x), rtol=1e-4, atol=1e-5)
    (graphed,) = modes.device_graphs(start)
    assert (graphed.captures, graphed.replays, graphed.skipped) == (1, 2, None)
    kinds = {node.how for node in graphed.graph.nodes}
    assert "launch" in kinds, "the Triton kernels are in the graph"
    assert any("addmm" in node.op for node in graphed.graph.nodes), "and the extern matmuls"
    launched = []  # a replay launches no kernel one by one: the graph runs them
    triton_launch.LISTENERS.append(lambda *args: launched.append(args))
    try:
        with torch.no_grad():
            run(inputs[0].to(DEVICE))
    finally:
        triton_launch.LISTENERS.pop()
    assert graphed.replays == 3 and not launched


def test_reduce_overhead_trains_with_forward_and_backward_replayed():
    host, dev = _models()
    start = len(modes.GRAPHED)
    step = torch.compile(lambda x: dev(x).square().mean(), mode="reduce-overhead", dynamic=False)
    opt_dev = torch.optim.SGD(dev.parameters(), lr=0.1)
    opt_host = torch.optim.SGD(host.parameters(), lr=0.1)
    for _ in range(4):
        x = torch.randn(8, 16)
        loss = step(x.to(DEVICE))
        loss.backward()
        opt_dev.step()
        opt_dev.zero_grad()
        expected = host(x).square().mean()
        expected.backward()
        opt_host.step()
        opt_host.zero_grad()
        torch.testing.assert_close(loss.cpu(), expected, rtol=1e-4, atol=1e-6)
    for p_dev, p_host in zip(dev.parameters(), host.parameters(), strict=True):
        torch.testing.assert_close(p_dev.cpu(), p_host, rtol=1e-4, atol=1e-6)
    graphs = modes.device_graphs(start)
    assert len(graphs) == 2 and all(g.replays >= 1 and g.skipped is None for g in graphs)


def test_reset_frees_the_device_graphs_and_their_memory():
    """torch.compiler.reset() drops what a reduce-overhead compile captured: its device graphs
    and the device memory they and the model held (Dynamo must not keep compiled frames of the
    device's internals, which would keep them alive)."""
    gc.collect()
    before = torch.mtia_sim.memory_allocated()
    start = len(modes.GRAPHED)

    def train():
        host, dev = _models()
        step = torch.compile(lambda x: dev(x).square().mean(), mode="reduce-overhead",
                             dynamic=False)
        for _ in range(3):
            step(torch.randn(8, 16, device=DEVICE)).backward()
        return len(modes.device_graphs(start))

    assert train() == 2
    torch.compiler.reset()
    gc.collect()
    assert modes.device_graphs(start) == []
    assert torch.mtia_sim.memory_allocated() == before


def test_reduce_overhead_says_why_a_graph_is_not_captured():
    def bump(x):
        x.add_(1)  # a mutated (non-static) input: Inductor does not capture this graph either
        return x * 2

    x = torch.randn(4, 4)
    dev = x.to(DEVICE)
    run = torch.compile(bump, mode="reduce-overhead", dynamic=False)
    with pytest.warns(modes.CompileModeWarning, match="reduce-overhead.*mutated inputs"):
        out = run(dev)
    out = run(dev)
    torch.testing.assert_close(out.cpu(), (x + 2) * 2)
    torch.testing.assert_close(dev.cpu(), x + 2)


def test_reduce_overhead_leaves_a_graph_with_host_work_uncaptured_and_says_so():
    def invert(a):  # linalg_inv_ex has no device kernel: the CPU fallback runs it
        return torch.linalg.inv(a * 2 + torch.eye(4, device=a.device) * 4).relu()

    run = torch.compile(invert, mode="reduce-overhead", dynamic=False)
    start = len(modes.GRAPHED)
    with pytest.warns(modes.CompileModeWarning, match="linalg_inv_ex ran on the host"):
        run(torch.randn(4, 4).to(DEVICE))
    for _ in range(2):
        a = torch.randn(4, 4)
        torch.testing.assert_close(run(a.to(DEVICE)).cpu(), invert(a), rtol=1e-4, atol=1e-5)
    (graphed,) = modes.device_graphs(start)
    assert graphed.graph is None and "CPU fallback" in graphed.skipped


def test_max_autotune_warns_once_what_it_skips_and_matches_eager():
    host, dev = _models()
    start = len(modes.GRAPHED)
    run = torch.compile(_head(dev), mode="max-autotune", dynamic=False)
    x = torch.randn(8, 16)
    with pytest.warns(modes.CompileModeWarning, match="max-autotune.*templates") as seen, \
            torch.no_grad():
        out, code = _compat.run_and_get_code(run, x.to(DEVICE))
    assert len([w for w in seen if issubclass(w.category, modes.CompileModeWarning)]) == 1
    torch.testing.assert_close(out.cpu(), _head(host)(x), rtol=1e-4, atol=1e-5)
    source = "\n".join(code)
    assert "extern_kernels.addmm" in source and "triton_tem" not in source  # no template
    with torch.no_grad():
        for _ in range(2):
            torch.testing.assert_close(run(x.to(DEVICE)).cpu(), out.cpu())
    (graphed,) = modes.device_graphs(start)
    assert graphed.replays == 1, "its graph capture applies"


def _branchy(x):
    y = torch.softmax(x * 2, -1)
    if y.max().item() > 0.01:  # the host reads a device value: Dynamo breaks the graph here
        y = y * 3
    else:
        y = y - 1
    return (y + 1).sum(0)


def test_fullgraph_with_a_graph_break_raises_dynamos_own_error():
    def printing(x):
        y = x.relu()
        print("a side effect Dynamo cannot put in a graph")
        return y + 1

    with pytest.raises(torch._dynamo.exc.Unsupported) as info:
        torch.compile(printing, fullgraph=True)(torch.randn(4).to(DEVICE))
    assert not isinstance(info.value, InductorDeviceError)


def test_a_graph_break_runs_as_several_compiled_graphs_on_the_device():
    x = torch.randn(8, 16)
    run = torch.compile(_branchy, dynamic=False)
    run(x.to(DEVICE))  # compile outside the trace
    with mtia_lab.trace() as t:
        out = run(x.to(DEVICE))
    torch.testing.assert_close(out.cpu(), _branchy(x))
    launches = [e for e in t.events if e.kind == "compiled"]
    graphs = {e.op.split(".")[1] for e in launches}  # "inductor.<graph>.<kernel>"
    assert len(graphs) >= 2, f"launches of one graph only: {graphs}"
    assert any(e.op.startswith("aten::_local_scalar_dense") for e in t.events), "the break"


def test_a_device_graph_captures_inductor_compiled_code_by_hand():
    """torch.mtia_sim.graph around a compiled call records its Triton launches too."""
    fn = _head(nn.Linear(16, 16).to(DEVICE))
    run = torch.compile(fn, dynamic=False)
    static_x = torch.randn(8, 16).to(DEVICE)
    with torch.no_grad():
        run(static_x)  # compile outside the capture
        g = torch.mtia_sim.MTIAGraph()
        with torch.mtia_sim.graph(g):
            static_out = run(static_x)
        new = torch.randn(8, 16)
        static_x.copy_(new)
        g.replay()
        torch.testing.assert_close(static_out.cpu(), fn(new.to(DEVICE)).cpu())
