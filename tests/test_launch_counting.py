"""The comparison counts every launch of Inductor's wrapper, also the host work a graph for
the device carries: model code that makes a tensor without a device (`torch.arange(n)`,
`torch.tensor(...)`) gets it computed by a C++ kernel on the host and copied over
(`buf3.copy_(arg1_1, False)`), and both are launches the comparison must hold."""

import dataclasses
import types

import torch
from fidelity_heldout13 import heldout13_graphs

import mtia_lab  # noqa: F401
from mtia_lab.compare import compare
from mtia_lab.compare.launches import roots, wrapper_launches
from mtia_lab.compare.plans import compare_plans
from mtia_lab.compiler import config
from mtia_lab.records.plan import DEVICE_COPY_LAUNCH


def test_a_host_kernel_and_its_copy_to_the_device_are_launches_of_inductors():
    def fn(x):
        scale = torch.log(torch.tensor(7.0))  # a host tensor: DeBERTa's log-bucket positions
        table = torch.tensor([float(i) for i in range(16)])  # made on the host, moved over
        return x / scale + table.to(x.device)

    torch.manual_seed(0)
    x = torch.randn(4, 16, device="mtia_sim")
    (c,) = compare(fn, x)
    c.check()
    names = c.placed.wrapper_launches
    assert any(n.startswith("cpp_") for n in names), names
    assert DEVICE_COPY_LAUNCH in names, names
    assert [launch.name for launch in c.placed.launches] == names
    torch.testing.assert_close(torch.compile(fn, backend="mtia_lab")(x).cpu(), fn(x.cpu()))


def test_wrapper_launches_reads_each_kind_of_line():
    wrapper = """
def call(args):
    triton_poi_fused_add_0.run(buf0, 16, stream=raw_stream0)
    extern_kernels.mm(buf0, arg1_1, out=buf1)
    cpp_fused_log_1(buf2)
    buf3.copy_(buf2, False)
    buf4 = torch.ops.aten.sort.stable(buf3)
    arg1_1 = copy_if_misaligned(arg1_1)
    return (buf4, )
"""
    assert wrapper_launches(wrapper) == [
        "triton_poi_fused_add_0", "extern_kernels.mm", "cpp_fused_log_1", DEVICE_COPY_LAUNCH,
        "torch.ops.aten.sort.stable"]


def test_values_only_a_copy_destinations_shape_is_taken_from_are_absorbed():
    """copy(self, src) reads only self's shape: Inductor computes the chain that made `self`
    nowhere, and the comparison absorbs it (with its users or kernel-mates) instead of giving
    it to the device copy, whose origins name it. Longer chains with several readers (BEiT's
    position index, held-out-3) take the lenient kernel-mates pass of `_absorb`."""
    def fn(x):
        table = torch.tensor([float(i) for i in range(16)])  # made on the host
        slot = torch.where(torch.arange(16, device=x.device) == 0, x[0], x[1])
        slot.copy_(table)  # only slot's shape survives
        return x * slot

    torch.manual_seed(0)
    x = torch.randn(4, 16, device="mtia_sim")
    (c,) = compare(fn, x)
    c.check()
    assert DEVICE_COPY_LAUNCH in c.placed.wrapper_launches
    assert "where" in c.placed.how and c.placed.how["where"].startswith("absorbed"), c.placed.how
    torch.testing.assert_close(torch.compile(fn, backend="mtia_lab")(x).cpu(), fn(x.cpu()))


def segment_sums(values, ids):
    """TAPAS' segmented reduce: cell ids of a product index map, then a scatter_reduce of the
    values into a fresh zeros buffer (include_self=False), then more work on the sums."""
    cells = ids * 4 + torch.arange(ids.shape[-1], device=ids.device).fmod(4)
    sums = torch.zeros(2 * 16, device=values.device).scatter_reduce(
        0, cells.flatten(), (values * 2).flatten(), reduce="sum", include_self=False)
    return sums.view(2, 16).softmax(-1)


def test_the_indexed_adds_of_a_scatter_reduce_without_self_are_part_of_it():
    """Inductor runs scatter_reduce(include_self=False) as three launches: the copy of its
    input (which writes the scatter's value), the zero-out of the indexed places and the
    indexed adds, each a mutation of that copy with no value of its own. The adds read the
    zero-out's buffer, whose launch writes no value either: the comparison follows Inductor's
    mutation record to the copy, so the adds are part of our scatter_reduce too."""
    torch.manual_seed(0)
    values = torch.randn(2, 8)
    ids = torch.randint(0, 4, (2, 8)) + torch.tensor([[0], [4]])
    (c,) = compare(segment_sums, values.to("mtia_sim"), ids.to("mtia_sim"))
    c.check()
    finishing = [launch for launch in c.placed.launches if not launch.nodes]
    assert len(finishing) == 2 and all(launch.part_of == ("scatter_reduce",)
                                       for launch in finishing), c.placed.launches
    got = torch.compile(segment_sums, backend="mtia_lab")(values.to("mtia_sim"),
                                                          ids.to("mtia_sim"))
    torch.testing.assert_close(got.cpu(), segment_sums(values, ids))


def test_a_check_on_a_computed_tensor_is_host_code_not_launches():
    """`torch._check_tensor_all` on a computed condition (D-FINE's decoder, held-out-12) is
    `_is_all_true`, an extern launch, then `.item()` and `aten._assert_scalar`s: Inductor makes
    those a DynamicScalar (`u0 = 1 if buf.item() else 0`) and AssertScalars (`if not (u0 >= 1):
    raise`), extern scheduler nodes whose code runs on the host, no kernel. They are not
    launches of Inductor's plan: counted, they held nothing of ours and outnumbered the
    wrapper's launches."""
    def fn(x, y):
        lengths = (y.sum(-1, keepdim=True) * 0).long()  # zeros, computed on the device
        first = torch.arange(4, device=x.device).view(1, 4) == lengths
        torch._check_tensor_all(first[:, 0])
        return x.relu() * 2

    torch.manual_seed(0)
    x, y = torch.randn(4, 16, device="mtia_sim"), torch.randn(4, 16, device="mtia_sim")
    (c,) = compare(fn, x, y)
    c.check()
    names = c.placed.wrapper_launches
    assert "torch.ops.aten._is_all_true.default" in names, names
    assert [launch.name for launch in c.placed.launches] == names
    assert c.inductor.after.kernels == len(names)
    torch.testing.assert_close(torch.compile(fn, backend="mtia_lab", fullgraph=True)(x, y).cpu(),
                               fn(x.cpu(), y.cpu()))


def cached_keys(x, w, v):
    """A DynamicCache's first update (BioGPT's train step, held-out-13): the layer's keys
    concatenated to the cache's empty keys (`torch.tensor([])`), then read by two matmuls."""
    keys = torch.tensor([], device=x.device)
    keys = torch.cat([keys, (x @ w).view(2, 8, 4, 8).transpose(1, 2)], dim=-2)
    return keys @ v, keys.transpose(-1, -2) @ v.t()


def test_a_cat_that_inductor_leaves_one_input_of_is_that_inputs_value():
    """Inductor's `cat` decomposition drops the 1-D empty input and makes the cat a clone of
    the other, which `remove_noop_ops` removes: no launch computes the cat or the empty
    tensor. Our scheduler does the same (ir.py's no-op copies and dead nodes): neither is a
    node of ours, and the comparison aligns without them. With two non-empty inputs the cat
    is Inductor's to launch, and ours."""
    torch.manual_seed(0)
    x, w, v = torch.randn(16, 32), torch.randn(32, 32), torch.randn(8, 8)
    with config.patch(matmul_templates=False, computed_once=False, extern_in_triton=False):
        (c,) = compare(cached_keys, *[t.to("mtia_sim") for t in (x, w, v)])
    c.check()
    ours = {name for group in c.ours.groups for name in group.nodes}
    assert not {"cat", "lift_fresh_copy"} & ours, c.ours.groups
    got = torch.compile(cached_keys, backend="mtia_lab")(*[t.to("mtia_sim") for t in (x, w, v)])
    torch.testing.assert_close([t.cpu() for t in got], list(cached_keys(x, w, v)))

    def two_pieces(x, w, v):  # the edge: nothing dropped, a cat of two
        keys = torch.cat([x.view(2, 8, 4, 8).transpose(1, 2)[:, :, :1], (x @ w).view(
            2, 8, 4, 8).transpose(1, 2)], dim=-2)
        return keys @ v, keys.transpose(-1, -2) @ keys

    (c,) = compare(two_pieces, *[t.to("mtia_sim") for t in (x, w, v)])
    c.check()
    assert "cat" in {name for group in c.ours.groups for name in group.nodes}
    assert c.placed.how["cat"] != "absorbed by its producers", c.placed.how


def test_a_copy_of_a_convolution_backwards_operand_is_part_of_it():
    """I-JEPA's train step (held-out-13): the output gradient of the patch convolution is a
    permuted view of the residual's gradient, an add that Inductor realizes (fused into the
    bias gradient's reduction, in a layout the view froze) while lowering the convolution
    backward, so that buffer's origins name the convolution backward too; the contiguous copy
    the fallback asks for inherits every origin it has and computes nothing of its own. It is
    the layout copy of that extern's operand: part of our convolution_backward."""
    fn, make = heldout13_graphs()["ijepa_classifier_train_step"]
    torch.manual_seed(0)
    (c,) = compare(fn, *[t.to("mtia_sim") for t in make()])
    c.check()
    copies = [launch for launch in c.placed.launches if not launch.nodes
              and "convolution_backward" in launch.name]
    assert copies and all(launch.part_of == ("convolution_backward",) for launch in copies), \
        c.placed.launches


def test_a_value_inductor_recomputes_is_our_departure_only_while_computed_once_is_on():
    """exp(x), read by two sums: Inductor computes it in each sum's kernel, ours once. While
    computed_once is on that is our departure; in a plan made with it off, recompute.py
    claims to recompute such a value as Inductor does, so a plan that still stores it is not
    explained by computed_once (it was: the departures-off figures counted such launches as
    a departure that stays on)."""
    def fn(x):
        y = x.exp()
        return y.sum(0), y.sum(1)

    (c,) = compare(fn, torch.randn(8, 16, device="mtia_sim"))
    assert c.differences and all(d.rules == ("computed_once",) and d.explained
                                 for d in c.differences), str(c)
    stored_once = dataclasses.replace(c.ours, settings={**c.ours.settings,
                                                        "computed_once": False})
    off = compare_plans(stored_once, c.inductor)
    assert off.differences and all(d.rules == ("stored_by_us_only",) and not d.explained
                                   and not d.not_modelled for d in off.differences), str(off)
    with config.patch(computed_once=False):
        (recomputed,) = compare(fn, torch.randn(8, 16, device="mtia_sim"))
    assert not recomputed.differences, str(recomputed)  # recompute.py does recompute it


def test_a_post_grad_node_is_ours_by_its_sources_not_by_a_name_a_retrace_reused():
    """A training step's post-grad graph is a retrace with names of its own: M2M-100's
    `clone_10` there is the copy Inductor made of our view_38 (an addmm's operand), and our
    clone_10 (a gradient, read by two mms and a bias sum) is its `clone_22`. The node is ours
    through the sources it remembers; its own name counts only for a node that remembers
    none (a pattern's), else our bias sum looked fused with a copy 64 launches away."""
    fx = torch.fx.Graph()
    made_from_view = fx.call_function(torch.ops.aten.clone.default, (fx.placeholder("x"),))
    made_from_view.name = "clone_10"
    made_from_ours = fx.call_function(torch.ops.aten.clone.default, (made_from_view,))
    made_from_ours.name = "clone_22"
    unremembered = fx.call_function(torch.ops.aten.mul.Tensor, (made_from_ours, 2))
    unremembered.name = "mul_3"

    def source(name):
        return types.SimpleNamespace(name=name, from_node=[])

    made_from_view.meta["from_node"] = [source("view_38")]
    made_from_ours.meta["from_node"] = [source("clone_10")]
    ours = {"clone_10", "mul_3", "sum_12"}
    assert roots(made_from_view, ours) == set()
    assert roots(made_from_ours, ours) == {"clone_10"}
    assert roots(unremembered, ours) == {"mul_3"}


def test_a_value_inductor_stores_under_a_views_name_is_stored_not_inlined():
    """exp(x) read by a matmul and a sum: Inductor computes it inside the launch that writes
    the `expand` the bmm reads (the value stored under the view's name) and again inside the
    sum. The comparison says it is stored there; "never stored" was wrong for such values."""
    def fn(x, w):
        y = (x * 2).exp()
        return torch.matmul(y, w), (y + 1).sum(-1)

    (c,) = compare(fn, torch.randn(2, 4, 8, 16, device="mtia_sim"),
                   torch.randn(2, 4, 16, 8, device="mtia_sim"))
    how = c.placed.how
    assert how["exp"].startswith("computed, stored as expand"), how
    assert how["mul"] == "computed", how  # read by exp only: inlined, stored under no name
    assert "never stored" not in str(c), str(c)
