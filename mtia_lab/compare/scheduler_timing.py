"""The graph Inductor's CPU scheduler is timed on, for the scheduling-time benchmark only.

benchmarks/bench_scheduler.py times Inductor's Scheduler constructor beside ours on the same
aten graph: `common_graph` re-traces a graph with Inductor's decompositions minus the
keep-list, and `keep_as_fallbacks` lowers the kept ops as ATen calls while Inductor runs. Not
the comparison (plans.py compiles for the device and reads Inductor's own plan).
"""

from __future__ import annotations

import contextlib

import torch
import torch.fx

from ..inductor import _compat as inductor_compat
from ..records.keep import keep_ops


def _example_args(gm: torch.fx.GraphModule) -> list:
    args = []
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            val = node.meta.get("val")
            if not isinstance(val, torch.Tensor):
                raise ValueError(f"placeholder {node.name} has no tensor meta['val']")
            args.append(torch.empty_strided(val.shape, val.stride(), dtype=val.dtype).zero_())
    return args


def common_graph(gm: torch.fx.GraphModule) -> tuple[torch.fx.GraphModule, list]:
    """Re-trace `gm` with Inductor's decompositions minus KEEP: the graph both schedule."""
    from torch.fx.experimental.proxy_tensor import make_fx

    keep = keep_ops()
    table = {op: fn for op, fn in inductor_compat.inductor_decompositions().items()
             if op not in keep}
    args = _example_args(gm)

    def flat(*flat_args):  # placeholders in order, whatever pytree structure gm was traced with
        return torch.fx.Interpreter(gm).run(*flat_args, enable_io_processing=False)

    return make_fx(flat, decomposition_table=table, tracing_mode="fake")(*args), args


@contextlib.contextmanager
def keep_as_fallbacks():
    """Lower the KEEP ops as ATen fallbacks for the duration (Inductor would decompose them)."""
    with contextlib.ExitStack() as stack:
        for op in keep_ops():
            stack.enter_context(inductor_compat.temporary_fallback(op))
        yield
