"""What a fusion plan's pictures need beyond the plan: per-node dataflow and users' names.

The plan (decisions.py) says which scheduler nodes share a kernel and which buffers cross
kernels; a picture of it also wants the dataflow *inside* a kernel (who reads whom), each
buffer's shape and strides, the module a node came from, and the names the user gave the graph's
inputs (`x`, `fc1.weight`) instead of AOTAutograd's (`primals_7`, `arg0_1`). This module
reads them from the scheduler's IR and its FX graph into plain data (`FusionPlan.to_dict()`
carries it as "detail"), so views never touch the IR.

Users' names come from Dynamo: the backend records, for each AOTAutograd graph it compiles,
where every input came from (`_compat.dynamo_input_sources`), as `gm.meta[INPUT_NAMES]`.
"""

from __future__ import annotations

import re

import torch

from .._compat import size_hint

INPUT_NAMES = "mtia_lab_input_names"  # gm.meta key: placeholder name -> the user's name
_ROOT = re.compile(r"^[LG]\['([^']+)'\]")
_STEP = re.compile(r"^\._(?:modules|parameters|buffers)\['([^']+)'\]|^\.(\w+)|^\[(\d+)\]"
                   r"|^\['([^']+)'\]")
_AOT_INPUT = re.compile(r"^(?:primals_(\d+)|arg(\d+)_1)$")
_TANGENT = re.compile(r"^tangents_(\d+)$")


def user_name(source: str) -> str:
    """Dynamo's source name as the user writes it: "L['self']._modules['fc1']._parameters
    ['weight']" -> "fc1.weight" (the module being compiled is `self`: left out, as in
    `named_parameters()`), "L['model']._modules['0']..." -> "model.0...", "L['x']" -> "x".
    Anything it cannot read is returned unchanged."""
    root = _ROOT.match(source)
    if not root:
        return source
    parts = [] if root.group(1) == "self" else [root.group(1)]
    rest = source[root.end():]
    while rest:
        step = _STEP.match(rest)
        if not step:
            return source
        name, attr, index, key = step.groups()
        if index is not None:
            parts[-1:] = [f"{parts[-1]}[{index}]"] if parts else [f"[{index}]"]
        else:
            parts.append(name or attr or key)
        rest = rest[step.end():]
    return ".".join(parts)


def input_names(gm: torch.fx.GraphModule, sources: list[str]) -> dict[str, str]:
    """AOTAutograd placeholder -> the user's name. Forward inputs are numbered in Dynamo's
    order (`primals_<i+1>` when training, `arg<i>_1` otherwise); a backward graph reuses the
    forward's `primals_<i+1>` for inputs it saved, gets activations saved by the forward under
    their forward names, and the gradients of the forward's outputs as `tangents_<j>`."""
    names: dict[str, str] = {}
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        numbered = _AOT_INPUT.match(node.name)
        tangent = _TANGENT.match(node.name)
        if numbered:
            i = int(numbered.group(1)) - 1 if numbered.group(1) else int(numbered.group(2))
            if 0 <= i < len(sources) and sources[i]:
                names[node.name] = user_name(sources[i])
        elif tangent:
            names[node.name] = f"grad of output {int(tangent.group(1)) - 1}"
    return names


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
