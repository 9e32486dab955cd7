"""Tensors a compiled function creates on the device (`torch.ones(n, device=x.device)`).

Compiled code runs on the inner CPU tensors, so a buffer made inside it must be a host buffer
like every other intermediate. Two graph passes see to that:

- `host_factories` (Dynamo's graph, before AOTAutograd traces it): a factory asking for
  `mtia_sim` memory makes a CPU tensor, which `on_device` wraps as a device tensor. AOTAutograd
  then traces a device tensor whose inner is that CPU tensor, exactly like an input: its aten
  graph gets a CPU factory, and a graph output made by a factory comes back on the device.
  A host tensor moved there (`x.cpu().to("mtia_sim")`, `h.to(x.device)`) is treated the same
  way: a host copy, wrapped, so a result computed from it alone comes back on the device too.
- `host_devices` (each aten graph, the safety net): any `device=mtia_sim` left (a CPU tensor
  moved with `.to(x.device)` inside the function) becomes `device=cpu`, and the CPU -> CPU
  `_to_copy`s this leaves behind (dispatch.py's `_traced` moves plain device tensors to the
  host to meet the inner tensors) are dropped.
"""

from __future__ import annotations

import torch
import torch.fx

from .._compat import DEVICE_NAME, map_functorch_wrapped
from ..backend.aten import tensor as device_tensor
from ..backend.runtime.device_state import RUNTIME

_CPU = torch.device("cpu")
_to_copy = torch.ops.aten._to_copy.default
# Factories that draw random numbers: on the device they draw from its generator, not the host's.
_RANDOM = {torch.rand, torch.randn, torch.randint, torch.randperm, torch.normal}


def _device_index(value) -> int | None:
    """The device index a `device=` argument names, or None when it is not the device."""
    if not isinstance(value, (str, torch.device)):
        return None
    device = torch.device(value)
    if device.type != DEVICE_NAME:
        return None
    return device.index if device.index is not None else RUNTIME.current_index


def on_device(host: torch.Tensor, index: int) -> torch.Tensor:
    """A tensor a factory made on the host, as a device tensor (traced only: while AOTAutograd
    traces, the host tensor is fake and `wrap` takes no memory).

    Inside a functorch transform (`torch.func.grad`, `vjp`, `jvp`, `vmap`) the factory's result
    is functorch's wrapper at the transform's level (a TensorWrapper, or a BatchedTensor), with
    no storage of its own. Eager makes the same wrapper around the device tensor, so: unwrap it,
    put what it wraps on the device, and wrap that again at the same level (and batch dim)."""
    return map_functorch_wrapped(host, lambda plain: device_tensor.wrap(plain, index,
                                                                       "compiled factory"))


def _host_move(node: torch.fx.Node) -> int | None:
    """The device index a `host_tensor.to(device)` node moves to, or None for any other node."""
    if node.op != "call_method" or node.target != "to" or not node.args:
        return None
    source = node.args[0]
    value = source.meta.get("example_value") if isinstance(source, torch.fx.Node) else None
    if not isinstance(value, torch.Tensor) or value.device.type == DEVICE_NAME:
        return None  # a device tensor's `.to` stays as it is (no copy when nothing changes)
    if "device" in node.kwargs:
        return _device_index(node.kwargs["device"])
    return _device_index(node.args[1]) if len(node.args) > 1 else None


def _move_to_host(node: torch.fx.Node) -> None:
    """`src.to(mtia_sim, ...)` -> `src.to(cpu, ..., copy=True)`: a fresh host tensor, as the
    device copy was (never the caller's host tensor itself)."""
    if "device" in node.kwargs:
        node.update_kwarg("device", _CPU)
    else:
        node.update_arg(1, _CPU)
    if len(node.args) > 4:  # to(device, dtype, non_blocking, copy)
        node.update_arg(4, True)
    else:
        node.update_kwarg("copy", True)


def host_factories(gm: torch.fx.GraphModule) -> int:
    """Make Dynamo's factories with `device=mtia_sim` build on the host, and its host -> device
    moves copy on the host, then wrap the result onto the device. Returns how many it rewrote."""
    graph, count = gm.graph, 0
    for node in list(graph.nodes):
        index = _host_move(node)
        if index is not None:
            _move_to_host(node)
        elif node.op != "call_function" or node.target is on_device:
            continue
        else:
            index = _device_index(node.kwargs.get("device"))
            if index is None:
                continue
            node.update_kwarg("device", _CPU)
            if node.target in _RANDOM and node.kwargs.get("generator") is None:
                node.update_kwarg("generator", RUNTIME.device(index).generator)  # as eager
        with graph.inserting_after(node):
            wrapped = graph.call_function(on_device, (node, index))
        node.replace_all_uses_with(wrapped, delete_user_cb=lambda user, w=wrapped: user is not w)
        count += 1
    if count:
        gm.recompile()
    return count


def _is_host_noop_copy(node: torch.fx.Node) -> bool:
    """A `_to_copy` that only changed the device (now CPU -> CPU) of an intermediate."""
    if node.target is not _to_copy or set(node.kwargs) - {"device", "dtype", "layout"}:
        return False
    source = node.args[0]
    if not isinstance(source, torch.fx.Node) or source.op == "placeholder":
        return False  # dropping it would make an output alias the caller's input
    before, after = source.meta.get("val"), node.meta.get("val")
    if not isinstance(before, torch.Tensor) or not isinstance(after, torch.Tensor):
        return False
    return (before.device != after.device and before.dtype == after.dtype
            and before.stride() == after.stride()
            and not any(user.op == "output" for user in node.users))


def host_devices(gm: torch.fx.GraphModule) -> int:
    """Rewrite `device=mtia_sim` in an aten graph to the host, and drop the CPU -> CPU copies
    that leaves. Returns how many nodes changed."""
    nodes = [n for n in gm.graph.nodes if n.op == "call_function"]
    noops = [n for n in nodes if _is_host_noop_copy(n)]  # judged on the graph as traced
    moved = [n for n in nodes if _device_index(n.kwargs.get("device")) is not None]
    for node in moved:
        node.update_kwarg("device", _CPU)
    for node in noops:
        node.replace_all_uses_with(node.args[0])
        gm.graph.erase_node(node)
    changed = len(noops) + len(moved)
    if changed:
        gm.recompile()
    return changed
