"""torch.mtia_sim mirrors torch.mtia / torch.cuda: devices, properties, RNG."""

import pytest
import torch

import mtia_lab
from mtia_lab.backend.runtime.profile import MTIA_V2


def test_registration_is_idempotent_and_named():
    mtia_lab.register()
    mtia_lab.register()
    assert torch._C._get_privateuse1_backend_name() == "mtia_sim"
    t = torch.ones(2, device="mtia_sim")
    assert t.device == torch.device("mtia_sim", 0)
    assert t.is_mtia_sim  # generated Tensor property


def test_device_count_and_current_device():
    assert torch.mtia_sim.is_available()
    assert torch.mtia_sim.device_count() == 2
    assert torch.mtia_sim.current_device() == 0
    with torch.mtia_sim.device(1):
        assert torch.mtia_sim.current_device() == 1
        assert torch.empty(3, device="mtia_sim").device.index == 1
    assert torch.mtia_sim.current_device() == 0
    torch.mtia_sim.set_device(1)
    try:
        assert torch.zeros(1, device="mtia_sim").device.index == 1
    finally:
        torch.mtia_sim.set_device(0)


def test_the_current_device_is_per_thread_as_on_cuda():
    """Threads that set different devices do not move each other's tensors (CUDA's current
    device is thread-local; a new thread starts on device 0)."""
    import threading

    seen, barrier = {}, threading.Barrier(2)

    def worker(index: int) -> None:
        seen[f"start {index}"] = torch.accelerator.current_device_index()
        torch.accelerator.set_device_index(index)
        barrier.wait()  # both threads have set their device before either makes tensors
        x = torch.ones(4, device="mtia_sim")
        seen[index] = (torch.accelerator.current_device_index(), x.device.index,
                       (x + x).sum().device.index)

    torch.accelerator.set_device_index(1)
    try:
        threads = [threading.Thread(target=worker, args=(i,)) for i in (0, 1)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert torch.accelerator.current_device_index() == 1  # this thread's, untouched
    finally:
        torch.accelerator.set_device_index(0)
    assert seen == {"start 0": 0, "start 1": 0, 0: (0, 0, 0), 1: (1, 1, 1)}


def test_device_count_is_configurable():
    mtia_lab.configure(device_count=3)
    try:
        assert torch.mtia_sim.device_count() == 3
        assert torch.ones(1, device="mtia_sim:2").device.index == 2
    finally:
        mtia_lab.configure(device_count=2)
    with pytest.raises(RuntimeError, match="mtia_sim:2 does not exist.*device_count"):
        torch.ones(1, device="mtia_sim:2")


def test_properties_come_from_the_chip_profile():
    props = torch.mtia_sim.get_device_properties(0)
    assert props.name == MTIA_V2.name
    assert props.multi_processor_count == 64
    assert props.clock_rate_mhz == 1350
    assert props.total_memory == mtia_lab.backend.RUNTIME.capacity
    assert torch.mtia_sim.get_device_capability() == (2, 0)
    assert torch.mtia_sim.is_bf16_supported()
    assert torch.bfloat16 in torch.mtia_sim.get_amp_supported_dtype()


def test_profile_can_be_swapped():
    mtia_lab.configure(profile=mtia_lab.MTIA_V1)
    try:
        assert torch.mtia_sim.get_device_capability() == (1, 0)
        assert torch.mtia_sim.get_device_properties().clock_rate_mhz == 800
    finally:
        mtia_lab.configure(profile=mtia_lab.MTIA_V2)


def test_manual_seed_makes_device_random_numbers_repeatable():
    torch.mtia_sim.manual_seed(1234)
    a = torch.randn(5, device="mtia_sim").cpu()
    torch.mtia_sim.manual_seed(1234)
    b = torch.randn(5, device="mtia_sim").cpu()
    torch.testing.assert_close(a, b)
    assert torch.mtia_sim.initial_seed() == 1234
    assert not torch.equal(a, torch.randn(5, device="mtia_sim").cpu())


def test_torch_manual_seed_seeds_the_device_too():
    torch.manual_seed(7)
    a = torch.rand(4, device="mtia_sim").cpu()
    torch.manual_seed(7)
    b = torch.rand(4, device="mtia_sim").cpu()
    torch.testing.assert_close(a, b)


def test_rng_state_round_trip():
    state = torch.mtia_sim.get_rng_state()
    a = torch.rand(3, device="mtia_sim").cpu()
    torch.mtia_sim.set_rng_state(state)
    b = torch.rand(3, device="mtia_sim").cpu()
    torch.testing.assert_close(a, b)


def test_device_rng_drives_dropout_and_normal():
    torch.mtia_sim.manual_seed(3)
    x = torch.ones(1000, device="mtia_sim")
    d1 = torch.nn.functional.dropout(x, 0.5).cpu()
    n1 = torch.empty(10, device="mtia_sim").normal_(2.0, 0.5).cpu()
    torch.mtia_sim.manual_seed(3)
    d2 = torch.nn.functional.dropout(x, 0.5).cpu()
    n2 = torch.empty(10, device="mtia_sim").normal_(2.0, 0.5).cpu()
    torch.testing.assert_close(d1, d2)
    torch.testing.assert_close(n1, n2)
    assert 300 < int((d1 == 0).sum()) < 700


def test_device_generators_are_independent():
    torch.mtia_sim.manual_seed_all(5)
    a0 = torch.rand(3, device="mtia_sim:0").cpu()
    a1 = torch.rand(3, device="mtia_sim:1").cpu()
    torch.testing.assert_close(a0, a1)  # same seed, same sequence
    torch.mtia_sim.manual_seed_all(5)
    torch.rand(3, device="mtia_sim:0")
    b1 = torch.rand(3, device="mtia_sim:1").cpu()
    torch.testing.assert_close(a1, b1)  # drawing on :0 did not advance :1


def test_stream_context_and_event_completion():
    s = torch.mtia_sim.Stream()
    assert torch.mtia_sim.current_stream() != s
    with torch.mtia_sim.stream(s):
        assert torch.mtia_sim.current_stream() is s
        torch.ones(1000, device="mtia_sim").mul_(2)  # queued work on s
        e = torch.mtia_sim.Event(enable_timing=True)
        e.record()
    assert torch.mtia_sim.current_stream() is torch.mtia_sim.default_stream()
    assert not e.query()  # the work is queued, not done: nothing synchronised yet
    e.synchronize()
    assert e.query()
