"""Compiled autograd on the device: its captured backward against AOTAutograd's and eager."""

import pytest
import torch

from mtia_lab.instruments.backward import accumulate, compare_backward
from mtia_lab.instruments.examples import Stack

DEV = "mtia_sim:0"


pytestmark = pytest.mark.usefixtures("fresh_dynamo")  # tests/conftest.py


def model_and_input():
    torch.manual_seed(0)
    return Stack(16, 2).to(DEV), torch.randn(8, 16, device=DEV)


def test_compiled_autograd_captures_one_backward_graph_with_eager_gradients():
    model, x = model_and_input()
    result = compare_backward(model, x)
    assert result.grads_match(atol=1e-5)
    assert result.captures == 1
    assert [p.name.split("_")[0] for p in result.aot_backward] == ["backward"]
    assert len(result.ca_backward) == 1  # the whole autograd graph as one Dynamo graph
    aot_kernels, _, _ = result.totals(result.aot_backward)
    ca_kernels, _, _ = result.totals(result.ca_backward)
    assert aot_kernels > 0 and ca_kernels > 0
    assert result.to_text().splitlines()[3].split()[:2] == ["AOTAutograd", "1"]
    # the capture hook is gone: the dispatcher runs device ops again, compiled autograd is off
    from torch._dynamo import compiled_autograd

    assert torch.compiler._is_compiling_flag is False
    assert compiled_autograd.AutogradCompilerInstance.begin_capture.__module__ == (
        "torch._dynamo.compiled_autograd")
    y = torch.ones(2, device=DEV, requires_grad=True)
    (y * 3).sum().backward()
    assert y.grad.cpu().tolist() == [3.0, 3.0]


def test_gradient_accumulation_captures_twice_then_reuses():
    model, _ = model_and_input()
    batches = [torch.randn(8, 16, device=DEV) for _ in range(3)]
    result = accumulate(model, batches)
    # first backward: no .grad yet; second: accumulate into .grad (another graph); then reuse
    assert result.captures == [1, 1, 0]
    assert result.grad_error < 1e-5


def test_real_inductor_compiles_compiled_autograds_backward_for_the_device():
    model, x = model_and_input()
    result = compare_backward(model, x, engine="inductor")
    assert result.grads_match(atol=1e-5)
    assert result.aot_backward and result.captures == 1
    # The captured graph's tensors reach Inductor as device tensors (not their inner host
    # tensors), so Inductor plans it for mtia_sim: Triton kernels, bytes, simulated time.
    assert set(result.ca_input_devices) == {"mtia_sim:0"}
    assert len(result.ca_backward) == 1
    kernels, moved, time_us = result.totals(result.ca_backward)
    assert kernels > 0 and moved > 0 and time_us > 0
    assert {g.kind for g in result.ca_backward[0].groups} >= {"extern", "reduction"}
    # The same backward, plus the loss's own backward (eager under AOTAutograd, captured by
    # compiled autograd): at least AOTAutograd's bytes.
    assert moved >= result.totals(result.aot_backward)[1]
    assert "no device plan" not in result.to_text()


def test_real_inductor_gradient_accumulation_with_a_scaled_loss_matches_eager():
    # `loss / n` saves n as a 0-d host tensor (a wrapped number) that compiled autograd hands
    # to the device graph beside its device tensors.
    model, _ = model_and_input()
    batches = [torch.randn(8, 16, device=DEV) for _ in range(2)]
    result = accumulate(model, batches, engine="inductor")
    assert result.captures == [1, 1]
    assert result.grad_error < 1e-5


def test_unknown_engine_is_refused():
    model, x = model_and_input()
    with pytest.raises(ValueError, match="engine='tvm'"):
        compare_backward(model, x, engine="tvm")


def test_real_inductor_compiled_autograd_with_a_new_batch_size_matches_eager():
    # The second capture sees a new size: compiled autograd's graph takes symbolic sizes, and
    # the device fakes of its list input must carry them.
    model, _ = model_and_input()
    batches = [torch.randn(n, 16, device=DEV) for n in (8, 5)]
    result = accumulate(model, batches, engine="inductor")
    assert result.captures == [1, 1]
    assert result.grad_error < 1e-5
