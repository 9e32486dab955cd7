"""The order Inductor lowers a graph in: its post-grad pass `reorder_for_locality`
(torch/_inductor/fx_passes/post_grad.py, on for inference graphs: config.reorder_for_locality)
moves each op right before its first user, walking the graph from its end.

So a graph's outputs that nothing else reads (a training step's bias gradients, summed over
the rows of the incoming gradient) are lowered last, just before `output`, in the output
tuple's order -- and Inductor numbers its scheduler nodes in that order: the proximity of
score_fusion and the long-distance check measure distances there, not in the traced order.
The comparison's Inductor compiles every graph as an inference graph, so the order is used
for every graph we schedule.
"""

from __future__ import annotations

import operator

import torch


def locality_positions(graph: torch.fx.Graph) -> dict[str, int]:
    """FX node name -> its position after `reorder_for_locality`: the same walk over a linked
    list of the nodes (the pass prepends a producer to the node being visited, and the walk
    then visits what it prepended, as FX's reversed iteration does)."""
    nodes = list(graph.nodes)
    if not nodes:
        return {}
    prev = {n: (nodes[i - 1] if i else None) for i, n in enumerate(nodes)}
    nxt = {n: (nodes[i + 1] if i + 1 < len(nodes) else None) for i, n in enumerate(nodes)}
    head = [nodes[0]]

    def unlink(n):
        p, q = prev[n], nxt[n]
        if p is None:
            head[0] = q
        else:
            nxt[p] = q
        if q is not None:
            prev[q] = p

    def prepend(node, other):  # fx Node.prepend: move `other` right before `node`
        if other is node:
            return
        unlink(other)
        p = prev[node]
        prev[other], nxt[other] = p, node
        prev[node] = other
        if p is None:
            head[0] = other
        else:
            nxt[p] = other

    copies = [n for n in nodes if n.op == "call_function"
              and n.target is torch.ops.aten.copy_.default]
    first_copy = copies[0] if copies else None  # input mutations: only the part before them
    past_mutating_epilogue = first_copy is None
    seen: set = set()

    def visit(node, other) -> None:
        if other.op != "call_function" or other.target is operator.getitem or \
                not all(u in seen for u in other.users) or _consumes_rng(other):
            return
        prepend(node, other)

    cur = nodes[-1]
    while cur is not None:
        seen.add(cur)
        if not past_mutating_epilogue:
            past_mutating_epilogue = cur is first_copy
        else:
            torch.fx.map_arg((cur.args, cur.kwargs), lambda a, cur=cur: visit(cur, a))
        cur = prev[cur]
    order: dict[str, int] = {}
    n = head[0]
    while n is not None:
        order[n.name] = len(order)
        n = nxt[n]
    return order


def _consumes_rng(node) -> bool:
    """Ops that consume RNG state stay where they are (the pass's `consumes_rng_state`)."""
    target = node.target
    return isinstance(target, torch._ops.OpOverload) and \
        torch.Tag.nondeterministic_seeded in target.tags
