"""Activation memory over a step, checked against the device allocator's own statistics."""

import pytest
import torch

from mtia_lab.instruments.activations import activation_timeline
from mtia_lab.instruments.checkpointing import (
    checkpoint_trade,
    checkpointed,
    save_matmuls,
)
from mtia_lab.instruments.examples import MLPBlock, Stack
from mtia_lab.viz.activation_views import activation_view, trade_view

DEV = "mtia_sim:0"


def variants(x):
    """The same three-block model, plain, fully checkpointed, selectively checkpointed."""
    torch.manual_seed(0)
    reference = Stack(32, 3)
    out = {}
    for name, wrap in (("none", None), ("full", checkpointed),
                       ("save matmuls", lambda b: checkpointed(b, save_matmuls))):
        model = Stack(32, 3, wrap=wrap)
        model.load_state_dict(dict(zip(model.state_dict(), reference.state_dict().values(),
                                       strict=True)))
        model = model.to(DEV)
        out[name] = (model, lambda m=model: m(x).square().sum())
    return out


@pytest.fixture(scope="module")
def trade():
    x = torch.randn(64, 32, device=DEV)
    chosen = variants(x)
    result = checkpoint_trade(chosen, inputs=(x,))
    grads = {name: [p.grad.cpu() for p in m.parameters()] for name, (m, _) in chosen.items()}
    return result, grads


def test_every_saved_tensor_is_used_by_a_backward_node_and_then_freed(trade):
    timeline = trade[0].timelines[0]
    saved = {e.tensor for e in timeline.events if e.action == "saved"}
    freed = {e.tensor for e in timeline.events if e.action == "freed"}
    assert saved and saved == freed
    assert timeline.events[-1].live_bytes == 0
    used_by = {e.node for e in timeline.events if e.action == "used"}
    assert used_by and all(node.endswith("Backward0") for node in used_by)


def test_saved_activations_are_device_memory_the_allocator_counted(trade):
    timeline = trade[0].timelines[0]
    # Every counted byte lives in an allocator block on the device: the allocator's peak
    # above the baseline holds at least the saved activations at their peak.
    assert timeline.host_bytes == 0
    assert timeline.allocator_peak_bytes >= timeline.peak_bytes > 0
    # The largest holders are the 64x128 results of the first linear and of gelu.
    assert timeline.peak_holders[0] == ("AddmmBackward0", 64 * 128 * 4)


def test_checkpointing_lowers_the_allocator_peak_and_pays_in_recomputation(trade):
    result, grads = trade
    none, full, selective = result.rows
    assert full.allocator_peak_bytes < selective.allocator_peak_bytes < none.allocator_peak_bytes
    # What the allocator saved is at most what autograd no longer keeps (checkpointing
    # recomputes one block's activations during backward: they occupy memory again then).
    assert (none.allocator_peak_bytes - full.allocator_peak_bytes
            <= none.saved_peak_bytes - full.saved_peak_bytes)
    # The trade on the simulated clock: more backward time and work, the most for full.
    assert none.backward_us < selective.backward_us < full.backward_us
    assert none.backward_flops < selective.backward_flops < full.backward_flops
    # Same gradients whatever was recomputed.
    for name in ("full", "save matmuls"):
        for a, b in zip(grads["none"], grads[name], strict=True):
            assert torch.allclose(a, b, atol=1e-5)


def test_views_state_the_peak_and_the_trade(trade):
    result, _ = trade
    text = activation_view(result.timelines[0], max_rows=3).to_text()
    assert text.startswith("activation timeline of none: 15 tensors saved for backward; peak ")
    assert "  ... 42 more events" in text
    svg = activation_view(result.timelines[1]).to_svg()
    assert svg.startswith("<svg") and "backward" in svg
    rows = trade_view(result).to_text().splitlines()
    assert rows[3].split()[:2] == ["none", "216.00"]
    assert rows[4].split()[0] == "full"


def test_a_compiled_step_saves_what_the_partitioner_chose_on_the_host():
    torch.manual_seed(0)
    model = Stack(16, 2).to(DEV)
    x = torch.randn(8, 16, device=DEV)
    eager = activation_timeline(lambda: model(x).sum(), model=model, inputs=(x,))
    eager_grads = [p.grad.cpu() for p in model.parameters()]
    compiled = torch.compile(model, backend="mtia_lab")
    timeline = activation_timeline(lambda: compiled(x).sum(), model=model, inputs=(x,))
    assert timeline.saved_count > 0
    # The teaching path desugars device tensors: its saved activations are host tensors,
    # which the device allocator does not see.
    assert timeline.host_bytes == timeline.peak_bytes > 0
    assert eager.host_bytes == 0
    for a, p in zip(eager_grads, model.parameters(), strict=True):
        assert torch.allclose(a, p.grad.cpu(), atol=1e-5)


def test_a_step_compiled_by_real_inductor_saves_device_tensors_the_allocator_counts():
    torch.manual_seed(0)
    model = Stack(16, 2).to(DEV)
    x = torch.randn(8, 16, device=DEV)
    compiled = torch.compile(model)
    timeline = activation_timeline(lambda: compiled(x).sum(), model=model, inputs=(x,))
    assert timeline.host_bytes == 0
    assert timeline.allocator_peak_bytes >= timeline.peak_bytes > 0
    assert {e.producer for e in timeline.events if e.nbytes} >= {"compiled graph"}


@pytest.mark.parametrize("policy", [3, "save everything", [torch.ops.aten.mm]])
def test_a_policy_that_is_not_callable_is_refused_by_name(policy):
    with pytest.raises(TypeError, match=r"policy=.* is not callable"):
        checkpointed(MLPBlock(4), policy=policy)


def test_a_list_of_ops_is_a_valid_policy():
    block = checkpointed(MLPBlock(4), policy=[torch.ops.aten.addmm.default]).to(DEV)
    x = torch.randn(2, 4, device=DEV, requires_grad=True)
    block(x).sum().backward()
    assert x.grad is not None and x.grad.device.type == "mtia_sim"


def test_step_must_return_a_scalar_loss():
    with pytest.raises(ValueError, match="step\\(\\) must return the loss"):
        activation_timeline(lambda: torch.randn(3, device=DEV, requires_grad=True) * 2)
