"""Which kernel serves an op: native, view, CPU fallback, strict mode, and device checks."""

import pytest
import torch

import mtia_lab
from mtia_lab.backend.aten.registry import KERNELS

aten = torch.ops.aten


def test_native_kernels_cover_the_issue_families():
    must_be_native = [
        aten.empty_strided.default, aten.zeros_like.default, aten.fill_.Scalar,
        aten.arange.start_out,
        aten.copy_.default, aten._to_copy.default, aten._copy_from.default, aten.view.default,
        aten._unsafe_view.default, aten.as_strided.default, aten.expand.default,
        aten.permute.default, aten.transpose.int, aten.t.default, aten.slice.Tensor,
        aten.select.int, aten.squeeze.dim, aten.unsqueeze.default, aten.unfold.default,
        aten.diagonal.default, aten.clamp.default, aten.clamp.Tensor, aten.clamp_.default,
        aten.clamp_min.default, aten.clamp_max.Tensor, aten.clamp.out, aten.add.Tensor,
        aten.gelu.default, aten.where.self, aten.eq.Tensor, aten.sum.dim_IntList,
        aten.mean.dim, aten.amax.default, aten.amin.default, aten.argmax.default,
        aten.var.correction, aten.std.correction, aten.mm.default, aten.addmm.default,
        aten.bmm.default, aten.baddbmm.default, aten._softmax.default, aten._log_softmax.default,
        aten.native_layer_norm.default, aten.native_layer_norm_backward.default,
        aten.embedding.default, aten.index_select.default, aten.gather.default,
        aten.scatter.src, aten.cat.default, aten.stack.default, aten.mm.out, aten.cat.out,
        aten.normal_.default, aten.uniform_.default,
    ]
    missing = [str(op) for op in must_be_native if op not in KERNELS]
    assert not missing


def test_fallback_computes_correctly_and_is_counted():
    mtia_lab.reset_fallback_counts()
    x = torch.randn(4, 5)
    result = torch.cumsum(x.to("mtia_sim"), dim=1)
    assert result.device.type == "mtia_sim"
    torch.testing.assert_close(result.cpu(), torch.cumsum(x, dim=1))
    assert mtia_lab.fallback_counts() == {"aten::cumsum": 1}


def test_fallback_in_place_on_a_view_writes_back_to_the_right_cells():
    host = torch.randn(6, 6)
    dev = host.to("mtia_sim")
    host[1:5:2, ::3].cumsum_(0)
    dev[1:5:2, ::3].cumsum_(0)  # cumsum_ has no native kernel: the fallback writes back
    torch.testing.assert_close(dev.cpu(), host)


def test_fallback_out_variant_returns_the_out_tensor():
    x = torch.randn(3, 4)
    out = torch.empty(3, 4, device="mtia_sim")
    returned = torch.cumprod(x.to("mtia_sim"), 0, out=out)
    assert returned is out
    torch.testing.assert_close(out.cpu(), torch.cumprod(x, 0))


def test_fallback_keeps_aliasing_between_arguments():
    x = torch.randn(4, 4)
    d = x.to("mtia_sim")
    expected = torch.logcumsumexp(x + x.t(), 0)
    torch.testing.assert_close(torch.logcumsumexp(d + d.t(), 0).cpu(), expected)
    # one storage, two views as arguments: the host copy must keep them aliased
    a = torch.arange(8.0)
    b = a.to("mtia_sim")
    expected = torch.cummax(a[:4] + a[4:], 0).values
    torch.testing.assert_close(torch.cummax(b[:4] + b[4:], 0).values.cpu(), expected)


def test_failing_op_leaves_its_inputs_intact():
    d = torch.arange(6.0, device="mtia_sim")
    before = d.cpu().clone()
    with pytest.raises(IndexError, match="Dimension out of range"):  # as on CPU
        d.cumsum_(dim=5)  # bad dim: the host kernel of the fallback raises
    assert torch.equal(d.cpu(), before)
    with pytest.raises(RuntimeError):
        d.add_(torch.ones(7, device="mtia_sim"))  # bad shape: the native kernel raises
    assert torch.equal(d.cpu(), before)


def test_strict_mode_names_the_op_and_the_fix():
    x = torch.randn(3, device="mtia_sim")
    with mtia_lab.strict():
        assert torch.equal((x + 1).cpu(), x.cpu() + 1)  # native ops still run
        with pytest.raises(mtia_lab.StrictModeError) as info:
            torch.cumsum(x, 0)
    message = str(info.value)
    assert "aten::cumsum" in message and "register_kernel" in message and "strict(False)" in message
    torch.cumsum(x, 0)  # allowed again outside the block


def test_global_strict_switch():
    x = torch.randn(3, device="mtia_sim")
    mtia_lab.set_strict(True)
    try:
        with pytest.raises(mtia_lab.StrictModeError):
            torch.cummax(x, 0)
        with mtia_lab.strict(False):
            torch.cummax(x, 0)
    finally:
        mtia_lab.set_strict(False)


def test_adding_a_kernel_makes_an_op_native():
    calls = []

    @mtia_lab.register_kernel("aten::cumsum")
    def cumsum(func, args, kwargs, device):
        calls.append(device.index)
        return func(*args, **kwargs)

    try:
        x = torch.randn(5)
        with mtia_lab.strict():
            result = torch.cumsum(x.to("mtia_sim"), 0)
        torch.testing.assert_close(result.cpu(), torch.cumsum(x, 0))
        assert calls == [0]
    finally:
        mtia_lab.unregister_kernel("aten::cumsum")
    assert aten.cumsum.default not in KERNELS


def test_mixing_devices_is_an_error_like_cuda():
    a = torch.ones(2, device="mtia_sim:0")
    b = torch.ones(2, device="mtia_sim:1")
    same_device = "Expected all tensors to be on the same device.*mtia_sim:0 and mtia_sim:1"
    with pytest.raises(RuntimeError, match=same_device):
        a + b
    with pytest.raises(RuntimeError, match="same device.*cpu"):
        a + torch.ones(2)
    with pytest.raises(RuntimeError, match="same device"):
        torch.cat([a, b])
    # a CPU scalar tensor may ride along, as on CUDA
    assert torch.equal((a * torch.tensor(3.0)).cpu(), torch.full((2,), 3.0))


def test_factories_without_a_kernel_fall_back_through_privateuse1():
    mtia_lab.reset_fallback_counts()
    perm = torch.randperm(6, device="mtia_sim")
    assert perm.device.type == "mtia_sim"
    assert sorted(perm.cpu().tolist()) == list(range(6))
    eye = torch.eye(3, device="mtia_sim:1")
    assert eye.device == torch.device("mtia_sim", 1)
    assert torch.equal(eye.cpu(), torch.eye(3))


@pytest.mark.parametrize(
    "make",
    [
        lambda d: torch.zeros(2, 3, device=d),
        lambda d: torch.ones(4, device=d, dtype=torch.float16),
        lambda d: torch.full((2, 2), 7.5, device=d),
        lambda d: torch.arange(3, 17, 2, device=d),
        lambda d: torch.linspace(0, 1, 9, device=d),
        lambda d: torch.tensor([[1, 2], [3, 4]], device=d),
        lambda d: torch.zeros_like(torch.empty(3, 2, device=d)),
        lambda d: torch.empty(2, 3, device=d).new_full((3,), 2.0),
    ],
)
def test_factories_match_cpu(make):
    dev, host = make("mtia_sim"), make("cpu")
    assert dev.device.type == "mtia_sim"
    assert dev.dtype == host.dtype and dev.shape == host.shape
    assert torch.equal(dev.cpu(), host)
