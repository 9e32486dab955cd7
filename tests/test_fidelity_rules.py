"""The rules added to follow Inductor on graphs it was not tuned on, each at its edge, checked
against Inductor's real plan for the device (every launch compared, `Comparison.check`)."""

import dataclasses
import math

import pytest
import torch
import torch.nn.functional as F

import mtia_lab  # noqa: F401
from mtia_lab.compare import AlignmentError, compare
from mtia_lab.compare.plans import compare_plans
from mtia_lab.compiler import COMPILED, config


def _compared(fn, *shapes):
    torch.manual_seed(0)
    (comparison,) = compare(fn, *(torch.randn(*s, device="mtia_sim") for s in shapes))
    return comparison.check()


def _kernels(comparison) -> list[tuple[str, ...]]:
    return [g.nodes for g in comparison.ours.groups]


def _same_as_inductor(comparison) -> None:
    assert comparison.identical == comparison.inductor_kernels, str(comparison)


@pytest.mark.parametrize("shifted", [False, True])
def test_read_other_positions_a_reader_of_a_shifted_slice_does_not_join_its_producer(shifted):
    def fn(x):  # nucleus sampling's shift: a token is removed if the one before crossed p
        remove = torch.cumsum(x.softmax(-1), -1) > 0.9
        if shifted:
            remove[:, 1:] = remove[:, :-1].clone()
        return remove

    c = _compared(fn, (4, 32))
    _same_as_inductor(c)
    assert len(c.ours.groups) == (2 if shifted else 1)
    assert any(d.rule == "read_other_positions" for d in c.ours.decisions) is shifted


@pytest.mark.parametrize("conv", [False, True])
def test_conv_input_layout_a_kernel_writing_a_convolutions_input_leaves_its_reduction(conv):
    """GroupNorm then SiLU is one kernel; when the SiLU feeds a convolution, Inductor writes it
    channels-last, and GroupNorm's loop (in the graph's order) no longer serves it."""
    def fn(x, w, b, cw):
        h = F.silu(F.group_norm(x, 4, w, b))
        return F.conv2d(h, cw, padding=1) if conv else h

    c = _compared(fn, (2, 8, 8, 8), (8,), (8,), (8, 8, 3, 3))
    assert not c.unexplained, str(c)
    norm = next(g.nodes for g in c.ours.groups if "native_group_norm" in g.nodes)
    assert ("mul" in norm) is not conv
    assert any(d.rule == "conv_input_layout" for d in c.ours.decisions) is conv
    held = [launch.nodes for launch in c.placed.launches if launch.nodes]
    assert sorted(held) == sorted(g.nodes for g in c.ours.groups)  # every kernel Inductor's



@pytest.mark.parametrize("act,affine,fused", [
    ("relu", True, True), ("silu", True, False), ("silu", False, True)])
def test_conv_input_layout_a_norm_inlined_into_its_reader_keeps_its_loop(act, affine, fused):
    """GroupNorm's normalize read by one op (ReLU) is inlined into it: the ReLU runs in the
    norm's loop and stores the convolution's input channels-last from there. Read twice
    (SiLU: x * sigmoid(x)) it is stored when it loads more than 4 values (input, mean,
    rstd, weight, bias), and the SiLU loops channels-last on its own; without weight and
    bias (3 loads) it is inlined into both reads and fuses again."""
    def fn(x, w, b, cw):
        h = F.group_norm(x, 4, w if affine else None, b if affine else None)
        return F.conv2d(h.relu() if act == "relu" else F.silu(h), cw, padding=1)

    c = _compared(fn, (2, 8, 8, 8), (8,), (8,), (8, 8, 3, 3))
    assert not c.unexplained, str(c)
    norm = next(g.nodes for g in c.ours.groups if "native_group_norm" in g.nodes)
    assert (len(norm) > 1) is fused, _kernels(c)
    assert any(d.rule == "conv_input_layout" for d in c.ours.decisions) is not fused


@pytest.mark.parametrize("cat", [False, True])
def test_stored_on_reuse_a_batchnorm_read_twice_is_stored_and_joins_only_a_plain_reader(cat):
    """An eval BatchNorm loads 5 values (input, mean, var, weight, bias); read twice by SiLU
    (x * sigmoid(x)) Inductor stores it (realize_reads_threshold 4), laid out channels-last
    like the convolution input it feeds, and fuses it with the SiLU again. When the SiLU
    is a piece of a cat, the cat reads the BatchNorm through an index: two kernels."""
    def fn(x, mean, var, w, b, y, cw):
        h = F.silu(F.batch_norm(x, mean, var.abs() + 1, w, b))
        return F.conv2d(torch.cat([y, h], 1) if cat else h, cw, padding=1)

    c = _compared(fn, (2, 8, 8, 8), (8,), (8,), (8,), (8,), (2, 8, 8, 8),
                  (8, 16 if cat else 8, 3, 3))
    assert not c.unexplained, str(c)
    norm = next(g.nodes for g in c.ours.groups if "sqrt" in g.nodes)
    assert ("sigmoid" in norm) is not cat, _kernels(c)


@pytest.mark.parametrize("host", [True, False])
def test_a_host_constant_copied_into_a_tensor_is_a_launch_of_its_own(host):
    """`index[0] = 5` copies a tensor constant of the host into the index (BEiT's relative
    position index): Inductor moves it to the device in a launch of its own (a DeviceCopy,
    an extern kernel), which nothing joins. A value computed on the device is copied inside
    the kernel that reads it."""
    def fn(x):
        index = torch.zeros(8, dtype=torch.long)  # made without a device, as BEiT's
        index[0] = 5 if host else (x[0, 0] > 0).long()
        return x[:, index] * 2

    c = _compared(fn, (4, 8))
    assert not c.unexplained, str(c)
    assert (("copy",) in _kernels(c)) is host, _kernels(c)
    moved = [launch.nodes for launch in c.placed.launches if launch.name == "device_copy"]
    assert moved == ([("copy",)] if host else []), moved

def test_norms_and_scans_are_reductions_that_take_a_pointwise_prologue():
    c = _compared(lambda x, y: (F.normalize(x + 1, dim=-1), torch.cumsum(y * 3, -1)),
                  (8, 16), (8, 16))
    _same_as_inductor(c)
    kinds = {g.nodes: g.kind for g in c.ours.groups}
    assert any(set(n) >= {"add", "linalg_vector_norm"} and k == "reduction"
               for n, k in kinds.items()), kinds
    assert any(set(n) >= {"mul", "cumsum"} and k == "reduction" for n, k in kinds.items()), kinds


@pytest.mark.parametrize("window,inlined", [(2, True), (3, False)])
def test_realize_acc_reads_a_pool_loading_more_than_8_values_is_a_kernel_of_its_own(
        window, inlined):
    def fn(x, y):
        return torch.cat([F.max_pool2d(x, window, 1), y.relu()], 1)

    size = 9 - window  # the pool's output: 8 - window + 2 ... the same spatial size as y
    c = _compared(fn, (2, 4, 8, 8), (2, 4, size, size))
    _same_as_inductor(c)
    pool = next(g for g in c.ours.groups if "max_pool2d_with_indices" in g.nodes)
    assert ("cat" in pool.nodes) is inlined


def test_a_convolution_belongs_to_inductors_extern_launch_and_its_copies_are_departures():
    def fn(x, w, b):
        return F.conv2d(x, w, b, padding=1).relu()

    c = _compared(fn, (2, 4, 8, 8), (8, 4, 3, 3), (8,))
    conv = next(launch for launch in c.placed.launches if "convolution" in launch.nodes)
    assert conv.kind == "extern"
    own = [d for d in c.differences if not d.inductor]  # launches holding none of our nodes
    assert own and {r for d in own for r in d.rules} == {"extern_in_triton"}
    assert len(c.groups) == len(c.placed.wrapper_launches) == c.inductor.kernel_count


def test_check_names_what_is_unaligned():
    c = _compared(lambda x: x.sin() + 1, (16,))
    c.placed.wrapper_launches = [*c.placed.wrapper_launches, "triton_poi_fused_extra_9"]
    c.placed.unplaced.append("sin")
    with pytest.raises(AlignmentError, match="sin is in no Inductor launch") as error:
        c.check()
    assert "triton_poi_fused_extra_9" in str(error.value)


@pytest.mark.parametrize("transposed", [False, True])
def test_a_clone_that_keeps_its_inputs_layout_is_no_kernel(transposed):
    """Inductor's remove_noop_ops: a clone with its input's sizes and strides is its input
    (transformers' eval dropout, `.contiguous()` on a contiguous tensor); making a transposed
    view contiguous is a real copy."""
    def fn(x, w):
        h = x @ w
        return (h.t() if transposed else h).clone(memory_format=torch.contiguous_format) + 1

    c = _compared(fn, (16, 16), (16, 16))
    with_ops = [g.nodes for g in c.ours.groups]
    assert any("clone" in nodes for nodes in with_ops) is transposed, with_ops
    assert ("clone" in c.ours.views) is not transposed  # a view: no kernel, no bytes
    assert not c.unexplained, str(c)


@pytest.mark.parametrize("reader", ["div", "cat", "cat_with_reduction"])
def test_an_unrolled_reduction_is_inlined_into_a_pointwise_reader_and_a_pointwise_cat(reader):
    """A sum over 2 elements is unrolled into pointwise code (unroll_reductions_threshold):
    inlined into the division that reads it (Mixtral's top-k renormalization), and into a
    cat that Inductor lowers as pointwise code (pointwise_cat: few pieces, each copied
    anyway). Next to a piece that is a real reduction, Inductor makes a ConcatKernel (a
    pointwise cat would recompute the reduction per element) and the sum is realized."""
    def fn(x, y):
        s = x.sum(-1)
        if reader == "div":
            return x / s[..., None]
        return torch.cat([s, y if reader == "cat" else y.exp().sum(-1, keepdim=True)], 1)

    c = _compared(fn, (16, 4, 2), (16, 4) if reader == "cat" else (16, 64))
    inlined = any({"sum_1", "div"} <= set(g.nodes) or {"sum_1", "cat"} <= set(g.nodes)
                  for g in c.ours.groups)
    assert inlined is (reader != "cat_with_reduction"), _kernels(c)
    assert not c.unexplained, str(c)


def test_a_like_factory_reads_no_buffer_so_it_shares_nothing_with_a_reader_of_its_argument():
    """MoE dispatch: `zeros_like(probs).scatter(...)` takes only probs' sizes (Inductor's
    full_like lowering loads nothing), so it is no sibling of `probs.mean(0)`."""
    def fn(probs, top):
        idx = torch.arange(2, device=probs.device).expand(16, 2)
        return probs.mean(0), torch.zeros_like(probs).scatter(-1, idx, top)

    c = _compared(fn, (16, 8), (16, 2))
    assert not c.unexplained, str(c)  # the scatter's two launches are a departure of ours
    assert ("mean",) in _kernels(c)
    assert next(n for n in c.ours.ir.nodes if n.name == "full_like").reads == ()


@pytest.mark.parametrize("shared", ["whole", "small"])
def test_the_reorder_round_joins_an_outer_reduction_only_to_align_a_buffer_read_whole(shared):
    """`(x * v).mean(0)` reduces over the outer dim. In Inductor's last round a pointwise
    kernel over the same 16x8 elements joins it when both read x whole (its loops reordered to
    the reduction's); when they share only the 8-element v, nothing is reordered."""
    def fn(x, y, v):
        return (x * v).mean(0), (x * 2 if shared == "whole" else y * v)

    c = _compared(fn, (16, 8), (16, 8), (8,))
    _same_as_inductor(c)
    assert (len(c.ours.groups) == 1) is (shared == "whole"), _kernels(c)


def test_a_value_inductor_inlines_into_its_readers_is_our_computed_once_departure():
    """cos(t) read by two kernels: Inductor recomputes it inside each one's loop
    (two users, one load: should_realize_on_reuse says no); we compute it once, in a kernel
    of its own, and the comparison names the departure."""
    def fn(t, q, k):
        c = t.cos()
        return q * c + 1, k * c + 2

    c = _compared(fn, (16,), (8, 16), (4, 16))  # two spaces: the readers are two kernels
    assert not c.unexplained, str(c)
    assert ("cos",) in _kernels(c)
    assert any(d.rules == ("computed_once",) for d in c.differences), str(c)


@pytest.mark.parametrize("sines", [27, 28])
def test_realize_opcount_a_loop_body_of_more_than_30_ops_is_stored_not_inlined(sines):
    """x + y then a chain of sines: 2 loads, 1 add, n sines -- 3 + n operations. Read through
    a broadcast by one copy (a grouped-query attention's repeat_kv), it is inlined into the
    copy while its body has at most 30 operations; at 31 Inductor stores it
    (has_large_inner_fn) and the copy, over another space, is a kernel of its own."""
    def fn(x, y):
        h = x + y
        for _ in range(sines):
            h = h.sin()
        return h[:, None].expand(8, 4, 16).clone()

    c = _compared(fn, (8, 16), (8, 16))
    _same_as_inductor(c)
    assert len(c.ours.groups) == (1 if sines == 27 else 2), _kernels(c)


def test_the_copies_of_an_attention_inductor_rewrote_are_found_by_order_not_by_name():
    """Inductor rewrites transformers' eager attention into SDPA's math, whose nodes remember
    no source and are named clone_default, clone_default_1...: the copies of q, k and v are
    matched to ours in order, not by a name that happens to read like ours
    ("clone_default_1" is not our "clone_1")."""
    from transformers import ViTConfig
    from transformers.models.vit.modeling_vit import ViTAttention

    torch.manual_seed(0)
    cfg = ViTConfig(hidden_size=32, num_attention_heads=4, attn_implementation="eager")
    attn = ViTAttention(cfg).eval().requires_grad_(False).to("mtia_sim")
    def fn(x):  # a copy of ours first: our q, k, v copies are clone_1, clone_2, clone_4
        return attn(x.transpose(0, 1).contiguous())[0]

    c = _compared(fn, (17, 2, 32))
    assert not c.unexplained, str(c)
    clones = [(name, launch.index) for launch in c.placed.launches for name in launch.nodes
              if name.startswith("clone")]
    assert [index for _, index in clones] == sorted({index for _, index in clones}), clones
    for name, index in clones:
        assert "clone" in c.placed.launches[index].name, (name, c.placed.launches[index])


def test_a_copy_of_an_attention_inductor_rewrote_is_found_through_the_patterns_scale():
    """SDPA's math scales q and k by a `mul` of its own between our linear and the copy of
    ours it re-made: that copy reads our linear through the pattern's nodes, and is matched to
    our copy of that linear, not by order to a copy before it that Inductor removed (the clone
    of a convolution's output PVTv2's spatial reduction reshapes)."""
    from transformers import PvtV2Config
    from transformers.models.pvt_v2.modeling_pvt_v2 import PvtV2SelfAttention

    torch.manual_seed(0)
    cfg = PvtV2Config(linear_attention=False)
    attn = PvtV2SelfAttention(cfg, hidden_size=32, num_attention_heads=2,
                              spatial_reduction_ratio=2).eval().requires_grad_(False)
    attn = attn.to("mtia_sim")

    def fn(x):
        return attn(x, 8, 8)[0] * 2  # a reader: the output's clone Inductor drops is not this

    with config.patch(matmul_templates=False, computed_once=False, extern_in_triton=False):
        c = _compared(fn, (2, 64, 32))
    assert not c.differences, str(c)


def test_the_softmax_of_a_second_attention_inductor_rewrote_is_found_by_its_own_ops():
    """Two of LXMERT's attentions, the first under a mask: Inductor rewrites both as SDPA's
    math, whose softmax remembers no node of ours. Its last `div` reads our second bmm
    through the re-made softmax, as our `div` that scales the scores does; it must not be
    taken for that `div` (it was: every softmax op of the second attention then went to
    the launch of the op after it, two differences no rule explains)."""
    from transformers import LxmertConfig
    from transformers.models.lxmert.modeling_lxmert import LxmertAttention

    torch.manual_seed(0)
    cfg = LxmertConfig(hidden_size=32, num_attention_heads=4)
    first, second = (LxmertAttention(cfg).eval().requires_grad_(False).to("mtia_sim")
                     for _ in range(2))

    def fn(x, y, mask):
        return second(first(x, x, mask)[0], y)[0]

    mask = torch.zeros(2, 1, 1, 8)
    mask[1, ..., 6:] = -1e4
    with config.patch(matmul_templates=False, computed_once=False, extern_in_triton=False):
        (c,) = compare(fn, *(t.to("mtia_sim") for t in
                             (torch.randn(2, 8, 32), torch.randn(2, 6, 32), mask)))
    c.check()
    assert not c.unexplained, str(c)
    assert c.identical == c.inductor_kernels - 1, str(c)  # the row check SDPA adds: ours


@pytest.mark.parametrize("dims", [(2, 2), (1, 2)])
def test_reduction_loop_order_two_reductions_over_other_dims_share_no_loop(dims):
    """Two scans of one [2, 8, 8] input are both 16 rows of 8: along the same dim they read it
    in one order and share a loop; along rows and columns (DETR's sine positions) they read
    it in two orders, and Inductor never reorders a reduction's loops."""
    def fn(x):
        return x.cumsum(dims[0]), (x * 2).cumsum(dims[1])

    c = _compared(fn, (2, 8, 8))
    _same_as_inductor(c)
    assert (len(c.ours.groups) == 1) is (dims[0] == dims[1]), _kernels(c)
    assert any(d.rule == "reduction_loop_order" for d in c.ours.decisions) is (
        dims[0] != dims[1])


@pytest.mark.parametrize("pooled", [True, False])
def test_conv_input_layout_a_one_pixel_input_is_laid_out_as_the_graph(pooled):
    """A squeeze-excite's pooled [N, C, 1, 1] input is the same memory channels-last or not:
    its mean stays with the SiLU it reads. Pooled over W only ([N, C, H, 1]) channels-last
    is another order, and the mean is a kernel of its own."""
    def fn(x, w):
        h = F.silu(x)
        s = h.mean((2, 3) if pooled else 3, keepdim=True)
        return F.conv2d(s, w), h

    c = _compared(fn, (2, 8, 4, 4), (8, 8, 1, 1))
    assert not c.unexplained, str(c)
    mean = next(g.nodes for g in c.ours.groups if "mean" in g.nodes)
    assert ("mul" in mean) is pooled, _kernels(c)  # SiLU: sigmoid, mul


@pytest.mark.parametrize("length", [512, 513])
def test_a_sort_of_at_most_512_elements_is_a_triton_kernel_that_fuses(length):
    """Inductor lowers a sort along a dim of at most 512 elements to a persistent Triton
    kernel (ir.Sort), which takes the softmax of the sorted values; a longer one calls
    aten.sort, which nothing joins."""
    def fn(x):
        return torch.sort(x * 2, -1).values.softmax(-1)

    c = _compared(fn, (2, length))
    _same_as_inductor(c)
    sort = next(g for g in c.ours.groups if "sort" in g.nodes)
    assert (sort.kind == "reduction") is (length <= 512), _kernels(c)
    assert ("amax" in sort.nodes) is (length <= 512)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bool])
def test_a_scatter_of_bool_values_calls_aten(dtype):
    """Triton stores no bool or int64 through an index (use_scatter_fallback): such a scatter
    is an ATen call after a copy of its input; a float scatter is one Triton kernel of ours
    (Inductor's copy and indexed stores: our scatter_in_two_launches departure)."""
    def fn(x, idx):
        src = (x > 0) if dtype is torch.bool else x * 2
        return src.scatter(1, idx, src)

    torch.manual_seed(0)
    idx = torch.stack([torch.randperm(16) for _ in range(4)]).to("mtia_sim")
    (c,) = compare(fn, torch.randn(4, 16, device="mtia_sim"), idx)
    c.check()
    assert not c.unexplained, str(c)
    scatter = next(g for g in c.ours.groups if "scatter" in g.nodes)
    assert (scatter.kind == "extern") is (dtype is torch.bool), _kernels(c)
    if dtype is torch.bool:
        _same_as_inductor(c)


def test_copy_into_a_slice_takes_only_its_shape_not_its_values():
    """Top-p's `remove[..., -1:] = 0` copies a zero into a slice of the mask: aten.copy(self,
    src) never loads self (Inductor's copy lowering), so the slice is no read at other
    positions and the mask, its cumsum and the slice write are one kernel, as Inductor's."""
    def fn(x):
        remove = x.softmax(-1).cumsum(-1) <= 0.1
        remove[..., -1:] = 0
        return remove

    c = _compared(fn, (4, 32))
    _same_as_inductor(c)
    assert len(c.ours.groups) == 1, _kernels(c)
    assert not any(d.rule == "read_other_positions" for d in c.ours.decisions)


@pytest.mark.parametrize("step", [0, 1])
def test_realize_opcount_a_value_read_through_two_slices_is_computed_twice(step):
    """sin(h[..., 0::2]) and cos(h[..., s::2]) stacked, then concatenated (DETR's sine
    positions): read through two different slices, h's body is computed at two indices
    (Inductor's CSE shares nothing), 37 operations > 30, and the stack is stored; through
    one slice, h is computed once (26 operations) and the stack is inlined into the cat."""
    def fn(x, z):
        h = x
        for _ in range(5):
            h = h * 1.5 + 0.5
        pos = torch.stack((h[..., 0::2].sin(), h[..., step::2].cos()), -1).flatten(-2)
        return torch.cat([pos, z], -1)

    c = _compared(fn, (8, 16), (8, 16))
    _same_as_inductor(c)
    outer = next(g.nodes for g in c.ours.groups if "cat_1" in g.nodes)
    assert ("sin" in outer) is (step == 0), _kernels(c)


def test_the_copy_of_a_convolutions_output_is_on_the_launch_writing_its_value():
    """SegFormer's sequence reduction: conv (with bias), flatten, transpose, contiguous, layer
    norm. Inductor adds the conv's bias in a Triton launch of its own; the copy's value is
    written there (or is that launch's value, where the channels-last layout made the copy
    a no-op Inductor removed), never by the extern conv call."""
    def fn(x, w, b, nw, nb):
        h = F.conv2d(x, w, b, stride=2).flatten(2).transpose(1, 2).contiguous()
        return F.layer_norm(h, (8,), nw, nb)

    c = _compared(fn, (2, 8, 8, 8), (8, 8, 2, 2), (8,), (8,), (8,))
    assert not c.unexplained, str(c)
    clone = next(launch for launch in c.placed.launches if "clone" in launch.nodes)
    assert clone.kind != "extern" and clone.nodes == ("clone",), c.placed.launches


def test_siblings_that_share_only_a_value_inductor_recomputes_are_computed_once():
    """CLIP's loss: cross entropy over the rows of logits and over its columns. We store the
    scaled logits once (computed_once) and the row softmax and the transposed copy share it;
    Inductor recomputes it in each reader, whose kernels share nothing: the difference is
    named as our departure, not left unexplained."""
    def fn(a, b, s):
        logits = a @ b.t() * s.exp()
        labels = torch.arange(8, device=a.device)
        return F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels)

    torch.manual_seed(0)
    (c,) = compare(fn, *(torch.randn(shape, device="mtia_sim")
                         for shape in ((8, 16), (8, 16), ())))
    c.check()
    assert not c.unexplained, str(c)
    assert any(d.rules == ("computed_once",) for d in c.differences), str(c)


@pytest.mark.parametrize("loads", [8, 9])
def test_realize_acc_reads_a_body_loading_more_than_8_values_is_stored(loads):
    """u = a + b + c + d has two readers (Inductor inlines it into each: 4 loads); v adds
    u to more inputs, so v's body, u inlined, loads `loads` values. At 9 Inductor stores v
    (has_exceeded_max_reads, counted through the inlined u, not through our kernel of u)
    and the broadcast copy that reads it is a kernel of its own; at 8 v is inlined there."""
    def fn(*xs):
        u = xs[0] + xs[1] + xs[2] + xs[3]
        v = u
        for x in xs[4:loads]:
            v = v + x
        return v[:, None].expand(8, 4, 16).clone(), u * 2

    c = _compared(fn, *[(8, 16)] * loads)
    assert not c.unexplained, str(c)
    copy = next(g.nodes for g in c.ours.groups if "clone" in g.nodes)
    assert (f"add_{loads - 2}" in copy) is (loads == 8), _kernels(c)


def _recomputing(fn, *shapes):
    """fn on seeded random inputs of these shapes: see _recomputing_on."""
    torch.manual_seed(0)
    return _recomputing_on(fn, [torch.randn(*s) for s in shapes])


def _recomputing_on(fn, host: list):
    """fn compared with Inductor with our departures off (no matmul template, no value
    computed once where Inductor recomputes it), and its compiled result against eager."""
    with config.patch(matmul_templates=False, computed_once=False):
        (c,) = compare(fn, *(t.to("mtia_sim") for t in host))
        torch._dynamo.reset()
        compiled = torch.compile(fn, backend="mtia_lab")(*(t.to("mtia_sim") for t in host))
    for got, want in zip(compiled, fn(*host), strict=True):
        torch.testing.assert_close(got.cpu(), want)
    return c.check()


@pytest.mark.parametrize("loads", [4, 5])
def test_computed_once_off_a_reused_value_loading_at_most_4_is_recomputed_in_each_reader(loads):
    """v, the sum of `loads` inputs, is read by two reductions over other dims (two kernels).
    Inductor's lowering realizes a value with several users only when its body loads more
    than realize_reads_threshold (4) values (should_realize_on_reuse): at 4 each reduction's
    kernel computes v again, at 5 v is stored once. With computed_once off ours does the
    same, the plan counts the recomputation (each kernel reads v's inputs, none writes v),
    and the compiled code still matches eager."""
    def fn(*xs):
        v = xs[0]
        for x in xs[1:]:
            v = v + x
        return v.sum(-1), v.amax(0)

    c = _recomputing(fn, *[(8, 16)] * loads)
    _same_as_inductor(c)
    v = f"add_{loads - 2}" if loads > 2 else "add"
    holders = [g for g in c.ours.groups if v in g.nodes]
    if loads == 4:
        assert len(holders) == 2 and v in c.ours.recomputed and v in c.placed.recomputed
        inputs = {n.name for n in c.ours.ir.gm.graph.nodes if n.op == "placeholder"}
        for g in holders:  # each kernel loads every input of v, and never stores v
            assert inputs <= set(g.inputs) and v not in g.outputs
            assert f"{v}: aten.add.Tensor (recomputed here)" in g.aten_nodes
        assert any(d.rule == "recomputed_in_each_reader" and d.first == (v,)
                   for d in c.ours.decisions)
    else:
        assert len(holders) == 1 and not c.ours.recomputed


def test_computed_once_on_a_value_with_several_readers_is_computed_once_and_stored():
    """The departure on (the default): the same value is computed in one kernel and stored
    for the other reader, where Inductor computes it in both."""
    def fn(a, b, c, d):
        v = a + b + c + d
        return v.sum(-1), v.amax(0)

    c = _compared(fn, *[(8, 16)] * 4)
    assert sum("add_2" in g.nodes for g in c.ours.groups) == 1 and not c.ours.recomputed
    assert any("add_2" in g.outputs for g in c.ours.groups)  # stored for the other reader
    assert "add_2" in c.placed.recomputed  # Inductor: computed in both launches
    assert not any(d.rule == "recomputed_in_each_reader" for d in c.ours.decisions)


def test_the_audit_rejects_a_node_in_two_kernels_our_plan_does_not_say_it_recomputes():
    def fn(a, b, c, d):
        v = a + b + c + d
        return v.sum(-1), v.amax(0)

    c = _recomputing(fn, *[(8, 16)] * 4)
    unrecorded = dataclasses.replace(c.ours, recomputed=())
    with pytest.raises(AlignmentError, match="add_2 is in 2 of our kernels"):
        compare_plans(unrecorded, c.inductor).check()


def test_computed_once_off_a_random_draw_read_by_two_kernels_is_drawn_once():
    """A mask drawn at random feeds two reductions over other dims: its comparison is
    recomputed in each kernel, the draw itself is stored (recomputing it would draw another
    mask in each kernel): both results use one mask, so their totals agree."""
    def fn(x):
        kept = x * (torch.rand_like(x) > 0.5)
        return kept.sum(-1), kept.sum(0)

    x = torch.randn(8, 16, device="mtia_sim")
    with config.patch(computed_once=False):
        torch._dynamo.reset()
        rows, cols = torch.compile(fn, backend="mtia_lab")(x)
        plan = COMPILED[-1].plan
    assert "rand_like" not in plan.recomputed and plan.recomputed
    torch.testing.assert_close(rows.sum().cpu(), cols.sum().cpu())


def test_an_op_is_found_by_its_retrace_name_whatever_number_ours_carries():
    """BiT's weight standardizations: var_mean of each weight, a GroupNorm between them.
    Inductor's decomposition of the GroupNorm makes post-grad nodes named var_mean_1,
    var_mean_3, ..., and its retrace names our var_means var_mean_correction,
    var_mean_correction_1: each var_mean is found by that name, in the order of our graph,
    so each standardization is on its own launch, not on the one before it."""
    def fn(x, w1, w2):
        def standardized(w):
            var, mean = torch.var_mean(w, dim=(1, 2, 3), keepdim=True, correction=0)
            return (w - mean) * torch.rsqrt(var + 1e-8)

        h = F.group_norm(F.conv2d(x, standardized(w1)), 2).relu()
        return F.conv2d(h, standardized(w2), padding=1)

    c = _compared(fn, (2, 8, 8, 8), (8, 8, 1, 1), (8, 8, 3, 3))
    for name in ("var_mean", "var_mean_1"):
        launch = next(lc for lc in c.placed.launches if name in lc.nodes)
        assert launch.nodes[0] == name and "native_group_norm" not in launch.nodes, launch
    assert not c.unexplained, str(c)


@pytest.mark.parametrize("experts", [4, 8])
def test_an_unrolled_softmax_stores_its_exponentials_and_reads_them_per_term(experts):
    """A softmax over 4 experts is unrolled (unroll_reductions_threshold 8): its max loads
    the row's 4 logits, each at its own index, so exp, read by the sum and the division,
    loads 5 values (> realize_reads_threshold 4) and Inductor stores it; the unrolled sum
    reads it at 4 other positions than it is written, so the division's kernel cannot
    take the exponentials' loop. Over 8 experts both are reductions: one kernel."""
    c = _recomputing(lambda x: (x.softmax(-1),), (16, experts))
    _same_as_inductor(c)
    assert len(c.ours.groups) == (2 if experts == 4 else 1), _kernels(c)
    assert any(d.rule == "read_other_positions" and "unrolled" in d.reason
               for d in c.ours.decisions) is (experts == 4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_an_unrolled_argmax_of_floats_is_large_enough_to_be_stored(dtype):
    """argmax over 4 values unrolled: each term folds a value and its index, with NaN tests
    for floats (47 operations in all, > realize_opcount_threshold 30: stored once, read by
    its two kernels) and without them for integers (29: each kernel computes it again)."""
    def fn(x):
        top = x.argmax(-1)
        return (top > 0).any(), F.one_hot(top, 4).cumsum(0)

    torch.manual_seed(0)
    x = torch.randn(16, 4) if dtype.is_floating_point else torch.randint(0, 9, (16, 4))
    c = _recomputing_on(fn, [x])
    _same_as_inductor(c)
    assert ("argmax" in c.ours.recomputed) is (dtype is torch.int64), c.ours.recomputed


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_an_unrolled_max_over_a_dim_folds_as_an_argmax_so_floats_are_stored(dtype):
    """`x.max(-1)` over 4 values, its values read by two ops: Inductor lowers max.dim as
    argmax_value, each term folding the value and its index (with NaN tests for floats: 47
    operations > realize_opcount_threshold 30, stored by a kernel of its own and loaded by
    its readers); for integers the fold has no NaN tests (29 operations): inlined, one
    kernel computes it and both readers."""
    def fn(x):
        top = x.max(-1, keepdim=True).values
        return ((top - x) / x.abs().clamp(min=top),)

    torch.manual_seed(0)
    x = torch.randn(16, 4) if dtype.is_floating_point else torch.randint(1, 9, (16, 4))
    c = _recomputing_on(fn, [x])
    _same_as_inductor(c)
    assert len(c.ours.groups) == (1 if dtype is torch.int64 else 2), _kernels(c)


def test_a_reduction_kernel_writing_a_piece_of_a_concat_kernel_is_our_departure():
    """A cat of 9 row sums (> 8 pieces: a ConcatKernel): Inductor's one kernel of the sums
    stores each in its slice of the cat's buffer, so its launch holds the cat; our cat is a
    kernel copying the pieces, the concat_kernel departure (not concat_kernel_never_fuses,
    which Inductor's launch contradicts)."""
    def fn(x):
        return (torch.cat([(x * (i + 1)).sum(-1, keepdim=True) for i in range(9)], -1),)

    with config.patch(matmul_templates=False, computed_once=False):
        c = _compared(fn, (16, 32))
    assert not c.unexplained, str(c)
    assert [d.rules for d in c.differences] == [("concat_kernel",)], str(c)


def test_a_value_inlined_into_the_last_op_is_as_far_from_the_first_as_that_op():
    """Two losses added at the end: the scalar tail (divisions, scales, the add) is inlined
    into the add, the last node; it joins the reduction nearest to it in graph order, the
    second loss's, as Inductor's score_fusion ranks by proximity among equal scores."""
    def fn(x, y):
        return (0.001 * x.pow(2).sum() / 16 + 0.001 * (y * y).mean(),)

    c = _recomputing(fn, (16,), (8,))
    _same_as_inductor(c)
    tail = next(g.nodes for g in c.ours.groups if "add" in g.nodes)
    assert "mean" in tail and "sum_1" not in tail, _kernels(c)


@pytest.mark.parametrize("constant", [True, False])
def test_an_index_by_a_host_constant_calls_aten_index(constant):
    """`x[..., torch.tensor([1])]` indexes by a tensor the model code made on the host: the
    graph holds it as a module constant, Inductor passes it to aten.index (an index on
    another device than the data falls back), and no kernel copies the constant. An index
    computed on the device is a gather Inductor lowers in Triton."""
    def fn(x):
        index = torch.tensor([1]) if constant else torch.arange(1, 2, device=x.device)
        return (x[..., index] * 2,)

    c = _recomputing(fn, (8, 4))
    _same_as_inductor(c)
    kinds = {g.nodes: g.kind for g in c.ours.groups}
    assert (kinds.get(("index",)) == "extern") is constant, kinds


@pytest.mark.parametrize("pooled", [False, True])
def test_a_stored_value_the_convolutions_prefer_channels_last_fuses_with_its_conv_input(pooled):
    """Batch norm (eval) of a convolution's output loads 5 values and has two readers (SiLU
    is x * sigmoid(x)): Inductor stores it (should_realize_on_reuse), channels-last as the
    convolutions around it prefer (maybe_apply_channels_last_stride_order), so the SiLU
    writing the next convolution's input shares its loop. A mean over H and W of that
    input (squeeze-excite) reads it over other loops: the reorder round gives the
    channels-last kernel the mean's loop order, and they fuse."""
    def fn(x, w1, w2, mean, var, g, b):
        h = F.silu(F.batch_norm(F.conv2d(x, w1, padding=1), mean, var.abs(), g, b))
        out = F.conv2d(h, w2)
        return (out, h.mean((2, 3))) if pooled else (out,)

    torch.manual_seed(0)
    shapes = [(2, 8, 8, 8), (16, 8, 3, 3), (16, 16, 1, 1), *[(16,)] * 4]
    host = [torch.randn(*s) for s in shapes]
    with config.patch(matmul_templates=False, computed_once=False):
        (c,) = compare(fn, *(t.to("mtia_sim") for t in host))
        torch._dynamo.reset()
        compiled = torch.compile(fn, backend="mtia_lab")(*(t.to("mtia_sim") for t in host))
    for got, want in zip(compiled, fn(*host), strict=True):  # two convolutions: sums of 72
        torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-4)
    assert not c.check().unexplained, str(c)
    silu = next(g.nodes for g in c.ours.groups if "sigmoid" in g.nodes)
    assert {"add_1", "mul_3"} <= set(silu) and ("mean" in silu) is pooled, _kernels(c)


def test_a_cat_piece_is_a_multi_consumer_only_if_the_value_given_to_the_cat_is():
    """RoFormer's interleaved positions: two halves of one split, each unsqueezed and
    concatenated with itself. Inductor asks whether the cat's own arguments have other
    users (has_multi_consumers), not the value they are views of: the other half's views do
    not count, the cat is pointwise code, and each of its two readers computes it again
    (ours did the same only for a cat whose source had no other reader)."""
    def fn(x, y, e):
        s, c = e.exp().split(4, -1)
        half = s[..., None]
        rep = torch.cat([half, half], -1).flatten(-2) + torch.cat([c, c], -1)
        return x * rep, y.t() * rep

    c = _recomputing(fn, (8, 8), (8, 8), (8, 8))
    _same_as_inductor(c)
    assert {"cat", "cat_1"} <= set(c.ours.recomputed), c.ours.recomputed


def _layout_copies(comparison) -> list[tuple[str, ...]]:
    return [g.nodes for g in comparison.ours.groups
            if any(n.startswith("layout_copy_") for n in g.nodes)]


def _compared_with_layout_copies(fn, host: list):
    """fn compared with Inductor with extern_in_triton off: audited, identical launch by
    launch, and compiled by our backend to eager's results."""
    with config.patch(extern_in_triton=False):
        (c,) = compare(fn, *(t.to("mtia_sim") for t in host))
        torch._dynamo.reset()
        got = torch.compile(fn, backend="mtia_lab")(*(t.to("mtia_sim") for t in host))
    torch.testing.assert_close(got.cpu(), fn(*host))
    c.check()
    _same_as_inductor(c)
    return c


@pytest.mark.parametrize("operand, copies", [
    ("graph_input", 2),  # x and w are graph inputs (fixed, contiguous): both copied
    ("pointwise", 1),  # relu(x) is a Triton kernel's output: it writes it channels-last
    ("slice", 2),  # a slice of relu(x): a view, its layout fixed: copied
    ("grouped", 0),  # a grouped convolution: decide_layout_opt keeps the graph contiguous
])
def test_extern_in_triton_off_a_convolution_operand_of_fixed_layout_gets_a_layout_copy(
        operand, copies):
    """Inductor's convolution lowering asks for its input, then its weight, channels-last
    (layout_optimization); an operand whose layout is fixed (a graph input, a view) and not
    channels-last is copied by a Triton launch of its own, one a Triton kernel writes is
    written channels-last by that kernel. With extern_in_triton off our plan has the same
    copies, named as such, and the compiled code still matches eager; with it on, none."""
    groups = 2 if operand == "grouped" else 1

    def fn(x, w):
        if operand in ("pointwise", "slice"):
            x = x.relu()
        if operand == "slice":
            x = x[:, :4]
        return F.conv2d(x, w, padding=1, groups=groups).sigmoid()

    shapes = [(2, 8 if operand == "slice" else 4, 8, 8), (8, 4 // groups, 3, 3)]
    host = [torch.randn(*s) for s in shapes]
    c = _compared_with_layout_copies(fn, host)
    assert len(_layout_copies(c)) == copies == len(c.ours.layout_copies), _kernels(c)
    for group in c.ours.groups:
        if group.nodes in _layout_copies(c):
            assert all("layout copy for conv, Inductor's layout_optimization" in a
                       for a in group.aten_nodes)
            assert group.bytes_moved > 0
    detail = c.ours.to_dict()["detail"]["nodes"]  # what the views draw
    for name in c.ours.layout_copies:
        assert any("Inductor's layout_optimization" in s for s in detail[name]["source"])
    (default,) = compare(fn, *(t.to("mtia_sim") for t in host))
    assert not _layout_copies(default) and not default.ours.layout_copies


@pytest.mark.parametrize("regrouped", [False, True])
def test_extern_in_triton_off_a_layout_copy_fuses_with_its_producer_only_through_a_split(
        regrouped):
    """A standardized weight (BiT): the statistics over (out, in*kh*kw), the result viewed
    as (out, in, kh, kw). The view only splits the producer's dims: Inductor reorders the
    copy's loops to the producer's and fuses them (the reduction's kernel writes the weight
    channels-last). Transposed before the view, the copy reads it in no order the producer
    loops in: a launch of its own."""
    def fn(x, w):
        flat = w.view(8, -1)
        flat = (flat - flat.mean(-1, keepdim=True)) * flat.var(-1, keepdim=True).rsqrt()
        if regrouped:
            flat = flat.view(4, 2, 36).transpose(0, 1)
        return F.conv2d(x.relu(), flat.reshape(8, 4, 3, 3), padding=1).sigmoid()

    host = [torch.randn(2, 4, 8, 8), torch.randn(8, 4, 3, 3)]
    c = _compared_with_layout_copies(fn, host)
    (copy,) = _layout_copies(c)
    assert (len(copy) == 1) is regrouped, _kernels(c)


@pytest.mark.parametrize("sliced", [False, True])
def test_extern_in_triton_off_a_layout_copy_fuses_with_its_producer_through_a_permute(sliced):
    """A conv1d reading a (batch, time, channels) value as (batch, channels, time), the value
    read again by a residual add (stored, so the convolution's input is a view of a fixed
    layout: copied). The permute only reorders the producer's dims: Inductor reorders the
    copy's loops to the producer's (`decide_loop_order_to_match`) and one kernel writes both.
    Through a slice the copy reads part of the buffer: no shared index, a launch of its own."""
    def fn(x, w):
        y = x * 2.0
        seen = y[:, 1:] if sliced else y
        return F.conv1d(seen.transpose(1, 2), w, padding=1).transpose(1, 2) + seen

    host = [torch.randn(2, 16, 8), torch.randn(8, 8, 3)]
    c = _compared_with_layout_copies(fn, host)
    (copy,) = _layout_copies(c)
    assert (len(copy) == 1) is sliced, _kernels(c)


@pytest.mark.parametrize("tail, sines, stored", [
    ("clamp_both", 24, True),  # clamp(-1, 1): clamp_min then clamp_max, two constants: +4
    ("clamp_min", 24, False),  # clamp(min=-1): one op, one constant: +2
    ("int_operand", 25, True),  # + an int64 tensor: a load, its to_dtype, the add: +3
    ("float_operand", 25, False),  # + a float tensor: a load and the add: +2
])
def test_realize_opcount_counts_a_clamps_bounds_and_a_promoted_operand(tail, sines, stored):
    """x + y then sines (3 + n operations), then a tail whose count Inductor's lowering
    decides: its decomposition makes a clamp with both bounds two ops, and type promotion
    converts an int64 operand of a float add (`to_dtype`, one op more). Read through a
    broadcast by one copy, the value is stored at 31 operations, inlined at 30 or fewer
    (has_large_inner_fn): one op either way puts it on the other side of the threshold."""
    def fn(x, y, z):
        h = x + y
        for _ in range(sines):
            h = h.sin()
        if tail == "clamp_both":
            h = h.clamp(-1, 1)
        elif tail == "clamp_min":
            h = h.clamp(min=-1)
        else:
            h = h + z
        return h[:, None].expand(8, 4, 16).clone()

    torch.manual_seed(0)
    z = torch.randint(0, 3, (8, 16)) if tail == "int_operand" else torch.randn(8, 16)
    (c,) = compare(fn, *(t.to("mtia_sim") for t in (torch.randn(8, 16), torch.randn(8, 16), z)))
    c.check()
    _same_as_inductor(c)
    assert len(c.ours.groups) == (2 if stored else 1), _kernels(c)


@pytest.mark.parametrize("biased", [False, True])
def test_stored_on_reuse_a_reader_of_a_biased_convolution_loads_the_bias_too(biased):
    """Off the CPU, Inductor's convolution lowering peels the bias off the extern call: the
    output its readers inline is an add of the call's result and the bias, two loads. The
    sum of two convolutions and a residual, read by two reductions, then loads 5 values
    with biases (more than realize_reads_threshold: stored once) and 3 without (each
    reduction's kernel computes it again). Ours counts the bias loads the same way."""
    def fn(x, w1, w2, b1, b2):
        v = F.conv2d(x, w1, b1 if biased else None, padding=1) + \
            F.conv2d(x, w2, b2 if biased else None, padding=1) + x
        return v.sum(1), v.amax(1)

    torch.manual_seed(0)
    host = [torch.randn(2, 4, 8, 8), torch.randn(4, 4, 3, 3), torch.randn(4, 4, 3, 3),
            torch.randn(4), torch.randn(4)]
    with config.patch(matmul_templates=False, computed_once=False, extern_in_triton=False):
        (c,) = compare(fn, *(t.to("mtia_sim") for t in host))
        torch._dynamo.reset()
        compiled = torch.compile(fn, backend="mtia_lab")(*(t.to("mtia_sim") for t in host))
    for got, want in zip(compiled, fn(*host), strict=True):
        torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-4)
    c.check()
    _same_as_inductor(c)
    assert ("add_1" in c.ours.recomputed) is not biased, _kernels(c)


@pytest.mark.parametrize("convolved", [False, True])
def test_realize_hint_a_biased_convolution_a_convolution_reads_too_is_stored_at_once(convolved):
    """y, a biased convolution's output, is the call's result plus the bias Inductor peels
    off; u = y + p + q + r has two readers. When a second convolution reads y too, Inductor
    stores y as it lowers it (`run_node`: a user in needs_realized_inputs, realize_hint, two
    non-constant loads), so u loads 4 values and is computed again in each reader
    (should_realize_on_reuse: not over 4). Read by u alone, y is inlined into it: u loads
    5 values (the call's result and the bias among them) and is stored once."""
    def fn(x, w, b, p, q, r, w2):
        y = F.conv2d(x, w, b, padding=1)
        u = y + p + q + r
        out = (u.sum(1), u.amax(1))
        return out + (F.conv2d(y, w2, padding=1),) if convolved else out

    torch.manual_seed(0)
    host = [torch.randn(2, 4, 8, 8), torch.randn(4, 4, 3, 3), torch.randn(4)] + \
        [torch.randn(2, 4, 8, 8) for _ in range(3)] + [torch.randn(4, 4, 3, 3)]
    for extern_in_triton in (True, False):
        torch._dynamo.reset()
        c = _compared_and_run(fn, host, matmul_templates=False, computed_once=False,
                              extern_in_triton=extern_in_triton)
        assert not c.unexplained, str(c)
        assert ("add_2" in c.ours.recomputed) is convolved, _kernels(c)


@pytest.mark.parametrize("op", ["log", "sqrt"])
def test_device_mismatch_host_code_with_a_heavy_op_broadcast_into_a_device_op_is_a_cpu_kernel(
        op):
    """SEW-D's log buckets divide by `torch.log(torch.tensor(c))`: a 0-dim constant made
    without a device, so Inductor computes the log on the host. Broadcast into the
    division it is reused (`expand`'s mark_reuse), and on the CPU a reused value with a
    heavy op (exp, log, sigmoid, tanh...) is stored (`should_realize_on_reuse`): a CPU
    kernel, which never fuses with the device's (device mismatch). A sqrt is no heavy op:
    inlined into the device kernel."""
    def fn(x):
        return torch.log(x.abs() + 1) / getattr(torch, op)(torch.tensor(7.0))

    c = _compared(fn, (8, 16))
    assert not c.unexplained, str(c)
    _same_as_inductor(c)
    assert (len(c.ours.groups) == 2) is (op == "log"), _kernels(c)
    assert any(d.rule == "device_mismatch" for d in c.ours.decisions) is (op == "log")


def test_a_layout_copy_of_a_weight_computes_none_of_the_recomputed_input_chain():
    """s = x + y has two readers, a ReLU into a convolution and the residual add: Inductor
    computes it in both kernels. The launch copying the weight channels-last names the
    convolution in its origins, but computes none of s: it is one of our layout copies,
    not a kernel that recomputes s."""
    def fn(x, y, w):
        s = x + y
        return F.conv2d(s.relu(), w, padding=1) + s

    torch.manual_seed(0)
    host = [torch.randn(2, 4, 8, 8), torch.randn(2, 4, 8, 8), torch.randn(4, 4, 3, 3)]
    with config.patch(matmul_templates=False, computed_once=False, extern_in_triton=False):
        (c,) = compare(fn, *(t.to("mtia_sim") for t in host))
    c.check()
    copies = [g for g in c.computed_groups if any(n.startswith("layout_copy_") for n in g)]
    assert copies and all(len(g) == 1 for g in copies), copies
    _same_as_inductor(c)


@pytest.mark.parametrize("switch", [True, False])
def test_the_launch_adding_a_peeled_bias_is_labelled_by_what_it_is(switch):
    """A biased convolution whose output no kernel reads (the graph's output): Inductor adds
    the bias it peeled off the call in a launch of its own. With extern_in_triton on, our
    departure explains it; with it off, the add is a node of ours (layout.peeled_biases),
    alone in its kernel as in Inductor's launch."""
    def fn(x, w, b):
        return F.conv2d(x, w, b, padding=1)

    torch.manual_seed(0)
    host = [torch.randn(2, 4, 8, 8), torch.randn(4, 4, 3, 3), torch.randn(4)]
    with config.patch(extern_in_triton=switch):
        (c,) = compare(fn, *(t.to("mtia_sim") for t in host))
    c.check()
    parts = [d for d in c.differences if not d.inductor]  # launches computing part of one
    if switch:  # the bias's add, and the layout copies of the operands if Inductor made some
        assert parts and all(d.rules == ("extern_in_triton",) and d.explained for d in parts)
    else:  # the copies and the add are ours too
        assert not parts, str(c)
        assert ("bias_add_convolution",) in _kernels(c)
        _same_as_inductor(c)
    assert not c.unexplained, str(c)


@pytest.mark.parametrize("reader", ["relu", "conv", "relu_and_output"])
def test_conv_bias_in_triton_the_add_is_a_node_where_inductor_stores_it(reader):
    """Off the CPU Inductor runs a convolution without its bias and returns the add of the
    bias as pointwise code (kernel/conv.py `convolution`). A ReLU reading it inlines it: no
    buffer, no node of ours (the ReLU's kernel adds it). A convolution reading it realizes
    it (`realize_input`): the add is a launch of its own, and so is our node
    `bias_add_convolution`. Returned by the graph and read by a ReLU too, it is stored and
    the ReLU's kernel computes both. Our code still gives eager's values."""
    from mtia_lab.compare.fidelity import fidelity_rows

    def fn(x, w, b, w2):
        h = F.conv1d(x, w, b, padding=1)
        if reader == "relu":
            return h.relu()
        if reader == "conv":
            return F.conv1d(h, w2)
        return h, h.relu()

    def make():
        torch.manual_seed(0)
        return (torch.randn(2, 4, 8), torch.randn(4, 4, 3), torch.randn(4), torch.randn(4, 4, 1))

    (row,) = fidelity_rows({"peeled": (fn, make)})
    c = row.inductor_like.check()
    assert not row.against_eager, row.against_eager
    kernels = _kernels(c)
    stored = reader != "relu"
    assert any("bias_add_convolution" in k for k in kernels) is stored, kernels
    assert (("bias_add_convolution",) in kernels) is (reader == "conv"), kernels
    _same_as_inductor(c)
    assert not c.unexplained, str(c)


@pytest.mark.parametrize("bias", [False, True])
def test_stored_on_reuse_counts_the_bias_inductor_peels_off_a_convolution(bias):
    """Off CPU Inductor runs a convolution without its bias and adds the bias, viewed per
    channel, as pointwise code its readers inline. A sum weighted by a two-channel sigmoid
    map then loads the map and the bias at two channels, and the two features: with the
    bias 6 loads (> realize_reads_threshold, 4), so the sum, read by the 4 gathers of a
    bilinear upsample, is stored; without it 4 loads, and each gather computes it again."""
    def fn(x, a, b, w, cb):
        s = torch.sigmoid(F.conv2d(x, w, cb if bias else None, padding=1))
        h = a * s[:, 0:1] + b * s[:, 1:2]
        return F.interpolate(h, scale_factor=2, mode="bilinear", align_corners=False)

    c = _compared(fn, (2, 4, 4, 4), (2, 4, 4, 4), (2, 4, 4, 4), (2, 4, 3, 3), (2,))
    assert not c.unexplained, str(c)
    weighted = next(g.nodes for g in c.ours.groups if "sigmoid" in g.nodes)
    assert any(n.startswith("index") for n in weighted) is not bias, _kernels(c)
    held = [launch.nodes for launch in c.placed.launches if launch.nodes]
    assert weighted in held, _kernels(c)


@pytest.mark.parametrize("reused", [False, True])
def test_a_concat_kernel_is_copied_for_a_convolution_and_fuses_with_nothing(reused):
    """A cat whose computed piece is also read by other pointwise code is a ConcatKernel
    (has_multi_consumers): created with a FixedLayout, so a convolution reading it copies
    it channels-last in a launch of its own (a nop kernel fuses with nothing). Otherwise
    the cat is pointwise code that writes the convolution's input in its order itself."""
    def fn(x, y, w):
        up = y.relu()
        out = F.conv2d(torch.cat([x, up], 1), w, padding=1)
        return (out, up * 2) if reused else out

    with config.patch(extern_in_triton=False):
        c = _compared(fn, (2, 4, 4, 4), (2, 4, 4, 4), (4, 8, 3, 3))
    copy = ("layout_copy_input_convolution",)
    assert (copy in _kernels(c)) is reused, _kernels(c)
    held = [launch.nodes for launch in c.placed.launches if launch.nodes]
    assert (copy in held) is reused, held


@pytest.mark.parametrize("masked", [False, True])
def test_an_unrolled_masked_max_is_large_so_it_is_stored_with_the_sum(masked):
    """A softmax over 6 positions is unrolled. Under a causal mask made of position compares,
    each of the 6 terms computes the mask again at its own index (Inductor's CSE shares only
    constants between terms): the max's body exceeds 30 ops and it is stored; the sum reads
    it per row, at the index it is written, so the max and the sum are one kernel and the
    division recomputes the exponentials. Without the mask the max is small and inlined."""
    def fn(s):
        if masked:
            pos = torch.arange(s.shape[-1], device=s.device)
            s = s + torch.where(pos[None, :] > pos[:, None], -1e9, 0.0)
        return (s.softmax(-1),)

    c = _recomputing(fn, (8, 6, 6))
    _same_as_inductor(c)
    amax = next(g.nodes for g in c.ours.groups if "amax" in g.nodes)
    assert ("sum_1" in amax) is masked, _kernels(c)


def test_a_launch_a_pattern_made_is_part_of_what_its_reader_holds():
    """Inductor's joint-graph attention pattern rewrites bmm, scale, softmax, bmm into SDPA,
    whose math adds `_safe_softmax`'s row check: a launch none of whose nodes is ours. The
    attribution puts it on the nodes of ours its reader holds, and the difference is the
    pattern's (post_grad_pattern), so the audit passes."""
    def fn(q, k, v):
        return (torch.matmul(torch.matmul(q, k.transpose(-1, -2)).mul(0.25).softmax(-1), v),)

    c = _recomputing(fn, (1, 2, 5, 16), (1, 2, 16, 16), (1, 2, 16, 16))
    assert c.placed.pattern_only, "the attention was not rewritten: nothing to check"
    pattern = [d for d in c.differences if d.launch in c.placed.pattern_only]
    assert pattern and all(d.rules == ("post_grad_pattern",) for d in pattern)
    assert all(c.placed.launches[k].part_of for k in c.placed.pattern_only)
    assert {launch.index for launch in c.placed.launches
            if not launch.nodes} <= c.placed.pattern_only | {d.launch for d in c.differences}


def test_a_value_each_bmm_operand_recomputes_is_recomputed_in_every_launch():
    """`eye` scaled and subtracted from a product, twice, each result a bmm operand (the
    Newton-Schulz step of Nystromformer's pseudo-inverse): Inductor inlines the eye into each
    operand's kernel, which it writes through the bmm's expand (a view, no origin). The
    attribution follows the view to the loop body, so each launch computes the eye again,
    as ours does with computed_once off."""
    def fn(a, v):
        eye = torch.eye(a.shape[-1], device=a.device)
        for _ in range(2):
            v = torch.matmul(v, 7 * eye - torch.matmul(a, v))
        return (v,)

    c = _recomputing(fn, (2, 4, 4), (2, 4, 4))
    _same_as_inductor(c)
    assert "eq" in c.placed.recomputed


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_grid_sample_is_decomposed_into_indexed_loads_that_take_their_producers(mode):
    """Inductor decomposes grid_sampler_2d (its decomposition.py, every mode) into pointwise
    code that loads the input at the grid's positions: the grid's arithmetic and the input's
    producer are inlined into it and its reader joins it, one launch, where an ATen call
    would be three."""
    def fn(x, points):
        grid = points * 2 - 1
        return (F.grid_sample(x.abs(), grid, mode=mode, align_corners=False).neg(),)

    c = _compared(fn, (2, 3, 8, 8), (2, 5, 1, 2))
    _same_as_inductor(c)
    assert len(c.ours.groups) == 1, _kernels(c)


@pytest.mark.parametrize("heads", [True, False])
def test_a_permuted_read_shares_a_buffer_only_in_loops_reordering_can_match(heads):
    """A projection read twice: scaled over (batch, seq, hidden), and copied permuted. Into
    heads (batch, heads, seq, head_dim: four loops beside three) no reordering of loops
    gives the two reads one index, so Inductor's score_fusion_memory finds no shared data
    and the two stay apart (ConvBERT's value and key copies); transposed (three loops, the
    same (size, stride) pairs) the reorder round aligns them and they fuse."""
    def fn(x, w, y):
        a = x @ w
        moved = a.view(2, 8, 2, 8).permute(0, 2, 1, 3) if heads else \
            a.view(2, 8, 16).permute(0, 2, 1)
        return a.view(2, 8, 16) * y, moved.contiguous()

    torch.manual_seed(0)
    c = _recomputing_on(fn, [torch.randn(16, 32), torch.randn(32, 16), torch.randn(16)])
    _same_as_inductor(c)
    assert (len(c.ours.groups) == 3) is heads, _kernels(c)


@pytest.mark.parametrize("inside", [True, False])
def test_a_shift_inside_the_rows_of_a_norm_reads_its_statistic_at_its_own_index(inside):
    """RMSNorm over the whole hidden dim, then rotate_half on each head: its halves are
    slices that move inside a head, so inside the norm's row, and every load of the row's
    mean stays at the index it is written: Inductor fuses the norm and the rotation into
    one kernel (OLMo-2's q/k norm). A shift along the sequence moves to another row: the
    mean is read at other positions, and the norm's reduction stays a kernel apart."""
    def fn(x):
        h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
        if not inside:
            return (h[:, 1:] * 2,)
        h = h.view(2, 8, 2, 8).transpose(1, 2)
        return (h * 2 + torch.cat((-h[..., 4:], h[..., :4]), -1) * 3,)

    c = _recomputing(fn, (2, 8, 16))
    _same_as_inductor(c)
    assert (len(c.ours.groups) == 1) is inside, _kernels(c)


@pytest.mark.parametrize("permuted", [False, True])
def test_a_reduction_over_permuted_rows_keeps_an_epilogue_that_merges_a_row_dim(permuted):
    """A multi-head norm: mean and variance of each head's row, then the heads merged back
    (`reshape(B, T, heads * d)`). Reading the heads permuted, Inductor loops over the rows in
    memory order and stores the statistics so; the normalize's loop merges the head dim with
    the reduced one, so no reordering of it reads them at the index they are written: two
    launches. Read in the graph's order, it is one."""
    def fn(x, w, g):
        h = x.permute(0, 2, 1, 3) if permuted else x
        mean = h.mean(-1, keepdim=True)
        var = h.var(-1, keepdim=True, correction=0)
        y = ((h - mean) * torch.rsqrt(var + 1e-6)).reshape(2, 8, 32)
        return (torch.sigmoid(g) * (y * w),)

    c = _recomputing(fn, (2, 2, 8, 16), (32,), (2, 8, 32))
    _same_as_inductor(c)
    stats = next(g.nodes for g in c.ours.groups if "mean" in g.nodes)
    assert ("sub" in stats) is not permuted, _kernels(c)


def test_a_launch_computes_again_what_a_value_inductor_folded_away_reads():
    """A gradient scaled by a loss's ones (`d / 256 * ones_like(loss)`), read by the kernel
    feeding a matmul and by a reduction after it: Inductor removes the multiplication by
    ones, so the scaled value has no node of its own (absorbed), and each launch computes
    d again. The launch's group holds what the folded value reads, transitively (d, x), as
    ours recomputes them: the plans are the same."""
    def fn(a, b, t, w, m):
        x = a + b * 0.22
        g = (x - t) * (1 / 256) * torch.ones_like(t[0, 0, 0])
        y = ((g * 0.22).reshape(16, 32) @ m).reshape(2, 8, 32)
        return (g + (w * y * x).sum(-1, keepdim=True) * x,)

    c = _recomputing(fn, (2, 8, 32), (2, 8, 32), (2, 8, 32), (32,), (32, 32))
    _same_as_inductor(c)
    assert "sub" in c.placed.recomputed and "sub" in c.ours.recomputed


def test_an_unrolled_sum_is_inlined_into_the_indexed_kernel_its_readers_joined():
    """RoPE's backward for grouped heads: the heads' gradients summed (2 terms: unrolled),
    scaled, and rotated back through two slice_scatters. The sum is pointwise code to
    Inductor's lowering, inlined into every reader, the slice_scatters' kernel too: one
    launch. Only a cat made a ConcatKernel realizes what it reads."""
    def fn(g, cos, sin):
        s = g.view(2, 2, 2, 8, 8).sum(2)
        a = s * sin
        z = torch.zeros_like(a)
        rot = torch.slice_scatter(z, -a[..., :4], 3, 4) + \
            torch.slice_scatter(z, a[..., 4:], 3, 0, 4)
        return (rot + s * cos,)

    c = _recomputing(fn, (2, 4, 8, 8), (8, 8), (8, 8))
    _same_as_inductor(c)
    assert len(c.ours.groups) == 1, _kernels(c)


def test_interleaved_slice_scatter_chains_a_pass_remade_are_told_apart():
    """A chunkwise recurrence stores each step's state and normalizer into two buffers
    (`states[:, 8*i:8*i+8] = s`): two slice_scatter chains, interleaved. Inductor re-makes
    them (`slice_scatter_default_k`, no source remembered) in another order than ours; each
    link reads the one before, so it is matched to ours by what it reads once that one is
    matched, not by its place in the graph: each chain's launch holds its own links."""
    def fn(x, y):
        states = torch.zeros(2, 24, 16, device=x.device)
        norms = torch.zeros(2, 24, device=x.device)
        s, n = x[:, 0].exp(), y[:, 0].exp()
        for i in range(3):
            states[:, 8 * i:8 * i + 8] = s
            norms[:, 8 * i:8 * i + 8] = n
            s = s * 0.5 + x[:, i]
            n = n * 0.5 + y[:, i]
        return (states[:, :16].reshape(2, 2, 8, 16).permute(0, 1, 3, 2).contiguous(),
                norms[:, :16].unsqueeze(-1).contiguous())

    c = _recomputing(fn, (2, 3, 8, 16), (2, 3, 8))
    _same_as_inductor(c)
    held = [set(launch.nodes) for launch in c.placed.launches]
    assert {"slice_scatter", "slice_scatter_2", "slice_scatter_4"} in [
        h & {f"slice_scatter{k}" for k in ("", "_1", "_2", "_3", "_4", "_5")} for h in held]


@pytest.mark.parametrize("reused", [False, True])
def test_a_concat_kernel_read_by_one_op_is_stored_not_inlined_into_it(reused):
    """TimeSformer's residual: a class token concatenated with the tokens a pointwise add
    made, then added to another cat. When the add has another pointwise reader, Inductor's
    cat lowering makes a ConcatKernel (has_multi_consumers): a buffer the add writes its
    slice of, which the one reader of the cat loads in a kernel of its own; otherwise the
    cat is pointwise code inlined into its reader."""
    def fn(x, y, z):
        a = x[:, 1:] + y
        out = torch.cat([x[:, :1], a], 1) + z.exp()
        return (out, a * 2) if reused else (out,)

    c = _recomputing(fn, (2, 9, 8), (2, 8, 8), (2, 9, 8))
    _same_as_inductor(c)
    assert (("cat",) in _kernels(c)) is reused, _kernels(c)


@pytest.mark.parametrize("rows", [16, 32])
def test_split_reduction_an_outer_norm_of_many_terms_runs_in_two_kernels(rows):
    """Weight norm (SEW's positional convolution): the norm of a (rows, 8, 16) weight over
    all but the last dim, then weight * g / norm. With 256 terms per output and 16 outputs
    Inductor splits the reduction in two (Reduction.num_splits: 2 partial sums per
    output), and the pointwise scale, over the whole weight, fits neither stage: three
    launches, the first one a part of Inductor we name and do not model. With 128 terms it
    is one reduction, whose loops the pointwise takes in the reorder round."""
    def fn(w, g):
        return (w * (g / torch.linalg.vector_norm(w, 2, [0, 1], True)),)

    c = _recomputing(fn, (rows, 8, 16), (1, 1, 16))
    assert not c.unexplained, str(c)
    assert [d.rules for d in c.differences] == ([("split_reductions",)] if rows == 32 else [])
    norm = next(g.nodes for g in c.ours.groups if "linalg_vector_norm" in g.nodes)
    assert (norm == ("linalg_vector_norm",)) is (rows == 32), _kernels(c)


@pytest.mark.parametrize("dims", [(0, 1), (0, 2)])
def test_split_reduction_only_a_reduction_that_keeps_the_innermost_dim_is_outer(dims):
    """A sum over all dims but one, read back by a pointwise over the whole input (as a
    BatchNorm's statistics are): kept dim last, Inductor's num_splits finds no reduced dim
    of stride 1 (an outer reduction) and splits 512 terms in four; kept dim in the middle,
    the innermost dim is reduced (an inner reduction: split only past 8192 terms)."""
    def fn(x):
        return (x - x.sum(dims, keepdim=True),)

    c = _recomputing(fn, (16, 32, 8) if dims == (0, 1) else (16, 8, 32))
    assert not c.unexplained, str(c)
    split = [d.rules for d in c.differences] == [("split_reductions",)]
    assert split is (dims == (0, 1)), str(c)


def test_a_bilinear_grid_sample_is_a_large_body_stored_as_its_cats_piece():
    """Deformable attention's sampling: two bilinear grid samples concatenated, read by a
    pointwise op. Inductor's decomposed grid sample is some 90 operations (a masked load and
    a weight per corner): stored for its size (realize_opcount_threshold), so the cat is a
    ConcatKernel whose pieces the two samples' kernels write, and the reader a launch of its
    own; counted as one op, ours would inline both samples into a pointwise cat."""
    def fn(x1, x2, g1, g2, w):  # two feature levels, each sampled at its own points
        a = F.grid_sample(x1, g1, align_corners=False)
        b = F.grid_sample(x2, g2, align_corners=False)
        return (torch.cat([a, b], -1) * w,)

    c = _recomputing(fn, (2, 4, 8, 8), (2, 4, 4, 4), (2, 5, 6, 2), (2, 5, 6, 2),
                     (2, 4, 5, 12))
    _same_as_inductor(c)
    assert ("grid_sampler_2d",) in _kernels(c), _kernels(c)


@pytest.mark.parametrize("length", [4, 16])
def test_a_short_scan_is_never_unrolled_and_takes_its_full_space_epilogue(length):
    """Inductor unrolls a reduction over fewer than 8 elements into pointwise code
    (`Reduction.create`), never a scan (`Scan.create`): a cumsum over 4 elements is a kernel
    over rows of 4, and a pointwise op over all its elements joins it (Mamba-2's segment
    sums), as it does over 16; unrolled, it would loop over the 16 rows only."""
    def fn(x, y):
        c = torch.cumsum(x * 2, -1)  # read twice: a kernel of its own, never inlined
        return c.exp() * y, c.amax(-1)

    c = _compared(fn, (16, length), (16, length))
    _same_as_inductor(c)
    assert any({"cumsum", "exp"} <= set(g.nodes) for g in c.ours.groups), _kernels(c)


@pytest.mark.parametrize("bias", [False, True])
def test_computed_once_off_a_linears_bias_is_one_more_load_of_its_pointwise_readers(bias):
    """`linear(x) * y + z) * u` read by two reductions over other dims. On a GPU-like device
    Inductor rewrites an fp32 addmm read only by pointwise ops as mm + a pointwise bias add
    (post_grad.py `unfuse_bias_add_to_pointwise`), inlined into its readers: with a bias v
    loads 5 values (mm, bias, y, z, u), more than realize_reads_threshold (4), and is stored
    once; without one it loads 4 and each reduction's kernel computes it again."""
    def fn(x, w, b, y, z, u):
        v = (F.linear(x, w, b if bias else None) * y + z) * u
        return v.sum(-1), v.amax(0)

    c = _recomputing(fn, (8, 16), (16, 16), (16,), (8, 16), (8, 16), (8, 16))
    _same_as_inductor(c)
    assert ("mul_1" in c.ours.recomputed) is not bias, c.ours.recomputed


@pytest.mark.parametrize("pieces", ["one_view", "two_views"])
def test_computed_once_off_each_view_a_pointwise_cat_takes_of_one_buffer_is_a_load(pieces):
    """A point's two coordinates swapped by a cat of two slices of one input (deformable
    attention's offset normalizer), read with three more inputs by a value two reductions
    read. Inductor's pointwise cat loads each piece at its own index: 5 loads, more than
    realize_reads_threshold (4), and the value is stored once; a cat of one slice twice
    loads it once (4 loads) and each reduction's kernel computes the value again."""
    def fn(s, p, r, q):
        second = s[:, 0:1] if pieces == "one_view" else s[:, 1:2]
        v = (r + p / torch.cat([second, s[:, 0:1]], -1)) * q
        return v.sum(-1), v.amax(0)

    c = _recomputing(fn, (8, 2), (8, 2), (8, 2), (8, 2))
    _same_as_inductor(c)
    assert ("mul" in c.ours.recomputed) is (pieces == "one_view"), c.ours.recomputed


@pytest.mark.parametrize("small,normed", [(2, True), (4, True), (4, False)])
def test_conv_input_layout_an_upsampled_norm_stored_channels_last_keeps_the_writer_apart(
        small, normed):
    """An FPN level (MaskFormer's pixel decoder): GroupNorm(x) plus the nearest upsample of
    ReLU(GroupNorm(s)), into a convolution. Inductor inlines each norm's normalize into its
    readers (over 4 terms per group the small norm's variance too) and counts the float
    aranges' decomposition (iota, step, start, cast): the upsample's body passes
    realize_opcount_threshold (30), and `run_node` stores it channels-last for the
    convolution. The writer of the convolution's input then has two channels-last accesses
    to the norm input's one and loops channels-last: it shares nothing with x's norm, whose
    statistics stay a launch of their own. Upsampling s itself (a small body) it is inlined,
    the writer keeps the norm's loop and fuses with its statistics."""
    def fn(x, w, b, cw, s, sw, sb):
        down = F.group_norm(s, 32, sw, sb).relu() if normed else s
        return F.conv2d(F.group_norm(x, 32, w, b) + F.interpolate(down, scale_factor=2),
                        cw, padding=1)

    torch.manual_seed(0)
    host = [torch.randn(2, 32, 2 * small, 2 * small), torch.randn(32), torch.randn(32),
            torch.randn(32, 32, 3, 3) / 32, torch.randn(2, 32, small, small), torch.randn(32),
            torch.randn(32)]
    c = _compared_with_layout_copies(fn, host)
    norm = next(g.nodes for g in c.ours.groups if "native_group_norm" in g.nodes)
    assert (norm == ("native_group_norm",)) is normed, _kernels(c)


@pytest.mark.parametrize("tiled", [True, False])
def test_computed_once_off_a_large_body_tiled_by_repeat_is_stored(tiled):
    """DINOv3's 2-D rotary angles: patch centres from two floating aranges (each decomposed:
    iota, step, start, cast), a meshgrid, 2x - 1, times 2 pi and the inverse frequencies, 32
    operations loading one value. Inductor's repeat lowering marks its input reused by the
    repeat factor: a body over realize_opcount_threshold (30) is stored, and the tiled cosine
    reads it. Without the repeat nothing marks it reused: read once, it is inlined."""
    def fn(inv_freq, q):
        h = torch.arange(0.5, 4, dtype=torch.float32, device=q.device) / 4
        w = torch.arange(0.5, 4, dtype=torch.float32, device=q.device) / 4
        coords = torch.stack(torch.meshgrid(h, w, indexing="ij"), -1).flatten(0, 1)
        angles = (2 * math.pi * (2 * coords - 1)[:, :, None] * inv_freq[None, None, :])
        angles = angles.flatten(1, 2)
        angles = angles.repeat(1, 2) if tiled else angles
        return (q * angles.cos(),)

    c = _recomputing(fn, (4,), (16, 16 if tiled else 8))
    _same_as_inductor(c)
    stored = [g.nodes for g in c.ours.groups if g.nodes[-1] == "mul_2"]
    assert bool(stored) is tiled, _kernels(c)


def test_an_attention_patterns_second_bmm_is_on_its_own_launch_not_its_readers():
    """Inductor's attention pattern rewrites bmm, scale, softmax, bmm into SDPA, whose math
    is a bmm remembering no node of ours; the replacement's output, a squeeze of it, stands
    for our second bmm, and only the launch reading it in place (the out-projection's addmm)
    names it in its origins. The attribution walks through the views to the bmm: our bmm is
    on Inductor's bmm launch, the addmm on its own, and no launch is left empty
    (MultiheadAttention with one query: SigLIP's pooling head)."""
    def fn(q, k, v, w, b):
        o = torch.bmm(torch.bmm(q * 0.25, k.transpose(1, 2)).softmax(-1), v)
        return (F.linear(o.permute(1, 0, 2).reshape(2, 32), w, b),)

    c = _recomputing(fn, (8, 1, 8), (8, 16, 8), (8, 16, 8), (32, 32), (32,))
    assert c.placed.pattern_only, "the attention was not rewritten: nothing to check"
    second = next(launch for launch in c.placed.launches if "bmm_1" in launch.nodes)
    assert "bmm" in second.name and "addmm" not in second.nodes, c.placed.launches
    assert not c.unexplained, str(c)


@pytest.mark.parametrize("index_dim", [1, 4])
def test_a_one_hot_scattered_into_zeros_is_a_pointwise_select_that_fuses(index_dim):
    """`zeros_like(x).scatter_(-2, index, 1.0)`, the hard one-hot of a straight-through
    Gumbel softmax (GroupViT's token assignment), then `y - x.detach() + x` and a sum over
    the last dim. With an index of one element along the scattered dim, Inductor's
    joint-graph pattern `scatter_upon_const_tensor` makes it `where(index == arange, 1, 0)`,
    a pointwise op that fuses with its readers; with an index of 4 it stays a scatter, whose
    output its readers wait for (scatter_output)."""
    def fn(x):
        index = x.topk(index_dim, dim=-2).indices
        y = torch.zeros_like(x).scatter_(-2, index, 1.0)
        return ((y - x.detach() + x).sum(-1),)

    c = _recomputing(fn, (2, 8, 16))
    assert not c.unexplained, str(c)  # a scatter: two launches to Inductor (ours: one)
    scatter = next(g.nodes for g in c.ours.groups if "scatter" in g.nodes)
    assert ("sum_1" in scatter) is (index_dim == 1), _kernels(c)


@pytest.mark.parametrize("loads", [1, 2])
def test_realize_hinted_a_pools_input_loading_two_places_is_stored(loads):
    """Inductor's avg_pool2d lowering calls `x.realize_hint()` on its input (`_avg_poolnd`):
    a pointwise value loading more than one place (`nontrivial_read_count > 1`: Funnel's
    cat of the class token and the shifted sequence, two slices of one buffer) is stored, a
    kernel of its own before the pool's; one loading a single buffer stays inlined."""
    def fn(x):
        h = torch.cat([x[:, :1], x[:, :-1]], 1) if loads == 2 else x * 2
        return F.avg_pool2d(h[:, None], [2, 1], [2, 1], ceil_mode=True)

    c = _compared(fn, (2, 10, 32))
    _same_as_inductor(c)
    assert len(c.ours.groups) == loads, _kernels(c)
    assert ("cat" in c.ours.groups[0].nodes) is (loads == 2)


@pytest.mark.parametrize("halves", ["same", "each"])
def test_an_indexed_read_of_each_half_of_a_split_shares_no_data(halves):
    """DiffLlama's values: `v.repeat(1, 2, 1, 1)` of each half of `chunk(v, 2, dim=1)`. A
    repeat loads its input at indices (x mod size), through the view it is given: the two
    halves are other addresses of one buffer, Inductor's memory deps differ
    (score_fusion_memory 0) and the two kernels stay apart; two repeats of one half share
    their reads and fuse horizontally."""
    def fn(x):
        a, b = torch.chunk(x @ x.transpose(-1, -2), 2, dim=1)
        second = a if halves == "same" else b
        return a.repeat(1, 2, 1, 1) * 2, second.repeat(1, 2, 1, 1) * 3

    c = _compared(fn, (2, 2, 8, 8))
    _same_as_inductor(c)
    repeats = [g for g in c.ours.groups if any(n.startswith("repeat") for n in g.nodes)]
    assert len(repeats) == (1 if halves == "same" else 2), _kernels(c)


def test_compare_a_value_joined_to_the_add_of_mm_plus_add_is_the_post_grad_pattern():
    """Llama 4's shared expert added to the routed experts' sum: `mm(x, w) + y.sum(0)`.
    Inductor's post-grad pattern (post_grad.py `addmm`) makes the add part of an addmm
    whose input, the sum, is stored by a kernel of its own; we schedule the add as traced
    and inline the (unrolled) sum into it. Both launches differ by that rewrite, our
    departure post_grad_pattern, not by a fusion rule."""
    def fn(x, w, y):
        return x @ w + y.view(4, 16, 32).sum(0)

    torch.manual_seed(0)
    args = [torch.randn(*s, device="mtia_sim") for s in ((16, 32), (32, 32), (64, 32))]
    with config.patch(matmul_templates=False):
        (c,) = compare(fn, *args)
    c.check()
    assert not c.unexplained, str(c)
    assert c.differences and all(d.rules == ("post_grad_pattern",) for d in c.differences)
    torch.testing.assert_close(torch.compile(fn, backend="mtia_lab")(*args).cpu(),
                               fn(*[a.cpu() for a in args]), rtol=1e-4, atol=1e-4)



@pytest.mark.parametrize("trained", [False, True])
def test_extern_in_triton_off_a_convolution_backward_fixes_and_copies_its_input(trained):
    """A convolution's input that a convolution backward reads too (the activation saved for
    the weight's gradient), with other users: Inductor's `GraphLowering.run_node` fixes its
    layout at its FX strides (need_fixed_layout), and each channels-last operand made of it
    (the forward convolution's input, the backward's input, `convolution_backward_lowering`)
    is a layout copy that its producer's kernel writes as well. Without the backward the
    producer writes the convolution's input channels-last itself: no copy."""
    def fn(x, w1, w2):
        def loss(ws):
            h = F.conv2d(x, ws[0], padding=1).relu()
            return F.conv2d(h, ws[1], padding=1).square().mean()

        if trained:  # the loss's value returned too: no dead forward code
            return torch.func.grad_and_value(loss)((w1, w2))
        return F.conv2d(F.conv2d(x, w1, padding=1).relu(), w2, padding=1)

    host = [torch.randn(2, 4, 8, 8), torch.randn(8, 4, 3, 3), torch.randn(8, 8, 3, 3)]
    with config.patch(extern_in_triton=False):
        (c,) = compare(fn, *(t.to("mtia_sim") for t in host))
        torch._dynamo.reset()
        got = torch.compile(fn, backend="mtia_lab")(*(t.to("mtia_sim") for t in host))
    leaves = torch.utils._pytree.tree_leaves
    torch.testing.assert_close([t.cpu() for t in leaves(got)], leaves(fn(*host)), rtol=1e-4,
                               atol=1e-4)
    c.check()
    assert not c.unexplained, str(c)
    relu = next(g.nodes for g in c.ours.groups if "relu" in g.nodes)
    copies = {n for n in relu if n.startswith("layout_copy_input_")}
    assert copies == ({"layout_copy_input_convolution_1",
                       "layout_copy_input_convolution_backward"} if trained else set()), relu
    held = [launch.nodes for launch in c.placed.launches if "relu" in launch.nodes]
    assert held == [relu]


@pytest.mark.parametrize("expanded", [False, True])
def test_a_convolutions_input_reading_a_row_sum_broadcast_joins_the_reduction(expanded):
    """MobileViTv2's linear attention: the context vector is a sum over the last dim,
    `relu(value) * context_vector.expand_as(value)` the next convolution's input. Inductor's
    dep of that read drops the trailing broadcast variable (`canonicalize`): it is the sum's
    write, shared data; and the product, written channels-last, takes the sum's loop order
    in the reorder round (`normalize_with_stride_order`): one kernel, explicit expand or
    implicit broadcast alike."""
    def fn(x, w_qkv, w_out):
        q, k, v = F.conv2d(x, w_qkv).split([1, 8, 8], dim=1)
        context = (k * q.softmax(-1)).sum(-1, keepdim=True)
        out = F.relu(v) * (context.expand_as(v) if expanded else context)
        return F.conv2d(out, w_out)

    host = [torch.randn(2, 8, 4, 16), torch.randn(17, 8, 1, 1), torch.randn(8, 8, 1, 1)]
    (c,) = compare(fn, *(t.to("mtia_sim") for t in host))
    c.check()
    assert not c.unexplained, str(c)
    summed = next(g.nodes for g in c.ours.groups if "sum_2" in g.nodes)  # the context
    assert "relu" in summed and "mul_1" in summed, _kernels(c)
    torch._dynamo.reset()
    got = torch.compile(fn, backend="mtia_lab")(*(t.to("mtia_sim") for t in host))
    torch.testing.assert_close(got.cpu(), fn(*host), rtol=1e-4, atol=1e-4)


def test_extern_in_triton_off_a_layout_copy_joins_a_sibling_reading_its_buffer_whole():
    """A residual block trained: the activation h is a convolution's input, its residual
    (`conv(h) + h`, pooled by a mean) and the input of the convolution backward. The
    backward's copy of h loops in h's order (`pick_loop_order`: its read and its write
    tie), so it shares h with the residual's kernel as much as with h's producer; of the
    two, the residual's kernel is the nearer in graph order, and Inductor fuses it there."""
    def fn(x, w1, w2):
        def loss(ws):
            h = F.conv2d(x, ws[0], padding=1).relu()
            y = (F.conv2d(h, ws[1], padding=1) + h).relu()
            return y.mean(dim=(2, 3)).square().sum()

        return torch.func.grad_and_value(loss)((w1, w2))

    host = [torch.randn(2, 4, 8, 8), torch.randn(8, 4, 3, 3), torch.randn(8, 8, 3, 3)]
    with config.patch(extern_in_triton=False):
        (c,) = compare(fn, *(t.to("mtia_sim") for t in host))
    c.check()
    assert not c.unexplained, str(c)
    pooled = next(g.nodes for g in c.ours.groups if "mean" in g.nodes)
    assert "layout_copy_input_convolution_backward" in pooled, _kernels(c)
    placed = next(launch.nodes for launch in c.placed.launches if "mean" in launch.nodes)
    assert "layout_copy_input_convolution_backward" in placed


@pytest.mark.parametrize("operands", [1, 2])
def test_an_unrolled_reduction_reused_and_loading_more_than_4_values_is_stored(operands):
    """NLLB-MoE's router probabilities `(probs * mask).sum(1)` over 4 experts, read by the
    clamp of their sum and by the division. A reduction over fewer terms than
    unroll_reductions_threshold is pointwise code to Inductor (`Reduction.create` unrolls
    it), and as pointwise code with several users it is stored when its body loads more
    than realize_reads_threshold (4) values (`StorageBox.should_realize_on_reuse`): 4 terms
    of 2 buffers, 8 loads. Stored, it is a kernel over its 8 rows that the readers over the
    rows' 32 elements do not join; over one buffer (4 loads) it is computed in each reader."""
    def fn(x, y):
        s = (x * (y if operands == 2 else x)).sum(-1, keepdim=True)
        return (s / (s + 1).clamp(min=1e-3) * x,)

    c = _recomputing(fn, (8, 4), (8, 4))
    _same_as_inductor(c)
    assert len(c.ours.groups) == operands, _kernels(c)


@pytest.mark.parametrize("gathered", [False, True])
def test_a_reader_of_a_reduction_gathered_through_an_index_does_not_join_it(gathered):
    """NLLB-MoE's `sorted_cumsum[order.argsort()]`: the cumsum's epilogue `c - 1` inlined
    into a gather (`aten.index`) is computed at the rows the index picks, so the kernel
    loads the cumsum at an indirect index (`tmp0`), not at the index it is written: no
    memory dependency matches (score_fusion_memory 0) and Inductor keeps the two apart,
    loop reordering or not. Read in place, the epilogue joins the cumsum's loop."""
    def fn(x, order):
        c = torch.cumsum(x, -1) - 1
        return ((c[order] if gathered else c) * 2,)

    torch.manual_seed(0)
    host = [torch.randn(8, 16), torch.randperm(8)]
    c = _recomputing_on(fn, host)
    _same_as_inductor(c)
    cumsum = next(g.nodes for g in c.ours.groups if "cumsum" in g.nodes)
    assert ("mul" in cumsum) is not gathered, _kernels(c)


@pytest.mark.parametrize("sines, stored", [(23, False), (24, True)])
def test_realize_opcount_counts_a_pads_mask(sines, stored):
    """x + y then sines (3 + n operations), then a pad of one element before the last dim
    (Parakeet's relative-position shift). Inductor's `constant_pad_nd` lowering loads the
    input under a mask: the index and the bound as index expressions, their compare
    (`range_mask_low`), the masked load: 4 operations. Read through a broadcast by one copy,
    the value is stored past realize_opcount_threshold (30): at 31, inlined at 30."""
    def fn(x, y):
        h = x + y
        for _ in range(sines):
            h = h.sin()
        return F.pad(h, (1, 0))[:, None].expand(8, 4, 17).clone()

    c = _compared(fn, (8, 16), (8, 16))
    _same_as_inductor(c)
    assert len(c.ours.groups) == (2 if stored else 1), _kernels(c)


@pytest.mark.parametrize("rows", ["arange_and_index", "index"])
def test_an_index_tensor_is_read_at_its_own_index_in_each_row_it_picks(rows):
    """TimesFM's last patch of each series: `x[arange(B), idx]` with idx from an argmax (its
    pointwise code loads 8 terms: stored, two gathers read it), then statistics over the
    rows picked. `aten.index` loads its index tensors over the output dims the indexed dims
    become (here the first), the same value in each of the row's elements: its MemoryDep
    drops the unused inner loop (`drop_unused_symbols`), so it is idx's store, index and
    all, and idx's kernel joins the row reductions over their reduced space, as Inductor's."""
    def fn(x, y):
        idx = torch.where((y > 0).sum(-1) == 0, 0, y.argmax(-1))  # loads y 8 times: stored
        if rows == "index":
            return (x[0][idx] * 2).sum(-1), (x[1][5 - idx] * 3).amax(-1)
        row = torch.arange(4, device=x.device)
        return x[row, idx].sum(-1), x[row, 5 - idx].amax(-1)

    c = _recomputing(fn, (4, 6, 8), (4, 4))
    _same_as_inductor(c)
    assert len(c.ours.groups) == 1, _kernels(c)


@pytest.mark.parametrize("second", ["gathered", "in_place"])
def test_two_kernels_gathering_one_buffer_by_two_index_tensors_share_it(second):
    """NLLB-MoE's two cumsums over the expert masks sorted by importance, each gathered by
    its own argsort. A gather's MemoryDep indexes the buffer by a symbol of the kernel's own
    (`tmp0`, the first indirect variable of its body), not by the index tensor: two kernels
    loading x at the rows of two permutations have equal deps, share x
    (score_fusion_memory) and, reductions over one space, fuse. A kernel reading x in place
    loads it at its own rows: nothing shared, two kernels."""
    def fn(x, p1, p2):
        a = torch.cumsum(x[p1], 0)
        b = torch.cumsum((x[p2] if second == "gathered" else x) * 2, 0)
        return a, b

    torch.manual_seed(0)
    c = _recomputing_on(fn, [torch.randn(8, 4), torch.randperm(8), torch.randperm(8)])
    _same_as_inductor(c)
    assert len(c.ours.groups) == (1 if second == "gathered" else 2), _kernels(c)


@pytest.mark.parametrize("dim", [-1, 0])
def test_a_gather_along_the_reduced_dim_reads_the_rows_statistics_in_place(dim):
    """NT-Xent's `log_softmax(x).gather(-1, labels)`: the gather loads each row's own max and
    sum of exponentials (one element per row, at the row's index, where they are written)
    and a column its index picks: Inductor's deps match, the gather joins the softmax's
    statistics. Gathering rows (dim 0) loads other rows' statistics, at an indirect index:
    nothing matches, two kernels."""
    def fn(x, labels):
        return (x.log_softmax(-1).gather(dim, labels) * 2,)

    torch.manual_seed(0)
    labels = torch.randint(0, 8 if dim == 0 else 16, (8, 1))
    c = _recomputing_on(fn, [torch.randn(8, 16), labels])
    _same_as_inductor(c)
    assert len(c.ours.groups) == (1 if dim == -1 else 2), _kernels(c)


@pytest.mark.parametrize("bias", [False, True])
def test_extern_in_triton_off_a_convolutions_biased_output_is_copied_by_its_bias_add(bias):
    """A convolution reading another's output (Depth Anything's reassemble stage then its
    fusion stage): a fixed layout, so our plan copies it channels-last. Inductor copies it
    too when the first has no bias; with a bias, it peels the bias off the call, and the add
    (a pointwise buffer, its layout free) writes the input channels-last: no copy, but that
    add is the launch our copy stands for. The comparison places our copy on it, not on the
    second convolution's weight copy (which then held two copies: an unexplained fusion)."""
    def fn(x, w1, b1, w2):
        return F.conv2d(F.conv2d(x, w1, b1 if bias else None), w2, padding=1).sigmoid()

    torch.manual_seed(0)
    host = [torch.randn(2, 4, 8, 8), torch.randn(8, 4, 1, 1), torch.randn(8),
            torch.randn(8, 8, 3, 3)]
    c = _compared_with_layout_copies(fn, host)
    assert len(_layout_copies(c)) == 3, _kernels(c)  # x, the first's output, w2 (w1 is 1x1)
    held = [launch.nodes for launch in c.placed.launches]
    assert ("layout_copy_input_convolution_1",) in held, held


@pytest.mark.parametrize("tokens, returned", [(16, False), (17, False), (17, True)])
def test_extern_in_triton_off_a_padded_attention_map_is_copied_for_its_bmm(tokens, returned):
    """Attention probabilities (2, 4, S, S) read by the second bmm as (8, S, S). Inductor
    pads a Triton kernel's output when it fixes its layout (`Layout._pad_strides`): a stride
    over 1024 elements rounds up to 128 bytes. At S=17 (a ViT's 16 patches and its class
    token) the batch stride 4*289 = 1156 becomes 1184, the (8, S, S) view no longer exists
    and `realize_input` copies the map in a launch of its own; at S=16 (1024) nothing is
    padded and the bmm reads the softmax's buffer. Nor is anything padded while lowering a
    bmm the graph returns (`mark_nodes_dislike_padding`: its strides are the user's)."""
    def fn(q, k, v):
        out = (q @ k.transpose(-1, -2)).softmax(-1) @ v
        return out if returned else out.sigmoid()

    torch.manual_seed(0)
    host = [torch.randn(2, 4, tokens, 8) for _ in range(3)]
    with config.patch(matmul_templates=False):  # no epilogue: Inductor's plan, launch by launch
        c = _compared_with_layout_copies(fn, host)
    assert len(_layout_copies(c)) == (tokens == 17 and not returned), _kernels(c)
    for name in c.ours.layout_copies:
        assert "comprehensive_padding" in c.ours.to_dict()["detail"]["nodes"][name]["source"][0]


def test_compare_a_padded_attention_maps_copy_is_the_launch_that_holds_nothing_of_ours():
    """A ViT's eager attention on 17 tokens: q, k, v projected (linears, their heads made
    contiguous by clones the bmms read), the scores scaled, the probabilities (2, 4, 17, 17)
    copied out of their padded buffer. Inductor's attention pattern rewrites the chain, and
    the copy's launch names only the values' projection: both it and the values' clone feed
    the bmm; the copy is the launch holding nothing of ours, not the clone's."""
    def fn(x, wq, wk, wv):
        q, k, v = (F.linear(x, w).view(2, 17, 4, 8).transpose(1, 2) for w in (wq, wk, wv))
        p = (torch.matmul(q, k.transpose(-1, -2)) * 0.35).softmax(-1)
        return torch.matmul(p, v).transpose(1, 2).reshape(2, 17, 32).sigmoid()

    torch.manual_seed(0)
    host = [torch.randn(2, 17, 32)] + [torch.randn(32, 32) for _ in range(3)]
    with config.patch(matmul_templates=False):
        c = _compared_with_layout_copies(fn, host)
    held = [launch.nodes for launch in c.placed.launches]
    assert ("layout_copy_mat1_bmm_1",) in held, held


@pytest.mark.parametrize("cached", [False, True])
def test_extern_in_triton_off_keys_through_a_dropped_cat_are_copied_for_their_bmm(cached):
    """A decoder's first step with a DynamicCache: the keys' and values' heads (a linear's
    output viewed (2, 6, 4, 8), heads transposed) are concatenated after the cache's empty
    `torch.tensor([])`. Our graph's cat writes a contiguous value the bmms view as (8, ...);
    Inductor drops the cat (the empty piece, then the clone of the one piece kept), the
    bmms' reshapes then merge the batch and the transposed heads, which no view can, and
    `reshape` clones them: a copy of the keys, another of the values, each its own launch
    (the linear's bias added in it). Without the cache our graph holds those clones
    itself: no layout copy."""
    def fn(x, wq, wk, wv, bk, bv):
        q = F.linear(x, wq).view(2, 6, 4, 8).transpose(1, 2)
        k = F.linear(x, wk, bk).view(2, 6, 4, 8).transpose(1, 2)
        v = F.linear(x, wv, bv).view(2, 6, 4, 8).transpose(1, 2)
        if cached:
            k = torch.cat([torch.tensor([], device=x.device), k], dim=-2)
            v = torch.cat([torch.tensor([], device=x.device), v], dim=-2)
        p = torch.matmul(q, k.transpose(-1, -2)).sigmoid()  # no softmax: no SDPA pattern
        return torch.matmul(p, v).transpose(1, 2).reshape(2, 6, 32).sigmoid()

    torch.manual_seed(0)
    host = [torch.randn(2, 6, 32)] + [torch.randn(32, 32) for _ in range(3)] + \
        [torch.randn(32) for _ in range(2)]
    with config.patch(matmul_templates=False):
        c = _compared_with_layout_copies(fn, host)
    assert len(_layout_copies(c)) == (2 if cached else 0), _kernels(c)


@pytest.mark.parametrize("source", ["same_slice", "other_slice", "projected"])
def test_read_other_positions_an_in_place_update_of_a_slice_is_read_at_its_own_index(source):
    """DAB-DETR scales the halves of its sine embedding in place: `q[..., 8:] *= s`, which
    functionalizes to slice_scatter(q, slice(q, 8:) * s, 8:). Inductor's lowering loads the
    source at `idx - 8` and the slice loads q at `+ 8`: q at the output's own index, one load
    shared with the scatter's own read of q (`OpCounterCSE.load`), so the chain of updates
    stays one kernel. A source taken from another slice (`q[..., 8:] = q[..., :8] * s`)
    really is read at other positions. Projected (DAB-DETR's later layers): the scales come
    from matmuls and the first update loads 5 values: it is stored, and the value that
    writes the slice back, recomputed by each of its two readers (computed_once off), is
    still read where it is written."""
    def fn(x, pos, r, obj):
        if source == "projected":
            pos, r = pos @ pos.mT @ pos, r @ r.mT
        q = x[..., :16] * pos + (x[..., 16:] if source == "projected" else 0)
        s = r.sigmoid()
        if source != "other_slice":
            q[..., 8:] *= (s[..., 0] / obj[..., 2]).unsqueeze(-1)
            q[..., :8] *= (s[..., 1] / obj[..., 3]).unsqueeze(-1)
        else:
            q[..., 8:] = q[..., :8] * (s[..., 0] / obj[..., 2]).unsqueeze(-1)
            q[..., :8] = q[..., 8:] * (s[..., 1] / obj[..., 3]).unsqueeze(-1)
        return q

    torch.manual_seed(0)
    host = [torch.randn(*s) for s in [(5, 2, 32), (5, 2, 16), (5, 2, 2), (5, 2, 4)]]
    c = _recomputing_on(fn, host)
    _same_as_inductor(c)
    triton = [g for g in c.ours.groups if not any(n.startswith(("bmm", "mm")) for n in g.nodes)]
    assert (len(triton) == 1) is (source != "other_slice"), _kernels(c)


@pytest.mark.parametrize("op", ["linear", "linear_summed", "mm"])
@pytest.mark.parametrize("k", [1, 2])
def test_an_unfused_addmm_over_an_inner_dim_of_one_is_a_broadcast_multiply(op, k):
    """Decision Transformer's return-to-go embedding, a linear of one feature read by
    pointwise ops: Inductor unfuses the addmm's bias (`unfuse_bias_add_to_pointwise`) into
    `bias + x @ w.t()`, traced with its decompositions, whose `mm` over an inner dim of 1
    is the broadcast multiply `x * w.t()`: pointwise code its reader inlines, one kernel.
    Over 2 features, or read by a reduction (no unfusing), or a bare mm (kept undecomposed
    by the keep-list), the matmul is an ATen call and its reader a kernel of its own."""
    def fn(x, w, b):
        if op == "mm":
            return ((x @ w.t()).sigmoid() * 2,)
        y = F.linear(x, w, b)
        return (y.sum(-1) if op == "linear_summed" else (y.sigmoid() + 1) * 2,)

    c = _recomputing(fn, (8, k), (8, k), (8,))
    _same_as_inductor(c)
    assert len(c.ours.groups) == (1 if k == 1 and op == "linear" else 2), _kernels(c)


@pytest.mark.parametrize("target", [False, True])
def test_reduction_prologue_a_full_reduction_reading_a_permuted_output_out_of_order(target):
    """PatchTST's forecast, permuted to (batch, horizon, channels) and returned, then its MSE
    against a contiguous target: the mean's loops tie between the two loads' orders and keep
    the graph's, so it loads the forecast in another order than its pointwise kernel writes
    it (memory deps differ; reordering that kernel's loops would tile it in 2D): two launches.
    Without the target the mean loops in the forecast's own order and takes its kernel in."""
    def fn(h, s, t):
        y = (h.permute(0, 2, 1) + 1) * s
        return y, ((y - t) ** 2 if target else y ** 2).mean()

    torch.manual_seed(0)
    host = [torch.randn(2, 3, 8), torch.randn(2, 1, 3), torch.randn(2, 8, 3)]
    (c,) = compare(fn, *(t.to("mtia_sim") for t in host))
    c.check()
    _same_as_inductor(c)
    assert len(c.ours.groups) == (2 if target else 1), _kernels(c)
    torch._dynamo.reset()
    got = torch.compile(fn, backend="mtia_lab")(*(t.to("mtia_sim") for t in host))
    for g, e in zip(got, fn(*host), strict=True):
        torch.testing.assert_close(g.cpu(), e)


def test_compare_the_fill_before_a_scatter_fallback_computes_the_fill_alone():
    """TAPAS's segment minimum: `full(...).scatter_reduce(..., "amin", include_self=False)`
    runs as Inductor's fallback (`aten.scatter_reduce_` in place, an extern launch) on a
    buffer a Triton launch fills first. That buffer's value and origins are the scatter's
    (its index and source too), but the fill reads nothing: the comparison places only the
    `full` on it, the index's nodes on the launch that computes them (no difference)."""
    def fn(rows, cols, v):
        index = (rows * 4 + cols).flatten()
        out = torch.full((16,), 0.0, device=v.device)
        return out.scatter_reduce(0, index, v.flatten(), "amin", include_self=False)

    torch.manual_seed(0)
    host = [torch.randint(0, 4, (2, 8)), torch.randint(0, 4, (2, 8)), torch.randn(2, 8)]
    (c,) = compare(fn, *(t.to("mtia_sim") for t in host))
    c.check()
    _same_as_inductor(c)
    assert [launch.nodes for launch in c.placed.launches] == [
        ("full",), ("mul", "add"), ("scatter_reduce",)]
    torch._dynamo.reset()
    got = torch.compile(fn, backend="mtia_lab")(*(t.to("mtia_sim") for t in host))
    torch.testing.assert_close(got.cpu(), fn(*host))


@pytest.mark.parametrize("transposed", [False, True])
def test_tiling_prevents_reduction_fusion_a_transposed_copy_stays_out_of_the_norm(transposed):
    """Swin v2's cosine attention normalizes keys over the head dim, then copies them
    transposed for the bmm. A copy in the norm's row order joins the norm's kernel; a
    transposed one is tiled by Triton (its load steps 1 along the rows, its store along the
    columns), and `SIMDScheduling.can_fuse` keeps a tiled pointwise kernel out of a
    reduction whose split its tiles are not (tiling_prevents_reduction_fusion)."""
    def fn(x):
        k = F.normalize(x, dim=-1)
        return (k.transpose(-2, -1) if transposed else k * 2).contiguous()

    torch.manual_seed(0)
    host = [torch.randn(4, 64, 32)]
    c = _recomputing_on(lambda x: (fn(x),), host)
    _same_as_inductor(c)
    assert len(c.ours.groups) == (2 if transposed else 1), _kernels(c)
    assert any(d.rule == "tiling_prevents_reduction_fusion" for d in c.ours.decisions) \
        is transposed


def test_tiling_prevents_reduction_fusion_an_inlined_embedding_reads_its_table_through_the_index():
    """AIMv2's patch embeddings: a convolution's output read transposed (B, C, HW -> B, HW, C),
    RMS-normalized, plus the position embeddings, normalized again. The embedding is inlined
    into the add while lowering: Inductor's kernel loads the table at `weight[ids[t], c]`, an
    index that steps along the positions only through the indices' values (stride 0 to
    `stride_hints`), not the embedding's output (0, 32, 1), which would make Triton tile the
    add 64x16 and keep it out of both norms. One kernel, as Inductor's."""
    def fn(x, table, w):
        def rms(h):
            return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * w

        pos = F.embedding(torch.arange(16, device=x.device)[None], table)
        h = rms(x.transpose(1, 2)) + pos
        return rms(h), h

    c = _compared(fn, (2, 32, 16), (16, 32), (32,))
    _same_as_inductor(c)
    assert len(c.ours.groups) == 1, _kernels(c)
    assert not any(d.rule == "tiling_prevents_reduction_fusion" for d in c.ours.decisions)


@pytest.mark.parametrize("convolved_first", [False, True])
def test_extern_in_triton_off_a_concat_of_channels_last_skip_features_is_not_copied(
        convolved_first):
    """ViTMatte's fusion block: the detail features (a ReLU a convolution reads) are
    concatenated with the upsampled path, and the cat is convolved. Inductor lowers that cat
    as a ConcatKernel; `ConcatKernel.create` lays it out channels-last when a piece is stored
    with a channels-last fixed layout -- the features, once the convolution reading them is
    lowered (before the cat). The next convolution then reads it as it is: no copy. When
    that convolution comes after the cat, the cat is contiguous, and copied."""
    def fn(x, w1, w2, w3, y):
        a = F.conv2d(x, w1, padding=1).relu()
        side = F.conv2d(a, w2, padding=1) if convolved_first else None
        up = y.sigmoid() * 2
        out = F.conv2d(torch.cat([a, up], 1), w3, padding=1)
        side = side if convolved_first else F.conv2d(a, w2, padding=1)
        return out + side.sum()

    torch.manual_seed(0)
    host = [torch.randn(2, 8, 8, 8), torch.randn(8, 8, 3, 3), torch.randn(8, 8, 3, 3),
            torch.randn(8, 16, 3, 3), torch.randn(2, 8, 8, 8)]
    with config.patch(extern_in_triton=False):
        (c,) = compare(fn, *(t.to("mtia_sim") for t in host))
        torch._dynamo.reset()
        got = torch.compile(fn, backend="mtia_lab")(*(t.to("mtia_sim") for t in host))
    torch.testing.assert_close(got.cpu(), fn(*host), rtol=1e-4, atol=1e-3)
    c.check()
    assert not c.unexplained, str(c)  # a piece's copy into the cat is not modelled
    copied = {n for g in _layout_copies(c) for n in g if n.startswith("layout_copy_input")}
    of_cat = "layout_copy_input_convolution_" + ("2" if convolved_first else "1")
    assert (of_cat in copied) is not convolved_first, copied


def test_computed_once_off_a_recomputed_value_keeps_its_own_slice_inside_its_readers_view():
    """Zamba's Mamba heads: `A = -exp(A_log)` is read per head (`A[h]`), each head's product
    is recomputed in two readers that view it at the even and odd steps of a scan. Inductor
    inlines each body at the reader's index composed with the value's own (`A[h]`), so the
    two heads load other halves of A_log and x and share nothing (two kernels, one per head),
    while the two readers of one head load the same steps and fuse. Taking the reader's view
    in place of the value's own made both heads read alike and fused them."""
    def fn(a, x):
        A = -torch.exp(a)
        outs = []
        for h in range(2):
            m = A[h] * x[h]  # read through the even and the odd steps, in two readers
            outs += [m[0::2] * m[1::2] + 1, m[1::2] + m[0::2] * 2]
        return tuple(outs)

    torch.manual_seed(0)
    c = _recomputing_on(fn, [torch.randn(2, 16, 8), torch.randn(2, 4, 16, 8)])
    _same_as_inductor(c)
    assert len(c.ours.groups) == 2, _kernels(c)


@pytest.mark.parametrize("broadcast", [False, True])
def test_a_value_read_at_two_steps_loads_its_inputs_at_each_but_a_broadcast_weight_once(
        broadcast):
    """A scan's step reads a value at the even and the odd steps (`e[0::2] * e[1::2]`).
    Inductor inlines e's body at each index, so its loads count once per step (x, y, z at
    two steps: 6 loads > realize_reads_threshold, and m, read twice, is stored); a weight
    broadcast over the steps is the same load at both, shared by the CSE (x at two steps,
    w1 and w2 once: 4 loads, and m is computed in each reader). Taking both views as one
    counted 3 loads; taking every load per view counted 6."""
    def fn(x, y, z, w1, w2):
        e = x * w1 + w2 if broadcast else x * y + z
        m = e[0::2] * e[1::2]
        return m.sum(-1), m.amax(0)

    torch.manual_seed(0)
    c = _recomputing_on(fn, [torch.randn(8, 16), torch.randn(8, 16), torch.randn(8, 16),
                             torch.randn(16), torch.randn(16)])
    _same_as_inductor(c)
    assert ("mul_1" in c.ours.recomputed) is broadcast, _kernels(c)


def test_the_copies_of_a_concat_kernels_pieces_packed_in_one_launch_are_our_concat_kernel():
    """The time-series forecaster's lagged inputs: a cat of two graph inputs, one of them
    read by another pointwise op too, is a ConcatKernel to Inductor (`has_multi_consumers`);
    each piece is copied into its slice, the copies packed in a foreach launch of two
    groups. Our cat kernel copies both pieces (concat_kernel, ours): the group that holds
    nothing of ours is that departure, not an unexplained launch."""
    def fn(a, b, s):
        return torch.cat([a, b], 1) / s, b + 1

    torch.manual_seed(0)
    host = [torch.randn(2, 5), torch.randn(2, 4), torch.randn(2, 1)]
    with config.patch(matmul_templates=False, computed_once=False, extern_in_triton=False):
        (c,) = compare(fn, *(t.to("mtia_sim") for t in host))
        torch._dynamo.reset()
        got = torch.compile(fn, backend="mtia_lab")(*(t.to("mtia_sim") for t in host))
    for x, want in zip(got, fn(*host), strict=True):
        torch.testing.assert_close(x.cpu(), want)
    c.check()
    assert c.placed.combos and not c.unexplained, str(c)
    assert [d.rules for d in c.differences] == [("concat_kernel",)], str(c)


def test_a_piece_copy_of_a_concat_kernel_launched_alone_is_our_concat_kernel():
    """ZAYA's cat of two projections, one also read through a view by a pointwise op: a
    ConcatKernel to Inductor (`has_multi_consumers`), each matmul's output copied into its
    slice, here in launches of their own (no foreach packs them). Our cat kernel copies both
    (concat_kernel, ours): the copy launch that holds nothing of ours is that departure, not
    a launch no rule explains."""
    def fn(x, w1, w2):
        a, b = x @ w1, x @ w2
        both = torch.cat([a, b], -1)
        return both.transpose(1, 2).sigmoid(), a.view(2, 8, 4, 8).transpose(1, 2) * 2

    torch.manual_seed(0)
    c = _compared_and_run(fn, [torch.randn(2, 8, 32), torch.randn(32, 32), torch.randn(32, 16)],
                          matmul_templates=False, computed_once=False, extern_in_triton=False)
    alone = [d for d in c.differences if not d.inductor]
    assert not c.placed.combos and alone, str(c)
    assert all(d.rules == ("concat_kernel",) for d in alone), str(c)


def test_a_piece_given_whole_to_a_concat_kernel_writes_its_slice_in_a_kernel_of_its_own():
    """The parallel scan of Mamba's PyTorch path: a step's value (one reader, the cat) is
    joined with a reshape of the previous one, which another step reads too, so Inductor
    makes the cat a ConcatKernel (`has_multi_consumers`). `ConcatKernel.realize_into`
    realizes the value given as it is into its slice (a kernel of its own); the reshaped
    piece is copied, its copy computing it. Ours inlined the value into our cat kernel."""
    def fn(x, y):
        a = x * 2 + 1
        v = (y + 1).view(2, 4, 8)
        return torch.cat([a, v], 1), v * 3

    torch.manual_seed(0)
    c = _recomputing_on(fn, [torch.randn(2, 4, 8), torch.randn(8, 8)])
    assert not c.unexplained, str(c)
    assert ("mul", "add") in _kernels(c), _kernels(c)


def test_an_unrolled_reduction_loads_a_rows_statistics_once_for_all_its_terms():
    """ERNIE 4.5's router: the top-2 weights gathered from the softmax and renormalised by
    their sum, an unrolled reduction of 2 terms. Each term loads the gathered score at its
    own index, but the row's max and sum (the softmax's) at the row's: one load for both,
    shared by Inductor's CSE. The weights then load 8 values (not more than
    realize_acc_reads_threshold): inlined into the experts' product, which, at 9, is stored;
    counting the row's statistics per term stored the weights instead."""
    def fn(logits, bias, v):
        p = logits.softmax(-1)
        idx = torch.topk(p + bias, 2).indices
        w = p.gather(-1, idx)
        w = w / w.sum(-1, keepdim=True).clamp(1e-12)
        return ((v * w.reshape(-1, 1)).view(16, 2, 32).sum(1) + 1,)

    torch.manual_seed(0)
    c = _recomputing_on(fn, [torch.randn(16, 8), torch.randn(8), torch.randn(32, 32)])
    _same_as_inductor(c)
    assert any("div_1" in g and "mul" in g for g in _kernels(c)), _kernels(c)


def test_two_copies_of_a_split_piece_in_other_loop_orders_share_it_after_reordering():
    """DeBERTa's key layer: a piece of a split projection copied as it is and copied
    transposed. Both read the same elements of the projection, in other loop orders (two
    views, one a permutation of the other); Inductor reorders one kernel's loops to match
    the other's (`shared_data_after_reordering_loop`) and fuses the two copies."""
    def fn(x, w):
        q, k = (x @ w).split(8, -1)
        return k.t().contiguous(), k.contiguous(), q

    torch.manual_seed(0)
    c = _recomputing_on(fn, [torch.randn(16, 32), torch.randn(32, 16)])
    _same_as_inductor(c)
    assert ("clone", "clone_1") in _kernels(c), _kernels(c)


@pytest.mark.parametrize("rows,hidden,fused", [
    ((2, 16), 64, False), ((1, 32), 64, True), ((2, 16), 32, True), ((2, 16, None), 64, True)])
def test_reduction_prologue_a_bias_gradient_over_a_flattened_view_keeps_out_its_producer(
        rows, hidden, fused):
    """A linear's backward: the incoming gradient (B, T, H), flattened to (B*T, H) for the
    matmuls and summed over its rows for the bias. In the reorder round Inductor reorders
    the pointwise kernel's 3 loops onto the reduction's only if it has as many: its 2 (B*T
    reduced, H kept) are not, and the reindexed (H, B*T) split fits only a square. Summed
    over (B, T) itself, or from a (1, T, H) gradient, the loops pair up and the two fuse."""
    summed_3d = rows[-1] is None
    shape = (*rows[:2], hidden)
    n = shape[0] * shape[1]

    def fn(x, dy, w):
        g = torch.ops.aten.gelu_backward(dy, x)
        flat = g.view(n, hidden)
        return flat @ w, (g.sum((0, 1)) if summed_3d else flat.sum(0))

    torch.manual_seed(0)
    host = [torch.randn(shape), torch.randn(shape), torch.randn(hidden, 8)]
    with config.patch(matmul_templates=False):
        (c,) = compare(fn, *(t.to("mtia_sim") for t in host))
        torch._dynamo.reset()
        got = torch.compile(fn, backend="mtia_lab")(*(t.to("mtia_sim") for t in host))
    c.check()
    _same_as_inductor(c)
    assert (len(c.ours.groups) == 2) is fused, _kernels(c)
    for g, e in zip(got, fn(*host), strict=True):
        torch.testing.assert_close(g.cpu(), e, rtol=1e-4, atol=1e-4)


def _compared_and_run(fn, host: list, **settings):
    """fn compared with Inductor under `settings` (config.patch), audited, and compiled by
    our backend to eager's results."""
    with config.patch(**settings):
        (c,) = compare(fn, *(t.to("mtia_sim") for t in host))
        torch._dynamo.reset()
        got = torch.compile(fn, backend="mtia_lab")(*(t.to("mtia_sim") for t in host))
    want = fn(*host)
    for g, e in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,), strict=True):
        torch.testing.assert_close(g.cpu(), e, rtol=1e-4, atol=1e-4)
    return c.check()


@pytest.mark.parametrize("steps", [4, 16])
def test_large_body_a_long_mask_broadcast_over_the_heads_is_stored(steps):
    """A mask computed by a long chain of pointwise ops from one load (a padding mask built
    from iotas, Table Transformer's) is added to attention scores over 4 heads: Inductor's
    `expand` marks it reused by the broadcast factor (graph_reuse=False), and a body over
    realize_opcount_threshold (30 operations) is stored in a launch of its own; a short one
    is computed in the softmax's kernel."""
    def fn(scores, mask):
        m = mask[:, None, None, :]
        for i in range(steps):
            m = (m * (1.0 + i / 64)).sin() + i / 32
        return (scores + m).softmax(-1)

    torch.manual_seed(0)
    c = _compared_and_run(fn, [torch.randn(2, 4, 16, 16), torch.randn(2, 16)],
                          computed_once=False)
    _same_as_inductor(c)
    assert len(c.ours.groups) == (2 if steps == 16 else 1), _kernels(c)


@pytest.mark.parametrize("resized", [False, True])
def test_reduction_loop_order_two_scans_of_a_gathered_mask_share_one_loop(resized):
    """DETR's sine positions: the cumsums of the pixel mask along rows and along columns.
    Of the mask itself they read it in two orders and stay apart; of a mask resized by a
    nearest interpolation (Table Transformer's), computed again in each (a gather at rows
    and columns both picked by index tensors), each loads it at the gather's indirect index,
    the same MemoryDep in both: Inductor fuses the two scans."""
    def fn(pixels):
        mask = (pixels > 0.3).float()  # inlined into the gather: read "through" it
        m = F.interpolate(mask[None], size=(4, 4))[0] if resized else mask
        return m.cumsum(1), m.cumsum(2)

    torch.manual_seed(0)
    host = [torch.rand(2, 32, 32) if resized else torch.rand(2, 4, 4)]
    c = _compared_and_run(fn, host, computed_once=False)
    _same_as_inductor(c)
    scans = [g.nodes for g in c.ours.groups if any(n.startswith("cumsum") for n in g.nodes)]
    assert len(scans) == (1 if resized else 2), _kernels(c)


def test_compare_a_scatter_whose_index_is_computed_is_two_launches_of_inductors():
    """wav2vec 2.0's attention mask: `mask[(arange(B), lengths - 1)] = 1` on a fresh zeros.
    Inductor launches the fill (holding the index_put: it writes the buffer) and the indexed
    stores, which compute `lengths - 1` inline; ours is one kernel of all three. Both
    launches differ from it by scatter_in_two_launches, a departure of ours, not an
    unexplained inlining."""
    def fn(x):
        lengths = (x > 0).sum(-1)
        mask = torch.zeros(x.shape, device=x.device)
        mask[(torch.arange(x.shape[0], device=x.device), lengths - 1)] = 1
        return mask

    torch.manual_seed(0)
    c = _compared_and_run(fn, [torch.randn(4, 16)], computed_once=False)
    assert not c.unexplained, str(c)
    split = [d for d in c.differences if "scatter_in_two_launches" in d.rules]
    assert len(split) == 2, str(c)


@pytest.mark.parametrize("flat", [False, True])
def test_reorder_round_a_bias_sum_and_an_add_sharing_a_3d_read_stay_apart(flat):
    """A training step's backward: the bias gradient sums a (B, T, H) gradient over its
    (B*T) rows while a residual add reads the same gradient beside it. In the reorder round
    Inductor aligns a shared read only when the pointwise's loops are the reduction's
    (`_try_reorder_loops_for_candidates`): a pointwise over (B, T, H) has 3 loops to the
    sum's 2 and stays apart; over a (B*T, H) gradient it takes the sum's loop order and
    fuses."""
    def fn(g, y):
        return g.reshape(-1, 32).sum(0), (g + y) * 2

    torch.manual_seed(0)
    shape = (36, 32) if flat else (2, 18, 32)
    c = _compared_and_run(fn, [torch.randn(shape), torch.randn(shape)], computed_once=False)
    _same_as_inductor(c)
    assert len(c.ours.groups) == (1 if flat else 2), _kernels(c)


@pytest.mark.parametrize("masked", [False, True])
def test_large_body_an_unrolled_any_over_a_masked_row_test_is_stored(masked):
    """`_safe_softmax`'s test for fully masked rows: an `any` over 6 terms, unrolled into
    pointwise code (unroll_reductions_threshold). Inductor converts each bool term of
    `aten.any.dim` to int64 and back, so over `logical_not(x == -inf)` the body is 36
    operations, over realize_opcount_threshold (30): stored in a launch of its own; over
    `x > 0` it is 30 and is computed in its reader's kernel."""
    def fn(s):
        test = torch.logical_not(s.eq(float("-inf"))) if masked else s > 0
        return torch.where(torch.any(test, -1, keepdim=True), s.softmax(-1), 0.0)

    torch.manual_seed(0)
    c = _compared_and_run(fn, [torch.randn(2, 4, 6, 6)], computed_once=False)
    _same_as_inductor(c)
    alone = [g.nodes for g in c.ours.groups if "any_1" in g.nodes and "where" not in g.nodes]
    assert bool(alone) is masked, _kernels(c)


@pytest.mark.parametrize("act", ["elu", "relu"])
def test_realize_reads_threshold_an_input_a_decomposition_reads_twice_is_reused(act):
    """Informer's distilling layer: BatchNorm (eval: input, mean, var, weight, bias: 5 loads),
    an activation, a max pool. Inductor decomposes elu into where(a > 0, a, expm1(a)), which
    reads the BatchNorm's value twice: `run_node` marks it reused and, loading more than
    realize_reads_threshold values, stores it; elu then loads one buffer and is inlined into
    the pool (its realize_hint stores nothing). relu reads it once: inlined into relu, whose
    body loads 5 buffers, and the pool's realize_hint stores that."""
    def fn(x, mean, var, w, b):
        h = F.batch_norm(x, mean, var, w, b, training=False)
        h = F.elu(h) if act == "elu" else F.relu(h)
        return F.max_pool1d(h, 3, 2, 1)

    torch.manual_seed(0)
    host = [torch.randn(2, 8, 16), torch.randn(8), torch.rand(8) + 0.5, torch.randn(8),
            torch.randn(8)]
    c = _compared_and_run(fn, host, computed_once=False)
    _same_as_inductor(c)
    pool = next(g.nodes for g in c.ours.groups if "max_pool2d_with_indices" in g.nodes)
    assert (act in pool) is (act == "elu"), _kernels(c)


@pytest.mark.parametrize("cache", ["empty", "one_row"])
def test_a_cat_onto_an_empty_1d_cache_is_a_clone_of_its_piece_inlined_into_its_reader(cache):
    """A decoder's first step concatenates its rotated keys to an empty KV cache
    (`torch.tensor([])`). Inductor's cat lowering skips a 1-D empty piece
    (`_cat_should_skip`) and, one piece left, returns `clone(piece)`: pointwise code without
    the cat's masked loads, its loop body (the rotary's 30-odd operations) under the
    realize threshold, inlined into the repeat_kv copy that reads it. With a cached row the
    cat is a real one, its body over 30 operations: stored, read by the copy's kernel."""
    def fn(k, inv_freq, old):
        pos = torch.arange(12, device=k.device) + 0
        freqs = pos[:, None].float() * inv_freq[None, :]
        emb = torch.cat((freqs, freqs), -1)
        cos, sin = emb.cos() * 1.0, emb.sin() * 1.0
        x1, x2 = k[..., :4], k[..., 4:]
        k = k * cos + torch.cat((-x2, x1), -1) * sin
        past = torch.tensor([], device=k.device) if cache == "empty" else old
        k = torch.cat([past, k], -2)
        return k[:, :, None].expand(2, 2, 2, -1, 8).reshape(2, 4, -1, 8).clone()

    c = _compared(fn, (2, 2, 12, 8), (4,), (2, 2, 1, 8))
    _same_as_inductor(c)
    assert len(c.ours.groups) == (1 if cache == "empty" else 2)


@pytest.mark.parametrize("view", ["same", "fewer_loops", "other_sizes", "permuted"])
def test_a_reader_of_an_unrolled_reduction_shares_its_store_as_inductors_memory_deps_say(view):
    """A sum over 2 elements is unrolled into pointwise code: its store has the loops of its
    output ([8, 8, 6]), not a reduction's, which match any order. A reader in the same loops
    shares it and joins the kernel; one in fewer loops over the same memory order too (the
    deps normalized, `MemoryDep.normalize`); one in as many loops of other sizes ([2, 32, 6])
    or permuted (the attention-weighted sum's transpose back) shares nothing: Inductor's
    `_try_reorder_loops_for_candidates` cannot reorder loops of other sizes to match, and
    the two stay apart."""
    def fn(v, w):
        s = (v * w.softmax(-1)).sum(-1)
        out = {"same": s, "fewer_loops": s.view(64, 6), "other_sizes": s.view(2, 32, 6),
               "permuted": s.view(2, 32, 6).transpose(1, 2)}[view]
        return s, out.clone() * 2

    c = _compared(fn, (8, 8, 6, 2), (8, 8, 6, 2))
    _same_as_inductor(c)
    assert len(c.ours.groups) == (1 if view in ("same", "fewer_loops") else 2)


def test_a_cat_recomputed_for_one_reader_is_asked_about_as_its_original():
    """recompute.py clones a value Inductor inlines into several readers as "value@reader";
    the clone computes its original's FX op, so what the lowering asks of a cat (its pieces,
    whether it lowers pointwise, its loads) is answered from the original. Asked by the
    clone's own name, the FX node was missing: RF-DETR's repeated reference points
    (`cat([u, u])`) crashed scheduling with the departures off."""
    from mtia_lab.compiler import lowering

    def repeated(x, y):
        u = x.sin().unsqueeze(1)
        return torch.cat([u, u], -1) * y, x.cos()

    torch.compiler.reset()
    torch.compile(repeated, backend="mtia_lab")(torch.randn(4, 2, device="mtia_sim"),
                                                  torch.randn(4, 1, 4, device="mtia_sim"))
    ir = COMPILED[-1].plan.ir
    cat = next(n for n in ir.nodes if n.target == "aten.cat.default")
    clone = dataclasses.replace(cat, name=f"{cat.name}@mul", writes=(f"{cat.writes[0]}@mul",))
    assert lowering.pointwise_cat(clone, ir) == lowering.pointwise_cat(cat, ir)
    assert lowering.nontrivial_loads([clone], ir) == lowering.nontrivial_loads([cat], ir) > 0


@pytest.mark.parametrize("matmuls", [4, 80])
def test_reorder_for_locality_a_gradient_only_returned_moves_to_the_end_of_the_graph(matmuls):
    """A bias gradient (a sum over the rows, only returned, last) beside a residual add that
    reads the same gradient and feeds a chain of matmuls: Inductor's post-grad
    `reorder_for_locality` moves the sum to just before the output, after the chain. Past 64
    nodes (the chain of 80) it is too far from the add to fuse (are_long_distant_nodes); after
    4 matmuls they share the gradient's load in one kernel."""
    def fn(g, w):
        bias_grad = g.sum(0)
        a = g + 1.0
        for _ in range(matmuls):
            a = a @ w
        return a, bias_grad  # returned last: nothing moves in front of it afterwards

    torch.manual_seed(0)
    c = _compared_and_run(fn, [torch.randn(32, 32), torch.randn(32, 32) / 8],
                          matmul_templates=False, computed_once=False, extern_in_triton=False)
    _same_as_inductor(c)
    group = next(g.nodes for g in c.ours.groups if "sum_1" in g.nodes)
    assert ("add" in group) == (matmuls == 4), _kernels(c)


@pytest.mark.parametrize("outputs, apart", [(2, True), (1, False)])
def test_reorder_for_locality_a_multi_output_extern_counts_its_multioutput_nodes(outputs, apart):
    """Two readers of x (`x * 2`, the first of a chain of 22 convolution backwards, and
    `x * 3`, returned, last): Inductor's convolution backward is a FallbackKernel and one
    MultiOutput node per output read (`FallbackKernel.generate_output`), so with the weight's
    gradient read too the chain is 66 scheduler nodes and the two readers are too far apart
    to fuse (are_long_distant_nodes); with the input's gradient only, 44, and they share x's
    load in one kernel. Counted one node per call, both would fuse."""
    conv_backward = torch.ops.aten.convolution_backward.default
    mask = [True, outputs == 2, False]

    def fn(x, g, w):
        h, weight_grads = x * 2, []
        for _ in range(22):
            h, weight_grad, _ = conv_backward(g, h, w, None, [1, 1], [1, 1], [1, 1], False,
                                              [0, 0], 1, mask)
            weight_grads.append(weight_grad)
        return (h, *(weight_grads if outputs == 2 else ()), x * 3)

    torch.manual_seed(0)
    c = _compared_and_run(fn, [torch.randn(1, 1, 8, 8), torch.randn(1, 1, 8, 8),
                               torch.randn(1, 1, 3, 3) / 4],
                          matmul_templates=False, computed_once=False, extern_in_triton=False)
    _same_as_inductor(c)
    group = next(g.nodes for g in c.ours.groups if "mul" in g.nodes)
    assert ("mul_1" not in group) == apart, _kernels(c)


def test_reorder_for_locality_a_layout_copy_stays_before_the_extern_it_is_made_for():
    """A sum only returned, right before a convolution backward in graph order, which reads
    a transposed view (its layout fixed, not the contiguous order the call asks for: a
    layout copy of its own): Inductor's `reorder_for_locality` moves the sum to the graph's
    end; the copy, made as Inductor lowers the convolution backward, stays just before it,
    not with the node it followed in our list."""
    def fn(x, g, w):
        total = g.sum()
        grad_input, grad_weight, _ = torch.ops.aten.convolution_backward.default(
            g, x.transpose(-1, -2), w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1,
            [True, True, False])
        return total, grad_input, grad_weight

    torch.manual_seed(0)
    c = _compared_and_run(fn, [torch.randn(2, 4, 8, 8), torch.randn(2, 8, 8, 8),
                               torch.randn(8, 4, 3, 3) / 8],
                          matmul_templates=False, computed_once=False, extern_in_triton=False)
    _same_as_inductor(c)
    nodes = c.ours.ir.by_name
    copy = nodes["layout_copy_input_convolution_backward"]
    assert copy.order < nodes["convolution_backward"].order < nodes["sum_1"].order, \
        (copy.order, nodes["convolution_backward"].order, nodes["sum_1"].order)


@pytest.mark.parametrize("training", [False, True])
def test_reorder_for_locality_runs_only_on_an_inference_graph(training):
    """Inductor's post-grad `reorder_for_locality` runs only with is_inference: for a graph
    that needs no gradient, not for the forward (or backward) of a training compile. Our
    AOTAutograd compilers mark a training compile's graphs (gm.meta[TRAINING]): there the sum
    only returned keeps its place in graph order, before the matmul; in an inference graph
    it moves to the end, after it."""
    from mtia_lab.compiler.ir import TRAINING

    def fn(g, w):
        bias_grad = g.sum(0)
        return (g + 1.0) @ w, bias_grad  # returned last: moved to just before the output

    torch._dynamo.reset()
    start = len(COMPILED)
    w = torch.randn(8, 8, device="mtia_sim").requires_grad_(training)
    torch.compile(fn, backend="mtia_lab")(torch.randn(8, 8, device="mtia_sim"), w)
    graph = COMPILED[start]
    assert bool(graph.gm.meta.get(TRAINING)) is training
    nodes = graph.plan.ir.by_name
    assert (nodes["sum_1"].order < nodes["mm"].order) is training, \
        (nodes["sum_1"].order, nodes["mm"].order)


@pytest.mark.parametrize("returned", [False, True])
def test_dead_node_elimination_a_loss_read_only_for_its_shape_is_not_launched(returned):
    """A training step that returns only the gradient computes its loss for nothing:
    autograd seeds the backward with `full_like(loss, 1)`, which Inductor decomposes into a
    `full` of the loss's shape, and its dead-code elimination drops the loss (the gather of
    the log-probabilities at the labels, the masked mean). The log-softmax, read then by
    the backward alone, is inlined into its kernel. Returned, the loss is computed and the
    log-softmax stored for both readers."""
    c = _cross_entropy_step(6, returned)
    _same_as_inductor(c)
    ours = {n for g in c.ours.groups for n in g.nodes}
    assert ("gather" in ours) is returned


@pytest.mark.parametrize("labels", [5, 6])
def test_large_body_an_unrolled_count_of_bool_labels_converts_each_term(labels):
    """The gradient's weight per label, `where(labels != -100, 1 / count, 0)`, counts the
    labels kept by an unrolled sum of bools: Inductor sums bools as int64 (lowering.py
    `sum_`: each term converted, `to_dtype`), so over 6 labels the weight's body is 31
    operations, over realize_opcount_threshold, and broadcast over the classes it is stored
    (`expand`'s mark_reuse: has_large_inner_fn) by the kernel of its count. Over 5 labels
    it is 27: computed in each reader."""
    c = _cross_entropy_step(labels, False)
    _same_as_inductor(c)
    ir = c.ours.ir
    weight = next(n.writes[0] for n in ir.nodes if n.target == "aten.where.self" and
                  ir.buffers[n.writes[0]].shape == (labels, 1) and
                  ir.buffers[n.writes[0]].dtype == torch.float32)
    assert any(weight in g.outputs for g in c.ours.groups) is (labels == 6)


def _cross_entropy_step(labels: int, returned: bool):
    def fn(x, w, target):
        def loss(weight):
            return F.cross_entropy(x @ weight, target, ignore_index=-100)

        grad, value = torch.func.grad_and_value(loss)(w)
        return (grad, value) if returned else grad

    torch.manual_seed(0)
    x, w = torch.randn(labels, 8, device="mtia_sim"), torch.randn(8, 5, device="mtia_sim")
    target = torch.tensor([0, 4, -100, 2, 1, 3][:labels]).to("mtia_sim")
    with config.patch(matmul_templates=False, computed_once=False, extern_in_triton=False):
        (c,) = compare(fn, x, w, target)
    return c.check()


@pytest.mark.parametrize("piece", ["dense", "sliced"])
def test_remove_noop_ops_a_cat_onto_an_empty_cache_of_a_dense_piece_copies_nothing(piece):
    """A DynamicCache's first keys, `cat([torch.tensor([]), k])`, where k is a transposed
    projection: Inductor's cat decomposition drops the empty piece and returns `k.clone()`,
    which keeps k's strides (dense, preserve_format) -- `remove_noop_ops` replaces it by k,
    and the matmul reading the keys reads the projection's output: no launch for the cat
    (nor for the empty tensor). A slice of k with gaps is cloned into a contiguous buffer:
    a copy in a launch of its own."""
    def fn(x, w, q):
        k = (x @ w).t()
        if piece == "sliced":
            k = k[1:]
        k = torch.cat([torch.tensor([], device=x.device), k], 0)
        return q @ k

    torch.manual_seed(0)
    args = [torch.randn(24, 16, device="mtia_sim"), torch.randn(16, 16, device="mtia_sim"),
            torch.randn(5, 16 if piece == "dense" else 15, device="mtia_sim")]
    with config.patch(matmul_templates=False, computed_once=False, extern_in_triton=False):
        (c,) = compare(fn, *args)
    c.check()
    _same_as_inductor(c)
    assert len(c.ours.groups) == (2 if piece == "dense" else 3)


@pytest.mark.parametrize("rows", [64, 256])
def test_peak_memory_weighs_the_reusable_buffers_in_elements(rows):
    """A bias added to two activated projections, siblings sharing only the bias (256 bytes):
    fusing them keeps both projections alive, which Inductor weighs by their reuse keys'
    sizes -- in elements (`buffer_reuse_key`), against 32 x the bytes fusion saves
    (`can_fusion_increase_peak_memory`). 64 x 64 elements are under 32 x 256: one kernel;
    256 x 64 are over: two."""
    def fn(x, w1, w2, b):
        return (x @ w1).relu() + b, (x @ w2).relu() + b

    with config.patch(matmul_templates=False):
        c = _compared(fn, (rows, 16), (16, 64), (16, 64), (64,))
    _same_as_inductor(c)
    pointwise = [g for g in c.ours.groups if g.kind == "pointwise"]
    assert len(pointwise) == (1 if rows == 64 else 2)


@pytest.mark.parametrize("second", ["zeros_like", "neg"])
def test_a_like_factory_is_no_reader_of_the_value_it_takes_the_shape_of(second):
    """v, the sum of 5 inputs, is masked by where(m, second(v), v) and broadcast into a
    larger product. Inductor decomposes zeros_like(v) into full(v.shape, 0) before lowering,
    so v has one user, is not marked reused and stays inlined in the product's kernel: one
    kernel. Read by neg too, v has two users loading 5 values (> realize_reads_threshold):
    stored by its own kernel of 8 elements, which the 128-element product cannot join."""
    def fn(a, b, c, d, e, m, big):
        v = a + b + c + d + e
        other = torch.zeros_like(v) if second == "zeros_like" else v.neg()
        return torch.where(m > 0, other, v)[:, None] * big

    c = _recomputing(fn, *[(8,)] * 6, (8, 16))
    _same_as_inductor(c)
    assert len(c.ours.groups) == (1 if second == "zeros_like" else 2)


@pytest.mark.parametrize("case", ["copy_of_transposed", "scaled_copy", "two_reshapes",
                                  "product_in_memory_order"])
def test_a_copy_read_by_a_matmul_through_a_reshape_is_stored_as_the_reshape(case):
    """A linear's bias gradient: a value read by a matmul and by a sum over its rows, through
    a reshape to [B*T, C]. `run_node` hints the reshape for the matmul; the hint stores only
    code loading from more than one place, so the copy of a transposed gradient (one load)
    is stored by `require_stride_order` as the reshape itself, with its two loops, and the
    reorder round puts them in the sum's order: Inductor writes the copy and sums it in one
    kernel. A product of two values is stored by the hint with its own three loops (B, T, C),
    which nothing reorders onto the sum's two: apart."""
    B, T, C = 2, 8, 32

    def fn(g, a, w):
        if case == "product_in_memory_order":
            x = (g.transpose(1, 2) * a).reshape(B * T, C)  # loads two values
        elif case == "scaled_copy":
            x = (g.transpose(1, 2).contiguous() * 2).view(B * T, C)
        elif case == "two_reshapes":
            x = g.transpose(1, 2).contiguous().view(B, T, 4, 8).view(B * T, C)
        else:
            x = g.transpose(1, 2).contiguous().view(B * T, C)
        return x @ w, x.sum(0)

    c = _compared_and_run(fn, [torch.randn(B, C, T), torch.randn(B, T, C), torch.randn(C, 8)],
                          matmul_templates=False, computed_once=False,
                          extern_in_triton=False)
    _same_as_inductor(c)
    together = any("sum_1" in g.nodes and len(g.nodes) > 1 for g in c.ours.groups)
    assert together == (case != "product_in_memory_order"), _kernels(c)


@pytest.mark.parametrize("gathered", [False, True])
def test_large_body_an_unrolled_all_over_a_gathered_padding_mask_loads_the_length_once(gathered):
    """LASR's fully masked rows: `all(~mask, dim=2)` (logical_not of an unrolled `any` over 7
    terms, the reduced dim dropped) of a mask `(q >= 0) & pad[b, kv]` whose padding is
    `arange < lengths[:, None]`, gathered. Each term loads the length at the batch index
    only: Inductor's CSE loads it once, the `any` (about 90 operations, one load) is not
    realized for its reads, and the negation, broadcast over the channels it masks
    (`expand`'s mark_reuse) with the whole body inlined, is stored with it. A mask loaded at
    every position is 7 loads: the `any` is stored, its negation computed in the reader."""
    def fn(x, lengths, m):
        pad = torch.arange(7, device=x.device) < lengths[:, None]
        b = torch.arange(2, device=x.device)[:, None, None, None]
        kv = torch.arange(7, device=x.device)[None, None, None, :]
        q = torch.arange(7, device=x.device)[None, None, :, None]
        mask = (q >= 0) & (pad[b, kv] if gathered else m > 0)
        return x.masked_fill(torch.all(~mask, dim=2), 0.0)

    torch.manual_seed(0)
    c = _compared_and_run(fn, [torch.randn(2, 32, 7), torch.tensor([7, 4]),
                               torch.randn(2, 1, 7, 7)], computed_once=False)
    _same_as_inductor(c)
    stored = next(g.nodes for g in c.ours.groups if "any_1" in g.nodes)
    assert ("logical_not_1" in stored) is gathered, _kernels(c)


@pytest.mark.parametrize("pieces", [3, 4])
def test_large_body_a_pointwise_cat_of_four_embeddings_is_stored(pieces):
    """Bark's fine acoustics: the codebooks' embeddings concatenated and summed. Inductor
    lowers the cat as pointwise code (its reader is a reduction, every piece computed):
    6n - 1 operations for n pieces (the index, the bounds, a ge and an lt per piece, an
    and_ for each middle one, a masked load each, n - 1 wheres) and 2 loads per embedding.
    Three pieces (23) are inlined into the sum; four (31) pass realize_opcount_threshold
    and the cat is stored (has_exceeded_max_reads), summed in another kernel."""
    def fn(codes, table, pos):
        embs = [F.embedding(codes[..., i], table[i]).unsqueeze(-1) for i in range(pieces)]
        return torch.cat(embs, -1)[..., :-1].sum(-1) + pos

    torch.manual_seed(0)
    c = _compared_and_run(fn, [torch.randint(0, 16, (2, 8, pieces)), torch.randn(pieces, 16, 8),
                               torch.randn(8, 8)], computed_once=False)
    _same_as_inductor(c)
    assert len(c.ours.groups) == (2 if pieces == 4 else 1), _kernels(c)



@pytest.mark.parametrize("angles", ["computed", "given"])
def test_large_body_each_piece_of_a_pointwise_cat_loads_at_its_own_offset(angles):
    """An interleaved rotary (Youtu's, DeepSeek's): cat([a*cos - b*sin, b*cos + a*sin]) of
    q's even and odd halves. Inductor's pointwise cat computes each piece in a masked block
    at the cat's index minus the piece's start, so the second piece loads q, cos and sin
    again at other positions; only what does not vary along the cat's dim (the positions
    the angles are computed from) is shared. Angles computed in the graph: 31 operations,
    over realize_opcount_threshold (30): the rotary is stored, and the cat with q's other
    half (a ConcatKernel for the bmm) copies that half in a launch of its own. Given cos
    and sin: 25 operations, inlined into the cat that the bmm reads."""
    def fn(x, w, pos, inv, k):
        if angles == "computed":
            freqs = pos[..., None].float() * inv
            cos, sin = freqs.cos()[:, None], freqs.sin()[:, None]
        else:
            cos, sin = pos[:, None], inv[:, None]
        q = (x @ w).view(2, 8, 4, 16).transpose(1, 2)
        q_pass, q_rot = q.split([8, 8], -1)
        a, b = q_rot[..., 0::2], q_rot[..., 1::2]
        rotated = torch.cat([a * cos - b * sin, b * cos + a * sin], -1)
        return torch.cat([q_pass, rotated], -1) @ k

    torch.manual_seed(0)
    pos, inv = ((torch.arange(8).repeat(2, 1), torch.rand(4)) if angles == "computed" else
                (torch.randn(2, 8, 4), torch.randn(2, 8, 4)))
    c = _compared_and_run(fn, [torch.randn(2, 8, 32), torch.randn(32, 64), pos, inv,
                               torch.randn(2, 4, 16, 8)], computed_once=False)
    _same_as_inductor(c)
    rotated = next(g.nodes for g in c.ours.groups if "cat" in g.nodes)
    assert ("cat_1" in rotated) is (angles == "given"), _kernels(c)


@pytest.mark.parametrize("read_elsewhere", [False, True])
def test_recombined_reduction_a_cat_of_a_normalized_qs_pieces_is_pointwise_code(
        read_elsewhere):
    """q/k RMSNorm, then RoPE on the first half of each row, then the cat of the rotated
    half with the other half (Laguna's, Sapiens2's attention). Each piece reads the norm's
    mean, and the cat's reader is a matmul: Inductor's cat lowering would make a
    ConcatKernel, a pointwise cat recomputing a reduction per element -- but the pieces
    only recombine the normalized rows (`_cat_inputs_recombine_reduction`: a reduction every
    piece reads, over as many elements as the cat, its readers all inside the pieces), and
    it is left out: the cat is pointwise code, the normalization computed in it, one
    epilogue of the reduction's kernel. Read elsewhere too (the variance returned), the
    mean fails that test and the cat is a ConcatKernel (Inductor's kernel of the pieces
    stores two slices)."""
    def fn(x, w, cos, sin, m):
        var = x.pow(2).mean(-1, keepdim=True)
        h = w * (x * torch.rsqrt(var + 1e-6))
        rot, keep = h[..., :8], h[..., 8:]
        q = torch.cat([rot * cos + sin, keep], -1)
        return (q @ m,) + ((var * 2,) if read_elsewhere else ())

    from mtia_lab.compiler import lowering

    c = _recomputing(fn, (16, 16), (16,), (16, 8), (16, 8), (16, 16))
    ir = c.ours.ir
    cat = next(n for n in ir.nodes if n.target == "aten.cat.default")
    assert lowering.pointwise_cat(cat, ir) is not read_elsewhere
    reduction = next(g.nodes for g in c.ours.groups if "mean" in g.nodes)
    assert ("cat" in reduction) is not read_elsewhere, _kernels(c)
    if not read_elsewhere:
        _same_as_inductor(c)


@pytest.mark.parametrize("op", ["index_put", "scatter_add"])
@pytest.mark.parametrize("epilogue", [False, True])
def test_scatter_in_one_kernel_off_a_scatters_stores_join_the_kernel_of_its_values(
        op, epilogue):
    """Inductor lowers a scatter as two launches: a copy of `self` into the output buffer (a
    `full` of zeros computed in it) and the indexed stores over the values' positions, a
    mutation of that buffer (a StarDep: never one kernel with the copy). The stores share
    the values' loop: where the values are a reduction's epilogue (an embedding's gradient
    after a norm's backward) they join the reduction's kernel, the index computed inline;
    where the values are a graph input, the stores are a launch of their own with the
    index. With scatter_in_one_kernel off our plan makes the same two, and its code still
    matches eager; with it on, our scatter is one kernel (scatter_in_two_launches)."""
    def fn(g, x, idx):
        v = g * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) if epilogue else g
        keep = (idx >= 0) & (idx < 64)
        i = torch.where(keep, idx, 0)
        if op == "index_put":
            v = v * keep[..., None]
            return torch.zeros(64, 16, device=g.device).index_put([i], v, accumulate=True)
        return torch.zeros(64, 16, device=g.device).scatter_add(0, i, v * keep)

    torch.manual_seed(0)
    values, index = ((2, 8, 16), (2, 8)) if op == "index_put" else ((16, 16), (16, 16))
    host = [torch.randn(*values), torch.randn(*values), torch.randint(-3, 70, index)]
    c = _compared_and_run(fn, host, matmul_templates=False, computed_once=False,
                          extern_in_triton=False, scatter_in_one_kernel=False)
    _same_as_inductor(c)
    scatter = next(n for g in c.ours.groups for n in g.nodes if n.startswith(("index_put",
                                                                              "scatter_add")))
    copy = f"scatter_copy_{scatter}"
    assert c.ours.scatter_copies == (copy,)
    (copied,) = [g.nodes for g in c.ours.groups if copy in g.nodes]
    assert scatter not in copied and set(copied) <= {copy, "full"}, _kernels(c)
    (stores,) = [g.nodes for g in c.ours.groups if scatter in g.nodes]
    assert ("mean" in stores) is epilogue, _kernels(c)
    torch._dynamo.reset()
    with config.patch(matmul_templates=False, computed_once=False, extern_in_triton=False):
        (default,) = compare(fn, *(t.to("mtia_sim") for t in host))
    assert not default.ours.scatter_copies
    (one,) = [g.nodes for g in default.ours.groups if scatter in g.nodes]
    assert "full" in one, _kernels(default)
    assert {r for d in default.differences for r in d.rules} >= {"scatter_in_two_launches"}, \
        str(default)


@pytest.mark.parametrize("frequencies", ["computed", "given"])
def test_large_body_a_stored_value_that_reads_nothing_is_still_inlined_into_its_readers(
        frequencies):
    """Funnel's relative sinusoidal table: cat([sin, cos]) of positions times inverse
    frequencies, gathered at two sets of relative positions. Computed from iotas alone, its
    body is over realize_opcount_threshold (30) and it has two readers: `mark_reuse` realizes
    it, but a ComputedBuffer that reads nothing is inlined into each reader all the same
    (`ComputedBuffer.make_loader`, num_reads() == 0), so each gather computes the table again
    in a kernel of its own and the table's store is dead. Given the frequencies as an input,
    the table loads them: stored, and the two gathers load it (one kernel)."""
    S, D = 8, 16

    def fn(x, inv):
        if frequencies == "computed":
            inv = 1 / (10000 ** (torch.arange(0, D // 2, device=x.device).float() / (D // 2)))
        rel = torch.arange(-2 * S, 2 * S, device=x.device).float()
        sinusoid = rel[:, None] * inv[None]
        table = torch.cat([torch.sin(sinusoid), torch.cos(sinusoid)], -1)
        first = torch.arange(S, device=x.device)[:, None] + S
        second = torch.arange(S, device=x.device)[:, None] + 2 * S
        a = torch.gather(table, 0, first.expand(S, D))
        b = torch.gather(table, 0, second.expand(S, D))
        return x @ a.t(), x @ b.t()

    c = _compared_and_run(fn, [torch.randn(4, D), torch.rand(D // 2)], computed_once=False)
    _same_as_inductor(c)
    gathers = [g.nodes for g in c.ours.groups if "gather" in g.nodes or "gather_1" in g.nodes]
    assert len(gathers) == (2 if frequencies == "computed" else 1), _kernels(c)
