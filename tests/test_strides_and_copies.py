"""Host<->device and device<->device copies keep layouts, offsets and aliasing."""

import pytest
import torch

import mtia_lab


def _layouts():
    base = torch.arange(2 * 3 * 4 * 5, dtype=torch.float32).reshape(2, 3, 4, 5)
    return {
        "contiguous": base,
        "transposed": base.transpose(1, 3),
        "channels_last": base.contiguous(memory_format=torch.channels_last),
        "sliced": base[:, 1:, ::2, 1:4],
        "expanded": torch.arange(5.0).expand(3, 4, 5),
        "as_strided": torch.arange(30.0).as_strided((3, 4), (7, 2), 3),
        "offset_row": base[1, 2],
    }


@pytest.mark.parametrize("name", list(_layouts()))
def test_to_device_and_back_matches_cpu_semantics(name):
    host = _layouts()[name]
    on_device = host.to("mtia_sim")
    # `.to()` keeps dense layouts and makes others contiguous, as it does for CUDA; clone() on
    # the host follows the same rule, so it is the oracle for the expected strides.
    assert on_device.stride() == host.clone().stride()
    back = on_device.cpu()
    assert torch.equal(back, host)
    assert back.stride() == host.clone().stride()


# Not "expanded": writing into overlapping memory is an error on every device.
@pytest.mark.parametrize("name", [n for n in _layouts() if n != "expanded"])
def test_copy_into_strided_device_views(name):
    host = _layouts()[name]
    storage = torch.zeros(host.untyped_storage().nbytes() // 4, device="mtia_sim")
    target = storage.as_strided(host.shape, host.stride(), host.storage_offset())
    target.copy_(host)
    expected = torch.zeros(storage.shape)
    expected.as_strided(host.shape, host.stride(), host.storage_offset()).copy_(host)
    assert torch.equal(storage.cpu(), expected)  # the same storage cells were written
    assert target.stride() == host.stride()
    assert target.storage_offset() == host.storage_offset()


def test_device_to_host_copy_into_strided_host_tensor():
    src = torch.randn(4, 6, device="mtia_sim")
    dst = torch.zeros(6, 4).t()
    dst.copy_(src)
    assert torch.equal(dst, src.cpu())
    assert dst.stride() == (1, 4)


def test_device_to_device_copies_across_indices():
    x = torch.randn(3, 5).t()
    on0 = x.to("mtia_sim:0")
    on1 = on0.to("mtia_sim:1")
    assert on1.device == torch.device("mtia_sim", 1)
    assert on1.stride() == on0.stride()
    assert torch.equal(on1.cpu(), x)
    assert mtia_lab.storage_of(on1) is not mtia_lab.storage_of(on0)
    dst = torch.zeros(5, 3, device="mtia_sim:1")
    dst.copy_(on0)
    assert torch.equal(dst.cpu(), x)


def test_views_alias_device_memory():
    x = torch.zeros(4, 4, device="mtia_sim")
    views = [x.view(16), x.t(), x[1], x[:, 2], x.unsqueeze(0), x.as_strided((2, 2), (5, 1), 1),
             x.expand(2, 4, 4), x.permute(1, 0), x.diagonal(), x.unfold(0, 2, 1), x.reshape(2, 8),
             x.squeeze(), torch.ops.aten._unsafe_view(x, (8, 2))]
    for v in views:
        assert mtia_lab.storage_of(v) is mtia_lab.storage_of(x)
    x.view(16)[5] = 7.0  # write through one view, read through the others
    assert x.t()[1, 1].item() == 7.0
    assert x.diagonal()[1].item() == 7.0
    assert x.as_strided((2, 2), (5, 1), 1)[0, 0].item() == 0.0
    assert x.as_strided((2, 2), (5, 1), 0)[1, 0].item() == 7.0


def test_view_metadata_matches_cpu():
    host = torch.arange(24.0).reshape(2, 3, 4)
    dev = host.to("mtia_sim")
    for make in (lambda t: t.transpose(0, 2), lambda t: t[:, 1:, ::2], lambda t: t.select(1, 2),
                 lambda t: t.unfold(2, 2, 1), lambda t: t.diagonal(0, 1, 2),
                 lambda t: t.as_strided((2, 2), (3, 1), 5), lambda t: t.expand(3, 2, 3, 4)):
        h, d = make(host), make(dev)
        assert d.shape == h.shape and d.stride() == h.stride()
        assert d.storage_offset() == h.storage_offset()
        assert torch.equal(d.cpu(), h)


def test_as_strided_outside_the_storage_is_a_clear_error():
    x = torch.zeros(4, device="mtia_sim")
    with pytest.raises(RuntimeError, match="out of bounds for storage"):
        x.as_strided((4,), (2,))


def test_non_blocking_copies_arrive():
    host = torch.randn(64, 64)
    dev = host.to("mtia_sim", non_blocking=True)
    back = dev.to("cpu", non_blocking=True)
    torch.mtia_sim.synchronize()
    assert torch.equal(back, host)


def test_in_place_ops_on_views_update_the_base():
    x = torch.arange(12.0, device="mtia_sim").reshape(3, 4)
    x[:, 1].mul_(10)
    x.t()[2].clamp_(max=5.0)
    expected = torch.arange(12.0).reshape(3, 4)
    expected[:, 1].mul_(10)
    expected.t()[2].clamp_(max=5.0)
    assert torch.equal(x.cpu(), expected)


def test_copy_into_expanded_tensor_is_refused_like_cpu():
    with pytest.raises(RuntimeError, match="more than one element"):
        torch.zeros(5).expand(3, 5).copy_(torch.ones(3, 5))
    with pytest.raises(RuntimeError, match="more than one element"):
        torch.zeros(5, device="mtia_sim").expand(3, 5).copy_(torch.ones(3, 5))


def test_tolist_reads_back_the_values():
    host = torch.arange(6).reshape(2, 3).t()
    assert host.to("mtia_sim").tolist() == host.tolist()
    assert torch.tensor(2.5, device="mtia_sim").tolist() == 2.5
