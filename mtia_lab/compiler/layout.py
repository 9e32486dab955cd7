"""Inductor's layout copies of a convolution's operands (`extern_in_triton=False`).

Inductor's convolution lowering (torch 2.13, `kernel/conv.py: convolution`) asks for the
input, then the weight, in one stride order: channels-last for a 2-d convolution when the
graph's layout optimization is on (`GraphLowering.decide_layout_opt`: `layout_optimization`
below; `ExternKernel.require_channels_last`), else the order of the output the convolution
will write (`require_stride_order`: contiguous). Both go through `require_strides`
(torch/_inductor/ir.py). Where the operand is a buffer whose layout is still free -- the
output of a Triton kernel, read whole -- its producer simply writes it in that order (no
launch: `rules.conv_input_layout` models the producer's loop order). Where its layout is
fixed -- a graph input, an extern's output, a view of a buffer (`convert_to_reinterpret_view`
freezes it) -- and not already in that order, Inductor copies it (`copy_input`: a Pointwise
clone, a Triton launch of its own unless it fuses with its producer: `follows_producer`) and
the extern call reads the copy. One pixel or one channel is the same layout either way.

By default (`extern_in_triton=True`, a departure of ours) our extern kernel is the whole op
and no copy is planned. With the departure off, `split(ir)` gives each such operand a node of
its own, `layout_copy_<role>_<conv>` (an `aten.clone` into that order), that the
convolution reads instead: the plan, its costs (the copy's bytes) and its views name it.
A bias Inductor peels off the call (`add` after it) is inlined into the kernels of the
convolution's readers (opcount counts its loads there), unless something needs it stored: the
graph returns it, or an extern reads it. Then it is a buffer of Inductor's, and with the
departure off a node of ours, `bias_add_<conv>` (`peeled_biases`), that reads the call's
output (`<conv>_call`) and writes the convolution's buffer: it fuses as any pointwise node.

A matmul's operand is copied too (`copy_input`, from `ExternKernel.realize_input`) when it is
a view that no longer exists once Inductor fixed the layout of the buffer it views, padded
(`Layout._pad_strides`, config.comprehensive_padding: `copied_view`): attention
probabilities (B, H, S, S) read as (B*H, S, S) when H*S*S is over 1024 and no multiple of
32 floats. Such a copy, `layout_copy_mat1_<matmul>`, reads the buffer at other addresses
than any kernel writing or reading it whole: it shares no data, a launch of its own. So is
the copy of a view through a cat Inductor drops (a DynamicCache's empty keys and the new
ones): the cat's readers view the permuted piece, and a reshape merging its dims is a clone
in Inductor's graph (`copied_view`), one copy for every matmul reading that reshape.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from .._compat import size_hint
from . import loops, lowering
from .ir import (
    Buffer,
    GraphIR,
    Kind,
    SchedulerNode,
    _access,
    _noop_copy,
    cat_kept,
    conv_operands,
    fixed_by_a_user,
    live_users,
    outer_product,
)

WHY = "layout copy for conv, Inductor's layout_optimization"
PADDED_WHY = ("copy for a matmul, a view Inductor cannot make of the buffer (padded: "
              "comprehensive_padding; or viewed through a cat it drops)")
NHWC_ORDER = (0, 2, 3, 1)  # dims from the largest stride to the smallest, channels-last


def copy_name(conv: str, role: str) -> str:
    return f"layout_copy_{role}_{conv}"


def copies(ir: GraphIR) -> list[tuple[str, str, str]]:
    """(extern, role, FX argument) of each operand Inductor copies before the extern call,
    in Inductor's order: a convolution's into channels-last (see the module docstring), a
    matmul's that Inductor's layout leaves no view of (`copied_view`: the value copied)."""
    fx = {n.name: n for n in ir.gm.graph.nodes}
    out = []
    channels_last = layout_optimization(ir.gm)
    for op, role, arg in _extern_operands(ir.gm):
        val = arg.meta.get("val")
        if op.name not in ir.by_name or not isinstance(val, torch.Tensor):
            continue
        if op.target in MATMUL_OPERANDS:
            copied = copied_view(arg, ir, fx)
            if copied is not None:
                out.append((op.name, role, copied))
            continue
        if _numel(val) <= 1 or _ordered(val, wanted_order(val, channels_last)):
            continue
        if not _layout_fixed(arg, ir, fx):
            continue  # its producer writes it in that order itself
        if channels_last and val.dim() == 4 and _concat_channels_last(arg, ir, fx):
            continue  # a ConcatKernel created channels-last: already in that order
        out.append((op.name, role, arg.name))
    return out


_CONVOLUTIONS = (torch.ops.aten.convolution.default,)


def _concat_channels_last(arg: torch.fx.Node, ir: GraphIR, fx: dict) -> bool:
    """Is the operand a cat Inductor lowers as a ConcatKernel laid out channels-last?
    `ConcatKernel.create` gives its output channels-last strides when a piece is a stored
    buffer whose layout is fixed channels-last when the cat is lowered: a convolution's
    output, or a value a convolution lowered earlier read (`require_channels_last` froze
    its layout: a decoder's skip features, convolved on, then concatenated with the
    upsampled path). A convolution reading that cat then needs no copy."""
    base = ir.base_of.get(arg.name)
    producer = ir.by_name.get(ir.buffers[base].producer or "") if base in ir.buffers else None
    if producer is None or producer.target != "aten.cat.default" or \
            lowering.pointwise_cat(producer, ir):
        return False
    cat = fx.get(producer.name)
    order = {n: i for i, n in enumerate(ir.gm.graph.nodes)}
    pieces = cat.args[0] if cat is not None and cat.args else ()
    for piece in pieces:
        if not isinstance(piece, torch.fx.Node) or ir.base_of.get(piece.name) != piece.name:
            continue  # a view of a buffer: no storage of its own
        if piece.target in _CONVOLUTIONS:
            return True
        if any(u.target in _CONVOLUTIONS and u.args and u.args[0] is piece
               and order[u] < order[cat] for u in live_users(piece)):
            return True
    return False


aten = torch.ops.aten
# a matmul's operands Inductor's lowering hands the extern call (`mm_args`: realize_inputs)
MATMUL_OPERANDS = {aten.mm.default: (0, 1), aten.bmm.default: (0, 1),
                   aten.addmm.default: (1, 2), aten.baddbmm.default: (1, 2)}
_VIEWS = {aten.view.default, aten._unsafe_view.default, aten.reshape.default,
          aten.expand.default, aten.permute.default, aten.transpose.int, aten.t.default,
          aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.default, aten.alias.default}
_RESHAPES = {aten._unsafe_view.default, aten.reshape.default}


def _extern_operands(gm: torch.fx.GraphModule):
    """(extern, role, FX argument): a convolution's (conv_operands), then a matmul's, each op
    in graph order."""
    convs: dict[torch.fx.Node, list] = {}
    for conv, role, arg in conv_operands(gm):
        convs.setdefault(conv, []).append((conv, role, arg))
    for fx_node in gm.graph.nodes:
        yield from convs.get(fx_node, ())
        if outer_product(fx_node):
            continue  # a broadcast multiply: no call, no operand handed to one
        for role, i in zip(("mat1", "mat2"), MATMUL_OPERANDS.get(fx_node.target, ()),
                           strict=False):
            arg = fx_node.args[i] if len(fx_node.args) > i else None
            if isinstance(arg, torch.fx.Node):
                yield fx_node, role, arg


def padded_strides(val: torch.Tensor) -> tuple[int, ...] | None:
    """The strides Inductor gives a Triton kernel's output when it fixes its layout
    (`Layout._pad_strides`, config.comprehensive_padding): from the smallest stride up, a
    stride over `padding_stride_threshold` (1024 elements) is rounded up to a multiple of
    128 bytes; None when nothing is padded (or the buffer is channels-last contiguous)."""
    shape = [size_hint(d) for d in val.shape]
    strides = [size_hint(s) for s in val.stride()]
    if len(shape) == 4 and _ordered(val, NHWC_ORDER) and not val.is_contiguous():
        return None  # pad_channels_last is off
    align = PADDING_BYTES // val.element_size()
    fill = sorted(range(len(shape)), key=lambda d: (strides[d], d))
    new = [0] * len(shape)
    new[fill[0]] = 1
    padded = False
    for prev, dim in zip(fill, fill[1:], strict=False):
        new[dim] = new[prev] * shape[prev]
        if new[dim] > PADDING_STRIDE_THRESHOLD and new[dim] % align:
            new[dim] = -(-new[dim] // align) * align
            padded = True
    return tuple(new) if padded else None


PADDING_STRIDE_THRESHOLD, PADDING_BYTES = 1024, 128  # Inductor's config defaults
_DISLIKE_PADDING = {aten.convolution.default, aten.convolution_backward.default}
_LIKE_PADDING = {"var_mean", "sum", "mean", "prod", "any", "amin", "amax", "min", "max",
                 "argmin", "argmax", "scatter_reduce"}


def _dislikes_padding(node: torch.fx.Node, seen: dict) -> bool:
    """Inductor's `mark_nodes_dislike_padding` (graph.py), for the node being lowered when a
    layout is fixed (`_pad_strides` reads `V.get_current_node()`): no padding while lowering
    a node the graph returns, or viewed by what it returns (user-visible strides:
    `extend_user_visible_output_strides`), nor one a convolution reads, through ops that
    are not reductions (they `like` padding: the mark stops there)."""
    if any(u.op == "output" for u in node.users) or _viewed_by_output(node):
        return True
    return _reaches_convolution(node, seen)


def _viewed_by_output(node: torch.fx.Node) -> bool:
    return any(u.target in _VIEWS and (any(w.op == "output" for w in u.users)
                                       or _viewed_by_output(u)) for u in node.users)


def _reaches_convolution(node: torch.fx.Node, seen: dict) -> bool:
    if node in seen:
        return seen[node]
    seen[node] = False
    packet = getattr(node.target, "overloadpacket", None)
    found = node.target in _DISLIKE_PADDING or (
        packet is not None and packet.__name__ not in _LIKE_PADDING
        and any(_reaches_convolution(u, seen) for u in live_users(node)))
    seen[node] = found
    return found


def copied_view(arg: torch.fx.Node, ir: GraphIR, fx: dict) -> str | None:
    """The value Inductor copies for this matmul operand, None if none: when the operand is
    a view whose dims no longer merge over the strides the buffer it views has in Inductor's
    graph, though they did in ours:
    - a view (a reshape merging dims: attention probabilities (B, H, S, S) read as
      (B*H, S, S)) of a buffer a Triton kernel writes, not a graph output (`pad_outputs` is
      off), whose padded strides (`padded_strides`) the view's dims no longer merge over:
      the matmul's lowering copies its operand (`ExternKernel.realize_input`: a view it
      cannot reinterpret goes to `copy_input`, a Triton launch of its own, one per call);
    - a view through a cat of one piece and empty ones (a DynamicCache's first keys): our
      graph's cat writes a contiguous value, Inductor's drops the cat (`ir._noop_copy`) and
      its readers view the piece where it is, permuted heads of a projection: a reshape
      merging the batch and heads then cannot view it, and Inductor's decomposition of
      `reshape` clones its input (`clone(memory_format=contiguous)`, a pointwise node of
      the graph), the one copy every reader of that reshape reads (a backward's matmul
      reading it transposed too): the value copied is that reshape's."""
    base = ir.base_of.get(arg.name)
    buf = ir.buffers.get(base) if base else None
    if buf is None or base == arg.name or base not in fx:
        return None
    found = _view_chain(arg, base, ir)
    whole = fx[base].meta.get("val")
    if found is None or not isinstance(whole, torch.Tensor):
        return None
    chain, through_cat = found
    strides = padded_strides(whole) if _padded_base(arg, base, buf, ir) else None
    if strides is None:
        if not through_cat:
            return None
        strides = tuple(size_hint(s) for s in whole.stride())
    value = torch.empty_strided([size_hint(d) for d in whole.shape], strides, device="meta",
                                dtype=whole.dtype)
    for view in reversed(chain):
        target = aten.view.default if view.target in _RESHAPES else view.target
        try:
            value = target(value, *view.args[1:], **view.kwargs)
        except (RuntimeError, ValueError):  # ValueError: torch._refs' view
            padded = not through_cat or _padded_base(arg, base, buf, ir)
            return arg.name if padded else view.name
    return None


def _padded_base(arg: torch.fx.Node, base: str, buf: Buffer, ir: GraphIR) -> bool:
    """Does Inductor pad the buffer the matmul operand views when it fixes its layout: a
    Triton kernel's output, not a graph output, no ConcatKernel, lowered while no node that
    dislikes padding is (`_dislikes_padding`)?"""
    producer = ir.by_name.get(buf.producer) if buf.producer else None
    matmul = next(u for u in arg.users if u.target in MATMUL_OPERANDS)
    if _dislikes_padding(matmul, {}):
        return False
    if producer is None or buf.is_output or producer.kind not in (Kind.POINTWISE,
                                                                   Kind.REDUCTION):
        return False
    # a ConcatKernel: created with a FixedLayout, never padded
    return not (producer.target == "aten.cat.default" and
                not lowering.pointwise_cat(producer, ir))


def _view_chain(arg: torch.fx.Node, base: str,
                ir: GraphIR) -> tuple[list[torch.fx.Node], bool] | None:
    """The views from the buffer `base` to `arg`, last first, and whether they pass a cat
    Inductor drops (a piece and empty ones: `ir._noop_copy`, its readers view the piece); a
    clone that is no kernel of ours (dropout's) is the same values. None when something
    else lies between."""
    chain = []
    through_cat = False
    node = arg
    while node.name != base:
        if node.target is aten.cat.default and _noop_copy(node):
            node, through_cat = cat_kept(node)[0], True
            continue
        removed = node.target is aten.clone.default and node.name not in ir.by_name
        if not (node.target in _VIEWS or removed) or not isinstance(node.args[0], torch.fx.Node):
            return None
        if not removed:  # a clone that is no kernel of ours (dropout's): the same values
            chain.append(node)
        node = node.args[0]
    return chain, through_cat


def wanted_order(val: torch.Tensor, channels_last: bool) -> tuple[int, ...]:
    """The dims of a convolution operand from the largest stride to the smallest, as
    Inductor asks for them: channels-last for a 2-d convolution under layout_optimization
    (`require_channels_last`), else the output's order (`require_stride_order` of
    `conv_layout`: contiguous, the order the device's convolution writes)."""
    if channels_last and val.dim() == 4:
        return NHWC_ORDER
    return tuple(range(val.dim()))


def _numel(val: torch.Tensor) -> int:
    n = 1
    for d in val.shape:
        n *= size_hint(d)
    return n


# Inductor's measured channels-last speed-up (< 1) or slow-down (> 1) by kind of convolution
# (GraphLowering.decide_layout_opt, for an inference graph)
GROUPED, SMALL, IN_OUT, DEFAULT = 1.358, 0.783, 0.725, 0.823


def layout_optimization(gm: torch.fx.GraphModule) -> bool:
    """Inductor's `GraphLowering.decide_layout_opt` for an inference graph on a device
    without mkldnn: no convolution, fewer than one per 300 nodes, or symbolic sizes: off;
    else on when the convolutions' FLOPs, each weighted by the speed-up measured for its kind
    (grouped with several input channels per group, small: at most 64 channels in and out,
    in_out: twice as many in as out with a wider kernel, default), do not grow."""
    convs = [n for n in gm.graph.nodes if n.target is torch.ops.aten.convolution.default]
    if not convs or len(gm.graph.nodes) >= 300 * len(convs):
        return False
    weights = [c.args[1].meta.get("val") for c in convs]
    if any(not isinstance(w, torch.Tensor) or _symbolic(w) or _symbolic(c.args[0].meta["val"])
           for c, w in zip(convs, weights, strict=True)):
        return False
    total = weighted = 0.0
    for conv, w in zip(convs, weights, strict=True):
        flops = _conv_flops(conv, w)
        total += flops
        weighted += flops * _speedup(conv, w)
    return weighted <= total


def _symbolic(t: torch.Tensor) -> bool:
    return any(not isinstance(d, int) for d in (*t.shape, *t.stride()))


def _speedup(conv: torch.fx.Node, w: torch.Tensor) -> float:
    out_c, in_c = w.shape[0], w.shape[1]
    if conv.args[-1] > 1 and in_c > 1:
        return GROUPED
    if out_c <= 64 and in_c <= 64:
        return SMALL
    if out_c * 2 <= in_c and w.shape[2] > 1:
        return IN_OUT
    return DEFAULT


def _conv_flops(conv: torch.fx.Node, w: torch.Tensor) -> float:
    """2 * output elements * multiply-adds per output (in channels per group x kernel)."""
    out = conv.meta.get("val")
    per_output = 1
    for d in w.shape[1:]:
        per_output *= d
    return 2.0 * (out.numel() if isinstance(out, torch.Tensor) else 0) * per_output


def _layout_fixed(arg: torch.fx.Node, ir: GraphIR, fx: dict) -> bool:
    """Is the operand's layout fixed when the convolution is lowered: a graph input, an
    extern's output, a cat lowered as a ConcatKernel, a value with several users one of
    which fixed its layout (`ir.fixed_by_a_user`: a forward activation a convolution
    backward reads too), or a view of a buffer (a slice, a reshape to other sizes)? A Triton
    kernel's output read whole is still a FlexibleLayout: its producer takes the order."""
    base = ir.base_of.get(arg.name)
    buf = ir.buffers.get(base) if base else None
    if buf is None or buf.producer is None:
        return True
    producer = ir.by_name.get(buf.producer)
    if producer is None or producer.kind not in (Kind.POINTWISE, Kind.REDUCTION):
        return True
    if producer.target == "aten.cat.default" and not lowering.pointwise_cat(producer, ir):
        return True  # a ConcatKernel: created with a FixedLayout (ir.py ConcatKernel.create)
    if base in fx and fixed_by_a_user(fx[base]):
        return True  # fixed at its FX strides when lowered (a convolution backward reads it)
    if base == arg.name:
        return False
    mine, whole = arg.meta.get("val"), fx[base].meta.get("val") if base in fx else None
    return not (isinstance(whole, torch.Tensor) and tuple(mine.shape) == tuple(whole.shape)
                and tuple(mine.stride()) == tuple(whole.stride()))


def _ordered(val: torch.Tensor, order: tuple[int, ...]) -> bool:
    """Inductor's `Layout.is_stride_ordered`: dims of size 1 left out, the strides of the
    others descend in `order`."""
    dims = [d for d in order if size_hint(val.shape[d]) != 1]
    strides = [size_hint(val.stride(d)) for d in dims]
    return all(a >= b for a, b in zip(strides, strides[1:], strict=False))


def split(ir: GraphIR, found: list[tuple[str, str, str]] | None = None) -> GraphIR:
    """A copy of `ir` with a layout copy node before each convolution operand of `copies`
    (all of them by default), the convolution reading the copy, and the add of each bias
    Inductor peels off a convolution and stores (`peeled_biases`) a node of its own after
    it. `ir` is left unchanged."""
    found = copies(ir) if found is None else found
    return _peel_biases(_copy_operands(ir, found) if found else ir, found)


BIAS_PREFIX = "bias_add_"


def bias_name(conv: str) -> str:
    return f"{BIAS_PREFIX}{conv}"


def call_buffer(conv: str) -> str:
    """The buffer a convolution's call writes, its bias not added yet."""
    return f"{conv}_call"


def peeled_biases(ir: GraphIR, found: list[tuple[str, str, str]]) -> list[str]:
    """The biased convolutions whose bias add Inductor stores in a buffer of its own: off the
    CPU its convolution lowering (kernel/conv.py `convolution`) runs the extern call without
    the bias and returns `add(call, bias.view(C, 1, ...))`, pointwise code each Triton reader
    inlines, stored (realized) only where something needs a buffer: the graph returns it
    (or a view of it), or an op that is no Triton code of Inductor's reads it, directly or
    through views (an extern's lowering `realize_input`s it: a convolution, a matmul, a
    fallback such as an ATen LayerNorm). Its readers' kernels compute it otherwise (opcount
    `_peeled_bias`). Where a layout copy of ours reads the convolution's output, that copy
    stands for the stored add already (`_bias_stored_early`)."""
    fx = {n.name: n for n in ir.gm.graph.nodes}
    copied = {ir.base_of.get(arg) for _, _, arg in found}
    out = []
    for node in ir.nodes:
        conv = fx.get(node.name)
        if conv is None or conv.target is not torch.ops.aten.convolution.default or \
                node.kind is not Kind.EXTERN or len(conv.args) < 3 or \
                not isinstance(conv.args[2], torch.fx.Node) or node.name in copied:
            continue
        val = conv.meta.get("val")
        if not isinstance(val, torch.Tensor) or val.dim() < 3 or size_hint(val.shape[1]) == 0:
            continue
        if ir.buffers[node.name].is_output or _read_by_extern(conv, ir):
            out.append(node.name)
    return out


def _read_by_extern(fx_node: torch.fx.Node, ir: GraphIR) -> bool:
    """Is the value read by an extern, template or fallback of ours (no Triton code of
    Inductor's), directly or through views?"""
    for user in live_users(fx_node):
        node = ir.by_name.get(user.name)
        if node is not None:
            if node.kind in (Kind.EXTERN, Kind.TEMPLATE):
                return True
        elif user.name in ir.base_of and _read_by_extern(user, ir):
            return True  # a view of it
    return False


def _peel_biases(ir: GraphIR, found: list[tuple[str, str, str]]) -> GraphIR:
    """`ir` with a node `bias_add_<conv>` after each convolution of `peeled_biases`: the
    convolution writes `<conv>_call`, the add reads it and the bias and writes the
    convolution's buffer, which its readers read as before."""
    peeled = peeled_biases(ir, found)
    if not peeled:
        return ir
    fx = {n.name: n for n in ir.gm.graph.nodes}
    nodes = {n.name: replace(n, access=dict(n.access)) for n in ir.nodes}
    buffers = dict(ir.buffers)
    users = {b: list(u) for b, u in ir.users.items()}
    after: dict[str, SchedulerNode] = {}
    for conv_name in peeled:
        conv, out = nodes[conv_name], ir.buffers[conv_name]
        call = call_buffer(conv_name)
        bias = ir.base_of[fx[conv_name].args[2].name]
        buffers[call] = replace(out, name=call, producer=conv_name, is_output=False)
        buffers[conv_name] = replace(out, producer=bias_name(conv_name))
        conv.writes = tuple(call if b == conv_name else b for b in conv.writes)
        val = fx[conv_name].meta["val"]
        numel = _numel(val)
        per_channel = [0] * val.dim()  # the bias viewed (C, 1, ...), broadcast over the rest
        per_channel[1] = 1
        spread = torch.empty_strided([size_hint(d) for d in val.shape], per_channel,
                                     device="meta", dtype=val.dtype)
        add = SchedulerNode(
            name=bias_name(conv_name), index=-1, kind=Kind.POINTWISE, target="aten.add.Tensor",
            reads=(call, bias), writes=(conv_name,), numel=numel, vector_flops=float(numel),
            low_precision=conv.low_precision, loads=2, channels_last=conv.channels_last,
            access={call: {"full"}, bias: {_access(spread, ir.buffers[bias])}},
            bias_of=(conv_name, call), loops=_add_loops(val, call, conv_name),
            source=(f"bias Inductor peeled off {conv_name} (kernel/conv.py)",) + conv.source)
        users[call] = [add.name]
        users[bias] = list(users.get(bias, [])) + [add.name]
        users[bias] = [u for u in users[bias] if u != conv_name]
        conv.reads = tuple(b for b in conv.reads if b != bias)
        conv.access = {b: how for b, how in conv.access.items() if b != bias}
        after[conv_name] = add
    ordered: list[SchedulerNode] = []
    for original in ir.nodes:
        ordered.append(nodes[original.name])
        if original.name in after:
            ordered.append(after[original.name])
    for i, node in enumerate(ordered):
        node.index = i
    return GraphIR(ir.gm, ordered, buffers, users, ir.base_of, ir.inputs, ir.views,
                   home=dict(ir.home))


def _add_loops(val: torch.Tensor, call: str, out: str) -> dict:
    """The loop signatures of the bias add (ir._loop_signatures): it reads the call's output
    whole and writes the convolution's buffer, both in the output's layout."""
    found, write = loops.signatures(val, [(call, val)], size_hint)
    found.setdefault(out, set()).add(write)
    return found


def _copy_operands(ir: GraphIR, found: list[tuple[str, str, str]]) -> GraphIR:
    channels_last = layout_optimization(ir.gm)
    fx = {n.name: n for n in ir.gm.graph.nodes}
    nodes = {n.name: replace(n, access=dict(n.access)) for n in ir.nodes}
    buffers = dict(ir.buffers)
    users = {b: list(u) for b, u in ir.users.items()}
    before: dict[str, list[SchedulerNode]] = {}
    after: dict[str, list[SchedulerNode]] = {}
    shared: dict[str, str] = {}  # a matmul operand's copied value -> its copy
    for conv_name, role, arg in found:
        conv, base = nodes[conv_name], ir.base_of[arg]
        if role in ("mat1", "mat2") and arg in shared:  # one copy (a reshape's clone) for
            name = shared[arg]  # every matmul reading that reshape (copied_view)
            conv.reads = tuple(name if b == base else b for b in conv.reads)
            conv.access = {(name if b == base else b): how for b, how in conv.access.items()}
            users[base] = [u for u in users.get(base, []) if u != conv_name]
            users[name] = users[name] + [conv_name]
            continue
        val = fx[arg].meta["val"]
        name = copy_name(conv_name, role)
        shape = tuple(size_hint(d) for d in val.shape)
        numel = 1
        for d in shape:
            numel *= d
        buffers[name] = Buffer(name, numel * val.element_size(), shape, val.dtype, name)
        padded = role in ("mat1", "mat2")
        # a padded buffer is read at other addresses than its writer's or its other
        # readers' index: no shared data with any of them (the whole buffer, padded strides)
        whole = fx[base].meta["val"]
        how = (tuple(size_hint(d) for d in whole.shape), padded_strides(whole) or tuple(
            size_hint(st) for st in whole.stride()), 0) if padded \
            else _access(val, ir.buffers[base])
        copy = SchedulerNode(
            name=name, index=-1, kind=Kind.POINTWISE, target="aten.clone.default",
            reads=(base,), writes=(name,), numel=numel,
            vector_flops=0.0, low_precision=conv.low_precision, loads=1,
            channels_last=not padded and wanted_order(val, channels_last) == NHWC_ORDER,
            access={base: {how}}, layout_of=(conv_name, arg),
            source=(f"{PADDED_WHY if padded else WHY} ({conv_name}'s {role})",) + conv.source)
        conv.reads = tuple(name if b == base else b for b in conv.reads)
        conv.access = {(name if b == base else b): how for b, how in conv.access.items()}
        users[base] = [u for u in users.get(base, []) if u != conv_name] + [name]
        users[name] = [conv_name]
        if role in ("mat1", "mat2"):
            shared[arg] = name
        producer = ir.buffers[base].producer
        if not padded and producer in nodes and _bias_stored_early(fx.get(base), ir):
            after.setdefault(producer, []).append(copy)
        else:
            before.setdefault(conv_name, []).append(copy)
    ordered: list[SchedulerNode] = []
    for original in ir.nodes:
        ordered.extend(before.get(original.name, []))
        ordered.append(nodes[original.name])
        ordered.extend(after.get(original.name, []))
    for i, node in enumerate(ordered):
        node.index = i
    return GraphIR(ir.gm, ordered, buffers, users, ir.base_of, ir.inputs, ir.views,
                   home=dict(ir.home))


def _bias_stored_early(base: torch.fx.Node | None, ir: GraphIR) -> bool:
    """Is the operand a biased convolution's output that Inductor stores as it lowers that
    convolution? Its value is the call's result plus the peeled bias, pointwise code that
    `run_node` realizes at once when a convolution (or an mm) is among its several readers
    (`opcount.hinted_for_reader`). That buffer is the one the reading convolution freezes
    in channels-last order (`require_channels_last` on a FlexibleLayout: no copy of its
    own): our copy stands for it, so it is placed where Inductor lowers it, right after the
    producing convolution, not before the reader (which fusion's proximity score sees)."""
    from .opcount import has_peeled_bias, hinted_for_reader

    return base is not None and base.target is torch.ops.aten.convolution.default and \
        has_peeled_bias(base, ir) and hinted_for_reader(base)


def follows_producer(copy: SchedulerNode, producer_writes: set[str], ir: GraphIR) -> bool:
    """Can a layout copy share its producer's loop (Inductor fuses them: the producer's
    kernel writes the channels-last copy, the value itself is never stored)? When it reads
    the whole buffer through a reshape that only splits the producer's dims (a weight
    standardized as (1, out, in*kh*kw), viewed as (out, in, kh, kw)): reordering the copy's
    loops (`loop_ordering_after_fusion`) then gives both one index. A slice, or a reshape
    that regroups dims across the producer's (a permuted patch unfolded into an image), has
    no such order: no shared data, a launch of its own. A permute of the whole buffer (a
    conv1d reading (batch, time, channels) as (batch, channels, time)) has one: the same
    loop variables in another order (`decide_loop_order_to_match`)."""
    base = ir.base_of.get(copy.layout_of[1]) if copy.layout_of else None
    if base not in producer_writes or copy.access.get(base) != {"full"}:
        return False
    fx = {n.name: n for n in ir.gm.graph.nodes}
    if _permutes_only(fx[copy.layout_of[1]], base, ir):
        return True
    view = [size_hint(d) for d in fx[copy.layout_of[1]].meta["val"].shape]
    whole = [size_hint(d) for d in fx[base].meta["val"].shape]
    return _splits(whole, view)


_PERMUTES = (torch.ops.aten.permute.default, torch.ops.aten.transpose.int, torch.ops.aten.t.default)


def _permutes_only(view: torch.fx.Node, base: str, ir: GraphIR) -> bool:
    """Is `view` the buffer `base` through permutes alone (its dims reordered, none split)?
    A copy that is no kernel (a clone keeping its input's layout: not in the IR) is `base`
    itself."""
    while view.name != base:
        removed = view.target is torch.ops.aten.clone.default and \
            view.name not in ir.by_name and ir.base_of.get(view.name) == base
        if view.target not in _PERMUTES and not removed:
            return False
        view = view.args[0]
    return True


def _splits(whole: list[int], view: list[int]) -> bool:
    """Is each dim of `whole` (size-1 dims left out) the product of consecutive dims of
    `view`?"""
    parts = [d for d in view if d != 1]
    for dim in (d for d in whole if d != 1):
        product = 1
        while parts and product < dim:
            product *= parts.pop(0)
        if product != dim:
            return False
    return not parts


def describe(node: SchedulerNode) -> str:
    """"name: aten op" of a node, a layout copy saying what it is for."""
    if node.layout_of:
        conv, arg = node.layout_of
        padded = node.name in (copy_name(conv, "mat1"), copy_name(conv, "mat2"))
        why = PADDED_WHY if padded else WHY
        return f"{node.name}: {node.target} ({why}; {arg} of {conv})"
    return f"{node.name}: {node.target}"
