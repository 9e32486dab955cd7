"""Inductor's recompute of a cheap value with several readers (`computed_once=False`).

Inductor's lowering stores ("realizes") a pointwise value with several readers only when
`StorageBox.should_realize_on_reuse` says so: more than `realize_reads_threshold` (4) loads,
or a large body (`realize_opcount_threshold`, opcount.py). Otherwise every reader inlines
the value's loop body and computes it again: the value is stored nowhere, and it runs in
every kernel that reads it. By default (`computed_once=True`, a departure of ours) our
scheduler computes such a value once, in one kernel, and stores it for the others.

With the departure off, `split(ir, names)` gives each reader of such a value a copy of its
node of its own (a *clone*, named `value@reader`), which the scheduler then inlines into that
reader like any value with one user (`inlined_while_lowering`). The plan names the original
node in each kernel that holds one of its clones, and prices each clone: the recomputation
is counted (its operations in each kernel, its inputs read by each).

Stored, not recomputed: a value an extern or a template reads (Inductor realizes an
extern's inputs: `ExternKernel.realize_input`), a cat lowered as a ConcatKernel and its
pieces, a pool, a node writing several buffers, a value a scatter reads, the shift of a
scaled softmax (Inductor's joint-graph pattern rewrites it first), and a random draw (our
kernels call the ATen op, which would draw other values in each kernel).
"""

from __future__ import annotations

import math
from dataclasses import replace

from . import loops, lowering, opcount
from .ir import (  # SEP, origin: the names of clones, kept with the IR they name
    POOLS,
    SEP,
    SHAPE_ONLY,
    GraphIR,
    Kind,
    SchedulerNode,
    node_kind,
    origin,
)


def candidates(ir: GraphIR) -> list[str]:
    """Nodes Inductor inlines into each of their readers, in graph order (see the module
    docstring for those left out): values with several readers it leaves unrealized, and
    the unrealized values inlined into them (one reader each: recomputed with it)."""
    _, reused, realized = opcount.realize_decisions(ir)
    fx = {n.name: n for n in ir.gm.graph.nodes}
    chosen = {n.name for n in ir.nodes if n.name in reused and _recomputable(n, ir, 2)
              and not scaled_softmax_shift(fx[n.name])}
    for node in reversed(ir.nodes):  # a reader before its producers
        if node.name in chosen or node.name in realized or not _recomputable(node, ir, 1):
            continue
        if all(u in chosen for u in ir.users[node.writes[0]]):
            chosen.add(node.name)
    return [n.name for n in ir.nodes if n.name in chosen]


def _recomputable(node: SchedulerNode, ir: GraphIR, fewest_readers: int) -> bool:
    """A pointwise value with one buffer (no pool, no cat Inductor makes a ConcatKernel of),
    read by at least `fewest_readers` loops that can inline it (no extern, template, scatter
    or ConcatKernel, no layout copy; no reader of its sizes only)."""
    if len(node.writes) != 1 or node.scatter or _pool(node) or _random(node, ir) or \
            not _inlinable(node, ir) or \
            node_kind(node) is not Kind.POINTWISE or ir.buffers[node.writes[0]].is_output:
        return False
    buf = node.writes[0]
    readers = [ir.by_name[u] for u in ir.users.get(buf, ())]
    return len(readers) >= fewest_readers and all(
        node_kind(r) in (Kind.POINTWISE, Kind.REDUCTION) and not r.scatter
        and not r.layout_of and not r.scatter_copy and _inlinable(r, ir)
        and r.access.get(buf) != {SHAPE_ONLY}
        for r in readers)


SCALES = ("aten.mul.Tensor", "aten.div.Tensor")


def scaled_softmax_shift(fx_node) -> bool:
    """`x - amax(x)` of a scaled input (`x = a * s` or `a / s`): Inductor's joint-graph
    patterns (`mul_softmax_pattern`, `div_softmax_pattern`) rewrite it, before lowering, into
    a shift whose body loads more than REALIZE_READS_ON_REUSE values: it is stored."""
    if str(fx_node.target) != "aten.sub.Tensor" or len(fx_node.args) < 2:
        return False
    x, shift = fx_node.args[0], fx_node.args[1]
    return (getattr(shift, "target", None) is not None and str(shift.target).startswith(
        "aten.amax") and shift.args and shift.args[0] is x
        and str(getattr(x, "target", "")) in SCALES)


RANDOM = {"rand", "rand_like", "randn", "randn_like", "bernoulli", "uniform", "normal",
          "randint", "randint_like", "native_dropout", "bernoulli_", "uniform_", "normal_"}


def _random(node: SchedulerNode, ir: GraphIR) -> bool:
    """A random draw, or a value read straight from one: Inductor's Triton code draws from a
    seed and the element's offset (the same values in every kernel); our kernels call the
    ATen op, which would draw new values in each. The draw is stored, and so is its reader
    (a draw inlined into one reader's kernel could not feed the others)."""
    producers = [ir.buffers[b].producer for b in node.reads]
    return node.op in RANDOM or any(
        p is not None and p in ir.by_name and ir.by_name[p].op in RANDOM for p in producers)


def _pool(node: SchedulerNode) -> bool:
    return node.op in POOLS


def _inlinable(node: SchedulerNode, ir: GraphIR) -> bool:
    """Pointwise code to Inductor's lowering: anything but a cat lowered as a ConcatKernel."""
    return node.target != "aten.cat.default" or lowering.pointwise_cat(node, ir)


def split(ir: GraphIR, names: list[str] | set[str]) -> GraphIR:
    """A copy of `ir` in which each node of `names` is replaced by one clone per reader.

    A clone reads what its original reads and writes a buffer of its own (`buf@reader`) that
    only its reader reads. Later values first, so that a value read by another recomputed
    value gets a clone for each of that value's clones. `ir` itself is left unchanged; the
    copy's `home` maps each clone to the node (not a clone) whose kernel computes it."""
    wanted = set(names)
    nodes = {n.name: replace(n, access=dict(n.access)) for n in ir.nodes}
    buffers = dict(ir.buffers)
    users = {b: list(u) for b, u in ir.users.items()}
    home: dict[str, str] = {}
    clones: dict[str, list[SchedulerNode]] = {}
    for original in reversed(ir.nodes):
        if original.name not in wanted:
            continue
        node = nodes.pop(original.name)
        buf = node.writes[0]
        made = []
        for reader in users.pop(buf, []):
            host = nodes[reader] if reader in nodes else _clone_named(clones, reader)
            how = host.access.get(buf, {"full"})
            if lowering.placed_back(host, buf, ir):  # read through the slice it writes back
                how = {"full"}
            clone = replace(node, name=f"{node.name}{SEP}{reader}",
                            writes=(f"{buf}{SEP}{reader}",),
                            access=_through(node.access, how, ir))
            new_buf = clone.writes[0]
            buffers[new_buf] = replace(buffers[buf], name=new_buf, producer=clone.name)
            users[new_buf] = [reader]
            host.reads = tuple(new_buf if b == buf else b for b in host.reads)
            host.access = {(new_buf if b == buf else b): how for b, how in host.access.items()}
            home[clone.name] = home.get(reader, reader)
            made.append(clone)
        for read in node.reads:
            users[read] = [u for u in users.get(read, []) if u != node.name] + [
                c.name for c in made]
        clones[node.name] = made
    ordered: list[SchedulerNode] = []
    for original in ir.nodes:
        ordered.extend(clones.get(original.name, [nodes.get(original.name)]))
    for i, node in enumerate(ordered):
        node.index = i
    return GraphIR(ir.gm, ordered, buffers, users, ir.base_of, ir.inputs, ir.views, home=home)


def _through(access: dict, how: set, ir: GraphIR) -> dict:
    """A clone's reads, when its reader reads the value through a view (a piece of a split,
    a slice): the clone computes only those elements, so it reads its own inputs at the
    positions the view picks -- other addresses than a clone for another piece (Inductor's
    memory deps differ: no shared data between them). Except a value of one element per
    row of a reduction when the view moves only inside rows (`loops.stays_in_rows`): the
    clone loads it at the row's own index.

    The clone's own view of an input is kept inside (`("of", view)`): Inductor's inlined
    loads compose the reader's index with the value's own (`ops.load(buf, index)` of the
    inlined body, `Pointwise.inner_fn` called at the reader's index), so the clones of two
    readers of one slice each (`A[0]` and `A[1]` of `-exp(A)`, one per head) load
    other addresses, even when both readers view the value alike. One view per view of
    the reader: two kernels that read the value at a common view share those loads."""
    if how == {"full"}:
        return dict(access)

    def views(own) -> set:
        kept = set() if own in ("full", SHAPE_ONLY) else {("of", own)}
        return {("through", frozenset({outer}) | kept) for outer in how}

    return {b: (hows if _per_row(b, how, ir) else set().union(*(views(h) for h in hows)))
            for b, hows in access.items()}


def _per_row(buf: str, how: set, ir: GraphIR) -> bool:
    """Is `buf` one value per row of an inner reduction, and does every view of `how` stay
    inside the rows it reduces?"""
    producer = ir.by_name.get(ir.buffers[buf].producer or "") if buf in ir.buffers else None
    if producer is None or producer.kind is not Kind.REDUCTION or producer.unrolled or \
            not producer.inner or math.prod(ir.buffers[buf].shape) != producer.numel:
        return False
    return all(h == "full" or loops.stays_in_rows(h, producer.rnumel) for h in how)


def _clone_named(clones: dict[str, list[SchedulerNode]], name: str) -> SchedulerNode:
    return next(c for c in clones[origin(name)] if c.name == name)


def members(ir: GraphIR, names: tuple[str, ...]) -> list[SchedulerNode]:
    """The nodes of a kernel of a plan, in a split IR: its nodes, and the clones of the
    values it recomputes (those whose home is one of its nodes)."""
    wanted = set(names)
    return [n for n in ir.nodes
            if (ir.home[n.name] in wanted if n.name in ir.home else n.name in wanted)]
