"""copy.deepcopy of device tensors and modules: own memory, same values, allocator intact."""

import copy

import torch
from torch import nn

import mtia_lab

DEV = "mtia_sim"


def test_deepcopy_of_a_trained_module_gets_its_own_blocks():
    torch.manual_seed(0)
    before = torch.mtia_sim.memory_allocated()
    model = nn.Linear(8, 8).to(DEV)
    model(torch.randn(4, 8, device=DEV)).sum().backward()
    twin = copy.deepcopy(model)
    for a, b in [(model.weight, twin.weight), (model.weight.grad, twin.weight.grad)]:
        assert mtia_lab.storage_of(a).address != mtia_lab.storage_of(b).address
        assert torch.equal(a.cpu(), b.cpu())
    assert isinstance(twin.weight, nn.Parameter) and twin.weight.requires_grad
    with torch.no_grad():
        twin.weight.add_(1)
    assert not torch.equal(model.weight.cpu(), twin.weight.cpu())
    # Freeing both copies in any order leaves the allocator consistent (it used to free the
    # copy's block as if it were the original's and corrupt the free lists).
    del model, twin, a, b
    torch.mtia_sim.empty_cache()
    assert torch.mtia_sim.memory_allocated() == before
    x = torch.randn(1000, device=DEV)  # the allocator still hands out and takes back blocks
    del x
    assert torch.mtia_sim.memory_allocated() == before


def test_deepcopy_matches_cpu_and_refuses_non_leaves_like_cpu():
    host = torch.randn(3, 4)
    dev = host.to(DEV)
    assert torch.equal(copy.deepcopy(dev).cpu(), copy.deepcopy(host))
    w = torch.randn(3, device=DEV, requires_grad=True)
    try:
        copy.deepcopy(w * 2)
    except RuntimeError as err:
        assert "leaves" in str(err)
    else:
        raise AssertionError("deepcopy of a non-leaf should fail, as it does on the CPU")
