"""What a fusion plan's pictures need beyond the plan: per-node dataflow and users' names.

The plan (records/plan.py) says which scheduler nodes share a kernel and which buffers cross
kernels; a picture of it also wants the dataflow *inside* a kernel (who reads whom), each
buffer's shape and strides, the module a node came from, and the names the user gave the graph's
inputs (`x`, `fc1.weight`) instead of AOTAutograd's (`primals_7`, `arg0_1`). This module
reads them from the scheduler's IR and its FX graph into plain data (`FusionPlan.to_dict()`
carries it as "detail"), so views never touch the IR.

Users' names come from Dynamo: the backend records, for each AOTAutograd graph it compiles,
where every input came from (`_compat.dynamo_input_sources`), as `gm.meta[INPUT_NAMES]`
(records/input_names.py).
"""

from __future__ import annotations

import torch

from .._compat import size_hint
from ..records.input_names import INPUT_NAMES, user_name


def _module_of(node: torch.fx.Node) -> str:
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return ""
    path = list(stack.values())[-1][0]
    return user_name(path) if path.startswith(("L[", "G[")) else path


def plan_detail(ir) -> dict:
    """Per scheduler node (op, reads, writes, module, source) and per buffer (shape, strides,
    dtype, bytes, the user's name of a graph input): plain data for views."""
    fx = {n.name: n for n in ir.gm.graph.nodes}
    names = ir.gm.meta.get(INPUT_NAMES, {})
    nodes = {
        n.name: {
            "target": n.target, "kind": n.kind.value, "reads": list(n.reads),
            "writes": list(n.writes), "module": _module_of(fx[n.name]) if n.name in fx else "",
            "source": list(n.source),
        }
        for n in ir.nodes
    }
    buffers = {}
    for name, b in ir.buffers.items():
        val = fx[name].meta.get("val") if name in fx else None
        stride = ([size_hint(s) for s in val.stride()] if isinstance(val, torch.Tensor)
                  else [])
        buffers[name] = {
            "shape": list(b.shape), "stride": stride,
            "dtype": str(b.dtype).removeprefix("torch."), "nbytes": b.nbytes,
            "producer": b.producer, "user_name": names.get(name, ""),
        }
    return {"nodes": nodes, "buffers": buffers, "inputs": list(ir.inputs)}
