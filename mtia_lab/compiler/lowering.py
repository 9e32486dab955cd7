"""What Inductor's lowering decides before any fusion rule: which values stay inside their
reader's loop body and which become buffers of their own.

Inductor lowers each aten op into a loop body and stores ("realizes") a value only when it
must: more than REALIZE_ACC_READS loads per element, a loop body over 30 operations
(opcount.py), a piece of a cat lowered as a ConcatKernel, a reduction read through pointwise
code. These predicates read the graph (GraphIR) and the kernels so far; the rule that uses them,
`rules.inlined_while_lowering`, records the decision.
"""

from __future__ import annotations

import math
import weakref

import torch
import torch.fx

from .ir import (
    REDUCTIONS,
    SHAPE_ONLY,
    FusedSchedulerNode,
    GraphIR,
    Kind,
    SchedulerNode,
    cat_kept,
    is_pointwise_use,
    live_users,
    node_kind,
    origin,
    scatter_placement,
)
from .opcount import realize_decisions


def unrolled_into(producer: FusedSchedulerNode, consumer: FusedSchedulerNode,
                   ir: GraphIR) -> bool:
    """A reduction small enough to unroll is pointwise code to Inductor's lowering: inlined
    into a plain pointwise or reduction reader, into an indexed kernel (a slice_scatter that
    a reader of it feeds: each loads it where it needs it), and into a cat that Inductor
    lowers as pointwise code (`pointwise_cat`); not into a ConcatKernel, whose inputs are
    realized (lowering.py `cat`: `ConcatKernel.create` realizes each piece)."""
    if not all(node_kind(n) is Kind.POINTWISE and not n.scatter for n in producer.nodes):
        return False
    if not consumer.indexed:
        return True
    readers = [n for n in consumer.nodes if set(n.reads) & producer.writes]
    return all(n.target != "aten.cat.default" or pointwise_cat(n, ir) for n in readers)


def into_concat_kernel(producer: FusedSchedulerNode, consumer: FusedSchedulerNode) -> bool:
    return any(n.target == "aten.cat.default" and n.indexed and set(n.reads) & producer.writes
               for n in consumer.nodes)


MAX_POINTWISE_CAT_INPUTS = 8  # Inductor's max_complex_pointwise_cat_inputs


def pointwise_cat(cat: SchedulerNode, ir: GraphIR) -> bool:
    """Inductor's `cat` lowering (lowering.py, on a GPU-like device): a pointwise kernel that
    loads each piece where it falls (pointwise_cat), or a ConcatKernel whose inputs are
    realized, each producer writing its slice. Pointwise when there are at most 8 pieces,
    none also read by another pointwise op, and either the cat's readers are all pointwise
    and a piece is computed (not a stored buffer), or every piece needs a copy anyway and
    none is, or reads, a reduction (a pointwise cat would recompute it per element) -- but
    the one reduction whose rows the pieces only recombine (`recombined_reduction`)."""
    if not cat.indexed:
        return True  # one piece left (ir.cat_kept): Inductor lowers `clone(piece)`
    pieces = [b for b in cat.reads if cat.access.get(b) != {SHAPE_ONLY}]  # ir.cat_skipped
    if len(pieces) > MAX_POINTWISE_CAT_INPUTS:
        return False
    producers = [ir.buffers[b].producer for b in pieces]
    users = ir.node_users()
    if _multi_consumer_piece(cat, ir):
        return False  # has_multi_consumers: the piece would be computed twice
    lowered = [lowered_as_piece(p, ir) for p in producers]
    readers = users.get(cat.name, set())
    pointwise_uses = bool(readers) and not any(ir.buffers[b].is_output for b in cat.writes) \
        and all(ir.by_name[u].kind is Kind.POINTWISE for u in readers)
    if any(lowered) and pointwise_uses:
        return True
    recombined = recombined_reduction(cat, producers, ir)
    return all(lowered) and not any(
        p is not None and reads_reduction(ir.by_name[p], ir, recombined) for p in producers)


def recombined_reduction(cat: SchedulerNode, producers: list, ir: GraphIR) -> str | None:
    """Inductor's `_cat_inputs_recombine_reduction` (qknorm -> RoPE -> cat): a reduction
    every piece's code loads, over as many elements as the cat has, whose readers all feed
    the pieces -- the pieces only recombine its normalized rows, and a pointwise cat
    computes nothing twice: `can_fuse_reduction` leaves it out. The pieces' code is walked
    as Inductor's `get_read_names` sees it: up to the values its lowering stores (a
    normalized q realized for its many loads is a load, no reduction read). None when
    there is none."""
    if len(producers) < 2 or any(p is None for p in producers):
        return None
    stored = _stored_values(ir)
    walks = [_pointwise_walk(ir.by_name[p], ir, stored) for p in producers]
    common = set.intersection(*(reductions for reductions, _ in walks))
    if not common:
        return None
    cone = {origin(n) for _, seen in walks for n in seen}  # FX nodes: a clone is its own
    users = ir.node_users()
    for node in ir.nodes:
        if node.name in common and node.numel * node.rnumel == cat.numel and \
                all(origin(u) in cone for u in users.get(node.name, ())):
            return node.name
    return None


_STORED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _stored_values(ir: GraphIR) -> set[str]:
    """The pointwise values Inductor's lowering stores (opcount.realize_decisions), by name;
    in an IR of clones (recompute.split), those the scheduler marked `stored`."""
    if ir.home:
        return {n.name for n in ir.nodes if n.stored}
    if ir.gm not in _STORED:
        _STORED[ir.gm] = realize_decisions(ir)[2]
    return _STORED[ir.gm]


def _pointwise_walk(node: SchedulerNode, ir: GraphIR, stored: set[str]) -> tuple[set, set]:
    """({reductions `node`'s code loads through pointwise code not stored}, {the nodes
    walked}). `node` itself is walked even if stored (the piece the cat is given)."""
    stack, seen, found = [node], {node.name}, set()
    while stack:
        node = stack.pop()
        if node_kind(node) is Kind.REDUCTION:
            found.add(node.name)
            continue
        if not lowered_pointwise(node):
            continue
        for b in node.reads:
            name = ir.buffers[b].producer
            if name is None or name in seen:
                continue
            seen.add(name)
            producer = ir.by_name[name]
            if node_kind(producer) is Kind.REDUCTION or name not in stored:
                stack.append(producer)
    return found, seen


def _multi_consumer_piece(cat: SchedulerNode, ir: GraphIR) -> bool:
    """Inductor's `has_multi_consumers`: a piece, as the cat's FX argument, read by other
    nodes too -- by a pointwise one (which would compute it again), or while it is pointwise
    code not yet stored. The argument is the value the cat is given: a view of a value (one
    unsqueezed half of a split) read only by the cat is no multi-consumer piece, however many
    other views of that value there are."""
    fx_cat = ir.fx_original(cat.name)
    for piece in _cat_pieces(cat, ir):
        users = live_users(piece)
        if len(users) <= 1:
            continue
        if any(is_pointwise_use(u) for u in users if u is not fx_cat):
            return True
        buf = ir.buffers.get(ir.base_of.get(piece.name, ""))
        producer = ir.by_name.get(buf.producer) if buf is not None and buf.producer else None
        if producer is not None and lowered_pointwise(producer):
            return True
    return False


def placed_back(node: SchedulerNode, buf: str, ir: GraphIR,
                group: FusedSchedulerNode | None = None) -> bool:
    """Does `node` read a slice of `buf` only to have its value, through members computed
    at their own index, written back by a slice_scatter of `group` at that same slice? The
    in-place `x[..., a:b] *= s` is slice_scatter(x, slice(x, a, b) * s, a, b): Inductor
    loads the source at `idx - a` and the slice loads x at `+ a`, x at the output's own
    index once sympy simplifies it -- the memory dependency of a plain read, which fuses.
    `group`: the chain must stay inside it (a fused kernel); None: anywhere in the graph."""
    view = {h for h in node.access.get(buf, ()) if h != SHAPE_ONLY}
    if len(view) != 1 or "full" in view:
        return False
    members = {n.name: n for n in (group.nodes if group is not None else ir.nodes)}
    current = node
    while len(current.writes) == 1:
        out = current.writes[0]
        readers = ir.users.get(out, ())
        if len(readers) != 1 or readers[0] not in members:
            return False
        reader = members[readers[0]]
        how = reader.access.get(out, set())
        if reader.op == "slice_scatter":
            fx = ir.fx_original(reader.name)
            source = fx.args[1] if fx is not None and len(fx.args) > 1 else None
            return source is not None and \
                ir.base_of.get(source.name) == out.split("@", 1)[0] and \
                scatter_placement(fx) == frozenset(view) and \
                tuple(ir.buffers[buf].shape) == tuple(fx.meta["val"].shape)
        if node_kind(reader) is not Kind.POINTWISE or reader.indexed or how != {"full"}:
            return False
        current = reader
    return False


def lowered_as_piece(producer: str | None, ir: GraphIR) -> bool:
    """Inductor's should_lower_cat_input: a piece the cat must compute or copy itself -- a
    stored buffer (a graph input, an extern's output) or pointwise code not yet realized. A
    reduction, or pointwise code realized for its many loads, can write its slice itself."""
    if producer is None or ir.by_name[producer].kind in (Kind.EXTERN, Kind.TEMPLATE):
        return True
    node = ir.by_name[producer]
    return lowered_pointwise(node) and loads(
        FusedSchedulerNode(inlined_cone(node, ir))) <= REALIZE_ACC_READS


def inlined_cone(node: SchedulerNode, ir: GraphIR) -> list[SchedulerNode]:
    """The node and the pointwise producers Inductor inlines into it (one user each, not
    stored by its lowering: a value `run_node` realized is a load, however few users)."""
    cone, stack = [node], [node]
    while stack:
        for buf in stack.pop().reads:
            name = ir.buffers[buf].producer
            producer = ir.by_name.get(name) if name else None
            if producer is not None and lowered_pointwise(producer) and \
                    not producer.stored and \
                    len(ir.users.get(buf, ())) == 1 and producer not in cone:
                cone.append(producer)
                stack.append(producer)
    return cone


def lowered_pointwise(node: SchedulerNode) -> bool:
    return node_kind(node) is Kind.POINTWISE and not node.scatter


def reads_reduction(node: SchedulerNode, ir: GraphIR, exclude: str | None = None) -> bool:
    """A reduction, or pointwise code that reads one through other pointwise code
    (Inductor's can_fuse_reduction), other than `exclude`."""
    stack, seen = [node], {node.name}  # a walk, each node once: shared producers (a
    # diamond of pointwise code) would otherwise be visited once per path
    while stack:
        node = stack.pop()
        if node_kind(node) is Kind.REDUCTION and node.name != exclude:
            return True
        if not lowered_pointwise(node):
            continue
        for b in node.reads:
            name = ir.buffers[b].producer
            if name is not None and name not in seen:
                seen.add(name)
                stack.append(ir.by_name[name])
    return False


REALIZE_ACC_READS = 8  # Inductor's realize_acc_reads_threshold (its default on GPUs)


def loads(g: FusedSchedulerNode) -> int:
    """Values a pointwise kernel loads per element: one per buffer it reads from memory, a
    whole window for a pool, each term of an unrolled reduction (a sum over 5 embedding rows
    loads 5 indices and 5 rows: Inductor's num_reads counts every distinct load)."""
    terms = max([n.rnumel for n in g.nodes if n.unrolled] or [1])
    return len(g.reads) * terms + sum(n.loads - len(n.reads) for n in g.nodes)


def large_body(producer: FusedSchedulerNode, consumer: FusedSchedulerNode) -> bool:
    """realize_opcount_threshold: Inductor stores a value whose loop body, with all it
    inlined, has more than 30 operations (opcount.py estimates the count)."""
    return any(n.large_body and set(n.writes) & consumer.reads for n in producer.nodes)


def stored_on_reuse(producer: FusedSchedulerNode, consumer: FusedSchedulerNode) -> bool:
    """realize_reads_threshold: Inductor stores a value read by several ops (`mark_reuse`)
    whose body loads more than 4 values (a BatchNorm: input, mean, var, weight, bias; an
    unrolled softmax's exponentials, their max loading each term), even when all its
    readers end up in one kernel (SiLU's x * sigmoid(x)): they load it."""
    return any(n.stored and set(n.writes) & consumer.reads for n in producer.nodes)


# Lowerings that call `x.realize_hint()` on their first argument before reading it several
# times (torch/_inductor/lowering.py: upsample_nearestnd, _max_pool_with_offsets,
# _adaptive_avg_pool2d, adaptive_max_pool2d, _fractional_max_pool, _avg_poolnd, and the
# backward lowerings' grad_output)
REALIZE_HINTED = ("upsample_nearest", "_upsample_nearest", "max_pool2d_with_indices",
                  "max_pool3d_with_indices", "_low_memory_max_pool", "_adaptive_avg_pool2d",
                  "adaptive_max_pool2d", "fractional_max_pool", "avg_pool2d", "avg_pool3d")


def realize_hinted(producer: FusedSchedulerNode, consumer: FusedSchedulerNode,
                   ir: GraphIR) -> bool:
    """Inductor's pool and nearest-upsample lowerings call `realize_hint()` on their input
    (its elements are read again by overlapping windows): `StorageBox.realize_hint` stores a
    pointwise value whose loop body loads from more than one place
    (`inner_fn_opcount().nontrivial_read_count > 1`: a cat of two slices, x + y). A value
    loading one buffer stays inlined into the pool's loads."""
    written = producer.writes
    readers = [n for n in consumer.nodes if set(n.reads) & written and
               n.op.startswith(REALIZE_HINTED)]
    if not readers or not all(lowered_pointwise(n) for n in producer.nodes):
        return False
    for reader in readers:
        node = ir.fx_node(reader.name)
        first = node.args[0] if node is not None and node.args else None
        if isinstance(first, torch.fx.Node) and ir.base_of.get(first.name) in written:
            cone = inlined_cone(producer.nodes[-1], ir)
            if nontrivial_loads(cone, ir) > 1:
                return True
    return False


def nontrivial_loads(cone: list[SchedulerNode], ir: GraphIR) -> int:
    """Distinct loads at a non-constant index of a loop body (Inductor's OpCounter
    `nontrivial_read_count`): each buffer read from outside the body (a one-element buffer is
    loaded at index 0: trivial), each piece of a cat (a masked load each, even of one buffer),
    a window's or an unrolled reduction's terms."""
    inside = {b for n in cone for b in n.writes}
    count = 0
    for node in cone:
        outside = [b for b in node.reads if b not in inside and
                   math.prod(ir.buffers[b].shape) != 1]
        if node.target == "aten.cat.default" and node.indexed:
            count += max(len(_cat_pieces(node, ir)), len(outside))
        else:
            count += len(outside) * (node.rnumel if node.unrolled else 1) + max(
                node.loads - len(node.reads), 0)
    return count


def _cat_pieces(cat: SchedulerNode, ir: GraphIR) -> list:
    """The distinct FX values a cat joins (a cat recomputed for a reader joins its
    original's)."""
    fx_cat = ir.fx_original(cat.name)
    return list(dict.fromkeys(cat_kept(fx_cat)))


def copied_for_layout(producer: FusedSchedulerNode, consumer: FusedSchedulerNode) -> bool:
    """A value a layout copy reads (layout.py) is realized first: Inductor's convolution
    lowering calls `x.realize()` on its operands before `require_channels_last` copies them."""
    return any(n.layout_of and set(n.reads) & producer.writes for n in consumer.nodes)


# Reduction.num_splits and choices.reduction_split_factor (torch/_inductor), on a device of
# 32-thread warps and 2048 threads per processor (DeviceProperties' defaults)
SPLIT_REDUCTIONS = REDUCTIONS - {"argmax", "argmin"}  # an arg-reduction is never split
WARP, THREADS_PER_SM, NUM_THREADS = 32, 2048, 256  # num_threads: warp * 8 warps
INNER_NO_SPLIT = 8192  # reduction_split_factor's no_split_threshold below compute capability 10


def reduction_splits(node: SchedulerNode, num_sm: int, major: int) -> int:
    """How many partial results per output Inductor's Reduction.create computes first, when
    `num_splits` splits a reduction in two for parallelism (few outputs, many terms): a
    first kernel over (outputs x splits) partial reductions, a second over the splits. 1: one
    kernel. An outer reduction (over dims that are not the innermost, weight norm's over all
    but the last) splits from 129 terms on; an inner one only past 8192."""
    if node.kind is not Kind.REDUCTION or node.unrolled or node.op not in SPLIT_REDUCTIONS:
        return 1
    rnumel, numel = node.rnumel, node.numel
    if numel == 1:
        return _inner_splits(rnumel, numel, num_sm, major)
    if rnumel <= WARP or numel >= num_sm * 2 * 32:
        return 1
    if _reduces_innermost(node):
        return _inner_splits(rnumel, numel, num_sm, major)
    return _outer_splits(rnumel, numel, num_sm)


def _reduces_innermost(node: SchedulerNode) -> bool:
    """num_splits' inner reduction: one of the reduced dims is the input's innermost (stride
    1), as BatchNorm's statistics over N, H and W -- not only a reduction over the trailing
    dims (`node.inner`)."""
    if not node.rorder:
        return True
    shape, reduced = node.rorder
    last = max((d for d, size in enumerate(shape) if size != 1), default=None)
    return last is None or last in reduced


def _closest_divisor(n: int, target: int) -> int:
    return min((d for d in range(1, n + 1) if n % d == 0), key=lambda d: abs(d - target))


def _inner_splits(rnumel: int, numel: int, num_sm: int, major: int) -> int:
    """reduction_split_factor(inner_reduction=True)."""
    if numel >= 2 * num_sm or rnumel <= (524288 if major >= 10 else INNER_NO_SPLIT):
        return 1
    total, fewest, most = rnumel * numel, WARP * num_sm * THREADS_PER_SM, \
        512 * num_sm * THREADS_PER_SM
    if total <= fewest:
        size = WARP
    elif total < most:
        blocks = math.ceil(num_sm * THREADS_PER_SM // (2 * NUM_THREADS) / numel)
        want = math.ceil(rnumel / (NUM_THREADS * blocks))
        closest = _closest_divisor(rnumel, want)
        size = max(closest, WARP) if abs(closest - want) < 30 else want
    else:
        closest = _closest_divisor(rnumel, 512)
        size = closest if abs(closest - 512) < 50 else 512
    return math.ceil(rnumel / (size * NUM_THREADS))


def _outer_splits(rnumel: int, numel: int, num_sm: int) -> int:
    """reduction_split_factor(inner_reduction=False): 4 values per thread, 128 outputs a
    block."""
    total, fewest, most = rnumel * numel, WARP * num_sm * THREADS_PER_SM, \
        512 * num_sm * THREADS_PER_SM
    if total < fewest:
        size = WARP
    elif total < most:
        blocks = math.ceil(num_sm * THREADS_PER_SM // NUM_THREADS / math.ceil(numel / 128))
        want = math.ceil(rnumel / (4 * blocks))
        closest = _closest_divisor(rnumel, want)
        size = max(closest, WARP) if abs(want - closest) < 20 else want
    else:
        closest = _closest_divisor(rnumel, 512)
        size = closest if abs(closest - 512) < 50 else 512
    return math.ceil(rnumel / (4 * size))
