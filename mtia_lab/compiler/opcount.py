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
makes them), and a producer's keys are part of it unless the producer was realized. What the
lowering adds to the aten ops is counted too: a clamp with both bounds is two ops (Inductor's
decomposition), an operand of another dtype is converted (`to_dtype`, type promotion), a
constant is one per value and dtype, a biased convolution's output is an add of the call's
result and the bias (peeled off the call). The costs of a few lowerings (a cat's masked loads,
an iota) were read off Inductor's own counts on the fidelity suites; the count is an
estimate, within an op or two of Inductor's (exact on a decomposed bilinear upsample).
"""

from __future__ import annotations

import math
import numbers

import torch

from .._compat import size_hint
from .ir import (
    INDEXED,
    LIKE_FACTORIES,
    LOWERED_NORMS,
    SCATTER,
    SHAPE_ONLY,
    GraphIR,
    Kind,
    SchedulerNode,
    _op_name,
    classify,
    is_pointwise_use,
    live_users,
    node_kind,
    on_host,
    outer_product,
    scatter_placement,
)

REALIZE_OPCOUNT = 30  # Inductor's realize_opcount_threshold (its default off CPU)
REALIZE_ALWAYS = 100  # run_node realizes any larger body (deep inlining recurses too far)
REALIZE_READS_ON_REUSE = 4  # realize_reads_threshold: a reused value loading more is stored
REALIZE_ACC_READS = 8  # realize_acc_reads_threshold: a body loading more values is stored
# pointwise_cat's loop body for n pieces: the index along the cat's dim, the n+1 bounds (a
# constant 0 and each piece's end, shared by the next piece as its start), per piece a ge and
# an lt of the index, a masked load, an and_ of the two for each piece between the first and
# the last, and the n-1 wheres picking one: 6n - 1 operations (4 embeddings: 23, their loads
# 8 more, over realize_opcount_threshold)
def cat_ops(pieces: int) -> int:
    return 6 * pieces - 1


FACTORIES = {
    "full": lambda args: args[1], "scalar_tensor": lambda args: args[0],
    "zeros": lambda args: 0, "ones": lambda args: 1, "full_like": lambda args: args[1],
    "zeros_like": lambda args: 0, "ones_like": lambda args: 1,
}
GATHERS = {"gather", "index", "embedding", "index_select"}
# Inductor's decomposition of grid_sampler_2d (decomposition.py, torch._decomp's
# `_grid_sampler_2d`) is pointwise code: per interpolation mode (0 bilinear, 1 nearest,
# 2 bicubic), the corners it loads the input at and the operations around them
# (unnormalize, floor, bounds masks, weights); bilinear read off Inductor's kernel (~90).
GRID_SAMPLER_BODY = {0: (4, 90), 1: (1, 25), 2: (16, 300)}
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
    A value an extern (a matmul, a convolution) reads is realized when the extern is lowered
    (`ExternKernel.realize_input`): the readers lowered after it load it (one load, no ops)."""
    fx = {n.name: n for n in ir.gm.graph.nodes}
    users = ir.node_users()
    bodies: dict[str, frozenset] = {}  # node -> the expression keys of its (inlined) body
    top: dict[str, object] = {}  # node -> the key of its own value
    interned: dict[tuple, int] = {}  # expression -> a small key (hashing stays cheap)
    realized: set[str] = set()
    large: dict[str, int] = {}
    inline_reused: set[str] = set()
    loaded: set[str] = set()  # realized, or read by an extern lowered already: readers load it
    dims: dict[str, dict] = {}  # node -> {key of its body: the output dims it varies along}
    heavy: dict[str, bool] = {}  # host code whose inlined body uses a heavy op
    for node in ir.nodes:
        if node.op in LOWERED_NORMS:  # its statistics stored, its normalize inlined
            bodies[node.name], top[node.name] = _norm_body(node, fx[node.name], ir)
            realized.add(node.name)
            loads = sum(1 for k in bodies[node.name] if k[0] == "load")
            if fx_reused(fx[node.name]) and loads > REALIZE_READS_ON_REUSE:
                loaded.add(node.name)  # should_realize_on_reuse: stored, its readers load it
            continue
        if node_kind(node) is not Kind.POINTWISE or node.scatter or node.layout_of or \
                node.bias_of or node.scatter_copy:
            realized.add(node.name)  # a layout copy: copy_input freezes its layout; a
            # convolution's bias add exists only where Inductor stores it (layout.py)
            loaded.add(node.name)
            if node_kind(node) in (Kind.EXTERN, Kind.TEMPLATE):
                loaded |= {ir.buffers[b].producer for b in node.reads}
            continue
        keys, value = _body(node, fx, ir, bodies, top, loaded, interned, dims)
        bodies[node.name], top[node.name] = keys, value
        ops = len(keys)
        loads = sum(1 for k in keys if isinstance(k, tuple) and k[0] == "load")
        reused = len(users.get(node.name, ())) > 1 or _repeated(fx[node.name])
        output = any(ir.buffers[b].is_output for b in node.writes)
        if ops > REALIZE_OPCOUNT and (loads > 1 or reused or broadcast(fx[node.name])) or \
                loads > REALIZE_ACC_READS:
            large[node.name] = ops
        heavy[node.name] = on_host(fx[node.name]) and (node.op in HEAVY_ON_CPU or any(
            heavy.get(ir.buffers[b].producer or "") and ir.buffers[b].producer not in loaded
            for b in node.reads))
        if loads == 0 and not output and (node.name in large or ops > REALIZE_ALWAYS):
            # realized for its size, but a ComputedBuffer that reads nothing is inlined into
            # each reader all the same (ir.py `ComputedBuffer.make_loader`: num_reads() == 0):
            # its readers compute it again and its own store is dead (dead_node_elimination)
            large.pop(node.name, None)
            if reused:
                inline_reused.add(node.name)
            continue
        if output or node.name in large or ops > REALIZE_ALWAYS or (
                fx_reused(fx[node.name]) and loads > REALIZE_READS_ON_REUSE) or (
                hinted_for_reader(fx[node.name]) and _nontrivial_loads(keys, ir) > 1) or (
                heavy[node.name] and (fx_reused(fx[node.name]) or broadcast(fx[node.name]))):
            realized.add(node.name)
            loaded.add(node.name)
        elif reused:
            inline_reused.add(node.name)
    return large, inline_reused, realized


def _norm_body(node: SchedulerNode, fx_node: torch.fx.Node,
               ir: GraphIR) -> tuple[frozenset, object]:
    """The body a reader of a GroupNorm inlines. Inductor decomposes native_group_norm into
    its statistics (var_mean, stored: the norm's own launch) and a pointwise normalize, the
    input at its own index less the mean, times rsqrt(var + eps), times the weight, plus
    the bias, that its readers compute as they would any pointwise op: 5 loads (input, mean,
    the variance's sum of squares, weight, bias) and 12 operations (inner_fn_opcount 17).
    Unrolled (`Reduction.create`: fewer terms than unroll_reductions_threshold), its var_mean
    is pointwise code: the mean, reused, is stored, and the variance (a load, a subtraction
    and a square per term, their sum, a division) is computed in each reader: over 4 terms,
    8 loads and 20 operations (28). A nearest upsample of its ReLU then passes
    realize_opcount_threshold and is stored (graph.py `run_node`: has_exceeded_max_reads)."""
    src, terms = ir.base_of.get(fx_node.args[0].name), node.rnumel
    keys: set = {("load", node.name, "mean"), ("load", src, "own")}
    if node.unrolled:
        keys |= {("load", src, ("term", i)) for i in range(terms)}
        variance = 2 * terms + (terms - 1) + 2  # sub, square per term; sum; count; divide
    else:
        keys.add(("load", node.name, "m2"))
        variance = 5  # the sum of squares over the count (Inductor: 5 operations)
    keys |= {("load", ir.base_of.get(a.name)) for a in fx_node.args[1:3]
             if isinstance(a, torch.fx.Node)}  # weight, bias
    affine = sum(1 for a in fx_node.args[1:3] if isinstance(a, torch.fx.Node))
    normalize = 2 + 1 + 1 + 1  # eps and its add, rsqrt; less the mean, times the rstd
    keys |= {(node.name, i) for i in range(variance + normalize + affine - 1)}
    value = (node.name, "value")
    return frozenset(keys | {value}), value


# `should_realize_on_reuse`'s heavy ops: CPU code using one is stored when reused -- by
# several readers, or broadcast into a larger op (`expand`'s mark_reuse)
HEAVY_ON_CPU = frozenset({"exp", "log", "log10", "log1p", "log2", "sigmoid", "tanh"})

# Readers whose lowering wants its inputs stored (torch/_inductor/lowering.py
# `needs_realized_inputs`: these, and the ops Inductor runs as fallbacks)
NEEDS_REALIZED_INPUTS = frozenset(getattr(torch.ops.aten, name) for name in (
    "as_strided", "as_strided_copy", "avg_pool2d", "avg_pool2d_backward", "bmm", "convolution",
    "convolution_backward", "max_pool2d_with_indices", "max_pool3d_with_indices",
    "max_pool2d_with_indices_backward", "mm", "upsample_nearest2d", "_upsample_nearest_exact2d",
    "_int_mm"))
# Of those, the externs whose input `run_node` also gives a fixed layout (`need_fixed_layout`,
# with layout optimization on: a convolution's input is not among them): a view of a value
# its hint left unstored is copied as the view (rules._realized_shape)
FIXED_LAYOUT_READERS = frozenset({"mm", "_int_mm", "convolution_backward"})


def hinted_for_reader(fx_node: torch.fx.Node) -> bool:
    """Does `GraphLowering.run_node` call `realize_hint()` on this value as it lowers it:
    more than one FX user, one of them an op in `needs_realized_inputs` (a convolution, an
    mm, a pool)? `StorageBox.realize_hint` then stores pointwise code loading from more than
    one place (`nontrivial_read_count > 1`), there and then: the readers lowered before that
    op load it too (a biased convolution's output -- the call's result plus the bias --
    read by the next convolution and by a residual add: the add loads one value, not two)."""
    users = set(data_users(fx_node))
    return len(users) > 1 and isinstance(fx_node.meta.get("val"), torch.Tensor) and any(
        getattr(u.target, "overloadpacket", None) in NEEDS_REALIZED_INPUTS for u in users)


def _nontrivial_loads(keys, ir: GraphIR) -> int:
    """Loads of a body at a non-constant index (OpCounter's `nontrivial_read_count`): a
    one-element buffer is loaded at index 0."""
    count = 0
    for key in keys:
        if isinstance(key, tuple) and key and key[0] == "load":
            buf = ir.buffers.get(key[1]) if isinstance(key[1], str) else None
            count += buf is None or math.prod(buf.shape) != 1
    return count


# Ops Inductor decomposes before lowering (torch/_inductor/decomposition.py
# inductor_decompositions, torch/_refs/nn/functional) into a body that reads their input more
# than once: the decomposed graph gives that input several FX users, so `run_node` marks it
# reused (`mark_reuse(len(n.users))`) as if several ops read it. elu: where(a > 0, scale * a,
# ... expm1(a * input_scale)); leaky_relu: where(a > 0, a, a * slope); gelu: a * 0.5 * (1 +
# erf(a * kAlpha)).
READ_TWICE_BY_DECOMPOSITION = (torch.ops.aten.elu.default, torch.ops.aten.leaky_relu.default,
                               torch.ops.aten.gelu.default)


def data_users(fx_node: torch.fx.Node) -> list[torch.fx.Node]:
    """The FX users that read the value, not only its sizes: Inductor decomposes
    `full_like(x, v)` (and zeros_like, ones_like, rand_like: decomposition.py `full_like`)
    into `full(x.shape, v)` before lowering, so in the graph `run_node` lowers x has no such
    user, and `mark_reuse(len(n.users))` does not count it. Dead users (`ir.dead_nodes`) are
    no readers either."""
    return [u for u in live_users(fx_node) if _op_name(u) not in LIKE_FACTORIES]


def fx_reused(fx_node: torch.fx.Node) -> bool:
    """Does Inductor's `run_node` call mark_reuse on this value: more than one FX user of the
    node itself, or of a view of it (a view's mark_reuse reaches the value's storage)? A
    value read only through a split (whose result is a list, not a tensor) and its pieces
    is never marked reused, however many pieces are read."""
    users = data_users(fx_node)
    if len(users) > 1 and isinstance(fx_node.meta.get("val"), torch.Tensor):
        return True
    if any(u.target in READ_TWICE_BY_DECOMPOSITION for u in users):
        return True
    return _repeated(fx_node) or any(_fx_view(u) and fx_reused(u) for u in users)


def _repeated(fx_node: torch.fx.Node) -> bool:
    """Is the value tiled by a repeat (directly or through views)? Inductor's repeat lowering
    marks its input reused by the repeat factor (`x.mark_reuse(new numel // old numel)`), so
    a body over realize_opcount_threshold or loading more than realize_reads_threshold
    values is stored (`should_realize_on_reuse`): DINOv3's rotary angles. A repeat that only
    broadcasts size-1 dims is an expand (`clone(expand(x))`), no reuse."""
    for user in live_users(fx_node):
        if _fx_view(user) and _repeated(user):
            return True
        if user.target is not torch.ops.aten.repeat.default:
            continue
        val, repeats = fx_node.meta.get("val"), list(user.args[1])
        if not isinstance(val, torch.Tensor):
            continue
        sizes = [1] * (len(repeats) - val.dim()) + list(val.shape)
        if not all(r == 1 or s == 1 for r, s in zip(repeats, sizes, strict=True)):
            return True
    return False


def broadcast(fx_node: torch.fx.Node) -> bool:
    """Is the value broadcast to more elements than it has (directly or through views): by
    an expand, or as an operand of a pointwise op whose result is larger? Inductor's `expand`
    lowering (lowering.py; `broadcast_tensors` calls it for a pointwise op's operands, and
    `copy` for its source) marks its input reused by the broadcast factor, not as graph
    fanout (`mark_reuse(..., graph_reuse=False)`): `should_realize_on_reuse` then stores it
    only for a body over realize_opcount_threshold (`has_large_inner_fn`), never for its
    loads. A padding mask built from iotas (~33 operations) broadcast over the heads of
    the attention scores it is added to is stored, not computed in the softmax's kernel."""
    val = fx_node.meta.get("val")
    if not isinstance(val, torch.Tensor):
        return False
    for user in live_users(fx_node):
        out = user.meta.get("val")
        larger = isinstance(out, torch.Tensor) and out.numel() > val.numel()
        if user.target is torch.ops.aten.expand.default:
            if larger or broadcast(user):
                return True
        elif _fx_view(user):
            if broadcast(user):
                return True
        elif larger and user.op == "call_function" and _broadcasts_operand(user, fx_node):
            return True
    return False


def _broadcasts_operand(user: torch.fx.Node, arg: torch.fx.Node) -> bool:
    """Does the lowering of `user` broadcast its operand `arg` to its result's shape: a
    pointwise op's operand (`broadcast_tensors`), a copy's source, an index tensor of a
    gather (`index_impl_helper` broadcasts the indices)? Not an indexed op's data."""
    name = getattr(getattr(user.target, "overloadpacket", None), "__name__", "")
    if name == "index":
        return len(user.args) > 1 and any(a is arg for a in user.args[1] or ())
    return classify(user.target) is Kind.POINTWISE and name not in INDEXED | SCATTER


def _fx_view(fx_node: torch.fx.Node) -> bool:
    return fx_node.op == "call_function" and classify(fx_node.target) is Kind.VIEW


def _body(node: SchedulerNode, fx: dict[str, torch.fx.Node], ir: GraphIR, bodies: dict,
          top: dict, loaded: set, interned: dict,
          dims: dict | None = None) -> tuple[frozenset, object]:
    """(the keys of node's body, the key of its value); `fx`: the graph's FX nodes by name.
    `dims[node]` gets, for the keys it can tell, the output dims each one varies along
    (`_inlined_at`: a producer inlined at a view shares what does not move)."""
    fx_node = fx[node.name]
    varies: dict = {} if dims is None else dims.setdefault(node.name, {})
    out = fx_node.meta.get("val")
    out_shape = tuple(size_hint(d) for d in out.shape) if isinstance(out, torch.Tensor) \
        else None
    if node.unrolled:  # its body runs over its input's dims: the terms' index and the rows'
        out_shape = _reduced_input_shape(fx_node) or out_shape
    op = node.op
    if op in FACTORIES:  # a constant fill: one operation, shared by every equal fill
        fill = ("const", FACTORIES[op](fx_node.args), _out_dtype(fx_node))
        return frozenset({fill}), fill
    if op == "arange":  # an iota (over its own index: two aranges are two iotas)
        keys, value = _arange_body(node.name, fx_node)
        if out_shape is not None and len(out_shape) == 1 and out_shape[0] > 1:
            varies.update({k: frozenset({0}) for k in keys if k[0] != "const"})
        return keys, value
    # a cat's, a gather's or a reduction's dim is no constant of the body
    scalars = not node.indexed and node.kind is not Kind.REDUCTION and op != "cat"
    keys: set = set()
    args: list = []
    operands: dict[int, torch.fx.Node] = {}  # position in args -> the FX tensor it came from
    promoted = _promoted_dtype(op, fx_node)
    const_dtype = promoted or _out_dtype(fx_node)  # 1 and 1.0 are two constants to the CSE
    pieces = _cat_piece_views(fx_node, ir) if op == "cat" else {}
    in_piece = _cat_piece_numbers(fx_node) if op == "cat" and node.indexed else {}
    gathered = _gathered_dims(fx_node, out_shape) if op == "index" else None
    for arg in _flat_args(fx_node):
        if isinstance(arg, torch.fx.Node):
            buf = ir.base_of.get(arg.name)
            if node.access.get(buf) == {SHAPE_ONLY}:
                continue  # only its sizes are taken: nothing loaded, nothing inlined
            producer = ir.buffers[buf].producer if buf in ir.buffers else None
            piece = pieces.get(arg.name)
            if producer is not None and producer not in loaded and producer in bodies:
                view = _view_of(node, buf, arg) if piece is None else piece
                body = bodies[producer]
                if op == "slice_scatter" and arg is fx_node.args[1]:
                    body = _placed_back(body, scatter_placement(fx_node))
                if gathered is not None and arg is fx_node.args[0] and view is None:
                    at = _gathered_at(arg, fx.get(producer), (dims or {}).get(producer, {}),
                                      gathered)
                else:
                    at = _inlined_at(arg, fx.get(producer), out_shape,
                                     (dims or {}).get(producer, {}), view, piece is None)
                if piece is None and arg.name in in_piece:
                    at = _in_cat_piece(at, in_piece[arg.name])
                for k in body:
                    moved, along = _apart(at(k), varies)
                    keys.add(moved)
                    if along is not None:
                        varies[moved] = along
                operands[len(args)] = arg
                args.append(_apart(at(top[producer]), varies)[0])
            elif buf in ir.buffers:
                key = ("load", buf, frozenset(_own_hows(node, buf, arg)))
                key = key if piece is None else (*key, piece)
                keys.add(key)
                if gathered is not None and arg is fx_node.args[0]:
                    varies[key] = _through(gathered, _varies(arg, tuple(arg.meta["val"].shape)))
                elif piece is None and out_shape is not None:
                    varies[key] = _varies(arg, out_shape)
                key = _peeled_bias(fx.get(producer or ""), key, keys, ir, interned)
                operands[len(args)] = arg
                args.append(key)
        elif scalars and isinstance(arg, numbers.Number) and not isinstance(arg, bool):
            keys.add(("const", arg, const_dtype))
            args.append(("const", arg, const_dtype))
    if op in IDENTITY or (op == "_to_copy" and not _casts(fx_node)) or (
            op == "cat" and not node.indexed and args):  # one piece: Inductor's clone of it
        return frozenset(keys), args[0] if args else (op, node.name)
    if op == "clamp" and _given(fx_node.args[1:3]) + _given(fx_node.kwargs.values()) == 2:
        keys.add(("clamp_min", _intern(interned, (op, tuple(args)))))  # clamp_min, clamp_max
    for at, arg in operands.items():  # type promotion: an operand of another dtype converted
        if promoted is not None and arg in _promoting(op, fx_node) and \
                _sample(arg).dtype != promoted:
            along = varies.get(args[at])
            args[at] = _intern(interned, ("to_dtype", args[at], promoted))
            if along is not None:
                varies[args[at]] = along
            keys.add(args[at])
    value = interned.setdefault((op, tuple(args)), len(interned))  # equal expressions: one key
    along = [varies.get(a, frozenset() if isinstance(a, tuple) and a[0] == "const" else None)
             for a in args]
    if None not in along and op not in GATHERS and op != "cat" and not node.unrolled:
        varies[value] = frozenset().union(*along)
    elif gathered is not None and None not in gathered.values():
        varies[value] = frozenset().union(*gathered.values())  # x[i0, i1] moves where they do
    if op == "cat" and len(set(args)) == 1:
        return frozenset(keys), value  # cat([x, x]): Inductor reads x at two offsets, no ops
    if op in GATHERS:  # its input's body computed at the index it loads: no op of its own
        return frozenset(keys), value
    keys.add(value)
    if op == "grid_sampler_2d":  # decomposed: a masked load per corner, their weights
        corners, ops = GRID_SAMPLER_BODY.get(_grid_mode(fx_node), GRID_SAMPLER_BODY[0])
        keys |= {("load", value, i) for i in range(corners - 1)}
        keys |= {(value, i) for i in range(ops)}
    if op == "constant_pad_nd":  # `value` is the masked load; its mask is computed
        keys |= _pad_mask(value, fx_node)
    if op == "cat":  # bounds, compares, masked loads, wheres (`cat_ops`), the first bound 0
        keys |= {("const", 0, const_dtype)}
        keys |= {(value, i) for i in range(cat_ops(len(args)) - 2)}
    if node.unrolled:  # the terms' loads, then a combine per term after the first
        arg = _arg_reduction(op, fx_node)
        extra = (node.rnumel - 1) * _combine_ops(arg, fx_node) - 1  # `value` is the last
        if arg:
            extra += 1  # the index of the first term, a constant 0
        shared = _along_rows(keys, varies, fx_node, out_shape)
        keys = _unrolled_terms(keys - {value}, node.rnumel, shared) | {value}
        _as_output_dims(varies, shared, fx_node)
        keys |= {(value, i) for i in range(extra)}
        keys |= {(value, "to_dtype", i, j) for i in range(node.rnumel)
                 for j in range(_any_term_casts(fx_node) + _sum_term_casts(fx_node))}
    return frozenset(keys), value


def _sum_term_casts(fx_node: torch.fx.Node) -> int:
    """Conversions of each term of an unrolled sum or product (lowering.py `sum_`, `prod`:
    the terms of a bool or integer input are summed as int64, those of any input in the
    `dtype` asked for; `_make_reduction_inner` converts the input, `to_dtype`, unless it is
    of that dtype already). Counting the labels a cross-entropy does not ignore (`ne(labels,
    -100).sum()`) over 6 labels is 6 loads, 6 compares, 6 conversions and 5 adds."""
    packet = getattr(fx_node.target, "overloadpacket", None)
    if packet not in (torch.ops.aten.sum, torch.ops.aten.prod) or not fx_node.args or \
            not isinstance(fx_node.args[0], torch.fx.Node):
        return 0
    src = fx_node.args[0].meta.get("val")
    if not isinstance(src, torch.Tensor):
        return 0
    dtype = fx_node.kwargs.get("dtype")
    if dtype is None and not (src.dtype.is_floating_point or src.dtype.is_complex):
        dtype = torch.int64
    return int(dtype is not None and dtype != src.dtype)


def _any_term_casts(fx_node: torch.fx.Node) -> int:
    """Conversions of each term of an unrolled `any` (lowering.py `reduce_any`): a
    non-bool term is converted to bool (`to_dtype`); a bool term of `aten.any.dim` goes
    through int64 and back (`.to(tl.int64)`, `!= 0` in Inductor's kernel: the op counter
    counts two `to_dtype`s), one of `aten.any.dims` (an amax of bools, decomposed) none.
    Over 6 terms of a masked-row test (`_safe_softmax`: eq, logical_not) that is 36
    operations, over realize_opcount_threshold: Inductor stores it (has_exceeded_max_reads:
    has_large_inner_fn) in a launch of its own."""
    target = str(fx_node.target)
    if not target.startswith("aten.any."):
        return 0
    src = fx_node.args[0].meta.get("val") if fx_node.args and isinstance(
        fx_node.args[0], torch.fx.Node) else None
    if not isinstance(src, torch.Tensor):
        return 0
    if src.dtype is not torch.bool:
        return 1
    return 2 if target == "aten.any.dim" else 0


def _pad_mask(value: object, fx_node: torch.fx.Node) -> set:
    """The mask of Inductor's `constant_pad_nd` lowering (lowering.py): per padded side of
    a dim, the dim's index and the bound as index expressions and their compare
    (`range_mask_low`: index >= 0, `range_mask_high`: index < size), the masks and-ed
    together, around the masked load (`ops.masked`: `value`). A pad of one dim's end only
    (`_pad_as_cat`: a cat with a fill) goes through the cat's lowering: left as it was."""
    src = fx_node.args[0].meta.get("val") if fx_node.args else None
    padding = list(fx_node.args[1]) if len(fx_node.args) > 1 else []
    pairs = list(zip(padding[::2], padding[1::2], strict=False))
    padded = [(lo, hi) for lo, hi in pairs if lo or hi]
    if not isinstance(src, torch.Tensor) or not padded or (
            len(padded) == 1 and padded[0][0] == 0 and padded[0][1] > 0):
        return set()
    keys: set = set()
    masks = 0
    for back, (low, high) in enumerate(pairs):  # the last dim's pair first
        size = src.shape[-1 - back]
        if low:
            keys |= {(value, "index", back), ("index_expr", 0), (value, "ge", back)}
            masks += 1
        if high:
            keys |= {(value, "index", back), ("index_expr", int(size)), (value, "lt", back)}
            masks += 1
    return keys | {(value, "and", i) for i in range(masks - 1)}


def _arange_body(name: str, fx_node: torch.fx.Node) -> tuple[frozenset, object]:
    """An integer arange is one iota (prims.iota takes its start and step). A floating one is
    decomposed (torch._refs.arange, in Inductor's decompositions): an int64 iota from 0,
    times the step, plus the start, converted to the dtype: 6 operations, the two int64
    constants shared with any other such arange in the body (Inductor counts 6 for
    arange(0., 4.), 11 with the nearest upsample's `+ 0.0`, `* 0.5` and cast to int64)."""
    iota = ("iota", name)
    dtype = _out_dtype(fx_node)
    if dtype is None or not dtype.is_floating_point:
        return frozenset({iota}), iota
    args = [a for a in fx_node.args if isinstance(a, numbers.Number)]
    start, step = (args[0], args[2]) if len(args) > 2 else (0 if len(args) < 2 else args[0], 1)
    # keys of their own: Inductor's count shares them with no later constant of the body
    step_key, start_key = ("const", step, torch.int64), ("const", start, torch.int64)
    value = (name, "to_dtype")
    keys = {iota, step_key, (name, "mul", step_key), start_key, (name, "add", start_key), value}
    return frozenset(keys), value


ARG_REDUCTIONS = {"argmax", "argmin"}
VALUE_AND_INDEX = {"aten.max.dim", "aten.min.dim"}  # (values, indices)


def _arg_reduction(op: str, fx_node: torch.fx.Node) -> bool:
    """Is this reduction folded as an argmax/argmin (a value and its index per term)? An
    argmax, and a max or min over a dim (`aten.max.dim`): on a Triton device Inductor lowers
    it, for a non-bool input, as argmax_with_value (or argmax_value when only the values are
    read), whose combine is argmax's even for the values alone (lowering.py `reduce_max`)."""
    if op in ARG_REDUCTIONS:
        return True
    if str(fx_node.target) not in VALUE_AND_INDEX:
        return False
    src = fx_node.args[0].meta.get("val") if fx_node.args else None
    return isinstance(src, torch.Tensor) and src.dtype is not torch.bool


# Ops Inductor lowers with type promotion (lowering.py `transform_args`): an operand of
# another dtype than the promoted one is converted first, one `to_dtype` more in the body
# (a float index minus its int64 floor, a bool mask times a float).
PROMOTING = {"add", "sub", "rsub", "mul", "div", "maximum", "minimum", "pow",
             "eq", "ne", "lt", "le", "gt", "ge", "where"}


def _promoting(op: str, fx_node: torch.fx.Node) -> list:
    """The operands Inductor promotes to one dtype: both of a binary op, a `where`'s two
    values (its condition stays bool); none for an op lowered without type promotion."""
    values = list(fx_node.args[1:3] if op == "where" else fx_node.args[:2])
    return values if op in PROMOTING and len(values) == 2 else []


def _promoted_dtype(op: str, fx_node: torch.fx.Node) -> torch.dtype | None:
    """The dtype Inductor computes a promoting op in (`get_promoted_dtype`), else None."""
    samples = [_sample(v) for v in _promoting(op, fx_node)]
    if not samples or any(s is None for s in samples):
        return None
    dtype = torch.result_type(*samples)
    if op == "div" and not (dtype.is_floating_point or dtype.is_complex) and \
            fx_node.kwargs.get("rounding_mode") is None:
        dtype = torch.get_default_dtype()  # true division of integers: INT_TO_FLOAT
    return dtype


def _out_dtype(fx_node: torch.fx.Node) -> torch.dtype | None:
    val = fx_node.meta.get("val")
    return val.dtype if isinstance(val, torch.Tensor) else None


def _sample(value: object) -> torch.Tensor | numbers.Number | None:
    """A stand-in of an operand for `torch.result_type`: a number as is, a tensor as an empty
    one of its dtype and dimension category (0-d or not), None for anything else."""
    if isinstance(value, torch.fx.Node):
        val = value.meta.get("val")
        if not isinstance(val, torch.Tensor):
            return None
        return torch.empty([0] * min(val.dim(), 1), dtype=val.dtype)
    return value if isinstance(value, numbers.Number) else None


def _peeled_bias(producer: torch.fx.Node | None, key: tuple, keys: set, ir: GraphIR,
                 interned: dict) -> object:
    """The value a reader of a convolution's output computes. Off the CPU, Inductor's
    convolution lowering (kernel/conv.py) peels the bias off the extern call: the output
    is a pointwise `add` of the call's result and the bias, inlined into its readers -- two
    loads and an op in each reader's body (a sum of two biased convolutions and a residual
    loads six values: stored once several ops read it, `should_realize_on_reuse`). So is the
    bias of an addmm Inductor unfuses (`_unfused_addmm`)."""
    if producer is not None and hinted_for_reader(producer) and has_peeled_bias(producer, ir):
        return key  # the call's result plus the bias: stored as it was lowered, one load
    if _unfused_addmm(producer):
        bias_arg = producer.args[0]
    elif producer is None or producer.target is not torch.ops.aten.convolution.default or \
            len(producer.args) < 3 or not isinstance(producer.args[2], torch.fx.Node):
        return key
    else:
        bias_arg = producer.args[2]
    bias = ("load", ir.base_of.get(bias_arg.name), frozenset({"bias"}))
    value = _intern(interned, ("add", key, bias))
    keys |= {bias, value}
    return value


def has_peeled_bias(producer: torch.fx.Node, ir: GraphIR) -> bool:
    """Is `producer` a convolution (or an unfused addmm) whose output Inductor's lowering
    makes an add of the call's result and a bias of more than one element (loaded at a
    non-constant index)?"""
    if _unfused_addmm(producer):
        bias = producer.args[0]
    elif producer.target is torch.ops.aten.convolution.default and len(producer.args) > 2:
        bias = producer.args[2]
    else:
        return False
    val = getattr(bias, "meta", {}).get("val")
    return isinstance(val, torch.Tensor) and val.numel() != 1


def _grid_mode(fx_node: torch.fx.Node) -> int:
    """grid_sampler_2d's interpolation_mode (0 bilinear, 1 nearest, 2 bicubic)."""
    mode = fx_node.args[2] if len(fx_node.args) > 2 else fx_node.kwargs.get(
        "interpolation_mode", 0)
    return mode if isinstance(mode, int) else 0


def _cat_piece_views(fx_node: torch.fx.Node, ir: GraphIR) -> dict[str, tuple]:
    """{piece: its view} for the pieces of a cat that are other views of a buffer another
    piece views too (the two coordinates of a point, `x[..., 0]` and `x[..., 1]`): Inductor's
    pointwise cat loads each piece at its own index (a masked load per piece), two distinct
    loads of one buffer (`num_reads`), and computes an inlined producer at each."""
    views: dict[str, tuple] = {}
    for arg in _flat_args(fx_node):
        val = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None
        if isinstance(val, torch.Tensor) and ir.base_of.get(arg.name) != arg.name:
            views[arg.name] = (ir.base_of.get(arg.name), tuple(val.shape), tuple(val.stride()),
                               val.storage_offset())
    bases: dict[object, set] = {}
    for view in views.values():
        bases.setdefault(view[0], set()).add(view)
    return {name: ("piece", view) for name, view in views.items() if len(bases[view[0]]) > 1}


def _cat_piece_numbers(fx_node: torch.fx.Node) -> dict[str, tuple[int, int]]:
    """{piece: (the cat's dim, its number)} for the pieces of a cat with two pieces or more
    that are not one value repeated (`cat([x, x])` reads x at two offsets, no ops)."""
    args = [a for a in _flat_args(fx_node) if isinstance(a, torch.fx.Node)]
    out = fx_node.meta.get("val")
    if len({a.name for a in args}) < 2 or not isinstance(out, torch.Tensor):
        return {}
    dim = fx_node.args[1] if len(fx_node.args) > 1 else fx_node.kwargs.get("dim", 0)
    dim = dim % out.dim() if out.dim() else 0
    return {a.name: (dim, i) for i, a in enumerate(args)}


def _in_cat_piece(at, placement: tuple[int, int]):
    """A piece's inlined body as Inductor's pointwise cat computes it: in a masked block of
    its own, loading at the cat's index minus the piece's start (`pointwise_cat`). A key that
    varies along the cat's dim is another expression in each piece (a's `x[i]`, b's
    `x[i - 4]`: a rotary's two halves load q twice, and its cos and sin twice); one that
    does not (the position a rotary's angle is computed from) is shared by the pieces."""
    dim, number = placement

    def moved(key):
        inner, along = at(key)
        if along is not None and dim not in along:
            return inner, along
        if isinstance(inner, tuple) and inner and inner[0] == "const":
            return inner, along
        return _at(inner, ("cat piece", dim, number)), along
    return moved


def _unfused_addmm(producer: torch.fx.Node | None) -> bool:
    """An addmm whose readers are all pointwise ops: on a GPU-like device Inductor's
    post-grad pass `unfuse_bias_add_to_pointwise` (fx_passes/post_grad.py, its check
    `should_prefer_unfused_addmm`) rewrites it as an mm and a pointwise `bias + mm`, inlined
    into the readers: one load and one op more in each reader's body. A bf16/fp16 bias keeps
    the addmm fused (`keep_addmm_fused_for_half_dtypes`)."""
    if producer is None or producer.target is not torch.ops.aten.addmm.default or \
            not isinstance(producer.args[0], torch.fx.Node) or outer_product(producer):
        return False  # an outer product is decomposed before: pointwise, no addmm left
    bias = producer.args[0].meta.get("val")
    if not isinstance(bias, torch.Tensor) or bias.dtype in (torch.bfloat16, torch.float16):
        return False
    users = live_users(producer)
    return bool(users) and all(is_pointwise_use(u) for u in users)


def _given(bounds) -> int:
    """How many of a clamp's bounds are given: Inductor's decomposition makes each one an op
    (clamp_min, then clamp_max)."""
    return sum(1 for b in bounds if b is not None)


def _intern(interned: dict, expression: tuple) -> int:
    return interned.setdefault(expression, len(interned))


def _combine_ops(arg: bool, fx_node: torch.fx.Node) -> int:
    """Operations that fold one more term into an unrolled reduction: one for a sum or a max;
    for argmax/argmin the value and its index (compare, equal, a tie goes to the lower index:
    the term's index constant, less-than, and, or, two wheres), and for floating values two
    NaN tests and the three ops that let a NaN win (ir.py, `get_reduction_combine_fn`)."""
    if not arg:
        return 1
    src = fx_node.args[0].meta.get("val") if fx_node.args else None
    floating = isinstance(src, torch.Tensor) and src.dtype.is_floating_point
    return 8 + (6 if floating else 0)


def _reduced_input_shape(fx_node: torch.fx.Node) -> tuple[int, ...] | None:
    src = fx_node.args[0].meta.get("val") if fx_node.args and isinstance(
        fx_node.args[0], torch.fx.Node) else None
    return tuple(size_hint(d) for d in src.shape) if isinstance(src, torch.Tensor) else None


def _reduced_dims(fx_node: torch.fx.Node) -> set[int]:
    """The input dims a reduction over `dim` (one dim, as any.dim and max.dim take it, or a
    list) folds; empty when unknown or over every dim."""
    src = fx_node.args[0].meta.get("val") if fx_node.args and isinstance(
        fx_node.args[0], torch.fx.Node) else None
    dims = fx_node.args[1] if len(fx_node.args) > 1 else fx_node.kwargs.get("dim")
    if isinstance(dims, int) and not isinstance(dims, bool):
        dims = [dims]
    if not isinstance(src, torch.Tensor) or src.dim() == 0 or \
            not isinstance(dims, (list, tuple)) or not dims:
        return set()  # (a 0-dim input "reduced" over dim 0 has no rows)
    return {int(d) % src.dim() for d in dims}


def _along_rows(keys, varies: dict, fx_node: torch.fx.Node, loop_shape) -> set:
    """The keys of an unrolled reduction's body that do not move along the reduced dims (a
    row's max and sum, read by each term of a gather of the row's softmax; a padding
    mask's length of the row, loaded at the batch index by each term of an `any` over the
    positions): the same load at every term, shared by Inductor's CSE. The keys' dims are
    the input's (`loop_shape`: the body runs over the input's dims), whether the reduction
    keeps its dims or drops them."""
    src = fx_node.args[0].meta.get("val") if fx_node.args and isinstance(
        fx_node.args[0], torch.fx.Node) else None
    reduced = _reduced_dims(fx_node)
    if loop_shape is None or not isinstance(src, torch.Tensor) or \
            src.dim() != len(loop_shape) or not reduced:
        return set()
    return {k for k in keys if varies.get(k) is not None and not varies[k] & reduced}


def _as_output_dims(varies: dict, shared: set, fx_node: torch.fx.Node) -> None:
    """The dims of the keys shared by every term, renumbered as the reduction's output's (a
    reduction that drops its dims shifts the dims after them down); a reader inlining the
    body places them by the output's dims. Other keys' dims are forgotten."""
    src, out = _reduced_input_shape(fx_node), fx_node.meta.get("val")
    reduced = _reduced_dims(fx_node)
    kept = isinstance(out, torch.Tensor) and src is not None and out.dim() == len(src)
    renumber = {d: d if kept else d - sum(1 for r in reduced if r < d)
                for d in range(len(src or ()))}
    for key in list(varies):
        along = varies[key]
        if key not in shared or along is None:
            del varies[key]
        else:
            varies[key] = frozenset(renumber[d] for d in along)


def _unrolled_terms(keys: set, terms: int, shared: set = frozenset()) -> set:
    """An unrolled reduction (`Reduction._unroll_reduction_fn`) calls its body once per term,
    at the term's index: every load of its body is a distinct load per term (a softmax over
    4 experts loads its row 4 times), and Inductor's `num_reads` counts each
    (OpCounterCSE.load: one read per distinct name and index); so is every operation on
    them or on the index (a causal mask's compare of positions): CSE shares only the
    constants between terms. A max over 6 masked scores is ~50 operations, not ~10: a large
    body that Inductor realizes (has_exceeded_max_reads), and its readers load it.
    `shared`: keys that do not move along the reduced dims, the same at every term."""
    consts = {k for k in keys if isinstance(k, tuple) and k and k[0] == "const"}
    same = consts | (set(shared) & keys)
    return same | {_at(k, ("term", i)) for k in keys - same for i in range(terms)}


def _view_of(node: SchedulerNode, buf: str, arg: torch.fx.Node) -> object:
    """None when `node` reads `buf` whole, at its own index; else the view it reads (a slice,
    a shift): an inlined producer is then computed at other indices, and Inductor's CSE
    shares none of its operations with another read of it (sin of x[0::2], cos of
    x[1::2] compute x's body twice). A node reading `buf` at several views (a scan's step,
    `x[0::2] * x[1::2]`) reads it at the view of `arg`, the operand at hand: a load, and a
    producer's body, per view (`Pointwise.inner_fn` called at each index)."""
    hows = _own_hows(node, buf, arg)
    views = [h for h in hows if h not in ("full", SHAPE_ONLY)
             and not (isinstance(h, tuple) and h[0] == "indexed")]  # a size taken loads nothing
    return frozenset(views) if views else None


def _own_hows(node: SchedulerNode, buf: str, arg: torch.fx.Node) -> set:
    """How `node` reads `buf` through `arg`: the view of `arg` when the node reads the buffer
    at several (each is its own load), else every way it reads it."""
    hows = node.access.get(buf, {"full"})
    val = arg.meta.get("val")
    if len(hows) > 1 and isinstance(val, torch.Tensor):
        view = (tuple(size_hint(d) for d in val.shape),
                tuple(size_hint(st) for st in val.stride()), size_hint(val.storage_offset()))
        if view in hows:
            return {view}
    return hows


def _varies(arg: torch.fx.Node, out_shape: tuple[int, ...]) -> frozenset | None:
    """The output dims along which a direct load of `arg` (broadcast to the output, aligned
    from the right) moves: those of a size above 1 and a stride that is not 0."""
    val = arg.meta.get("val")
    if not isinstance(val, torch.Tensor) or val.dim() > len(out_shape):
        return None
    lead = len(out_shape) - val.dim()
    return frozenset(lead + j for j, (n, st) in enumerate(zip(val.shape, val.stride(),
                                                              strict=True))
                     if size_hint(n) > 1 and size_hint(st) != 0)


def _apart(placed: tuple, varies: dict) -> tuple:
    """(key, dims) of a producer's key inlined at a read whose dims are known: another key
    when the body holds it already along other dims (`x[:, None] > x[None, :]` of an iota:
    the iota at the row and the iota at the column are two expressions to Inductor's CSE,
    not one)."""
    key, along = placed
    if along is not None and varies.get(key, along) != along:
        return _at(key, ("dims", along)), along
    return key, along


def _gathered_dims(fx_node: torch.fx.Node, out_shape) -> dict | None:
    """{source dim: the output dims its index tensor moves along} of `x[i0, i1, ...]`
    (aten.index.Tensor) indexing every dim of x: the output is the index tensors broadcast
    together, and x is loaded at (i0, i1, ...) there -- a value of x's body that moves along
    x's dim d moves where i_d does, not where x's dim d would broadcast to (a padding mask
    `mask[batch, kv]` gathered into (batch, 1, 1, kv) moves along the batch at the output's
    first dim). None for other indexings."""
    src = fx_node.args[0].meta.get("val") if isinstance(fx_node.args[0], torch.fx.Node) else None
    indices = fx_node.args[1] if len(fx_node.args) > 1 else None
    if out_shape is None or not isinstance(src, torch.Tensor) or \
            not isinstance(indices, (list, tuple)) or len(indices) != src.dim() or \
            not all(isinstance(i, torch.fx.Node) for i in indices):
        return None
    return {d: _varies(i, out_shape) for d, i in enumerate(indices)}


def _through(gathered: dict, along) -> frozenset | None:
    """The output dims a gather's source value, moving along its source dims `along`,
    moves along (`_gathered_dims`); None when not known."""
    if along is None:
        return None
    out = [gathered.get(d) for d in along]
    return None if any(o is None for o in out) else frozenset().union(*out)


def _gathered_at(arg: torch.fx.Node, producer: torch.fx.Node | None, varies: dict,
                 gathered: dict):
    """_inlined_at for the source of a gather (`_gathered_dims`): the producer's body
    computed at the gathered index, its keys those of the body (no view moves them), their
    dims the output dims the index tensors of the source dims they move along move along."""
    val = arg.meta.get("val")
    whole = producer.meta.get("val") if producer is not None else None
    mapping = _dim_map(val, whole, 0) if isinstance(val, torch.Tensor) and \
        isinstance(whole, torch.Tensor) else None

    def at(key):
        along = varies.get(key)
        if mapping is None or along is None or any(i not in mapping for i in along):
            return key, None
        return key, _through(gathered, {j for i in along for j, _ in mapping[i][0]})
    return at


def _dim_map(view: torch.Tensor, whole: torch.Tensor, lead: int) -> dict | None:
    """{dim of `whole` (of a size above 1): ((output dim, step) of each view dim walking
    it, where the view starts along it)} for `view`, a view of `whole`'s storage that the
    reader broadcasts to its output (`lead`: output dims in front); None when a view dim
    walks no single dim of `whole` (a reshape merging dims)."""
    shape = [size_hint(d) for d in whole.shape]
    strides = [size_hint(st) for st in whole.stride()]
    offset = size_hint(view.storage_offset()) - size_hint(whole.storage_offset())
    dims = sorted((i for i, n in enumerate(shape) if n > 1 and strides[i] > 0),
                  key=lambda i: -strides[i])
    start = {}
    for i in dims:
        start[i], offset = divmod(offset, strides[i])
    if offset or any(start[i] >= shape[i] for i in dims):
        return None
    walks: dict[int, list] = {i: [] for i in dims}
    for j, (n, st) in enumerate(zip(view.shape, view.stride(), strict=True)):
        n, st = size_hint(n), size_hint(st)
        if n == 1 or st == 0:
            continue
        fits = [i for i in dims if st % strides[i] == 0
                and start[i] + st // strides[i] * (n - 1) < shape[i]]
        if not fits:
            return None
        walks[fits[0]].append((lead + j, st // strides[fits[0]]))
    return {i: (tuple(walks[i]), start[i]) for i in dims}


def _inlined_at(arg: torch.fx.Node, producer: torch.fx.Node | None, out_shape, varies: dict,
                view: object, plain: bool):
    """key -> (the key read by the reader, the reader's dims it varies along or None) for
    the keys of `producer`'s body, inlined where the reader reads it through `arg`.

    Inductor inlines the body at the reader's index (`Pointwise.inner_fn`) and its CSE
    shares an expression only at one index: a key at a view is another key -- unless the
    key does not move along the dims the view moves (a weight broadcast over the steps
    of a scan, loaded once for the even and odd steps both: `x[0::2] * x[1::2]` of
    `w * x` loads w once). A key whose dims are known is named by where the view puts
    those dims; others by the whole view."""
    val = arg.meta.get("val")
    whole = producer.meta.get("val") if producer is not None else None
    mapping = None
    if plain and out_shape is not None and isinstance(val, torch.Tensor) and \
            isinstance(whole, torch.Tensor) and val.dim() <= len(out_shape):
        mapping = _dim_map(val, whole, len(out_shape) - val.dim())
    def placed(along) -> frozenset | None:  # the reader's dims the producer's dims land on
        if mapping is None or along is None or any(i not in mapping for i in along):
            return None
        return frozenset(j for i in along for j, _ in mapping[i][0])

    if view is None:  # read whole at its own index: the same keys
        return lambda key: (key, placed(varies.get(key)))

    def moved(key):
        if isinstance(key, tuple) and key and key[0] == "const":
            return key, frozenset()
        if mapping is None:
            return _at(key, view), None
        along = varies.get(key)
        picked = tuple(sorted(mapping)) if along is None else tuple(sorted(along))
        if any(i not in mapping for i in picked):
            return _at(key, view), None
        return _at(key, ("dims", tuple((i, mapping[i]) for i in picked))), placed(picked)
    return moved


def _placed_back(body: frozenset, placement: object) -> frozenset:
    """A slice_scatter's source body with its reads of that same slice cancelled: the
    in-place `x[..., a:b] *= s` becomes slice_scatter(x, slice(x, a, b) * s, a, b), and
    Inductor's lowering loads the source at `idx - a`, whose slice loads x at `+ a`: x at
    the output's own index (sympy simplifies the index), the same load as the
    slice_scatter's own read of x, shared by the CSE (`OpCounterCSE.load`). Without this
    the reads count twice and the value looks reused with too many loads."""
    if placement is None:
        return body
    return frozenset(_unplaced(k, placement) for k in body)


def _unplaced(key: object, placement: object) -> object:
    """A key read at the placement (`_at(k, placement)`) is k again; a buffer loaded
    straight at it is that buffer at its own index."""
    if not (isinstance(key, tuple) and len(key) == 3 and key[2] == placement):
        return key
    if isinstance(key[1], str):
        return (key[0], key[1], frozenset({"full"})) if key[0] == "load" else key
    return key[1]


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
