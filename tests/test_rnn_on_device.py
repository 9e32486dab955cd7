"""Recurrent layers on the device match the CPU, forward and backward. On an accelerator
PyTorch's LSTM/GRU cells call the fused cell ops (`_thnn_fused_lstm_cell`, `_thnn_fused_gru_cell`)
that only CUDA implements: the device serves them itself."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

DEVICE = "mtia_sim"
LAYERS = {
    "LSTM 2 layers, bidirectional": lambda: nn.LSTM(6, 8, num_layers=2, bidirectional=True),
    "LSTM without bias, batch first": lambda: nn.LSTM(6, 8, bias=False, batch_first=True),
    "GRU 2 layers, bidirectional": lambda: nn.GRU(6, 8, num_layers=2, bidirectional=True),
    "GRU without bias": lambda: nn.GRU(6, 8, bias=False),
}


def _run(layer: nn.Module, x: torch.Tensor):
    output, state = layer(x)
    states = state if isinstance(state, tuple) else (state,)
    loss = output.square().sum() + sum(s.sum() for s in states)
    loss.backward()
    grads = [p.grad for p in layer.parameters()]
    return [output, *states, x.grad, *grads]


@pytest.mark.parametrize("make", LAYERS.values(), ids=LAYERS.keys())
def test_recurrent_layers_match_the_cpu_forward_and_backward(make):
    torch.manual_seed(0)
    layer = make()
    on_device = copy.deepcopy(layer).to(DEVICE)
    x = torch.randn(5, 3, 6, requires_grad=True)
    x_device = x.detach().to(DEVICE).requires_grad_()
    expected = _run(layer, x)
    got = _run(on_device, x_device)
    assert all(t.device.type == DEVICE for t in got)
    for want, have in zip(expected, got, strict=True):
        torch.testing.assert_close(have.cpu(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cell_type", [nn.LSTMCell, nn.GRUCell])
def test_a_single_cell_without_grad_needs_no_state(cell_type):
    torch.manual_seed(0)
    cell = cell_type(4, 5)
    x = torch.randn(2, 4)
    with torch.no_grad():
        expected = cell(x)
        got = copy.deepcopy(cell).to(DEVICE)(x.to(DEVICE))
    expected = expected if isinstance(expected, tuple) else (expected,)
    got = got if isinstance(got, tuple) else (got,)
    for want, have in zip(expected, got, strict=True):
        torch.testing.assert_close(have.cpu(), want, rtol=1e-5, atol=1e-5)
