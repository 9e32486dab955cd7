"""Fusion rules and guardrails: small named functions, each returning a Verdict.

`can_fuse` asks them in the order TorchInductor does (torch 2.13, `Scheduler._can_fuse`, then
`choices.can_fuse`, then the vertical or horizontal check), so that when several limits apply
the reason recorded is the one Inductor would give:

    1. lowering     inlined_while_lowering: a pointwise op used by one kernel only is computed
                    inside it (Inductor inlines it before scheduling: no guardrail applies),
                    unless Inductor's lowering stores it: too many loads (realize_acc_reads),
                    a loop body over 30 operations (realize_opcount, opcount.py), several
                    readers and more than 4 loads (realize_reads_threshold: an unrolled
                    reduction loads each term), a piece of a cat lowered to a ConcatKernel
                    (`pointwise_cat`; concat_kernel, ours), a pool's or nearest upsample's
                    input loading more than one place (realize_hint: `realize_hinted`)
    2. kinds        extern_never_fuses, concat_kernel_never_fuses, template_epilogue (ours),
                    device_mismatch (host code stored: a CPU kernel), factory_into_consumer
                    (a kind can depend on the lowering: a sort of at most 512 elements is a
                    reduction-shaped Triton kernel, a scatter of bool/int64 values or an
                    index by a mask or a host constant an ATen call: ir._lowered_kind)
    3. choices      no_shared_data (with conv_input_layout), max_fusion_size, peak_memory,
                    max_fusion_unique_io_buffers   (choices.can_fuse: vertical and horizontal)
    4. vertical     scatter_output, indexed_read, read_other_positions (a slice, a shift,
                    a gather by an index tensor, an unrolled reduction's terms),
                    split_reduction (a reduction Inductor splits in two), reduction_*
                    (reduction_loop_order, tiling_prevents_reduction_fusion: a pointwise
                    kernel Triton tiles, tiling.py), vertical_pointwise
       horizontal   score_fusion_memory_threshold, long_distance, then the same space checks
                    (choices.can_fuse_horizontal, then the Triton backend's can_fuse)
    5. ours         on_chip_memory_budget

After its rounds, Inductor makes one more (`loop_ordering_after_fusion`) in which a pointwise
kernel may take a reduction's loop order: a reduction over outer dims (BatchNorm's statistics)
then fuses with the pointwise kernels over its whole input -- only to align a buffer both
read whole (`_reorder_aligns`); a pointwise kernel written channels-last takes the loops of a
reduction over each channel's H and W (`conv_input_layout`). `Pair.reorder` marks that round.

Iteration spaces, as in Inductor's Triton scheduling: a pointwise kernel loops over `numel`
elements; a reduction over `numel` outputs times `rnumel` reduced elements. Two kernels fuse
when one loop nest serves both: equal spaces, a pointwise over `numel * rnumel` beside a
reduction over the innermost dims, or a pointwise over `numel` (the reduction's tail).

Rules marked *ours* (`DEPARTURES`) are where this scheduler departs from Inductor on purpose;
their decisions say so ("(ours)") and PlanCompare names them when the two plans differ.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .._compat import size_hint
from . import config, layout, loops, lowering, opcount, recompute, scatter, tiling
from .ir import FusedSchedulerNode, GraphIR, Kind, _op_name, on_host

# Departures from Inductor, on purpose: rule name -> why (shown in records and views).
DEPARTURES = {
    "template_epilogue": "a matmul is a template that takes its pointwise epilogue (what an "
                         "MTIA-style GEMM kernel does); Inductor calls aten mm without "
                         "max-autotune and fuses nothing into it",
    "on_chip_memory_budget": "a fused kernel's intermediates must fit the PEs' local memory",
    "computed_once": "every aten op runs in one kernel; Inductor may inline a cheap pointwise "
                     "op into several kernels and compute it in each (switch it off: "
                     "config computed_once=False, recompute.py)",
    "post_grad_pattern": "we schedule the aten graph as traced; Inductor first rewrites some "
                         "patterns (mm + add into addmm, ...) into other ops",
    "extern_in_triton": "our extern kernel is the whole op; Inductor runs parts of some in "
                        "Triton launches of their own: it copies a convolution's inputs into "
                        "the layout it picks (layout_optimization), a matmul's view of a "
                        "buffer it padded, and adds a bias it peeled "
                        "off the call (switch the copies on: config extern_in_triton=False, "
                        "layout.py)",
    "concat_kernel": "where Inductor lowers a cat to a ConcatKernel (its producers write their "
                     "slices of the cat's buffer, no copy), we copy the pieces in a kernel of "
                     "our own",
    "scatter_in_two_launches": "our scatter is one kernel (a copy of its input, then the "
                               "indexed stores); Inductor launches the copy and the stores "
                               "as two kernels, the second writing into the first's buffer "
                               "(switch the copy on: config scatter_in_one_kernel=False, "
                               "scatter.py)",
}
# Inductor checks left out on purpose (the plan records this list in its settings).
NOT_MODELLED = {
    "loop_index_inversion_in_fusion": "a pointwise read in another order is shared when "
                                      "its loops can be reordered to match (loops.py); "
                                      "a reduction's reads and writes match any order, "
                                      "and a copy's index is never inverted",
    "tiling_prevents_pointwise_fusion": "Triton tilings are not modelled",
    "speedup_by_fusion": "only benchmarks templates under max-autotune",
    "mix_order_reduction": "reductions over the same data in another order stay apart",
    "split_reductions": "Inductor splits a reduction of few outputs and many terms in two "
                        "(Reduction.num_splits): what fuses with it is modelled "
                        "(split_reduction; our kernel is its second stage), the first "
                        "stage's launch is not",
    "conv_bias_in_triton": "Inductor peels a convolution's bias off the extern call (off the "
                           "CPU) and adds it in Triton, inlined into the readers' kernels "
                           "(its loads are counted, opcount.py), or stored where the graph "
                           "returns it or an extern reads it: with extern_in_triton=False "
                           "that add is a node of ours (layout.peeled_biases); an add "
                           "stored for another reason (a ConcatKernel's input, a layout "
                           "copy standing for it) is not modelled",
    "extern_operand_copy": "Inductor copies an operand of a matmul it cannot read in place "
                           "(ExternKernel.require_stride_order) in a launch of its own; "
                           "a convolution's operand copies are modelled (layout.py), and "
                           "a matmul's view of a buffer Inductor padded (comprehensive "
                           "padding) or views through a cat it drops (layout.copied_view); "
                           "not a view of a buffer whose layout Inductor took from its "
                           "reads (ComputedBuffer.decide_layout)",
    "realize_reads_threshold": "with computed_once on (the default), an op with several "
                               "users is computed once, never inlined into each of them "
                               "(computed_once=False follows it: recompute.py); one loading "
                               "more than 4 values is stored in both (stored_on_reuse)",
}


@dataclass(frozen=True)
class Verdict:
    fused: bool
    name: str  # the rule or guardrail that decided
    reason: str
    inline: bool = False  # an inlining (Inductor's lowering), not a scheduler fusion

    @property
    def ours(self) -> bool:
        return self.name in DEPARTURES


def ours(name: str, fused: bool, reason: str) -> Verdict:
    """A verdict of a rule of our own: its reason says so."""
    return Verdict(fused, name, f"(ours) {reason}")


@dataclass
class Pair:
    """Two candidate kernels, `a` earlier in graph order, and facts about fusing them."""

    a: FusedSchedulerNode
    b: FusedSchedulerNode
    ir: GraphIR
    profile: object  # ChipProfile, for the on-chip budget
    score: int  # score_fusion_memory(a, b): bytes both touch the same way
    reorder: bool = False  # Inductor's last round: loops may be reordered to fit

    @property
    def vertical(self) -> bool:
        """Does one read what the other writes (producer/consumer)?"""
        return bool(self.b.reads & self.a.writes) or bool(self.a.reads & self.b.writes)

    def producer_consumer(self) -> tuple[FusedSchedulerNode, FusedSchedulerNode]:
        return (self.a, self.b) if self.b.reads & self.a.writes else (self.b, self.a)


def _space(g: FusedSchedulerNode) -> str:
    return f"{g.numel}x{g.rnumel}" if g.rnumel > 1 else str(g.numel)


def _first_target(g: FusedSchedulerNode, kind: Kind) -> str:
    node = next(n for n in g.nodes if n.kind is kind)
    return f"{node.name} ({node.target})"


def _pure_pointwise(g: FusedSchedulerNode) -> bool:
    return all(n.kind is Kind.POINTWISE and not n.scatter for n in g.nodes)


# ---- 1. lowering -----------------------------------------------------------------------------

def inlined_while_lowering(p: Pair) -> Verdict | None:
    """Inductor lowers a pointwise op into a loop body and realizes it as a buffer only when
    it must (a reduction, an extern's input, a graph output, several users, more than
    REALIZE_ACC_READS loads per element: a 3x3 max pool loads 9; a loop body of more than
    30 operations with everything inlined into it: `lowering.large_body`; several readers
    and more than 4 loads: `lowering.stored_on_reuse`), and a cat it lowers as a
    ConcatKernel is a buffer its pieces write (`_concat_kernel`). An op whose only
    user is one pointwise or reduction kernel is computed inside that kernel -- whatever the
    spaces: a broadcast or an indexed load just recomputes it where it is needed."""
    if not p.vertical:
        return None
    producer, consumer = p.producer_consumer()
    if producer.size != 1 or consumer.kind not in (Kind.POINTWISE, Kind.REDUCTION):
        return None
    if _concat_kernel(producer, p.ir) is not None:
        return None  # a buffer its pieces write: its readers load it (concat_kernel_never_fuses)
    if _realized_into_slice(producer, consumer, p.ir):
        return None  # it writes its slice of the cat in a kernel of its own
    if not (_pure_pointwise(producer) or lowering.unrolled_into(producer, consumer, p.ir)):
        if producer.kind is Kind.POINTWISE and consumer.indexed and lowering.into_concat_kernel(
                producer, consumer):
            return ours("concat_kernel", False, f"{producer.nodes[-1].name} is a piece of a "
                        "cat Inductor makes a ConcatKernel of (its producers write their "
                        "slices); we copy the pieces in a kernel of our own")
        return None
    if lowering.loads(producer) > lowering.REALIZE_ACC_READS or lowering.large_body(
            producer, consumer) or lowering.stored_on_reuse(producer, consumer) or \
            lowering.copied_for_layout(producer, consumer) or \
            lowering.realize_hinted(producer, consumer, p.ir):
        return None  # realized: a buffer of its own, fused (or not) by the other rules
    ir = p.ir
    for buf in producer.writes:
        if ir.buffers[buf].is_output:
            return None
        if any(u not in consumer.names and u not in producer.names
               for u in ir.users.get(buf, ())):
            return None
    what = consumer.kind.value + (" (indexed loads)" if consumer.indexed else "")
    return Verdict(True, "inlined_while_lowering",
                   f"{producer.nodes[-1].name} has one user: inlined into the {what} kernel "
                   "that reads it, as Inductor's lowering does", inline=True)


# ---- 2. kinds --------------------------------------------------------------------------------

def extern_never_fuses(p: Pair) -> Verdict | None:
    """An op that runs as its ATen kernel is a black box: nothing can join its loop."""
    for g in (p.a, p.b):
        if g.kind is Kind.EXTERN:
            what = _first_target(g, Kind.EXTERN)
            return Verdict(False, "extern_never_fuses",
                           f"{what} runs as its ATen kernel (extern); externs never fuse")
    return None


def concat_kernel_never_fuses(p: Pair) -> Verdict | None:
    """A cat Inductor lowers as a ConcatKernel is a NopKernelSchedulerNode: its pieces write
    its buffer, it launches nothing, and `Scheduler.can_fuse` refuses it on either side
    ("node1 is nop", "node2 is extern or nop"): a reader of the cat reads the buffer in a
    kernel of its own. (Our cat kernel copying the pieces is the concat_kernel departure: the
    verdict between a piece's kernel and the cat, which Inductor's piece kernel writes.)"""
    for g in (p.a, p.b):
        cat = _concat_kernel(g, p.ir)
        if cat is not None:
            other = p.b if g is p.a else p.a
            if set(cat.reads) & other.writes and other.kind in (Kind.POINTWISE, Kind.REDUCTION):
                return ours("concat_kernel", False, f"{other.nodes[-1].name} writes a piece of "
                            f"{cat.name}, a ConcatKernel to Inductor (the piece's kernel "
                            "stores its slice); we copy the pieces in a kernel of our own")
            return Verdict(False, "concat_kernel_never_fuses",
                           f"{cat.name} is a ConcatKernel (no kernel of its own to Inductor): "
                           "nothing fuses with it")
    return None


def _realized_into_slice(producer: FusedSchedulerNode, consumer: FusedSchedulerNode,
                         ir: GraphIR) -> bool:
    """Is the producer a piece the consumer's ConcatKernel is given as it is (no view), beside
    a piece the ConcatKernel copies? `ConcatKernel.realize_into` realizes a piece given as
    it is (`StorageBox.realize`) into its slice of the cat's buffer (a NonOwningLayout): a
    kernel of its own. A piece given through a view (a reshape of it), a graph input or an
    extern's output is copied instead, in a copy kernel that holds the cat (the copy's
    Pointwise inlines a viewed piece's loader). With nothing to copy, our cat kernel is
    the piece's own (the cat is on the piece's launch), and the piece is inlined into it."""
    cat = _concat_kernel(consumer, ir)
    fx_cat = ir.fx_node(cat.name) if cat is not None else None
    if fx_cat is None or not fx_cat.args or not isinstance(fx_cat.args[0], (list, tuple)):
        return False
    pieces = [a for a in fx_cat.args[0] if getattr(a, "name", None) is not None]
    whole = [a for a in pieces if a.name in producer.writes]
    return bool(whole) and any(_copied_piece(a, ir) for a in pieces if a not in whole)


def _copied_piece(piece, ir: GraphIR) -> bool:
    """A piece of a ConcatKernel it copies into its slice: a view of a value, a graph
    input, or a buffer an extern wrote in its own layout (`can_realize_into_without_copy`
    is false for them)."""
    buf = ir.base_of.get(piece.name)
    if buf != piece.name or buf not in ir.buffers:
        return True
    producer = ir.buffers[buf].producer
    return producer is None or producer not in ir.by_name or \
        ir.by_name[producer].kind in (Kind.EXTERN, Kind.TEMPLATE)


def _concat_kernel(g: FusedSchedulerNode, ir: GraphIR):
    """The cat of a kernel that Inductor's `cat` lowering (lowering.py) makes a ConcatKernel
    of, not `pointwise_cat` code: a buffer its pieces write, even read by one op only."""
    return next((n for n in g.nodes if n.target == "aten.cat.default"
                 and recompute.SEP not in n.name  # a recomputed cat is pointwise code
                 and not lowering.pointwise_cat(n, ir)), None)


def template_epilogue(p: Pair) -> Verdict | None:
    """Ours: a matmul template takes a pointwise epilogue over its output tile (an MTIA-style
    GEMM kernel). Inductor does this only for Triton templates (max-autotune); without it,
    mm/addmm/bmm are aten calls that nothing joins. Prologue fusion is on by default in open
    source torch 2.13 (`prologue_fusion`), but it applies to Triton templates too, and our
    template takes none: it reads its operands from memory."""
    ta, tb = p.a.kind is Kind.TEMPLATE, p.b.kind is Kind.TEMPLATE
    if not (ta or tb):
        return None
    if not config.matmul_templates:  # Inductor without max-autotune: an aten call
        what = _first_target(p.a if ta else p.b, Kind.TEMPLATE)
        return Verdict(False, "extern_never_fuses", f"{what} runs as its ATen kernel "
                       "(matmul_templates=False, as Inductor without max-autotune)")
    name = "template_epilogue"
    if ta and tb:
        return ours(name, False, "two matmul templates cannot share one kernel")
    if not p.vertical:
        return ours(name, False, "a template fuses only with its own epilogue, not siblings")
    producer, consumer = p.producer_consumer()
    if consumer.kind is Kind.TEMPLATE:
        return ours(name, False, "our matmul template takes no prologue: it reads its "
                    "operands from memory")
    if consumer.kind is not Kind.POINTWISE or consumer.indexed or consumer.scatter:
        what = "indexed op" if consumer.kind is Kind.POINTWISE else consumer.kind.value
        return ours(name, False, f"a {what} cannot be a template epilogue")
    if consumer.numel != producer.numel:
        return ours(name, False, f"epilogue space {_space(consumer)} != template output "
                    f"{producer.numel}")
    return ours(name, True, f"pointwise epilogue over the {producer.numel}-element matmul "
                "output")


def factory_into_consumer(p: Pair) -> Verdict | None:
    """A factory (full, zeros, iota) reads no memory: its consumer can make the values itself
    (Inductor never realizes it unless it is an output). A scatter's copy of it (scatter.py)
    is realized by the scatter's lowering: a buffer, no factory."""
    if not p.vertical:
        return None
    producer, consumer = p.producer_consumer()
    if producer.reads or not _pure_pointwise(producer) or \
            any(n.scatter_copy for n in producer.nodes):
        return None
    return Verdict(True, "factory_into_consumer",
                   f"{producer.nodes[0].name} reads nothing: {consumer.kind.value} kernel "
                   "creates its values in place", inline=True)


def device_mismatch(p: Pair) -> Verdict | None:
    """Host code stored as a kernel of its own (a CPU kernel: `ir.on_host`, realized by
    its lowering) never fuses with a kernel of the device (`Scheduler.can_fuse`: "device
    mismatch"); the device kernel loads the value as a scalar argument."""
    host_a, host_b = _on_host(p.a, p.ir), _on_host(p.b, p.ir)
    if host_a == host_b:
        return None
    host = p.a if host_a else p.b
    return Verdict(False, "device_mismatch", f"{host.nodes[-1].name} is host code (a 0-dim "
                   "value of host constants, stored): a CPU kernel, apart from the device's")


def _on_host(g: FusedSchedulerNode, ir: GraphIR) -> bool:
    """Host code stored by its lowering (unstored, it is inlined into its device readers:
    no kernel of its own, nothing to mismatch)."""
    return any(n.stored and ir.fx_node(n.name) is not None and on_host(ir.fx_node(n.name))
               for n in g.nodes)


KIND_RULES = [inlined_while_lowering, extern_never_fuses, concat_kernel_never_fuses,
              template_epilogue,
              device_mismatch, factory_into_consumer]


# ---- 3. choices.can_fuse: every pair --------------------------------------------------------

def no_shared_data(p: Pair) -> Verdict | None:
    if p.score == 0:
        return Verdict(False, "no_shared_data", "no shared data: no buffer both read or "
                       "write at the same addresses (Inductor's score_fusion_memory is 0)")
    return None


def _channels_last(g: FusedSchedulerNode, ir: GraphIR) -> bool:
    """Does the kernel loop channels-last? A layout copy fused with its producer loops in
    the producer's order (`layout.follows_producer`)."""
    return any(n.channels_last and not (n.layout_of and layout.follows_producer(
        n, g.writes, ir)) for n in g.nodes)


def _copy_of_other(last: FusedSchedulerNode, other: FusedSchedulerNode, ir: GraphIR) -> bool:
    """A layout copy of a buffer the other kernel writes, or reads whole. The copy's loop
    follows the buffer it reads, not the channels-last one it writes: Inductor orders a
    pointwise loop by a vote of its accesses' strides (`pick_loop_order`), and the copy's
    one read against its one write is a tie, which keeps the graph's order. So it shares
    that buffer at one index with its producer and with a sibling reading it whole (a
    residual branch reading the same activation)."""
    return any(n.layout_of and (layout.follows_producer(n, other.writes, ir)
                                or layout.follows_producer(n, other.reads, ir))
               for n in last.nodes)


def conv_input_layout(p: Pair) -> Verdict | None:
    """A kernel writing a convolution's input loops channels-last (Inductor's layout
    optimization); it reads or writes nothing at the same index as a kernel looping in the
    graph's order: no shared data (Inductor's score_fusion_memory is 0). Unless it reads a
    norm's output that Inductor inlines into it (`_reads_inlined_norm`): then it is computed
    in the norm's own loop, which stores it channels-last. Or unless it is a layout copy of
    the other's output that Inductor fuses into it (`layout.follows_producer`)."""
    if _layout_copy_apart(p):
        return Verdict(False, "conv_input_layout", "a layout copy for a convolution reads its "
                       "producer's output through a view its loops cannot be reordered to: "
                       "no data shared at the same index (layout.follows_producer)")
    last_a, last_b = _channels_last(p.a, p.ir), _channels_last(p.b, p.ir)
    if last_a == last_b:
        return None
    last, other = (p.a, p.b) if last_a else (p.b, p.a)
    if _reads_inlined_norm(last, other, p.ir) or _stored_for_it(last, other, p.ir) or \
            _copy_of_other(last, other, p.ir):
        return None
    if p.reorder and (_per_channel_reduction(last, other, p.ir)
                      or _reads_row_results(last, other, p.ir)):
        return None  # the reorder round: the pointwise loop takes the reduction's order
    return Verdict(False, "conv_input_layout", f"{last.nodes[-1].name} writes a convolution's "
                   "input, laid out channels-last: its loop order is not the other's, so no "
                   "data is shared at the same index")


def _layout_copy_apart(p: Pair) -> bool:
    """A layout copy (layout.py) and the kernel writing what it copies, when the copy cannot
    follow that kernel's loop order (a slice, a reshape across its dims)."""
    for copy, other in ((p.a, p.b), (p.b, p.a)):
        for n in copy.nodes:
            if n.layout_of and p.ir.base_of.get(n.layout_of[1]) in other.writes and \
                    not layout.follows_producer(n, other.writes, p.ir):
                return True
    return False


def _per_channel_reduction(last: FusedSchedulerNode, other: FusedSchedulerNode,
                           ir: GraphIR) -> bool:
    """Inductor's reorder round (`_try_reorder_loops_for_candidates`) reorders the loops of a
    pointwise kernel written channels-last to those of a reduction that reads its output
    whole over rows of one (sample, channel) each (a mean over H and W): the same loop
    variables in another order. A reduction over groups of channels (GroupNorm) splits the
    channel dim: its loops are other variables, and nothing is reordered."""
    if not _pure_pointwise(last) or other.kind is not Kind.REDUCTION or not other.inner:
        return False
    for buf in last.writes & other.reads:
        shape = ir.buffers[buf].shape
        if len(shape) == 4 and other.numel == shape[0] * shape[1] and \
                other.rnumel == shape[2] * shape[3]:
            return True
    return False


def _reads_row_results(last: FusedSchedulerNode, other: FusedSchedulerNode,
                       ir: GraphIR) -> bool:
    """Inductor's reorder round (`_try_reorder_loops_for_candidates`) also aligns a pointwise
    kernel written channels-last with a reduction over inner dims whose results it reads,
    broadcast over the reduced dims (MobileViTv2's `relu(value) * context_vector.expand_as(
    value)`, the context vector a sum over the last dim): the read and the reduction's write
    are one dep once ordered by stride (`normalize_with_stride_order`), so the pointwise
    loops are reordered to the reduction's and the two share that buffer."""
    if not _pure_pointwise(last) or other.kind is not Kind.REDUCTION or not other.inner:
        return False
    for node in other.nodes:
        if node.kind is not Kind.REDUCTION or node.unrolled:
            continue
        for buf in set(node.writes) & last.reads:
            shape = ir.buffers[buf].shape
            if math.prod(shape) != node.numel:
                continue  # not one result per row (a norm's normalized output)
            hows = {how for n in last.nodes for how in n.access.get(buf, ())}
            if hows and all(how == "full" or loops.trailing_broadcast(how, shape)
                            for how in hows):
                return True
    return False


def _stored_for_it(last: FusedSchedulerNode, other: FusedSchedulerNode, ir: GraphIR) -> bool:
    """A pointwise value Inductor stores for its reuse (`stored_on_reuse`: a BatchNorm read
    by SiLU's x * sigmoid(x)) that feeds the convolution's input is laid out channels-last
    too (`find_nodes_prefer_channels_last`: a node prefers it when a user does; applied by
    `maybe_apply_channels_last_stride_order` when it is realized): a pointwise loop follows
    its output's layout, so both loop in one order."""
    if not _pure_pointwise(other):
        return False
    fed = [b for n in other.nodes if n.stored for b in n.writes if b in last.reads]
    return bool(fed) and not any(ir.buffers[b].is_output for b in fed)


NORM_STATISTICS = 2  # a norm's normalize loads its mean and its rstd besides its inputs


def _reads_inlined_norm(last: FusedSchedulerNode, other: FusedSchedulerNode,
                        ir: GraphIR) -> bool:
    """Inductor decomposes a norm (GroupNorm) into its statistics, a reduction, and a
    pointwise normalize over the whole input. Read by one node, or by several when it loads
    at most `realize_reads_threshold` (4) values (input, mean, rstd, weight, bias: 5), the
    normalize is inlined into its reader, which then runs in the norm's loop (the graph's
    order, storing channels-last); reused and loading more, it is stored, and its reader
    loops channels-last on its own (`StorageBox.should_realize_on_reuse`)."""
    if _loops_channels_last(last, ir):
        return False
    for node in other.nodes:
        if node.kind is not Kind.REDUCTION or node.unrolled:
            continue
        for buf in node.writes:
            readers = ir.users.get(buf, ())
            full = _elements(ir.buffers[buf].shape) == node.numel * node.rnumel
            if not (full and readers and all(r in last.names for r in readers)):
                continue
            loads = len(node.reads) + NORM_STATISTICS
            if len(readers) == 1 or loads <= opcount.REALIZE_READS_ON_REUSE:
                return True
    return False


def _loops_channels_last(last: FusedSchedulerNode, ir: GraphIR) -> bool:
    """Does the kernel writing a convolution's input loop channels-last whatever it inlines?
    Inductor orders a pointwise kernel's loops by the strides of all its accesses
    (`ComputedBuffer.simplify_and_reorder`, `pick_loop_order`: a vote per access, a tie
    keeps the graph's order). Its store is channels-last; so is a value it reads that was
    stored for the same convolution (`maybe_apply_channels_last_stride_order` when
    `run_node` realizes it: a nearest upsample too large to inline); the buffers of the
    same shape it reads from outside in the graph's order (a norm's input) vote the other
    way. More channels-last accesses: its loops are channels-last, and it shares nothing
    at the same index with a kernel looping in the graph's order."""
    writers = [n for n in last.nodes if n.channels_last]
    if not writers:
        return False
    shape = ir.buffers[next(iter(writers[0].writes))].shape
    stored = {b for n in last.nodes if n.stored for b in n.writes
              if any(b in m.reads for m in last.nodes if m is not n)}
    channels_last = 1 + len(stored)
    in_order = sum(1 for b in last.reads if ir.buffers[b].shape == shape and not (
        ir.buffers[b].producer in ir.by_name and ir.by_name[ir.buffers[b].producer].channels_last))
    return channels_last > in_order


def max_fusion_size(p: Pair) -> Verdict | None:
    limit = config.max_fusion_size
    size = p.a.size + p.b.size
    if size > limit:
        return Verdict(False, "max_fusion_size", f"max_fusion_size: {size} nodes > {limit}")
    return None


def peak_memory(p: Pair) -> Verdict | None:
    """Inductor's can_fusion_increase_peak_memory: buffers of one size and dtype that each
    side reads as their only user (a graph output has the output as a user too) could be
    reused if the two ran apart; refuse when that memory exceeds 32x the traffic fusion
    saves. Inductor sums the buffers' sizes as their reuse keys have them
    (`buffer_reuse_key`: the storage size, in elements) and compares them with
    score_fusion_memory, in bytes: a float32 buffer weighs a quarter of its bytes."""
    ir = p.ir

    def last_reads(g: FusedSchedulerNode) -> set:
        return {(ir.buffers[b].dtype, math.prod(ir.buffers[b].shape)) for b in g.reads
                if len(ir.users.get(b, ())) == 1 and not ir.buffers[b].is_output
                and ir.buffers[b].producer is not None}

    overhead = sum(numel for _, numel in last_reads(p.a) & last_reads(p.b))
    if overhead > 32 * p.score:
        return Verdict(False, "peak_memory", f"fusion will increase peak memory: {overhead:,} "
                       f"elements could be reused > 32 x {p.score:,} bytes saved")
    return None


def max_fusion_unique_io_buffers(p: Pair) -> Verdict | None:
    limit = config.max_fusion_unique_io_buffers
    if limit is None:
        return None
    fused = FusedSchedulerNode.fuse(p.a, p.b)
    count = len(fused.reads) + len(fused.outputs(p.ir))
    if count > limit:
        return Verdict(False, "max_fusion_unique_io_buffers",
                       f"max_fusion_unique_io_buffers: {count} buffers > {limit}")
    return None


CHOICES = [no_shared_data, conv_input_layout, max_fusion_size, peak_memory,
           max_fusion_unique_io_buffers]


# ---- 4. vertical / horizontal: one loop nest for both ----------------------------------------

def scatter_output(p: Pair) -> Verdict | None:
    """A scatter stores through an index: its output is whole only after every store. Its
    stores into the copy of its input (scatter_in_one_kernel=False, scatter.py) are a StarDep
    on the copy, which Inductor never fuses with the copy's plain store."""
    producer, consumer = p.producer_consumer()
    if producer.scatter and _reads_scattered(producer, consumer):
        return Verdict(False, "scatter_output", f"{producer.nodes[-1].name} stores through an "
                       "index: its readers wait for the whole buffer")
    into = scatter.stores_into_copy(producer.writes, consumer.nodes)
    if into is not None:
        return Verdict(False, "scatter_output", f"{into} stores through an index into the "
                       f"copy of its input {producer.nodes[-1].name} writes (a StarDep: the "
                       "memory deps do not match)")
    return None


def _reads_scattered(producer: FusedSchedulerNode, consumer: FusedSchedulerNode) -> bool:
    """Does the consumer wait for a scatter's stores? For a scatter whose stores are a node
    of their own (scatter.py), only a reader of its buffer does (the memory deps of the
    indexed store match no plain read): the other values of the stores' kernel (a check of
    the index computed there) fuse with their readers. A scatter that is one kernel with
    the copy of its input (scatter_in_one_kernel): every reader of that kernel."""
    stores = [n for n in producer.nodes if n.scatter]
    if not all(scatter.copy_name(n.name) in n.reads for n in stores):
        return True
    return bool({b for n in stores for b in n.writes} & consumer.reads)


def indexed_read(p: Pair) -> Verdict | None:
    """A gather/embedding/cat/pool reads its input at other positions than it writes: a
    realized producer's loop cannot feed it (Inductor: the memory deps do not match)."""
    producer, consumer = p.producer_consumer()
    if consumer.indexed and (producer.writes & {
            b for n in consumer.nodes for b, how in n.access.items()
            if any(isinstance(h, tuple) and h[0] == "indexed" for h in how)}):
        return Verdict(False, "indexed_read", f"{consumer.nodes[0].name} reads "
                       f"{producer.nodes[-1].name}'s buffer through an index: not one loop")
    return None


def _fits_reduction(pw: FusedSchedulerNode, red: FusedSchedulerNode,
                    reorder: bool = False) -> str | None:
    if pw.numel == red.numel * red.rnumel:
        if red.inner:
            return f"full space {red.numel}x{red.rnumel}"
        if reorder:  # Inductor's reorder round: the pointwise takes the reduction's loop order
            return (f"full space {red.numel}x{red.rnumel}, its loops reordered to the "
                    "reduction's (loop_ordering_after_fusion)")
        return None
    if pw.numel == red.numel:
        return f"reduced space {red.numel}"
    return None


def _reorder_aligns(p: Pair, red: FusedSchedulerNode) -> bool:
    """Inductor's reorder round reorders a kernel's loops only to align a buffer both kernels
    access whole, in different orders (`shared_data_after_reordering_loop`: BatchNorm's
    input, read by the channel statistics and by the normalization). Sharing a smaller
    buffer (top-k indices read by a scatter and by a one-hot mask) is no reason to reorder."""
    full = red.numel * red.rnumel
    shared = (p.a.reads | p.a.writes) & (p.b.reads | p.b.writes)
    return any(_elements(p.ir.buffers[b].shape) == full for b in shared) and \
        _reorder_pairs_loops(p, red)


def _reorder_pairs_loops(p: Pair, red: FusedSchedulerNode) -> bool:
    """In the reorder round Inductor keeps each kernel's loops as its buffer's dims, unmerged
    (`simplify_and_reorder` does not normalize under loop_ordering_after_fusion), and
    `_try_reorder_loops_for_candidates` reorders a pointwise kernel's loops only onto as many
    loops of the reduction: a pointwise over (B, T, H) writing what a reduction reads as a
    (B*T, H) view summed over its rows (a linear's bias gradient) has 3 loops to the
    reduction's 2, and nothing aligns. `_try_reindex_pointwise_for_reduction` then splits the
    pointwise as (numel, rnumel) in its own memory order, which the reduction reads
    transposed: reordering that onto (numel, rnumel) fits only when the two are equal. A
    pointwise whose output the reduction reads in its own dims ((B, T) reduced) aligns.
    A buffer both only read (the gradient a bias's sum and a residual add both read, beside
    each other) is judged alike, by the loops of the pointwise reading it: its output's dims
    (`_try_reorder_loops_for_candidates` takes a shared read as a candidate too)."""
    pw = p.b if red is p.a else p.a
    for node in red.nodes:
        if node.kind is not Kind.REDUCTION or not node.rorder:
            continue
        red_dims = sorted(d for d in node.rorder[0] if d != 1)
        shapes = [_realized_shape(pw, buf, p.ir) for buf in pw.writes & set(node.reads)]
        shapes += [p.ir.buffers[m.writes[0]].shape for buf in pw.reads & set(node.reads)
                   for m in pw.nodes if buf in m.reads and m.writes and
                   m.numel == _elements(p.ir.buffers[buf].shape)]
        for shape in shapes:
            pw_dims = sorted(d for d in shape if d != 1)
            if pw_dims != red_dims and not (len(red_dims) == 2
                                            and node.numel == node.rnumel):
                return False
    return True


def _elements(shape: tuple[int, ...]) -> int:
    count = 1
    for d in shape:
        count *= d
    return count


def _slice(how) -> bool:
    """A read of a view that is part of the buffer at other positions (a slice, a shift),
    not a broadcast of it (a zero stride) and not the whole buffer."""
    if not isinstance(how, tuple) or len(how) != 3:
        return False
    shape, strides, offset = how
    return all(s != 0 or d == 1 for s, d in zip(strides, shape, strict=True))


def read_other_positions(p: Pair) -> Verdict | None:
    """A consumer that reads part of its producer's output at other positions than the
    producer writes them (`x[..., :-1]` shifted into `y[..., 1:]`, or computed inside a
    gather at the rows an index tensor picks: an indirect index): Inductor fuses a realized
    producer only with readers of the same index (its memory dependencies must match)."""
    producer, consumer = p.producer_consumer()
    shifted = _shifted(consumer, p.ir)
    rows = {n.numel for n in consumer.nodes if _unrolled_terms(n)}
    for node in consumer.nodes:
        for buf in producer.writes & set(node.reads):
            if _per_output(p.ir.buffers[buf], rows, node.access.get(buf, ())):
                continue
            if _unrolled_terms(node):
                return Verdict(False, "read_other_positions",
                               f"{node.name} is a reduction over {node.rnumel} elements "
                               "unrolled into pointwise code: it loads "
                               f"{producer.nodes[-1].name}'s output at each term's index, "
                               "not at the index it is written")
            moved = node.name in shifted and not _within_rows(shifted[node.name], producer,
                                                              p.ir.buffers[buf])
            if moved or any(_slice(how) for how in node.access.get(buf, ())) and \
                    not lowering.placed_back(node, buf, p.ir, consumer):
                return Verdict(False, "read_other_positions",
                               f"{node.name} reads {producer.nodes[-1].name}'s output at "
                               "other positions than it is written (a slice, a shift, "
                               "a gather)")
    return None


def _per_output(buf, rows: set[int], hows) -> bool:
    """A value with one element per output of an unrolled reduction of the consumer (a row's
    max, keepdim, read by `x - max` inside a sum unrolled over the row), read whole: each
    term loads it at the output's index, the index it is written at -- the same memory
    dependency, so Inductor fuses it (softmax's max and sum in one kernel)."""
    return math.prod(buf.shape) in rows and not any(_slice(how) for how in hows)


def _unrolled_terms(node) -> bool:
    """A reduction Inductor unrolls into pointwise code (`Reduction._unroll_reduction_fn`):
    each output element loads its `rnumel` terms, each at its own index (x[4*i + j])."""
    return node.unrolled and node.rnumel > 1


def _shifted(group: FusedSchedulerNode, ir: GraphIR) -> dict[str, set]:
    """Nodes of a group computed at other positions than the group's own -> the views that
    move them: read through a slice or gathered through an index by another member (an
    inlined op is recomputed where it is read: `index`'s inner_fn loads its input's body at
    the indirect index), and what they read inside the group, transitively ("terms": the
    terms of an unrolled reduction)."""
    inside = {b: ir.buffers[b].producer for b in group.writes}
    shifted: dict[str, set] = {}
    for node in reversed(group.nodes):
        for buf in node.reads:
            if buf not in inside:
                continue
            placed = lowering.placed_back(node, buf, ir, group)  # its slice written back
            views = {how for how in node.access.get(buf, ())
                     if _slice(how) and not placed or _gathered(how)}
            views |= shifted.get(node.name, set())
            if _unrolled_terms(node):
                views.add("terms")
            if views:
                shifted.setdefault(inside[buf], set()).update(views)
    return shifted


GATHERS = {"embedding", "gather", "index", "index_select"}  # loads at an index tensor's values


def _gathered(how) -> bool:
    """A read through an index tensor (a gather, `x[perm]`): other positions than its own,
    known only at run time (ir._indexed_access, the view it is taken of appended). Not a
    cat's or a pad's: their positions move by a constant (`_within_rows` judges those)."""
    return isinstance(how, tuple) and len(how) >= 4 and how[0] == "indexed" and \
        how[1] in GATHERS


def _within_rows(views: set, producer: FusedSchedulerNode, buf) -> bool:
    """Does a value of one element per row of the producer's reduction (a mean over the last
    dim) stay at its own index when read at positions moved by `views`? Yes when each view
    moves only inside rows of the reduced length (rotate_half's halves of a head, inside the
    RMSNorm's row of every head): the kernel loads it at the row's index, the index it is
    written at -- Inductor's memory dependencies match, and it fuses (OLMo-2's q/k norm)."""
    if producer.kind is not Kind.REDUCTION or not producer.inner or \
            math.prod(buf.shape) != producer.numel:
        return False
    return all(loops.stays_in_rows(view, producer.rnumel) or _gathers_last_dim(view)
               for view in views)


def _gathers_last_dim(how) -> bool:
    """A gather along the last dim only (`log_softmax.gather(-1, labels)`): each output
    loads its own row, at a column its index picks. A value of one element per row (the
    row's max, its sum of exponentials) is loaded at the row's index, where it is written."""
    if not _gathered(how) or len(how) < 4:
        return False
    rest, out = how[2], how[3]
    if how[1] == "gather":
        return bool(rest) and rest[0].lstrip("-").isdigit() and \
            int(rest[0]) in (-1, len(out) - 1)
    if how[1] == "index" and rest:
        picked = rest[0].strip("[]").split(", ")
        return len(picked) == len(out) and all(p == "None" for p in picked[:-1])
    return False


def split_reduction(p: Pair) -> Verdict | None:
    """A reduction Inductor splits in two (`Reduction.num_splits`, lowering.reduction_splits)
    is, to its scheduler, a first kernel reducing the input to partial results (a launch
    we do not model: rules.NOT_MODELLED split_reductions) and a second reducing those: our
    kernel. The second reads only the partial results, nothing its input's producer or
    siblings touch, and loops over outputs x splits: only a pointwise reader over its
    outputs fits it."""
    for g in (p.a, p.b):
        split = next((n for n in g.nodes if n.splits > 1), None)
        if split is None:
            continue
        other = p.b if g is p.a else p.a
        what = (f"Inductor splits {split.name} in two ({split.numel}x{split.rnumel} reduced "
                f"to {split.numel}x{split.splits} partial results first)")
        if set(split.reads) & other.writes or not p.vertical:
            return Verdict(False, "split_reduction", f"{what}: its first stage reads the "
                           "input, the second shares no data with "
                           f"{other.nodes[-1].name}")
        if set(split.writes) & other.reads and not (
                other.kind is Kind.POINTWISE and other.numel == split.numel):
            return Verdict(False, "split_reduction", f"{what}: its second stage loops over "
                           f"{split.numel}x{split.splits}, not {_space(other)}")
    return None


def reduction_fusion(p: Pair) -> Verdict | None:
    """Reductions fuse with reductions over the same space, and with pointwise kernels over
    the reduced space, or over the full space when the reduction runs over the inner dims."""
    ra, rb = p.a.kind is Kind.REDUCTION, p.b.kind is Kind.REDUCTION
    if not (ra or rb):
        return None
    if ra and rb:
        same = (p.a.numel, p.a.rnumel) == (p.b.numel, p.b.rnumel)
        name = "reduction_vertical" if p.vertical else "horizontal"
        if same and p.a.rorders != p.b.rorders and not _gathered_alike(p):
            return reduction_loop_order(p)
        return Verdict(same, name, f"reductions over {_space(p.a)} and {_space(p.b)}"
                       + (" share one loop" if same else " differ"))
    red, pw = (p.a, p.b) if ra else (p.b, p.a)
    fit = _fits_reduction(pw, red, p.reorder and _reorder_aligns(p, red))
    if not p.vertical:
        name = "horizontal"
    else:
        name = "reduction_prologue" if p.producer_consumer()[0] is pw else "reduction_epilogue"
    if fit is not None and name == "reduction_epilogue" and _rows_merged(pw, red, p.ir):
        return Verdict(False, name, f"{red.nodes[-1].name} loops over its rows in its input's "
                       "memory order (a permuted view) and stores them so; "
                       f"{pw.nodes[-1].name}'s loop merges a row dim with the reduced one "
                       "(a reshape): no reordering of its loops reads them in that order")
    if fit is not None and name == "reduction_prologue":
        misread = loops.full_reduction_misreads(pw, red, p.ir, size_hint)
        if misread is not None:
            return Verdict(False, name, f"{red.nodes[-1].name} loops in the order of its other "
                           f"loads and reads {misread} in another order than "
                           f"{pw.nodes[-1].name} writes it: their memory dependencies differ, "
                           "and reordering the pointwise's loops would tile it in 2D")
    if fit is not None and red.inner and (
            tiles := tiling.prevents_reduction_fusion(pw, red, p.ir)) is not None:
        return Verdict(False, "tiling_prevents_reduction_fusion", f"{pw.nodes[-1].name} "
                       f"accesses memory across its loops (a transpose): Triton tiles it "
                       f"{'x'.join(map(str, tiles))}, not flat nor as the reduction's "
                       f"{red.numel}x{red.rnumel} (SIMDScheduling.can_fuse)")
    if fit is None:
        why = (f"pointwise space {pw.numel} fits neither {red.numel}x{red.rnumel} nor "
               f"{red.numel}")
        if pw.numel == red.numel * red.rnumel:
            why = (f"pointwise over {pw.numel} elements is not in the loop order of a "
                   "reduction over outer dims (until the reorder round)")
        return Verdict(False, name, why)
    return Verdict(True, name, f"pointwise over the reduction's {fit}")


def _rows_merged(pw: FusedSchedulerNode, red: FusedSchedulerNode, ir: GraphIR) -> bool:
    """An epilogue over a reduction's whole input that cannot loop in the reduction's row
    order. A reduction reading a permuted view loops over its rows in its input's memory order
    and stores its output in that order (`rows_permuted`). Inductor fuses a reader over the
    full space only when the reader's loads of that output are at the index it is written
    (`fusable_read_and_write`), after reordering the reader's loops if need be (the reorder
    round, `_try_reorder_loops_for_candidates`): that takes each row dim as a loop of the
    reader's own. A reader whose loop is a reshape merging a row dim with the reduced one
    (heads' rows normalized, then `reshape(B, T, heads * d)`) has no such loop: the two
    stay apart."""
    if pw.numel != red.numel * red.rnumel or not any(n.rows_permuted for n in red.nodes):
        return False
    for node in red.nodes:
        if not node.rows_permuted:
            continue
        rows = [d for d in ir.buffers[node.writes[0]].shape if d > 1]
        for member in pw.nodes:
            if member.kind is not Kind.POINTWISE or member.numel != pw.numel:
                continue
            dims = [d for d in ir.buffers[member.writes[0]].shape if d > 1]
            for d in rows:
                if d not in dims:
                    return True
                dims.remove(d)
            if math.prod(dims) != node.rnumel:
                return True
    return False


RESHAPES = frozenset({"view", "reshape", "_unsafe_view"})


def _realized_shape(pw: FusedSchedulerNode, buf: str, ir: GraphIR) -> tuple:
    """The shape of the loops `buf` is stored with. Its own, except for a value read only
    through a reshape that several ops read, one a matmul (`run_node`'s `need_fixed_layout`):
    the reshape's `realize_hint` stores only code loading from more than one place
    (`nontrivial_read_count > 1`), and a copy loading one value (the contiguous copy of a
    permuted gradient) is left unstored; `require_stride_order` then copies the reshape
    itself, with the reshape's loops ([B*T, C], not [B, T, C]), which the reorder round can
    reorder onto a sum over the B*T rows (a linear's bias gradient)."""
    shape = ir.buffers[buf].shape
    writer = next((m for m in pw.nodes if buf in m.writes), None)
    fx = ir.fx_node(writer.name) if writer is not None else None
    reshape = None
    while fx is not None and len(users := opcount.data_users(fx)) == 1 and \
            _op_name(users[0]) in RESHAPES:  # a chain of reshapes: the last one's readers
        reshape = fx = users[0]
    if reshape is None or not isinstance(reshape.meta.get("val"), torch.Tensor):
        return shape
    readers = opcount.data_users(reshape)
    loads = {b for b in pw.reads if _elements(ir.buffers[b].shape) > 1}
    if len(readers) > 1 and any(_op_name(r) in opcount.FIXED_LAYOUT_READERS for r in readers) \
            and len(loads) <= 1:
        return tuple(size_hint(d) for d in reshape.meta["val"].shape)
    return shape


def reduction_loop_order(p: Pair) -> Verdict:
    """Two reductions over spaces of one size that reduce other dims of their input (a cumsum
    along the rows, another along the columns) read it in other orders: no load is at the
    same index in both (Inductor's score_fusion_memory is 0), and Inductor reorders the loops
    of a pointwise kernel to fit, never a reduction's (`_try_reorder_loops_for_candidates`:
    "Don't reorder loops since both nodes are reductions")."""
    return Verdict(False, "reduction_loop_order", f"reductions over {_space(p.a)} and "
                   f"{_space(p.b)} reduce other dims: they read their input in other orders, "
                   "and a reduction's loops are never reordered")


def _gathered_alike(p: Pair) -> bool:
    """Do two reductions over other dims both load a buffer through one gather whose index
    tensors pick every dim either reduces (DETR's cumsums of a pixel mask resized by a
    nearest interpolation: rows and columns both gathered)? The load's MemoryDep index is
    then the kept leading dims and the gather's indirect variables (`tmp0`: the same names
    in both bodies, `_indirect` in scheduler.py), equal in both kernels whatever dim each
    reduces: score_fusion_memory counts the buffer, and Inductor fuses the two reductions
    (`SIMDScheduling.can_fuse`: the same numel and rnumel)."""
    fx = None
    for buf in p.a.reads & p.b.reads:
        keys = [{(h[1], *h[3:]) for n in g.nodes for h in _gathers(n.access.get(buf, ()))}
                for g in (p.a, p.b)]
        for key in keys[0] & keys[1]:
            if fx is None:
                fx = {n.name: n for n in p.ir.gm.graph.nodes}
            gather = next((fx.get(recompute.origin(n.name)) for n in p.a.nodes
                           for hows in n.access.values() for h in hows
                           if _gathered(h) and (h[1], *h[3:]) == key), None)
            picked = _indexed_trailing_dims(gather)
            shape = tuple(size_hint(d) for d in gather.meta["val"].shape) if picked else ()
            if picked and all(_reduced_from_end(n, shape) >= -picked for g in (p.a, p.b)
                              for n in g.nodes if n.kind is Kind.REDUCTION):
                return True
    return False


def _gathers(hows) -> list:
    """The gathers among a node's reads of a buffer, also those of a value computed inside
    the gather that reads it (a clone's read "through" its reader's view)."""
    found = []
    for how in hows:
        if isinstance(how, tuple) and len(how) == 2 and how[0] == "through":
            found += _gathers(how[1])
        elif _gathered(how):
            found.append(how)
    return found


def _indexed_trailing_dims(gather) -> int:
    """How many trailing dims of an `index` gather's output its index tensors pick (0 when a
    dim after the first index tensor is sliced through: its loop variable is direct)."""
    if gather is None or str(gather.target) != "aten.index.Tensor" or len(gather.args) < 2:
        return 0
    indices = list(gather.args[1])
    first = next((i for i, t in enumerate(indices) if t is not None), None)
    src = gather.args[0].meta.get("val")
    if first is None or any(t is None for t in indices[first:]) or src is None or \
            len(indices) != src.dim():
        return 0
    out = gather.meta.get("val")
    return out.dim() - first if out is not None else 0


def _reduced_from_end(node, shape: tuple[int, ...]) -> int:
    """The outermost dim a reduction reduces, counted from the end (-1: the last dim); a
    reduction over the innermost dims reduces those of `shape` (its input's trailing dims)
    whose product is its rnumel."""
    if node.rorder:
        shape, dims = node.rorder
        return min(d - len(shape) for d in dims)
    count, at = 1, 0
    while count < node.rnumel and at < len(shape):
        at += 1
        count *= shape[-at]
    return -max(at, 1)


def vertical_pointwise(p: Pair) -> Verdict | None:
    """Producer and consumer looping over the same elements become one loop."""
    same = p.a.numel == p.b.numel
    return Verdict(same, "vertical_pointwise", f"iteration spaces {p.a.numel} and {p.b.numel}"
                   + (" match" if same else " differ"))


VERTICAL = [scatter_output, indexed_read, read_other_positions, split_reduction,
            reduction_fusion, vertical_pointwise]


def score_fusion_memory_threshold(p: Pair) -> Verdict | None:
    limit = config.score_fusion_memory_threshold
    if p.score < limit:
        return Verdict(False, "score_fusion_memory_threshold",
                       f"score_fusion_memory_threshold: saves {p.score} bytes < {limit}")
    return None


LONG_DISTANCE = 64  # Inductor's are_long_distant_nodes: graph-order distance


def long_distance(p: Pair) -> Verdict | None:
    distance = max(abs(p.a.min_order - p.b.max_order), abs(p.b.min_order - p.a.max_order))
    if distance > LONG_DISTANCE:
        return Verdict(False, "long_distance", f"nodes are too far apart ({distance} > "
                       f"{LONG_DISTANCE}): fusing them may increase peak memory")
    return None


def horizontal(p: Pair) -> Verdict | None:
    """Siblings that read the same buffer over the same space: read it once."""
    same = p.a.numel == p.b.numel
    return Verdict(same, "horizontal", f"siblings share {p.score:,} bytes of input; spaces "
                   f"{p.a.numel} and {p.b.numel}" + (" match" if same else " differ"))


HORIZONTAL = [score_fusion_memory_threshold, long_distance, split_reduction,
              reduction_fusion, horizontal]


# ---- 5. ours ---------------------------------------------------------------------------------

def on_chip_memory_budget(p: Pair) -> Verdict | None:
    """Ours: intermediates a fused kernel no longer writes to DRAM must stay on chip."""
    fused = FusedSchedulerNode.fuse(p.a, p.b)
    budget = config.on_chip_budget_bytes(p.profile)
    kept = p.ir.nbytes(fused.writes - fused.outputs(p.ir))
    if kept > budget:
        return ours("on_chip_memory_budget", False,
                    f"on_chip_memory_budget: {kept:,} bytes of intermediates > {budget:,}")
    return None


RULES = [*KIND_RULES, scatter_output, indexed_read, read_other_positions, split_reduction,
         reduction_fusion, vertical_pointwise, horizontal]


def _first(checks, p: Pair) -> Verdict | None:
    return next((v for check in checks if (v := check(p)) is not None), None)


def can_fuse(p: Pair) -> Verdict:
    """Inductor's order: kinds decide first, then the limits every pair must pass, then the
    vertical or horizontal checks; a yes must also pass our on-chip budget."""
    verdict = _first(KIND_RULES, p)
    if verdict is not None and (verdict.inline or not verdict.fused):
        return verdict
    refusal = _first(CHOICES, p)
    if refusal is not None:
        return refusal
    if verdict is None:
        verdict = _first(VERTICAL if p.vertical else HORIZONTAL, p)
    if verdict is None or not verdict.fused:
        return verdict or Verdict(False, "no_rule", "no fusion rule applies")
    return on_chip_memory_budget(p) or verdict
