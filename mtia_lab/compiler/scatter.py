"""Inductor's two launches of a scatter (`scatter_in_one_kernel=False`).

Inductor lowers `index_put` (torch 2.13, lowering.py `index_put_impl_`) and `scatter`,
`scatter_add`, `scatter_reduce` (`scatter_reduce_`) as two operations: a Pointwise copy of
`self` into the output buffer (`clone(x)`, realized: a `full` of zeros for an embedding's
gradient is computed in it), then an `ir.Scatter` over the values' positions (the index's
for a scatter) that stores into that buffer, a mutation of it
(`MutationLayoutSHOULDREMOVE`). The scheduler sees the stores' use of the copy as a StarDep:
no memory dependency it can fuse (`fusable_read_and_write` wants a store of the same atomic
mode), so the two are never one kernel; the stores share the values' loop, so they fuse with
the kernel that computes the values (a norm backward's epilogue), the index computed inline.

By default (`scatter_in_one_kernel=True`, a departure of ours) our scatter is one node and one
kernel: the copy and the stores. With the departure off, `split(ir)` gives each scatter
Inductor lowers so a node of its own before it, `scatter_copy_<scatter>` (an `aten.clone` of
`self`), and the scatter becomes the stores: it loops over the values' space, reads the index
and the values at its own positions, and reads the copy's buffer in place (an access no other
kernel shares: score 0), writing the scatter's value that its readers wait for
(`scatter_output`).

Left out (one kernel as before): ATen's fallbacks (a scatter of int64 or bool values, a
`scatter_reduce` other than a sum: `ir._lowered_kind` makes them externs), an `index_put`
with a boolean index (`index_put_fallback`, or a `where` for one value:
`index_put_as_masked_fill`), an accumulating `index_put` into int64 or bool, a
`scatter_reduce` without `include_self` (three launches: the copy, the zero-out of the indexed
places, the stores), and `index_add`, `masked_scatter`, `embedding_dense_backward`
(decomposed before lowering).
"""

from __future__ import annotations

from dataclasses import replace

import torch

from .._compat import size_hint
from . import loops
from .ir import Buffer, GraphIR, Kind, SchedulerNode, _access, _op_name

WHY = "copy of a scatter's input, Inductor's first launch of the scatter (clone, then stores)"
PREFIX = "scatter_copy_"
INDEX_PUTS = ("index_put", "_unsafe_index_put")
SCATTERS = ("scatter", "scatter_add", "scatter_reduce")


def copy_name(scatter: str) -> str:
    return f"{PREFIX}{scatter}"


def _arg(fx_node: torch.fx.Node, i: int, name: str, default=None):
    return fx_node.args[i] if len(fx_node.args) > i else fx_node.kwargs.get(name, default)


def _val(arg) -> torch.Tensor | None:
    val = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None
    return val if isinstance(val, torch.Tensor) else None


def stores_space(fx_node: torch.fx.Node) -> tuple[int, ...] | None:
    """The shape the stores of a scatter Inductor lowers in two launches loop over (the
    values' for an index_put: `index_output_size_and_inner_fn`; the index's for a scatter),
    None for a scatter it lowers otherwise (see the module docstring)."""
    op = _op_name(fx_node)
    self_val = _val(fx_node.args[0]) if fx_node.args else None
    if self_val is None:
        return None
    if op in INDEX_PUTS:
        indices = _arg(fx_node, 1, "indices", ())
        accumulate = bool(_arg(fx_node, 3, "accumulate", False))
        tensors = [_val(t) for t in indices if t is not None]
        if not tensors or any(t is None or t.dtype in (torch.bool, torch.uint8)
                              for t in tensors):
            return None
        if accumulate and self_val.dtype in (torch.int64, torch.bool):
            return None  # needs_fallback_due_to_atomic_add_limitations
        dims = [d for d, t in enumerate(indices) if t is not None]
        block = [size_hint(d) for d in torch.broadcast_shapes(*(t.shape for t in tensors))]
        x_size = [size_hint(d) for d in self_val.shape]
        if dims == list(range(dims[0], dims[-1] + 1)):
            return tuple(x_size[:dims[0]] + block + x_size[dims[-1] + 1:])
        return tuple(block + [s for d, s in enumerate(x_size) if d not in dims])
    if op in SCATTERS:
        index = _val(_arg(fx_node, 2, "index"))
        reduce = _arg(fx_node, 4, "reduce")
        if index is None or op == "scatter_reduce" and (
                reduce != "sum" or not _arg(fx_node, 5, "include_self", True)) or \
                op == "scatter" and reduce not in (None, "add"):
            return None  # a fallback (use_scatter_fallback), or three launches
        return tuple(size_hint(d) for d in index.shape)
    return None


def scatters(ir: GraphIR) -> list[str]:
    """Our scatter nodes Inductor lowers as a copy, then the stores."""
    return [n.name for n in ir.nodes if n.scatter and n.kind is Kind.POINTWISE
            and ir.fx_node(n.name) is not None and stores_space(ir.fx_node(n.name)) is not None]


def _over(val: torch.Tensor, shape: tuple[int, ...], start: int | None) -> torch.Tensor:
    """`val` as the stores read it over their loop `shape`: broadcast from its last dims
    (values, src), or, for an index tensor, from dim `start` (where the indexed dims go)."""
    sizes = [size_hint(d) for d in val.shape]
    lead = len(shape) - len(sizes) if start is None else start
    strides = [0] * len(shape)
    for d, (n, st) in enumerate(zip(sizes, val.stride(), strict=True)):
        if n != 1 and lead + d < len(shape) and n == shape[lead + d]:
            strides[lead + d] = size_hint(st)
    return torch.empty_strided(shape, strides, dtype=val.dtype, device="meta")


def _stores_reads(fx_node: torch.fx.Node, shape: tuple[int, ...]) -> list[tuple[str, object]]:
    """(FX argument, its view over the stores' loop) of each tensor the stores read."""
    op = _op_name(fx_node)
    found = []
    if op in INDEX_PUTS:
        indices = _arg(fx_node, 1, "indices", ())
        dims = [d for d, t in enumerate(indices) if t is not None]
        start = dims[0] if dims == list(range(dims[0], dims[-1] + 1)) else 0
        block = max((_val(t).dim() for t in indices if _val(t) is not None), default=0)
        for t in indices:
            if isinstance(t, torch.fx.Node) and _val(t) is not None:
                found.append((t, _over(_val(t), shape, start + block - _val(t).dim())))
        values = _arg(fx_node, 2, "values")
        if _val(values) is not None:
            found.append((values, _over(_val(values), shape, None)))
        return found
    index = _arg(fx_node, 2, "index")
    found.append((index, _val(index)))
    src = _arg(fx_node, 3, "src")
    if _val(src) is not None:  # loaded at the index's positions: a part of it, or all
        val = _val(src)
        found.append((src, val.as_strided(shape, val.stride(), val.storage_offset())))
    return found


def split(ir: GraphIR, names: list[str] | None = None) -> GraphIR:
    """A copy of `ir` with a copy node before each scatter of `names` (all that Inductor
    lowers in two launches by default); the scatter becomes the stores, reading the copy in
    place. `ir` is left unchanged."""
    names = scatters(ir) if names is None else names
    if not names:
        return ir
    nodes = {n.name: replace(n, access=dict(n.access), loops=dict(n.loops)) for n in ir.nodes}
    buffers = dict(ir.buffers)
    users = {b: list(u) for b, u in ir.users.items()}
    before: dict[str, SchedulerNode] = {}
    for name in names:
        node, fx_node = nodes[name], ir.fx_node(name)
        self_arg = fx_node.args[0]
        self_val, base = _val(self_arg), ir.base_of[self_arg.name]
        copy = copy_name(name)
        shape = tuple(size_hint(d) for d in self_val.shape)
        numel = 1
        for d in shape:
            numel *= d
        buffers[copy] = Buffer(copy, numel * self_val.element_size(), shape, self_val.dtype,
                               copy)
        how = _access(self_val, ir.buffers[base])
        out = torch.empty(shape, dtype=self_val.dtype, device="meta")
        found, write = loops.signatures(out, [(base, self_val)] if how == "full" else [],
                                        size_hint)
        found.setdefault(copy, set()).add(write)
        before[name] = SchedulerNode(
            name=copy, index=-1, kind=Kind.POINTWISE, target="aten.clone.default",
            reads=(base,), writes=(copy,), numel=numel, vector_flops=0.0,
            low_precision=node.low_precision, loads=1, access={base: {how}},
            loops=found, scatter_copy=(name, self_arg.name),
            source=(f"{WHY} ({name}'s self)",) + node.source)
        space = stores_space(fx_node)
        stores_numel = 1
        for d in space:
            stores_numel *= d
        access: dict[str, set] = {copy: {("stored into by", name)}}
        whole = []
        for arg, view in _stores_reads(fx_node, space):
            buf = ir.base_of.get(arg.name)
            if buf not in ir.buffers:
                continue
            seen = _access(view, ir.buffers[buf])
            access.setdefault(buf, set()).add(seen)
            if seen == "full":
                whole.append((buf, view))
        reads = tuple(dict.fromkeys((copy, *(b for b in access if b != copy))))
        space_val = torch.empty(space, dtype=self_val.dtype, device="meta")
        found, _ = loops.signatures(space_val, whole, size_hint)
        node.reads, node.access, node.numel = reads, access, stores_numel
        writes = ir.by_name[name].loops
        node.loops = {**found, **{w: writes.get(w, {None}) for w in node.writes}}
        node.vector_flops, node.loads = float(stores_numel), len(reads)
        for buf in set(ir.by_name[name].reads) - set(reads):
            users[buf] = [u for u in users.get(buf, []) if u != name]
        users.setdefault(base, []).append(copy)
        users[copy] = [name]
    ordered: list[SchedulerNode] = []
    for original in ir.nodes:
        if original.name in before:
            ordered.append(before[original.name])
        ordered.append(nodes[original.name])
    for i, node in enumerate(ordered):
        node.index = i
    return GraphIR(ir.gm, ordered, buffers, users, ir.base_of, ir.inputs, ir.views,
                   home=dict(ir.home))


def stores_into_copy(producer_writes: set[str], consumer_nodes) -> str | None:
    """The scatter of `consumer_nodes` whose copy `producer_writes` holds: the stores use the
    copy as a StarDep, which Inductor's `fusable_read_and_write` never fuses with the copy's
    plain store (only with another store of the same atomic mode)."""
    for n in consumer_nodes:
        if n.scatter and copy_name(n.name) in producer_writes:
            return n.name
    return None
