"""The loop order of each whole read and write: when two kernels touch a buffer at one index.

Inductor counts a buffer as data two kernels share (`Scheduler.score_fusion_memory`) only when
their MemoryDeps on it are equal: the same index expression over the same loop ranges. On a
GPU with `loop_ordering_after_fusion` (on in torch 2.13), a kernel keeps the loops of its
output's dims (size-1 dims dropped, never merged: `ComputedBuffer.simplify_and_reorder`),
in the order `pick_loop_order` takes from the strides of its loads and stores. Two kernels
reading one buffer whole in memory order share it (the loop-reordering round merges both
into one loop: `MemoryDep.normalize`); a read through a permutation shares it only when the
loop variables can be reordered to match (`_try_reorder_loops_for_candidates`: the same
number of loops, the same (size, stride) pairs, a pointwise kernel to reorder). A reshape
to heads permuted (a [2, 2, 8, 8] copy of a [16, 16] buffer) beside a read in memory order
over [2, 8, 16] shares nothing: Inductor keeps them apart.

A loop signature is a tuple of (size, stride) per loop, outermost first, in elements of the
buffer. Only pointwise kernels have them: a reduction's accesses match any order (Inductor
also matches a reduction's store to a permuted reader by other means, not modelled), but for
a full reduction loading a pointwise kernel's output out of order (`full_reduction_misreads`).
"""

from __future__ import annotations

import functools
import math

import torch

Dims = tuple[tuple[int, int], ...]


def _strides_over(val: torch.Tensor, out_shape: tuple[int, ...], size) -> list[int]:
    """The strides of `val` read over an output of `out_shape` (broadcast: aligned from the
    right, a dim of size 1 read again and again has stride 0)."""
    shape = [size(d) for d in val.shape]
    strides = [size(s) for s in val.stride()]
    lead = len(out_shape) - len(shape)
    if lead < 0:
        return [0] * len(out_shape)
    return [0] * lead + [s if d != 1 else 0 for d, s in zip(shape, strides, strict=True)]


def pick_loop_order(stride_lists: list[list[int]], sizes: list[int]) -> list[int]:
    """Inductor's `scheduler.pick_loop_order`: loops outermost first, a loop before another
    when more of the accesses step further along it; ties keep the output's order."""

    def cmp(a: int, b: int) -> int:
        if sizes[a] == 1 or sizes[b] == 1:
            return (sizes[a] == 1) - (sizes[b] == 1)
        sa = [abs(s[a]) for s in stride_lists]
        sb = [abs(s[b]) for s in stride_lists]
        a_first = sum(y == 0 or x < y for x, y in zip(sa, sb, strict=True))
        b_first = sum(x == 0 or y < x for x, y in zip(sa, sb, strict=True))
        if a_first != b_first:
            return -1 if a_first > b_first else 1
        return (b > a) - (b < a)

    order = list(reversed(range(len(sizes))))
    order.sort(key=functools.cmp_to_key(cmp))
    return list(reversed(order))


def signatures(out: torch.Tensor, reads: list[tuple[str, torch.Tensor]],
               size) -> tuple[dict[str, set], Dims]:
    """(buffer -> loop signatures of its reads, the signature of the write) of a pointwise
    kernel whose output is `out`, reading each (buffer, view) of `reads` whole: it loops
    over its output in `pick_loop_order`'s order."""
    out_shape = tuple(size(d) for d in out.shape)
    write = _strides_over(out, out_shape, size)
    over = [(buf, _strides_over(val, out_shape, size)) for buf, val in reads]
    order = pick_loop_order([write, *(s for _, s in over)], list(out_shape))
    found: dict[str, set] = {}
    for buf, s in over:
        found.setdefault(buf, set()).add(_squeezed(list(out_shape), s, order))
    return found, _squeezed(list(out_shape), write, order)


def _squeezed(sizes: list[int], strides: list[int], order) -> Dims:
    return tuple((sizes[i], strides[i]) for i in order if sizes[i] != 1)


def merged(dims: Dims) -> Dims:
    """Adjacent loops merged where one steps over the other whole (`MemoryDep.normalize`):
    a read in memory order becomes one loop, whatever the view's shape."""
    out: list[tuple[int, int]] = []
    for n, s in dims:
        if out and out[-1][1] == s * n:
            out[-1] = (out[-1][0] * n, s)
        else:
            out.append((n, s))
    return tuple(out)


def unbroadcast(dims: Dims) -> Dims:
    """The loops a MemoryDep keeps: Inductor drops the loop variables its index does not use
    (`_RecordLoadStoreInner.canonicalize`: `drop_unused_symbols`), so a value read again
    along its innermost loops (a row's value in each of the row's elements) is read at the
    index it is written at over its own loops. Only the innermost: dropping an outer loop
    leaves the inner ones other variables than the writer's."""
    end = len(dims)
    while end and dims[end - 1][1] == 0:
        end -= 1
    return dims[:end]


def reorderable(a: Dims, b: Dims) -> bool:
    """Can one kernel's loops be reordered so that both index the buffer alike
    (`MemoryDep.decide_loop_order_to_match`: as many loops, none broadcast, no two of one
    stride, the same (size, stride) pairs)?"""
    if len(a) != len(b) or any(s == 0 for _, s in a + b):
        return False
    if len({s for _, s in a}) != len(a) or len({s for _, s in b}) != len(b):
        return False
    return set(a) == set(b)


def same_index(a: set, b: set, reorder: bool) -> bool:
    """Do two kernels touch a buffer at one index, given the loop signatures of their whole
    accesses of it (None: unknown, taken as matching)? `reorder`: one of them is pointwise,
    so its loops may be reordered to fit. Inductor's `_try_reorder_loops_for_candidates`
    compares the merged loops (`MemoryDep.normalize`) only of deps with different numbers
    of loops; with as many loops, of other sizes (a [8, 8, 6] store read as [2, 32, 6]), it
    tries to reorder one kernel's loops (`decide_loop_order_to_match`), which fails: they
    share nothing."""
    for x in a:
        for y in b:
            if x is None or y is None:
                return True
            x, y = unbroadcast(x), unbroadcast(y)
            if x == y or len(x) != len(y) and merged(x) == merged(y):
                return True
            if reorder and reorderable(x, y):
                return True
    return False


def stays_in_rows(view: object, row: int) -> bool:
    """Does a view (shape, strides, offset) of a buffer laid out in rows of `row` elements
    pick, at each position, an element of the row that position's unmoved index is in?
    Each dim must step over whole rows or stay inside one: the offset's place in its row
    plus the in-row dims' extent fits the row (rotate_half's `x[..., 4:]` of a head of 8,
    in a row of 32). A view that is nested ("through" a recomputed value's reader, see
    recompute._through) is judged by the views inside it; anything else moves."""
    if isinstance(view, tuple) and len(view) == 2 and view[0] == "through":
        return all(stays_in_rows(v, row) for v in view[1])
    if isinstance(view, tuple) and len(view) == 2 and view[0] == "of":  # the clone's own
        return stays_in_rows(view[1], row)
    if not (isinstance(view, tuple) and len(view) == 3) or row <= 1:
        return False
    shape, strides, offset = view
    if not isinstance(offset, int) or offset // row != 0:
        return False
    inside = offset % row
    for n, s in zip(shape, strides, strict=True):
        if n != 1 and s % row != 0:
            inside += abs(s) * (n - 1)
    return inside < row


def trailing_broadcast(how, shape: tuple[int, ...]) -> bool:
    """Is the view (shape, strides, offset) the whole buffer in its own order, contiguous,
    then dims of stride 0 (size-1 dims aside)?"""
    if not (isinstance(how, tuple) and len(how) == 3 and how[2] == 0):
        return False
    dims = [(d, st) for d, st in zip(how[0], how[1], strict=True) if d != 1]
    while dims and dims[-1][1] == 0:
        dims.pop()
    if not dims or any(st == 0 for _, st in dims):
        return False
    expected = 1
    for d, st in reversed(dims):
        if st != expected:
            return False
        expected *= d
    return expected == math.prod(shape) and len(dims) < len(
        [d for d in how[0] if d != 1])


def full_reduction_misreads(pw, red, ir, size) -> str | None:
    """A buffer of `pw` that the full reduction `red` (one output) loads in another order than
    `pw` writes it, or None.

    A reduction's loops are in `pick_loop_order`'s order over the loads of its body (the
    pointwise code inlined into it included; its one-element store steps along no loop): a
    permuted buffer read beside one in the graph's order ties, and the tie keeps the graph's
    order (`ComputedBuffer.simplify_and_reorder` on the reduction's variables). A pointwise
    kernel writing that buffer in its memory order then writes it at another index than the
    reduction loads it: `Scheduler.can_fuse_vertical` refuses ("memory deps did not match"),
    and reordering the pointwise's loops to the reduction's (`_try_reorder_loops_for_candidates`)
    makes its loads and stores need a 2D tiling, which `SIMDScheduling.can_fuse` refuses for a
    reduction ("invalid tiling for reduction", `tiling_prevents_reduction_fusion`)."""
    if red.numel != 1:
        return None
    inside = {b for n in red.nodes for b in n.writes}
    space = None
    stride_lists: list[list[int]] = []
    wanted: list[tuple[str, list[int]]] = []
    for node in red.nodes:
        fx = ir.fx_node(node.name)
        if fx is None:
            return None
        if node.kind.value == "reduction":
            args = [a for a in fx.args[:1] if isinstance(a, torch.fx.Node)]
            shaped = args[0].meta.get("val") if args else None
        elif node.kind.value == "pointwise" and node.numel == red.rnumel:
            args = [a for a in fx.args if isinstance(a, torch.fx.Node)]
            shaped = fx.meta.get("val")
        else:
            continue
        if not isinstance(shaped, torch.Tensor):
            return None
        shape = tuple(size(d) for d in shaped.shape)
        if space is None:
            space = shape
        elif shape != space:
            return None  # a reshape inside the reduction's body: not modelled
        for a in args:
            buf, val = ir.base_of.get(a.name), a.meta.get("val")
            if buf is None or buf in inside or not isinstance(val, torch.Tensor) or \
                    tuple(size(d) for d in val.shape) != space:
                continue
            strides = _strides_over(val, space, size)
            stride_lists.append(strides)
            if buf in pw.writes:
                wanted.append((buf, strides))
    if not wanted:
        return None
    order = pick_loop_order(stride_lists, list(space))
    for buf, strides in wanted:
        writer = next((n for n in pw.nodes if buf in n.writes), None)
        written = writer.loops.get(buf) if writer is not None else None
        if written and not same_index({_squeezed(list(space), strides, order)}, written,
                                      reorder=False):
            return buf
    return None
