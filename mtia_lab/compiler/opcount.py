"""How big a pointwise op's loop body is once Inductor has inlined its producers into it.

Inductor lowers each pointwise op to a loop body (`inner_fn`) and inlines the bodies of the
pointwise ops it reads, until something makes it store a value (realize it). One of those
reasons is size: `has_large_inner_fn` counts the body's operations (`inner_fn_opcount`,
after common-subexpression elimination: loads, constants, index expressions and ops) and
realizes a value whose body exceeds `realize_opcount_threshold` (30) when it loads from more
than one place, or when it has several readers. Another is the loads the body accumulates:
more than `realize_acc_reads_threshold` (8) distinct loads, and it is stored (an unrolled
recurrence's state after a few steps). See torch/_inductor/graph.py `run_node`, and ir.py
`StorageBox.has_exceeded_max_reads` (then `realize_hint`: more than one non-constant load)
and `should_realize_on_reuse`.

`large_bodies(ir)` imitates that count on our IR, in graph order as Inductor lowers: each
node's body is a set of expression keys (equal keys are one operation, as Inductor's CSE
makes them), and a producer's keys are part of it unless the producer was realized. The
costs of a few lowerings (a cat's masked loads, an iota) were read off Inductor's own counts
on the fidelity suites; the count is an estimate, within an op or two of Inductor's.
"""

from __future__ import annotations

import numbers

import torch

from .ir import SHAPE_ONLY, GraphIR, Kind, SchedulerNode, classify, node_kind

REALIZE_OPCOUNT = 30  # Inductor's realize_opcount_threshold (its default off CPU)
REALIZE_ALWAYS = 100  # run_node realizes any larger body (deep inlining recurses too far)
REALIZE_READS_ON_REUSE = 4  # realize_reads_threshold: a reused value loading more is stored
REALIZE_ACC_READS = 8  # realize_acc_reads_threshold: a body loading more values is stored
CAT_OPS_PER_PIECE = 5  # index_expr, bound, compare, masked load, where (pointwise_cat)
FACTORIES = {
    "full": lambda args: args[1], "scalar_tensor": lambda args: args[0],
    "zeros": lambda args: 0, "ones": lambda args: 1, "full_like": lambda args: args[1],
    "zeros_like": lambda args: 0, "ones_like": lambda args: 1,
}
GATHERS = {"gather", "index", "embedding", "index_select"}
IDENTITY = {"clone", "copy", "alias", "lift_fresh_copy", "expand", "contiguous"}


def large_bodies(ir: GraphIR) -> dict[str, int]:
    """{node: estimated ops} for each pointwise node Inductor realizes for its body's size."""
    return realize_decisions(ir)[0]


def realize_decisions(ir: GraphIR) -> tuple[dict[str, int], set[str], set[str]]:
    """({node: ops} realized for the body's size, {node with several readers left
    unrealized}, {node realized}), deciding node by node in graph order as
    `GraphLowering.run_node` does. A reused node is left unrealized when
    `should_realize_on_reuse` says no: at most REALIZE_READS_ON_REUSE loads, a body of at
    most REALIZE_OPCOUNT ops, not a graph output; each of its readers computes it inline.
    A value an extern reads is realized when the extern is lowered (`realize_input`): the
    readers lowered after it load it instead of inlining its body (only the body counts
    change: where it is stored is the scheduler's business, as before)."""
    fx = {n.name: n for n in ir.gm.graph.nodes}
    users = ir.node_users()
    bodies: dict[str, frozenset] = {}  # node -> the expression keys of its (inlined) body
    top: dict[str, object] = {}  # node -> the key of its own value
    interned: dict[tuple, int] = {}  # expression -> a small key (hashing stays cheap)
    realized: set[str] = set()
    large: dict[str, int] = {}
    inline_reused: set[str] = set()
    biases = peeled_biases(ir)
    loaded: set[str] = set()  # realized by an extern reader: later readers load them
    for node in ir.nodes:
        if node_kind(node) is not Kind.POINTWISE or node.scatter or node.layout_of:
            realized.add(node.name)  # a layout copy: copy_input freezes its layout
            if node_kind(node) in (Kind.EXTERN, Kind.TEMPLATE):
                loaded |= {ir.buffers[b].producer for b in node.reads if b in ir.buffers}
            continue
        keys, value = _body(node, fx[node.name], ir, bodies, top, realized | loaded,
                            interned, biases)
        bodies[node.name], top[node.name] = keys, value
        ops = len(keys)
        loads = sum(1 for k in keys if isinstance(k, tuple) and k[0] == "load")
        reused = len(users.get(node.name, ())) > 1
        output = any(ir.buffers[b].is_output for b in node.writes)
        if ops > REALIZE_OPCOUNT and (loads > 1 or reused) or loads > REALIZE_ACC_READS:
            large[node.name] = ops
        if output or node.name in large or ops > REALIZE_ALWAYS or (
                fx_reused(fx[node.name]) and loads > REALIZE_READS_ON_REUSE):
            realized.add(node.name)
        elif reused:
            inline_reused.add(node.name)
    return large, inline_reused, realized


def fx_reused(fx_node: torch.fx.Node) -> bool:
    """Does Inductor's `run_node` call mark_reuse on this value: more than one FX user of the
    node itself, or of a view of it (a view's mark_reuse reaches the value's storage)? A
    value read only through a split (whose result is a list, not a tensor) and its pieces
    is never marked reused, however many pieces are read."""
    if len(fx_node.users) > 1 and isinstance(fx_node.meta.get("val"), torch.Tensor):
        return True
    return any(_fx_view(u) and fx_reused(u) for u in fx_node.users)


def _fx_view(fx_node: torch.fx.Node) -> bool:
    return fx_node.op == "call_function" and classify(fx_node.target) is Kind.VIEW


def _body(node: SchedulerNode, fx_node: torch.fx.Node, ir: GraphIR, bodies: dict,
          top: dict, realized: set, interned: dict,
          biases: dict | None = None) -> tuple[frozenset, object]:
    """(the keys of node's body, the key of its value). `biases`: peeled_biases(ir)."""
    biases = biases or {}
    op = node.target.split(".")[1] if node.target.startswith("aten.") else node.target
    if op in FACTORIES:  # a constant fill: one operation, shared by every equal fill
        fill = FACTORIES[op](fx_node.args)
        return frozenset({("const", fill)}), ("const", fill)
    if op == "arange":  # an iota (over its own index: two aranges are two iotas)
        value = ("iota", node.name)
        return frozenset({value}), value
    scalars = not node.indexed  # a cat's dim or a gather's dim is no constant of the body
    keys: set = set()
    args: list = []
    for arg in _flat_args(fx_node):
        if isinstance(arg, torch.fx.Node):
            buf = ir.base_of.get(arg.name)
            if node.access.get(buf) == {SHAPE_ONLY}:
                continue  # only its sizes are taken: nothing loaded, nothing inlined
            producer = ir.buffers[buf].producer if buf in ir.buffers else None
            if producer is not None and producer not in realized and producer in bodies:
                view = _view_of(node, buf)
                keys |= bodies[producer] if view is None else {_at(k, view) for k in
                                                               bodies[producer]}
                args.append(top[producer] if view is None else _at(top[producer], view))
            elif buf in ir.buffers:
                key = ("load", buf, frozenset(node.access.get(buf, {"full"})))
                keys.add(key)
                bias = biases.get(producer) if producer is not None else None
                if bias is not None:  # the conv's value is `conv + bias`, inlined here
                    view = _view_of(node, buf)
                    keys |= {("load", bias, view), ("bias_add", key)}
                    key = ("bias_add", key)
                args.append(key)
        elif scalars and isinstance(arg, numbers.Number) and not isinstance(arg, bool):
            keys.add(("const", arg))
            args.append(("const", arg))
    if op in IDENTITY or (op == "_to_copy" and not _casts(fx_node)):
        return frozenset(keys), args[0] if args else (op, node.name)
    value = interned.setdefault((op, tuple(args)), len(interned))  # equal expressions: one key
    if op == "cat" and len(set(args)) == 1:
        return frozenset(keys), value  # cat([x, x]): Inductor reads x at two offsets, no ops
    if op in GATHERS:  # its input's body computed at the index it loads: no op of its own
        return frozenset(keys), value
    keys.add(value)
    if op == "cat":  # per piece: bounds, a compare, a masked load (0 elsewhere), a where
        keys |= {("const", 0)} | {(value, i) for i in range(CAT_OPS_PER_PIECE * len(args) - 1)}
    if node.unrolled:  # the terms' loads, then a combine per term after the first
        extra = (node.rnumel - 1) * _combine_ops(op, fx_node) - 1  # `value` is the last
        if op in ARG_REDUCTIONS:
            extra += 1  # the index of the first term, a constant 0
        keys = _unrolled_terms(keys - {value}, node.rnumel) | {value}
        keys |= {(value, i) for i in range(extra)}
    return frozenset(keys), value


ARG_REDUCTIONS = {"argmax", "argmin"}


def peeled_biases(ir: GraphIR) -> dict[str, str]:
    """{convolution: its bias buffer} for each convolution whose bias Inductor peels off the
    call (torch 2.13 `kernel/conv.py: convolution`, off CPU: the extern runs without it and an
    `add` of the bias, viewed per channel, follows as unrealized pointwise code). A reader
    of the convolution's output inlines that add: it loads the bias too, once per view of
    the output it reads (two channels of a sigmoid map: two bias loads), which counts
    toward `realize_reads_threshold` as Inductor's `num_reads` counts it."""
    out = {}
    for fx_node in ir.gm.graph.nodes:
        if fx_node.name not in ir.by_name or \
                ir.by_name[fx_node.name].target != "aten.convolution.default":
            continue
        bias = fx_node.args[2] if len(fx_node.args) > 2 else None
        if isinstance(bias, torch.fx.Node):
            out[fx_node.name] = ir.base_of.get(bias.name, bias.name)
    return out


def _combine_ops(op: str, fx_node: torch.fx.Node) -> int:
    """Operations that fold one more term into an unrolled reduction: one for a sum or a max;
    for argmax/argmin the value and its index (compare, equal, a tie goes to the lower index:
    the term's index constant, less-than, and, or, two wheres), and for floating values two
    NaN tests and the three ops that let a NaN win (ir.py, `get_reduction_combine_fn`)."""
    if op not in ARG_REDUCTIONS:
        return 1
    src = fx_node.args[0].meta.get("val") if fx_node.args else None
    floating = isinstance(src, torch.Tensor) and src.dtype.is_floating_point
    return 8 + (6 if floating else 0)


def _unrolled_terms(keys: set, terms: int) -> set:
    """An unrolled reduction (`Reduction._unroll_reduction_fn`) calls its body once per term,
    at the term's index: every load of its body is a distinct load per term (a softmax over
    4 experts loads its row 4 times), and Inductor's `num_reads` counts each
    (OpCounterCSE.load: one read per distinct name and index); so is every operation on
    them or on the index (a causal mask's compare of positions): CSE shares only the
    constants between terms. A max over 6 masked scores is ~50 operations, not ~10: a large
    body that Inductor realizes (has_exceeded_max_reads), and its readers load it."""
    consts = {k for k in keys if isinstance(k, tuple) and k and k[0] == "const"}
    return consts | {_at(k, ("term", i)) for k in keys - consts for i in range(terms)}


def _view_of(node: SchedulerNode, buf: str) -> object:
    """None when `node` reads `buf` whole, at its own index; else the view it reads (a slice,
    a shift): an inlined producer is then computed at other indices, and Inductor's CSE
    shares none of its operations with another read of it (sin of x[0::2], cos of
    x[1::2] compute x's body twice)."""
    hows = node.access.get(buf, {"full"})
    views = [h for h in hows if h != "full" and not (isinstance(h, tuple) and h[0] == "indexed")]
    return frozenset(views) if views else None


def _at(key: object, view: object) -> object:
    """An expression key computed at another index: a load or an operation again (it keeps
    its kind, so loads are still counted as loads); a constant is the same constant."""
    if isinstance(key, tuple) and key and key[0] == "const":
        return key
    kind = key[0] if isinstance(key, tuple) and key and isinstance(key[0], str) else "op"
    return (kind, key, view)


def _flat_args(fx_node: torch.fx.Node) -> list:
    flat: list = []
    for arg in fx_node.args:
        flat.extend(arg if isinstance(arg, (list, tuple)) else [arg])
    return flat


def _casts(fx_node: torch.fx.Node) -> bool:
    """Does a _to_copy change the dtype (a device copy of the same dtype is the identity)?"""
    src = fx_node.args[0].meta.get("val") if fx_node.args else None
    out = fx_node.meta.get("val")
    return not (isinstance(src, torch.Tensor) and isinstance(out, torch.Tensor)
                and src.dtype == out.dtype)
