"""torch.compile(backend="mtia_lab") against eager on the device: kernel counts, then numbers."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from models import GeluMLP as MLP

import mtia_lab  # noqa: F401
from mtia_lab.compiler import (
    COMPILED,
    FusionSplitError,
    add_listener,
    assert_single_kernel,
    remove_listener,
)

DEV = "mtia_sim"


def compiled_run(model, *inputs, train=False):
    """Run compiled (and backward if train); return outputs, grads and the new graphs."""
    torch.compiler.reset()
    start = len(COMPILED)
    out = torch.compile(model, backend="mtia_lab")(*inputs)
    grads = None
    if train:
        out.sum().backward()
        grads = [p.grad.cpu().clone() for p in model.parameters()]
        model.zero_grad(set_to_none=True)
    return out, grads, COMPILED[start:]


def eager_run(model, *inputs, train=False):
    out = model(*inputs)
    grads = None
    if train:
        out.sum().backward()
        grads = [p.grad.cpu().clone() for p in model.parameters()]
        model.zero_grad(set_to_none=True)
    return out, grads


def kinds(graph):
    return [g.kind for g in graph.plan.groups]


def assert_close_all(a, b):
    for x, y in zip(a, b, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-5)


class Block(nn.Module):
    """Pre-norm transformer block: attention with softmax, layer norms, MLP, residuals."""

    def __init__(self, c=16, heads=2):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(c), nn.LayerNorm(c)
        self.qkv, self.proj = nn.Linear(c, 3 * c), nn.Linear(c, c)
        self.fc1, self.fc2 = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=-1)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (c // self.heads) ** -0.5
        att = torch.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4 * 4 * 4, 5)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)
        return self.fc(x.flatten(1))


@pytest.fixture(scope="module")
def mlp():
    torch.manual_seed(0)
    return MLP().to(DEV), torch.randn(4, 8, device=DEV)


def test_mlp_inference(mlp):
    model, x = mlp
    with torch.no_grad():
        out, _, graphs = compiled_run(model, x)
        expected, _ = eager_run(model, x)
    assert [g.plan.kernel_count for g in graphs] == [2]  # addmm+gelu epilogue, addmm
    assert kinds(graphs[0]) == ["template", "template"]
    assert out.device == x.device
    torch.testing.assert_close(out.cpu(), expected.cpu())


def test_mlp_training_step_gradients(mlp):
    model, x = mlp
    out, grads, graphs = compiled_run(model, x, train=True)
    expected, expected_grads = eager_run(model, x, train=True)
    forward, backward = graphs
    assert forward.plan.kernel_count == 2
    assert backward.plan.kernel_count < backward.plan.before.kernels
    assert backward.plan.after.bytes_moved < backward.plan.before.bytes_moved
    torch.testing.assert_close(out.cpu(), expected.cpu())
    assert_close_all(grads, expected_grads)
    assert all(p.device.type == DEV for p in model.parameters())


def test_transformer_block_forward_and_backward():
    torch.manual_seed(0)
    model, x = Block().to(DEV), torch.randn(2, 8, 16, device=DEV)
    out, grads, graphs = compiled_run(model, x, train=True)
    expected, expected_grads = eager_run(model, x, train=True)
    forward = graphs[0].plan
    assert kinds(graphs[0]).count("extern") == 2  # the two layer norms, kept as ATen kernels
    softmax = [g for g in forward.groups if {"aten.amax.default", "aten.exp.default",
                                             "aten.div.Tensor"} <= {a.split(": ")[1]
                                                                   for a in g.aten_nodes}]
    assert len(softmax) == 1  # the whole softmax, scale included, is one kernel
    assert forward.kernel_count < forward.before.kernels
    torch.testing.assert_close(out.cpu(), expected.cpu(), rtol=1e-4, atol=1e-5)
    assert_close_all(grads, expected_grads)
    sources = {s for d in forward.decisions for s in d.source}
    assert any("test_compiler_models.py:" in s for s in sources)


def test_conv_net_forward_and_backward():
    torch.manual_seed(0)
    model, x = ConvNet().to(DEV), torch.randn(2, 3, 8, 8, device=DEV)
    out, grads, graphs = compiled_run(model, x, train=True)
    expected, expected_grads = eager_run(model, x, train=True)
    assert "extern" in kinds(graphs[0])  # convolution runs as its ATen kernel
    assert any(d.rule == "extern_never_fuses" for d in graphs[0].plan.refusals())
    torch.testing.assert_close(out.cpu(), expected.cpu(), rtol=1e-4, atol=1e-5)
    assert_close_all(grads, expected_grads)


def test_runner_charges_the_clock_and_reports_each_kernel(mlp):
    model, x = mlp
    events = []
    with torch.no_grad():
        compiled = torch.compile(model, backend="mtia_lab")
        torch.compiler.reset()
        start = len(COMPILED)
        compiled(x)  # compile first: tracing runs fake tensors through the device
        plan = COMPILED[start].plan
        listener = add_listener(lambda kernel, cost, span: events.append((kernel, cost, span)))
        try:
            stream = torch.mtia_sim.current_stream()
            before = stream.clock_us
            compiled(x)
            after = stream.clock_us
        finally:
            remove_listener(listener)
    assert [e[0].name for e in events] == ["kernel_0", "kernel_1"]
    assert [e[1] for e in events] == [g.cost for g in plan.groups]
    assert after - before == pytest.approx(plan.after.time_us)
    assert all(span.end_us - span.start_us == pytest.approx(g.duration_us)
               for (_, _, span), g in zip(events, plan.groups, strict=True))


def test_generated_source_is_the_code_that_runs(mlp):
    model, x = mlp
    with torch.no_grad():
        _, _, graphs = compiled_run(model, x)
    kernel = graphs[0].program.kernels[0]
    assert kernel.source.startswith("def kernel_0(")
    assert "aten.gelu.default" in kernel.source and "addmm.default" in kernel.source
    assert kernel.fn.__code__.co_filename == "<mtia_lab kernel kernel_0>"
    namespace = {"torch": torch}
    exec(kernel.source, namespace)
    args = [torch.randn(graphs[0].gm.graph.find_nodes(op="placeholder", target=name)[0]
                        .meta["val"].shape) for name in kernel.inputs]
    for a, b in zip(namespace["kernel_0"](*args), kernel.fn(*args), strict=True):
        torch.testing.assert_close(a, b)


def test_assert_single_kernel():
    x = torch.randn(4, 8, device=DEV)
    result = assert_single_kernel(lambda t: (t * 2).relu().sum(), x)
    torch.testing.assert_close(result.cpu(), (x.cpu() * 2).relu().sum())

    def split(t):
        return F.layer_norm(t.relu(), (8,)) * 2  # the layer norm splits the region

    with pytest.raises(FusionSplitError) as err:
        assert_single_kernel(split, x)
    message = str(err.value)
    assert "expected one kernel, got 3" in message
    assert "extern_never_fuses" in message and "native_layer_norm" in message
    assert "test_compiler_models.py:" in message  # the user's line that made the split


def test_new_batch_size_recompiles_with_dynamic_false():
    torch.manual_seed(0)
    model = MLP().to(DEV)
    torch.compiler.reset()
    start = len(COMPILED)
    compiled = torch.compile(model, backend="mtia_lab", dynamic=False)
    with torch.no_grad():
        for batch in (4, 6):
            x = torch.randn(batch, 8, device=DEV)
            torch.testing.assert_close(compiled(x).cpu(), model(x).cpu())
    assert [c.plan.kernel_count for c in COMPILED[start:]] == [2, 2]


def test_host_tensors_compile_too_without_touching_the_device_clock():
    torch.manual_seed(0)
    model, x = MLP(), torch.randn(4, 8)
    stream = torch.mtia_sim.current_stream()
    torch.compiler.reset()
    with torch.no_grad():
        compiled = torch.compile(model, backend="mtia_lab", dynamic=False)
        compiled(x)  # compile first
        before = stream.clock_us
        out = compiled(x)
    assert stream.clock_us == before
    torch.testing.assert_close(out, model(x))


def test_rf_detr_with_departures_on_and_off_matches_eager():
    """A detector nobody here wrote (RF-DETR: windowed DINOv2, C2f projector, two-stage query
    selection, deformable attention), compiled and also scheduled with the departures off,
    against eager: it once crashed the departures-off schedule (a cat recomputed for a reader,
    see test_fidelity_rules)."""
    transformers = pytest.importorskip("transformers")
    from mtia_lab.compare.fidelity import eager_rows

    backbone = transformers.RfDetrDinov2Config(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4, mlp_ratio=2, image_size=32,
        patch_size=8, num_windows=2, window_block_indices=[0], num_register_tokens=0,
        out_features=["stage1", "stage2"])
    cfg = transformers.RfDetrConfig(
        backbone_config=backbone, d_model=32, decoder_layers=1, decoder_self_attention_heads=4,
        decoder_cross_attention_heads=4, decoder_n_points=2, decoder_ffn_dim=64, num_queries=8,
        group_detr=1, c2f_num_blocks=1, num_labels=4, dropout=0.0, intermediate_size=64)
    torch.manual_seed(0)
    model = transformers.RfDetrForObjectDetection(cfg)
    for name, p in model.named_parameters():  # zero-initialized heads and offsets: seeded
        if p.numel() > 1 and "norm" not in name and p.std() == 0:
            nn.init.normal_(p, mean=p.mean().item(), std=0.2)
    model.eval().requires_grad_(False).to(DEV)

    def rf_detr(pixels):
        out = model(pixel_values=pixels)
        return out.logits, out.pred_boxes

    assert eager_rows({"rf_detr": (rf_detr, lambda: (torch.randn(2, 3, 32, 32),))}) == \
        {"rf_detr": ""}
