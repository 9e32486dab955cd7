"""torch.compile given an empty device tensor, as OpInfo samples and real models give it (an
empty cache, a batch with no boxes): Dynamo's fake copy of it resizes its 0-byte storage to 0
bytes, which reaches a PrivateUse1 hook a Python backend cannot register
(storage_methods.resize_)."""

import pytest
import torch

import mtia_lab  # noqa: F401

DEVICE = "mtia_sim"


@pytest.mark.parametrize("backend", ["eager", "mtia_lab", "inductor"])
def test_an_empty_input_compiles_and_matches_cpu(backend):
    x, y = torch.randn(1, 0, 3), torch.randn(2, 3)

    def f(empty, full):
        return torch.acos(empty.clamp(-1, 1)), torch.cat([empty.flatten(0, 1), full]) * 2

    torch.compiler.reset()
    got = torch.compile(f, backend=backend)(x.to(DEVICE), y.to(DEVICE))
    for g, e in zip(got, f(x, y), strict=True):
        assert g.device.type == DEVICE
        torch.testing.assert_close(g.cpu(), e)


def test_a_fake_device_storage_resized_to_another_size_says_what_to_do():
    from torch._subclasses.fake_tensor import FakeTensorMode

    fake = FakeTensorMode().from_tensor(torch.zeros(4, device=DEVICE))
    storage = fake.untyped_storage()
    size = storage.nbytes()
    assert storage.resize_(size) is storage  # its own size: nothing to do
    with pytest.raises(NotImplementedError, match=rf"to {size + 16} bytes.*tensor\.resize_"):
        storage.resize_(size + 16)
    assert storage.nbytes() == size


def test_a_device_tensors_own_storage_still_resizes_its_memory():
    tensor = torch.arange(4.0, device=DEVICE)
    tensor.untyped_storage().resize_(32)
    assert tensor.untyped_storage().nbytes() == 32
    torch.testing.assert_close(tensor.cpu(), torch.arange(4.0))  # nothing lost
