"""The names the user gave a graph's inputs (`x`, `fc1.weight`), not AOTAutograd's
(`primals_7`, `arg0_1`).

Dynamo knows where each input came from (its source, "L['self']._modules['fc1']._parameters
['weight']"); the teaching compiler records, for each AOTAutograd graph it compiles, those
sources read as the user writes them, as `gm.meta[INPUT_NAMES]` (compiler/aot.py). Both
compilers' plans and every view name inputs and modules through `user_name`.
"""

from __future__ import annotations

import re

import torch

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
