"""Pinned host memory works with mtia_sim as PyTorch's accelerator, as it does with CUDA."""

from __future__ import annotations

import pytest
import torch
import torch.utils.data as data


def test_pin_memory_copies_and_marks_the_host_tensor():
    host = torch.randn(4, 3).t()  # not contiguous: strides are kept, as CUDA's pinning does
    pinned = host.pin_memory()
    assert pinned.is_pinned() and not host.is_pinned()
    assert pinned.stride() == host.stride() and torch.equal(pinned, host)
    assert pinned.pin_memory() is pinned  # already pinned: itself
    assert pinned[1:].is_pinned()  # views share the pinned memory
    moved = pinned.to("mtia_sim", non_blocking=True)
    assert torch.equal(moved.cpu(), host)
    assert not moved.is_pinned()


def test_pin_memory_keeps_autograd():
    x = torch.randn(3, requires_grad=True)
    (x.pin_memory() * 2).sum().backward()
    torch.testing.assert_close(x.grad, torch.full((3,), 2.0))


@pytest.mark.parametrize("workers", [0, 1])
def test_dataloader_pins_its_batches(workers):
    dataset = data.TensorDataset(torch.arange(12.0).view(6, 2), torch.arange(6))
    loader = data.DataLoader(dataset, batch_size=4, pin_memory=True, num_workers=workers)
    batches = list(loader)
    assert [tuple(t.shape[0] for t in batch) for batch in batches] == [(4, 4), (2, 2)]
    assert all(t.is_pinned() for batch in batches for t in batch)
    torch.testing.assert_close(torch.cat([b[0] for b in batches]), dataset.tensors[0])


def test_pinning_for_another_accelerator_is_refused_clearly():
    with pytest.warns(DeprecationWarning), pytest.raises(RuntimeError, match="mtia_sim only"):
        torch.randn(2).pin_memory("cuda")


def test_memory_inside_a_pinned_block_is_pinned():
    """A tensor over part of a pinned storage (a storage slice, as torch_openreg's
    test_rewrapped_storage makes) is pinned too: CUDA asks whether the *address* lies in a
    pinned block, not whether the storage object was the one pinned."""
    pinned = torch.randn(10).pin_memory()
    inside = torch.tensor((), dtype=torch.float32).set_(
        pinned.untyped_storage()[8:], size=(5,), stride=(1,), storage_offset=0)
    assert inside.is_pinned() and inside.data_ptr() == pinned.data_ptr() + 8
    assert torch.equal(inside, pinned[2:7])
    plain = torch.randn(10)
    beside = torch.tensor((), dtype=torch.float32).set_(
        plain.untyped_storage()[8:], size=(5,), stride=(1,), storage_offset=0)
    assert not beside.is_pinned()
