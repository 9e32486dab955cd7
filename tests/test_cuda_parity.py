"""Behaviour that CUDA has and a user relies on, checked on mtia_sim against the CPU (or against
what torch.cuda documents where no CUDA device is at hand)."""

import pytest
import torch

DEVICE = "mtia_sim"


# -- host index tensors and masks (CUDA copies them to the device: ATen make_info) ---------------
def _index_cases():
    x = torch.arange(24.0).reshape(4, 6)
    idx = torch.tensor([2, 0, 2])
    mask = x > 10
    return x, idx, mask


def test_host_indices_and_masks_index_like_cuda():
    x, idx, mask = _index_cases()
    d = x.to(DEVICE)
    torch.testing.assert_close(d[idx].cpu(), x[idx])
    torch.testing.assert_close(d[mask].cpu(), x[mask])
    torch.testing.assert_close(d[:, idx].cpu(), x[:, idx])
    torch.testing.assert_close(d[idx, idx].cpu(), x[idx, idx])
    assert d[idx].device == d.device


@pytest.mark.parametrize("accumulate", [False, True])
def test_host_indices_write_like_cuda(accumulate):
    x, idx, mask = _index_cases()
    d = x.to(DEVICE)
    values = torch.tensor([1.0, 2.0, 3.0])
    expected = x.clone().index_put_((idx,), values[:, None], accumulate=accumulate)
    got = d.clone().index_put_((idx,), values[:, None].to(DEVICE), accumulate=accumulate)
    torch.testing.assert_close(got.cpu(), expected)
    x[mask] = -1.0
    d[mask] = -1.0
    torch.testing.assert_close(d.cpu(), x)
    x[idx, 1] = torch.tensor(7.0)  # a 0-dim host value rides along, as on CUDA
    d[idx, 1] = torch.tensor(7.0)
    torch.testing.assert_close(d.cpu(), x)


def test_host_index_backward_matches_cpu():
    x, idx, _ = _index_cases()
    leaf_cpu = x.clone().requires_grad_()
    leaf_dev = x.to(DEVICE).requires_grad_()
    (leaf_cpu[idx] * 2).sum().backward()
    (leaf_dev[idx] * 2).sum().backward()
    torch.testing.assert_close(leaf_dev.grad.cpu(), leaf_cpu.grad)


def test_ops_cuda_refuses_host_indices_for_still_refuse():
    x, idx, mask = _index_cases()
    d = x.to(DEVICE)
    with pytest.raises(RuntimeError, match="same device"):
        d.index_select(1, idx)
    with pytest.raises(RuntimeError, match="same device"):
        d.gather(1, idx.expand(4, 3))
    with pytest.raises(RuntimeError, match="same device"):
        d[idx] = torch.ones(3, 6)  # a host value that is not a 0-dim scalar: refused on CUDA


@pytest.mark.parametrize("backend", ["mtia_lab", "aot_eager"])
def test_host_indices_compiled_match_eager(backend):
    torch._dynamo.reset()
    x, idx, mask = _index_cases()

    def fn(a, i, m):
        b = a * 2
        b[m] = 0.0
        return b[i] + 1

    compiled = torch.compile(fn, backend=backend)
    torch.testing.assert_close(compiled(x.to(DEVICE), idx, mask).cpu(), fn(x, idx, mask))


# -- torch.compile of what runs eagerly ------------------------------------------------------------
class _ScaledAttention(torch.nn.Module):
    """The pattern of Mistral's attention: a Python constant made a tensor, moved to x.device."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):
        scale = torch.tensor(8.0).to(x.device)
        scores = self.proj(x) @ x.transpose(-1, -2) / torch.sqrt(scale)
        floor = torch.tensor(torch.finfo(x.dtype).min).to(x.device, x.dtype)
        return torch.maximum(scores, floor).softmax(-1) @ x


def _eval_batchnorm():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU())
    with torch.no_grad():  # running statistics that are not the defaults
        model[1].running_mean.uniform_(-1, 1)
        model[1].running_var.uniform_(0.5, 2)
    return model.eval(), torch.randn(2, 3, 8, 8)


@pytest.mark.parametrize("backend", ["mtia_lab", "aot_eager", "eager"])
@pytest.mark.parametrize(
    "make", [_eval_batchnorm, lambda: (_ScaledAttention(), torch.randn(2, 5, 8))],
    ids=["batchnorm_eval", "constant_to_device"],
)
def test_compile_runs_what_runs_eagerly(backend, make):
    torch._dynamo.reset()
    model, x = make()
    with torch.no_grad():
        expected = model(x)
        got = torch.compile(model.to(DEVICE), backend=backend)(x.to(DEVICE))
    assert got.device.type == DEVICE
    torch.testing.assert_close(got.cpu(), expected)


# -- out of memory: torch.OutOfMemoryError with the device summary, before the host allocates ------
HUGE = 1 << 42  # elements: more than the simulated device and more than any host


@pytest.mark.parametrize(
    "make",
    [
        lambda x: torch.empty(HUGE, device=DEVICE),
        lambda x: torch.zeros(HUGE, device=DEVICE),
        lambda x: torch.randn(HUGE, device=DEVICE),
        lambda x: torch.full((HUGE,), 1.0, device=DEVICE),
        lambda x: torch.empty_strided((HUGE,), (1,), device=DEVICE),
        lambda x: torch.ones(2, HUGE, device=DEVICE),
        lambda x: x.repeat(HUGE),
        lambda x: x.new_empty(HUGE),
        lambda x: x.new_zeros((HUGE, 2)),
        lambda x: x.new_full((HUGE,), 2.0),
        lambda x: x.expand(HUGE, 4).contiguous(),  # size known only once the host computes
        lambda x: torch.outer(x.new_ones(1 << 21), x.new_ones(1 << 21)),  # a native kernel
        lambda x: torch.tensor([0], device=DEVICE).bincount(minlength=HUGE),  # the CPU fallback
        lambda x: torch.randperm(HUGE, device=DEVICE),  # a factory without a device kernel
    ],
)
def test_allocations_too_large_raise_device_oom(make):
    x = torch.ones(4, device=DEVICE)
    before = torch.mtia_sim.memory_stats()["num_ooms"]
    with pytest.raises(torch.OutOfMemoryError, match="mtia_sim:0 out of memory"):
        make(x)
    assert torch.mtia_sim.memory_stats()["num_ooms"] == before + 1
    torch.testing.assert_close(x.cpu(), torch.ones(4))  # the inputs are intact


def test_capacity_is_checked_before_the_host_allocates():
    import mtia_lab

    mtia_lab.configure(memory_capacity=8 << 20)
    try:
        with pytest.raises(torch.OutOfMemoryError, match="8.00 MiB in total"):
            torch.zeros(16 << 20, dtype=torch.uint8, device=DEVICE)
        with pytest.raises(torch.OutOfMemoryError, match="aten::_to_copy"):
            torch.zeros(16 << 20, dtype=torch.uint8).to(DEVICE)
    finally:
        mtia_lab.configure(memory_capacity=mtia_lab.backend.runtime.device_state.DEFAULT_CAPACITY)


def test_a_device_larger_than_the_host_reports_the_host_limit():
    import mtia_lab

    mtia_lab.configure(memory_capacity=1 << 62)
    try:
        with pytest.raises(torch.OutOfMemoryError, match="host cannot back"):
            torch.empty(1 << 58, dtype=torch.uint8, device=DEVICE)
    finally:
        mtia_lab.configure(memory_capacity=mtia_lab.backend.runtime.device_state.DEFAULT_CAPACITY)


# -- resize_, storages, DLPack, skip_data -----------------------------------------------------
@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (2, 3, 4, 6), (1, 2, 2, 2)])
@pytest.mark.parametrize("memory_format", [torch.channels_last, torch.contiguous_format])
def test_resize_honours_memory_format(shape, memory_format):
    cpu = torch.arange(120.0).reshape(2, 3, 4, 5)
    dev = cpu.to(DEVICE)
    cpu.resize_(*shape, memory_format=memory_format)
    dev.resize_(*shape, memory_format=memory_format)
    assert dev.shape == cpu.shape and dev.stride() == cpu.stride()
    kept = min(cpu.numel(), 120)  # the bytes that were there stay (beyond them: uninitialised)
    torch.testing.assert_close(dev.cpu().as_strided((kept,), (1,)), cpu.as_strided((kept,), (1,)))
    template = torch.empty(2, 3, 4, 5).to(memory_format=torch.channels_last)
    for kwargs in ({}, {"memory_format": torch.channels_last}):
        cpu_as, dev_as = torch.ones(3), torch.ones(3, device=DEVICE)
        cpu_as.resize_as_(template, **kwargs)
        dev_as.resize_as_(template.to(DEVICE), **kwargs)
        assert dev_as.stride() == cpu_as.stride()


def test_storage_methods_are_generated_and_copy_to_the_device():
    x = torch.arange(4.0, device=DEVICE)
    assert x.untyped_storage().is_mtia_sim and not torch.UntypedStorage(4).is_mtia_sim
    host = torch.arange(6.0).untyped_storage()
    for device, index in ((None, 0), (1, 1), ("mtia_sim:1", 1)):
        storage = host.mtia_sim(device)
        assert storage.device == torch.device(DEVICE, index) and storage.is_mtia_sim
        assert storage.mtia_sim(index) is storage  # already there: no copy, as storage.cuda()
        with torch.mtia_sim.device(index):
            bound = torch.empty(0, device=DEVICE).set_(storage)
        torch.testing.assert_close(bound.cpu(), torch.arange(6.0))
        torch.testing.assert_close(torch.empty(0).set_(storage.cpu()), torch.arange(6.0))
    typed = torch.arange(3.0).storage().mtia_sim()
    assert typed.is_mtia_sim and typed.dtype == torch.float32
    with pytest.raises(RuntimeError, match="does not exist"):
        host.mtia_sim(7)


@pytest.mark.parametrize(
    "export",
    [
        lambda x: torch.from_dlpack(x),
        lambda x: torch.utils.dlpack.to_dlpack(x),
        lambda x: torch.to_dlpack(x),
        lambda x: x.__dlpack__(),
    ],
)
def test_dlpack_export_is_refused_clearly(export):
    x = torch.arange(4.0, device=DEVICE)
    with pytest.raises(BufferError, match=r"cannot be exchanged through DLPack.*x\.cpu\(\)"):
        export(x)
    # the way round it names works, and host tensors still go through DLPack
    back = torch.from_dlpack(x.cpu()).to(DEVICE)
    torch.testing.assert_close(back.cpu(), torch.arange(4.0))
    assert torch.from_dlpack(torch.utils.dlpack.to_dlpack(torch.arange(3))).tolist() == [0, 1, 2]


def test_skip_data_saves_device_tensors_as_cuda_does(tmp_path):
    """PyTorch refuses skip_data only for backends without storages (xla, mtia, storage-less
    PrivateUse1); CUDA tensors are saved without their bytes. Device tensors here have storages
    and the CUDA file format, so they behave as CUDA's: same file as the CPU tensor's, no bytes."""
    cpu = torch.randn(1000)
    files = {}
    for name, tensor in (("cpu", cpu), ("dev", cpu.to(DEVICE))):
        files[name] = tmp_path / f"{name}.pt"
        with torch.serialization.skip_data():
            torch.save({"w": tensor, "view": tensor[10:20]}, files[name])
    assert files["dev"].stat().st_size == files["cpu"].stat().st_size
    with torch.serialization.skip_data():
        loaded = torch.load(files["dev"], weights_only=True)
    assert loaded["w"].device == torch.device(DEVICE, 0) and loaded["w"].shape == (1000,)
    assert loaded["view"].untyped_storage().nbytes() == loaded["w"].untyped_storage().nbytes()
    plain = torch.load(files["dev"], map_location="cpu", weights_only=True)
    assert plain["w"].shape == (1000,) and plain["view"].storage_offset() == 10


def test_large_results_of_small_views_are_refused_before_the_host_computes():
    import mtia_lab

    mtia_lab.configure(memory_capacity=8 << 20)
    try:
        row = torch.ones(1 << 10, device=DEVICE)  # 4 KiB
        big = row.expand(4096, 1 << 10)  # a 16 MiB view of it
        for make in (big.clone, big.contiguous, lambda: torch.zeros_like(big),
                     lambda: torch.empty_like(big, dtype=torch.float64)):
            with pytest.raises(torch.OutOfMemoryError, match="8.00 MiB in total"):
                make()
    finally:
        mtia_lab.configure(memory_capacity=mtia_lab.backend.runtime.device_state.DEFAULT_CAPACITY)


@pytest.mark.parametrize("backend", ["mtia_lab", "eager"])
def test_compiled_code_reports_device_oom(backend):
    """(aot_eager runs PyTorch's graph on the inner host tensors, outside mtia_lab: a host
    allocation failure there stays PyTorch's CPU RuntimeError.)"""
    torch._dynamo.reset()
    x = torch.ones(4, device=DEVICE)
    with pytest.raises(torch.OutOfMemoryError, match="mtia_sim:0 out of memory"):
        torch.compile(lambda a: a.repeat(HUGE) + 1, backend=backend)(x)


def test_indices_on_another_device_are_copied_like_make_info_does():
    x, idx, mask = _index_cases()
    d = x.to(f"{DEVICE}:0")
    torch.testing.assert_close(d[idx.to(f"{DEVICE}:1")].cpu(), x[idx])
    d[mask.to(f"{DEVICE}:1")] = 5.0
    x[mask] = 5.0
    torch.testing.assert_close(d.cpu(), x)
    with pytest.raises(RuntimeError, match="same device"):
        d.index_select(0, idx.to(f"{DEVICE}:1"))  # only advanced indexing moves indices


CONSTANT_PATTERNS = {
    "tensor_on_device": lambda a: a * torch.tensor(2.0, device=a.device),
    "as_tensor": lambda a: a + torch.as_tensor(3.0, device=a.device),
    "new_tensor": lambda a: a - a.new_tensor(1.5),
    "masked_fill_constant": lambda a: a.masked_fill(a > 0, torch.tensor(0.5).to(a.device)),
}


@pytest.mark.parametrize("backend", ["mtia_lab", "aot_eager", "eager"])
@pytest.mark.parametrize("name", list(CONSTANT_PATTERNS))
def test_small_constants_on_the_device_compile(backend, name):
    torch._dynamo.reset()
    fn, x = CONSTANT_PATTERNS[name], torch.randn(4, 4)
    got = torch.compile(fn, backend=backend)(x.to(DEVICE))
    assert got.device.type == DEVICE
    torch.testing.assert_close(got.cpu(), fn(x))
