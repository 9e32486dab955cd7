"""The tiling Inductor's Triton backend picks for a pointwise kernel, as its fusion check sees it.

`SIMDScheduling.can_fuse` (codegen/simd.py) lets a pointwise kernel over a reduction's whole
input join that reduction only when `select_tiling(pointwise nodes, numel)` is flat
(`(numel, 1)`) or is the reduction's own split (`(numel, rnumel, 1)`)
(`config.triton.tiling_prevents_reduction_fusion`). At fusion time `select_tiling` runs
without the coalescing analysis, with at most 2 tiles (`get_max_tiles(default=2)`): each
memory access (`candidate_tilings`) whose stride-1 loop is not the innermost proposes to split
the loops after it -- a transposed copy (`k.transpose(-2, -1).contiguous()`) is tiled
(rows, columns). The proposal scores the elements the access touches (doubled for a write,
and for each side whose size is a multiple of 32); one scoring at least the kernel's numel
is a candidate, and the best-scored compatible one wins (each candidate on its own: they are
named by their buffer, so two accesses proposing one tiling do not add up).

A loop signature (loops.py) is the (size, stride) of each loop of a whole access, outermost
first: what `candidate_tilings` reads off `stride_hints(dep.index, range_vars)`.
"""

from __future__ import annotations

import math

import torch

from .._compat import size_hint
from .ir import FusedSchedulerNode, GraphIR, Kind, node_kind

Tiling = tuple[int, ...]


def _good(size: int) -> bool:
    """`CandidateTiling.is_good_size`."""
    return size >= 32 and size % 32 == 0


def _candidate(dims: tuple[tuple[int, int], ...], numel: int, write: bool) -> tuple | None:
    """(tiling, score) one access proposes (`candidate_tilings.tile_ranges`), or None."""
    strides = [s for _, s in dims]
    if 1 not in strides:
        return None
    split = strides.index(1) + 1
    if split == len(dims) or all(s == 0 for s in strides[split:]):
        return None
    outer = math.prod(n for n, _ in dims[:split])
    inner = math.prod(n for n, _ in dims[split:])
    score = math.prod(n for n, s in dims if s != 0)
    score *= 2 if write else 1
    score *= (2 if _good(outer) else 1) * (2 if _good(inner) else 1)
    return ((outer, inner), score) if score >= numel else None


def _compatible(tiling: Tiling, sizes: list[int]) -> bool:
    """Can a node's loops (outermost first) be cut at the tiling's groups
    (`SIMDKernel._split_iteration_ranges`: a loop may span two groups when it is a multiple
    of what the first has left)?"""
    remaining = list(tiling)
    group = 0
    for size in sizes:
        while group < len(remaining) and remaining[group] == 1:
            group += 1
        if group == len(remaining):
            return False
        if size > remaining[group] and group + 1 < len(remaining):
            if size % remaining[group]:
                return False
            rest = size // remaining[group]
            remaining[group] = 1
            group += 1
            if remaining[group] % rest:
                return False
            remaining[group] //= rest
        elif remaining[group] % size:
            return False
        else:
            remaining[group] //= size
    return True


def pointwise_tiling(group: FusedSchedulerNode, ir: GraphIR) -> Tiling:
    """The tiles `select_tiling(group's nodes, numel)` picks: (numel,) when flat, else (outer,
    inner). Only members over the group's whole space count (an inlined broadcast producer
    is no node of Inductor's: its loads are its reader's)."""
    numel = group.numel
    members = [n for n in group.nodes if node_kind(n) is Kind.POINTWISE and n.numel == numel
               and n.loops]
    seen: set[str] = set()
    candidates: list[tuple[Tiling, int]] = []
    inside = {n.name: n for n in group.nodes}
    for node in members:
        accesses = []
        for buf, signatures in node.loops.items():
            gathered = _gathered_loads(buf, signatures, inside, ir)
            accesses += gathered if gathered is not None else [(buf, signatures)]
        for buf, signatures in accesses:
            if buf in seen:
                continue
            for dims in signatures:
                if dims is None:
                    continue
                found = _candidate(dims, numel, write=buf in node.writes)
                if found is not None:
                    seen.add(buf)
                    candidates.append(found)
                    break
    # Counter.most_common over candidates named by their buffer: best score first, ties in
    # the order found
    for tiling, _ in sorted(candidates, key=lambda c: -c[1]):
        if all(_compatible(tiling, _sizes(n)) for n in members):
            return tiling
    return (numel,)


def _gathered_loads(buf: str, signatures: set, inside: dict, ir: GraphIR) -> list | None:
    """The loads Inductor's kernel makes where a member reads an embedding computed in the
    same kernel and inlined there while lowering (one reader, not stored): `weight[idx[i],
    c]`, the table through an indirect index (its loops along the looked-up positions step
    through the index's value, stride 0 to `stride_hints`; along the embedding dim, the
    table's own stride) and the indices at the positions (their own strides; 0 along the
    embedding dim) -- not the embedding's output, which is never stored. None when `buf` is
    no such embedding."""
    producer = ir.buffers[buf].producer if buf in ir.buffers else None
    node = inside.get(producer)
    if node is None or node.op != "embedding" or node.stored or len(ir.users.get(buf, ())) != 1:
        return None
    fx = ir.fx_original(node.name)
    args = list(fx.args[:2]) if fx is not None else []
    if len(args) != 2 or not all(isinstance(a, torch.fx.Node) for a in args):
        return None
    out, indices = fx.meta.get("val"), args[1].meta.get("val")
    if not isinstance(out, torch.Tensor) or not isinstance(indices, torch.Tensor) or \
            not out.is_contiguous() or out.dim() != indices.dim() + 1:
        return None
    weight = args[0].meta.get("val")
    along = size_hint(weight.stride(-1)) if isinstance(weight, torch.Tensor) else 1
    by_stride = {size_hint(out.stride(k)): k for k in range(out.dim())
                 if size_hint(out.shape[k]) > 1}
    table, looked_up = set(), set()
    for dims in signatures:
        if dims is None:
            return None
        dims_table, dims_index = [], []
        for n, s in dims:
            k = by_stride.get(s) if s else None
            if s and k is None:
                return None
            last = k == out.dim() - 1
            dims_table.append((n, along if last else 0))
            dims_index.append((n, size_hint(indices.stride(k)) if k is not None and not last
                               and size_hint(indices.shape[k]) > 1 else 0))
        table.add(tuple(dims_table))
        looked_up.add(tuple(dims_index))
    return [(args[0].name, table), (args[1].name, looked_up)]


def _sizes(node) -> list[int]:
    """The node's loop sizes, outermost first (its write's loop signature)."""
    for buf in node.writes:
        for dims in node.loops.get(buf, ()):
            if dims is not None:
                return [n for n, _ in dims]
    return [node.numel]


def prevents_reduction_fusion(pw: FusedSchedulerNode, red: FusedSchedulerNode,
                              ir: GraphIR) -> Tiling | None:
    """The pointwise kernel's tiling when it keeps it out of the reduction over its elements
    (`SIMDScheduling.can_fuse`: `is_reduction_tiling_valid`), else None."""
    if pw.numel != red.numel * red.rnumel:
        return None
    tiling = pointwise_tiling(pw, ir)
    if tiling in ((pw.numel,), (red.numel, red.rnumel)):
        return None
    return tiling
