"""Operations that used to give silently wrong values on the device, each against the CPU:
`.data =`, `set_`, torch.save of lazy conj/neg views, host tensors as `out=`, copies between
differently shaped views of one tensor."""

from __future__ import annotations

import gc
import io
import warnings

import pytest
import torch

DEVICE = "mtia_sim"


def test_assigning_data_swaps_shape_and_values():
    linear = torch.nn.Linear(2, 2).to(DEVICE)
    weight = linear.weight
    linear.weight.data = torch.arange(9.0, device=DEVICE).view(3, 3)
    assert linear.weight is weight and weight.shape == (3, 3)
    torch.testing.assert_close(weight.detach().cpu(), torch.arange(9.0).view(3, 3))
    weight.data.mul_(2)  # `.data` is still a view of the parameter's memory
    torch.testing.assert_close(weight.detach().cpu(), torch.arange(9.0).view(3, 3) * 2)


def test_vector_to_parameters_writes_the_parameters():
    cpu = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Linear(2, 1))
    dev = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Linear(2, 1)).to(DEVICE)
    vector = torch.randn(sum(p.numel() for p in cpu.parameters()))
    torch.nn.utils.vector_to_parameters(vector, cpu.parameters())
    torch.nn.utils.vector_to_parameters(vector.to(DEVICE), dev.parameters())
    for p, q in zip(cpu.parameters(), dev.parameters(), strict=True):
        torch.testing.assert_close(q.detach().cpu(), p.detach())
    x = torch.randn(4, 3)
    torch.testing.assert_close(dev(x.to(DEVICE)).detach().cpu(), cpu(x).detach())


def test_data_from_another_device_is_refused_as_on_cuda():
    x = torch.ones(2, device=DEVICE)
    with pytest.raises(RuntimeError, match="incompatible tensor type"):
        x.data = torch.zeros(2)


def test_set_aliases_the_source_and_frees_the_old_memory():
    gc.collect()
    before = torch.mtia_sim.memory_allocated()
    v = torch.zeros(1000, device=DEVICE)
    other = torch.ones(10, device=DEVICE)
    assert v.set_(other) is v
    other.add_(1)
    torch.testing.assert_close(v.cpu(), torch.full((10,), 2.0))
    v.mul_(3)
    torch.testing.assert_close(other.cpu(), torch.full((10,), 6.0))
    assert torch.mtia_sim.memory_allocated() - before == 512  # only `other`'s block remains
    v.set_()
    assert v.shape == (0,)
    source = torch.arange(6.0, device=DEVICE)
    v.set_(source, 1, (2, 2), (2, 1))  # with a geometry: a strided view of `source`
    want = torch.empty(0).set_(torch.arange(6.0), 1, (2, 2), (2, 1))
    assert (v.shape, v.stride(), v.storage_offset()) == (want.shape, want.stride(), 1)
    source.mul_(10)
    torch.testing.assert_close(v.cpu(), want * 10)
    with pytest.raises(RuntimeError, match="same device"):
        v.set_(torch.zeros(3))


@pytest.mark.parametrize("make", [
    lambda x: x.conj(), lambda x: x.conj().imag, lambda x: x._neg_view(),
    lambda x: x.conj()[1:], lambda x: x.conj().imag._neg_view(),
], ids=["conj", "conj-imag", "neg", "conj-slice", "conj-imag-neg"])
def test_save_keeps_lazy_conj_and_neg_bits(make):
    x = torch.tensor([1 + 2j, 3 - 1j, 2 + 0.5j])
    want = make(x)
    buffer = io.BytesIO()
    torch.save([x.to(DEVICE), make(x.to(DEVICE))], buffer)
    for location in (None, "cpu"):
        buffer.seek(0)
        plain, got = torch.load(buffer, map_location=location)
        assert (got.is_conj(), got.is_neg()) == (want.is_conj(), want.is_neg())
        assert torch.equal(got.cpu(), want)
        assert torch.equal((got * 2).cpu(), want * 2)  # kernels read the bits too
        assert torch.equal(plain.cpu(), x)


@pytest.mark.parametrize("call", [
    lambda d: torch.nonzero(d, out=torch.empty([], dtype=torch.long)),
    lambda d: torch.add(d, 1, out=torch.empty([])),
    lambda d: torch.sum(d, 0, out=torch.empty([])),
    lambda d: torch.empty([]).add_(d),
    lambda d: torch.cumsum(d, 0, out=torch.empty(3)),
    lambda d: torch.matmul(d, d, out=torch.empty([])),
], ids=["nonzero", "add", "sum", "inplace", "cumsum", "matmul"])
def test_host_tensor_as_written_argument_is_refused(call):
    dev = torch.ones(3, device=DEVICE)
    refused = "(expected '(out|self)' to be on|same device).*mtia_sim:0"
    with pytest.raises(RuntimeError, match=refused):
        call(dev)
    torch.testing.assert_close(dev.cpu(), torch.ones(3))


def test_host_scalars_still_ride_along_as_inputs():
    dev = torch.ones(3, device=DEVICE)
    torch.testing.assert_close(torch.add(dev, torch.tensor(2.0)).cpu(), torch.full((3,), 3.0))
    out = torch.empty(3, device=DEVICE)
    torch.mul(dev, torch.tensor(4.0), out=out)
    torch.testing.assert_close(out.cpu(), torch.full((3,), 4.0))


@pytest.mark.parametrize("dst, src", [((2, 3), (3, 2)), ((2, 3), (6,)), ((6,), (3, 2))])
def test_copy_between_views_of_one_tensor_raises_as_on_cpu(dst, src):
    for device in ("cpu", DEVICE):
        x = torch.arange(6.0, device=device)
        with pytest.raises(RuntimeError):
            x.view(dst).copy_(x.view(src))
        torch.testing.assert_close(x.cpu(), torch.arange(6.0))
    x = torch.arange(6.0, device=DEVICE)
    x.view(2, 3).copy_(x.view(2, 3))  # the very same elements: a no-op, as on the CPU
    torch.testing.assert_close(x.cpu(), torch.arange(6.0))


@pytest.mark.parametrize("left, right", [
    ((3,), (3,)), ((3,), (3, 4)), ((2, 3), (3,)), ((5, 2, 3), (3, 4)), ((2, 1, 3, 4), (5, 4, 2)),
    ((5, 5), (5, 5)),
])
@pytest.mark.parametrize("out_shape", ["result", (0,), (7,)])
def test_matmul_out_fills_out_like_cpu(left, right, out_shape):
    """matmul(out=) computes into a reshaped view of `out`: the copy back onto `out` joins two
    differently shaped views of the same elements, which must not trip copy_'s shape check."""
    x, y = torch.randn(left), torch.randn(right)
    shape = torch.matmul(x, y).shape if out_shape == "result" else out_shape
    out, dev_out = torch.empty(shape), torch.empty(shape, device=DEVICE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # resizing a non-empty out= warns (CPU: sometimes)
        torch.matmul(x, y, out=out)
        assert torch.matmul(x.to(DEVICE), y.to(DEVICE), out=dev_out) is dev_out
    assert dev_out.shape == out.shape
    torch.testing.assert_close(dev_out.cpu(), out)
