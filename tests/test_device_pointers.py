"""Device addresses as CUDA reports them: `data_ptr()` of a tensor and of its storage is the
simulated address of its allocation, and a view's is its base's plus offset times item size
(PyTorch's view tests compare these)."""

from __future__ import annotations

import torch

import mtia_lab


def test_data_ptr_is_the_allocation_address_plus_the_offset(device):
    base = torch.randn(6, 4, device=device)
    address = mtia_lab.storage_of(base).address
    assert address != 0 and base.data_ptr() == address
    view = base[2:, 1:]
    assert view.data_ptr() == address + view.storage_offset() * base.element_size()
    assert base.view(torch.int16).data_ptr() == address  # dtype views share it too
    assert base.t().data_ptr() == address


def test_storage_data_ptr_is_shared_by_views_and_base(device):
    base = torch.arange(12.0, device=device)
    view = base.view(3, 4)[1:]
    assert view.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
    assert base.untyped_storage().data_ptr() == mtia_lab.storage_of(base).address
    assert view.untyped_storage() is base.untyped_storage()
    assert base.untyped_storage().device == device
    assert base.untyped_storage().nbytes() == 12 * 4


def test_separate_allocations_have_separate_addresses(device):
    a, b = torch.zeros(4, device=device), torch.zeros(4, device=device)
    assert a.data_ptr() != b.data_ptr()
    assert a.clone().data_ptr() != a.data_ptr()


def test_an_empty_tensor_reports_a_null_pointer_as_on_cuda(device):
    assert torch.empty(0, device=device).data_ptr() == 0


def test_storage_reads_back_the_device_bytes_and_rebinds(device):
    base = torch.arange(8.0, device=device)
    storage = base.untyped_storage()
    assert bytes(storage.cpu().tolist()) == base.cpu().numpy().tobytes()
    other = torch.empty(0, device=device).set_(storage, 4, (2, 2), (2, 1))
    assert other.data_ptr() == base.data_ptr() + 16
    base[5] = -1.0
    assert other.cpu().tolist() == [[4.0, -1.0], [6.0, 7.0]]


def test_storage_resize_frees_and_reallocates_device_memory(device, clean_memory):
    """FSDP2's way of freeing a parameter: resize its storage to zero, later back to full."""
    before = torch.mtia_sim.memory_allocated(device)
    param = torch.arange(256.0, device=device)
    view = param[128:]
    assert torch.mtia_sim.memory_allocated(device) - before == 1024
    param.untyped_storage().resize_(0)
    storage = param.untyped_storage()
    assert storage.size() == len(storage) == 0 and param.data_ptr() == 0
    assert torch.mtia_sim.memory_allocated(device) == before
    param.untyped_storage().resize_(1024)
    assert torch.mtia_sim.memory_allocated(device) - before == 1024
    param.copy_(torch.ones(256, device=device))
    assert view.sum().item() == 128.0 and view.data_ptr() == param.data_ptr() + 512
    del param, view
    assert torch.mtia_sim.memory_allocated(device) == before
