"""The fused LSTM and GRU cells, which PyTorch calls on any accelerator.

On a CUDA, XPU or PrivateUse1 tensor, PyTorch's recurrent layers (`nn.LSTM`, `nn.GRU`, their
cells) compute each time step with `_thnn_fused_lstm_cell` / `_thnn_fused_gru_cell` and take
gradients with their backward ops. Only CUDA implements them (there is no CPU kernel for the
fallback), so the device serves the four ops here, with the same gate order, workspace layout
and gradients as CUDA's kernels (aten/src/ATen/native/cuda/RNN.cu): LSTM gates are
(input, forget, cell, output), the workspace holds them activated; GRU gates are
(reset, input, new), the workspace holds (reset, input, new, hx, hidden new-gate).
"""

from __future__ import annotations

import torch

from .registry import register_kernel

aten = torch.ops.aten


def _with_biases(input_gates, hidden_gates, input_bias, hidden_bias):
    if input_bias is not None:
        input_gates = input_gates + input_bias
    if hidden_bias is not None:
        hidden_gates = hidden_gates + hidden_bias
    return input_gates, hidden_gates


def lstm_cell(func, args, kwargs, device):
    """(hy, cy, workspace) of one LSTM step, as CUDA's fused kernel."""
    input_gates, hidden_gates, cx, *biases = (*args, *kwargs.values())
    input_bias, hidden_bias = (list(biases) + [None, None])[:2]
    input_gates, hidden_gates = _with_biases(input_gates, hidden_gates, input_bias, hidden_bias)
    i, f, g, o = (input_gates + hidden_gates).chunk(4, 1)
    workspace = torch.cat([i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()], 1)
    ig, fg, cg, og = workspace.chunk(4, 1)
    cy = fg * cx + ig * cg
    hy = og * cy.tanh()
    return hy, cy, workspace


def lstm_cell_backward(func, args, kwargs, device):
    """(grad_gates, grad_cx, grad_bias) from the saved workspace, as CUDA's kernel."""
    grad_hy, grad_cy, cx, cy, workspace, has_bias = (*args, *kwargs.values())
    ig, fg, cg, og = workspace.chunk(4, 1)
    tanh_cy = cy.tanh()
    grad_hy = torch.zeros_like(cy) if grad_hy is None else grad_hy
    grad_c = grad_hy * og * (1 - tanh_cy * tanh_cy)
    if grad_cy is not None:
        grad_c = grad_c + grad_cy
    grad_gates = torch.cat([
        grad_c * cg * ig * (1 - ig),
        grad_c * cx * fg * (1 - fg),
        grad_c * ig * (1 - cg * cg),
        grad_hy * tanh_cy * og * (1 - og),
    ], 1)
    grad_bias = grad_gates.sum(0) if has_bias else None
    return grad_gates, grad_c * fg, grad_bias


def gru_cell(func, args, kwargs, device):
    """(hy, workspace) of one GRU step, as CUDA's fused kernel."""
    input_gates, hidden_gates, hx, *biases = (*args, *kwargs.values())
    input_bias, hidden_bias = (list(biases) + [None, None])[:2]
    input_gates, hidden_gates = _with_biases(input_gates, hidden_gates, input_bias, hidden_bias)
    ir, ii, in_ = input_gates.chunk(3, 1)
    hr, hi, hn = hidden_gates.chunk(3, 1)
    rg = (ir + hr).sigmoid()
    ig = (ii + hi).sigmoid()
    ng = (in_ + rg * hn).tanh()
    hy = ng + ig * (hx - ng)
    return hy, torch.cat([rg, ig, ng, hx, hn], 1)


def gru_cell_backward(func, args, kwargs, device):
    """(grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias, grad_hidden_bias)."""
    grad_hy, workspace, has_bias = (*args, *kwargs.values())
    rg, ig, ng, hx, hn = workspace.chunk(5, 1)
    grad_input_gate = grad_hy * (hx - ng) * (1 - ig) * ig
    grad_new = grad_hy * (1 - ig) * (1 - ng * ng)
    grad_reset = grad_new * hn * (1 - rg) * rg
    grad_input_gates = torch.cat([grad_reset, grad_input_gate, grad_new], 1)
    grad_hidden_gates = torch.cat([grad_reset, grad_input_gate, grad_new * rg], 1)
    grad_hx = grad_hy * ig
    if not has_bias:
        return grad_input_gates, grad_hidden_gates, grad_hx, None, None
    return (grad_input_gates, grad_hidden_gates, grad_hx, grad_input_gates.sum(0),
            grad_hidden_gates.sum(0))


def register() -> None:
    register_kernel(aten._thnn_fused_lstm_cell.default)(lstm_cell)
    register_kernel(aten._thnn_fused_lstm_cell_backward_impl.default)(lstm_cell_backward)
    register_kernel(aten._thnn_fused_gru_cell.default)(gru_cell)
    register_kernel(aten._thnn_fused_gru_cell_backward.default)(gru_cell_backward)
