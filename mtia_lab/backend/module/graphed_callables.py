"""`torch.mtia_sim.make_graphed_callables`: CUDA's helper, for inference.

torch.cuda.make_graphed_callables captures each callable's forward *and* backward into graphs
and returns autograd Functions that replay them. The simulator captures forward work only (its
graphs record the ops the dispatcher serves; autograd's backward runs on another thread and is
not captured), so it serves callables whose sample inputs and parameters need no gradient, or
any callable under `torch.no_grad()`: each is warmed up, captured once (all sharing one memory
pool), and replaced by a function that copies its inputs into the static inputs, replays the
graph and returns the static outputs, as CUDA's does. Anything needing a backward graph raises.
"""

from __future__ import annotations

import torch

from ..aten.mtia_graph import MTIAGraph, graph, graph_pool_handle


def _needs_grad(fn, args) -> bool:
    if not torch.is_grad_enabled():
        return False
    params = list(fn.parameters()) if isinstance(fn, torch.nn.Module) else []
    return any(t.requires_grad for t in (*args, *params) if isinstance(t, torch.Tensor))


def make_graphed_callables(callables, sample_args, num_warmup_iters: int = 3,
                           allow_unused_input: bool = False, pool=None):
    """Graph-captured versions of `callables` (one callable or a tuple, with `sample_args` one
    tuple of tensors or a tuple of such tuples), for inference; see the module docstring."""
    single = not isinstance(callables, tuple)
    if single:
        callables, sample_args = (callables,), (sample_args,)
    if len(callables) != len(sample_args):
        raise ValueError(f"{len(callables)} callables but {len(sample_args)} sample_args tuples")
    if not isinstance(num_warmup_iters, int) or num_warmup_iters < 0:
        raise ValueError(f"num_warmup_iters must be an int >= 0, got {num_warmup_iters!r}")
    pool = graph_pool_handle() if pool is None else pool
    graphed = []
    for fn, args in zip(callables, sample_args, strict=True):
        if not isinstance(args, tuple) or not all(isinstance(a, torch.Tensor) for a in args):
            raise TypeError("sample_args must be a tuple of tensors per callable")
        if _needs_grad(fn, args):
            raise NotImplementedError(
                "make_graphed_callables on mtia_sim captures forward work only (no backward "
                "graph): call it under torch.no_grad(), or on inputs and parameters that do "
                "not require grad, and run training steps eagerly."
            )
        for _ in range(num_warmup_iters):
            fn(*args)
        static_inputs = tuple(a.detach().clone() for a in args)
        mtia_graph = MTIAGraph()
        with graph(mtia_graph, pool=pool):
            static_outputs = fn(*static_inputs)
        graphed.append(_replayer(fn, mtia_graph, static_inputs, static_outputs))
    return graphed[0] if single else tuple(graphed)


def _replayer(fn, mtia_graph: MTIAGraph, static_inputs, static_outputs):
    def replay(*inputs):
        if len(inputs) != len(static_inputs):
            raise TypeError(f"expected {len(static_inputs)} inputs, got {len(inputs)}")
        for static, new in zip(static_inputs, inputs, strict=True):
            if new is not static:
                static.copy_(new)
        mtia_graph.replay()
        return static_outputs

    if isinstance(fn, torch.nn.Module):
        fn.forward = replay  # as CUDA's: the module's forward becomes the replay
        return fn
    return replay
