"""torch.save / torch.load of device tensors: layouts, shared storages, map_location, memory.

The oracle is PyTorch on the CPU: the same objects saved and loaded on the host must come back
with the same values, sizes, strides, offsets and storage sharing as the device ones.
"""

from __future__ import annotations

import gc
import io
import pickle
import zipfile

import pytest
import torch
from fresh_python import run_python

import mtia_lab
from mtia_lab.backend.runtime.allocator import round_size

D0, D1 = torch.device("mtia_sim", 0), torch.device("mtia_sim", 1)


def _layouts(device) -> dict[str, torch.Tensor]:
    """The same family of tensors and views, built with the same ops on `device`."""
    base = torch.arange(2 * 3 * 4 * 5, dtype=torch.float32, device=device).reshape(2, 3, 4, 5)
    return {
        "contiguous": base,
        "transposed": base.transpose(1, 3),
        "sliced_offset": base[1, 1:, ::2, 2:4],
        "channels_last": base.contiguous(memory_format=torch.channels_last),
        "as_strided": base.flatten().as_strided((3, 4), (7, 2), 3),
        "scalar": torch.tensor(2.5, device=device),
        "empty": torch.empty(0, 3, device=device),
        "bf16": torch.linspace(-2, 2, 7, device=device).to(torch.bfloat16),
        "int64_t": torch.arange(12, device=device).reshape(3, 4).t(),
        "bool": torch.arange(6, device=device) % 2 == 0,
    }


def _round_trip(obj, **load_kwargs):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return torch.load(buffer, **load_kwargs)


def _same_tensor(got: torch.Tensor, expected: torch.Tensor, device) -> None:
    assert got.device == device
    assert got.dtype == expected.dtype
    assert got.shape == expected.shape
    assert got.stride() == expected.stride()
    assert got.storage_offset() == expected.storage_offset()
    assert torch.equal(got.cpu(), expected.cpu())


def _storage_groups(tensors: dict[str, torch.Tensor]) -> list[set[str]]:
    """Which names share one storage (by the storage's identity on its device)."""
    groups: dict[int, set[str]] = {}
    for name, t in tensors.items():
        key = id(mtia_lab.storage_of(t)) if t.device.type == "mtia_sim" else (
            t.untyped_storage()._cdata
        )
        groups.setdefault(key, set()).add(name)
    return sorted(groups.values(), key=sorted)


@pytest.mark.parametrize("name", list(_layouts("cpu")))
def test_round_trip_keeps_layout_like_cpu(name):
    on_device = _layouts(D0)[name]
    on_host = _layouts("cpu")[name]
    _same_tensor(_round_trip(on_device), _round_trip(on_host), D0)


def test_views_saved_together_share_one_storage_like_cpu():
    saved_device, saved_host = _layouts(D0), _layouts("cpu")
    loaded, loaded_host = _round_trip(saved_device), _round_trip(saved_host)
    assert _storage_groups(loaded) == _storage_groups(loaded_host)
    assert {"contiguous", "transposed", "sliced_offset", "as_strided"} in _storage_groups(loaded)
    # Sharing is real: a write through one view shows in the others, as on the host.
    for tensors in (loaded, loaded_host):
        tensors["contiguous"][1, 2, 2, 3] = -7.0
    for name in ("transposed", "sliced_offset", "as_strided"):
        assert torch.equal(loaded[name].cpu(), loaded_host[name])


def test_file_holds_each_storage_once_like_cpu():
    """A view is saved with its whole storage, once, exactly as PyTorch does on the host."""

    def records(obj) -> list[int]:
        buffer = io.BytesIO()
        torch.save(obj, buffer)
        with zipfile.ZipFile(buffer) as archive:
            return sorted(i.file_size for i in archive.infolist() if "/data/" in i.filename)

    assert records(_layouts(D0)) == records(_layouts("cpu"))
    base = torch.randn(64, 64, device=D0)
    assert records([base[:2], base[5:9].t()]) == [64 * 64 * 4]


@pytest.mark.parametrize("device", [D0, D1], ids=["mtia_sim:0", "mtia_sim:1"])
def test_device_index_and_requires_grad_are_kept(device):
    x = torch.randn(3, 4, device=device, requires_grad=True)
    loaded = _round_trip({"x": x, "y": x.detach()[1:]})
    assert loaded["x"].device == device and loaded["y"].device == device
    assert loaded["x"].requires_grad and loaded["x"].is_leaf
    assert not loaded["y"].requires_grad
    assert torch.equal(loaded["x"].detach().cpu(), x.detach().cpu())
    if device.index != 0:
        return  # autograd runs on mtia_sim:0 only (README, "Known limits")
    (loaded["x"] * 2).sum().backward()
    assert torch.equal(loaded["x"].grad.cpu(), torch.full((3, 4), 2.0))


def test_state_dict_of_linear_and_layer_norm_round_trips():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16)).to(D0)
    state = _round_trip(model.state_dict())
    assert {k: v.device for k, v in state.items()} == dict.fromkeys(state, D0)
    fresh = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16)).to(D0)
    fresh.load_state_dict(state)
    x = torch.randn(4, 8)
    torch.testing.assert_close(fresh(x.to(D0)).cpu(), model(x.to(D0)).cpu(), rtol=0, atol=0)
    host = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16))
    host.load_state_dict(_round_trip(model.state_dict(), map_location="cpu"))
    torch.testing.assert_close(host(x), model(x.to(D0)).cpu())


def test_whole_module_round_trips_with_parameters():
    model = torch.nn.Linear(3, 2).to(D1)
    loaded = _round_trip(model, weights_only=False)
    for name, p in loaded.named_parameters():
        assert isinstance(p, torch.nn.Parameter) and p.requires_grad and p.device == D1
        assert torch.equal(p.detach().cpu(), getattr(model, name).detach().cpu())


@pytest.mark.parametrize(
    "map_location,expected",
    [
        ("cpu", torch.device("cpu")),
        (torch.device("cpu"), torch.device("cpu")),
        (lambda storage, location: storage, torch.device("cpu")),  # the classic "to host"
        (lambda storage, location: None, D0),  # None: keep the saved location
        ("mtia_sim:1", D1),
        (D1, D1),
        ({"mtia_sim:0": "mtia_sim:1"}, D1),
        ({"mtia_sim:1": "mtia_sim:0"}, D0),  # no entry for the saved location: unchanged
    ],
    ids=["str-cpu", "device-cpu", "callable-host", "callable-none", "str-1", "device-1",
         "dict-hit", "dict-miss"],
)
def test_map_location(map_location, expected):
    saved = _layouts(D0)
    loaded = _round_trip(saved, map_location=map_location)
    loaded_host = _round_trip(_layouts("cpu"))
    for name, tensor in loaded.items():
        _same_tensor(tensor, loaded_host[name], expected)
    assert _storage_groups(loaded) == _storage_groups(loaded_host)


def test_bare_device_name_means_the_current_device():
    x = torch.randn(5, device=D0)
    with torch.mtia_sim.device(1):
        loaded = _round_trip(x, map_location="mtia_sim")
    assert loaded.device == D1
    assert torch.equal(loaded.cpu(), x.cpu())


def test_from_device_1_to_device_0_and_back():
    x = torch.randn(4, 4, device=D1).t()
    to0 = _round_trip(x, map_location={"mtia_sim:1": "mtia_sim:0"})
    back = _round_trip(to0, map_location={"mtia_sim:0": "mtia_sim:1"})
    _same_tensor(to0, x, D0)
    _same_tensor(back, x, D1)


def test_missing_device_index_is_a_clear_error():
    x = torch.randn(3, device=D1)
    with pytest.raises(RuntimeError, match=r"mtia_sim:7.*map_location"):
        _round_trip(x, map_location="mtia_sim:7")


@pytest.mark.parametrize("map_location", ["mtia_sim:1", {"cpu": "mtia_sim:1"}, D1])
def test_cpu_checkpoint_loads_onto_the_device(map_location):
    loaded_host = _round_trip(_layouts("cpu"))
    loaded = _round_trip(_layouts("cpu"), map_location=map_location)
    for name, tensor in loaded.items():
        _same_tensor(tensor, loaded_host[name], D1)
    assert _storage_groups(loaded) == _storage_groups(loaded_host)


def test_set_storage_on_device_refuses_foreign_storages():
    x = torch.empty(0, device=D0)
    with pytest.raises(NotImplementedError, match="torch.load"):
        x.set_(torch.UntypedStorage(16), 0, (4,), (1,))


def test_plain_pickle_keeps_device_and_values():
    x = torch.randn(2, 5, device=D1).t()
    back = pickle.loads(pickle.dumps(x))
    _same_tensor(back, x, D1)


def test_legacy_format_round_trips():
    x = torch.randn(3, 4, device=D0)
    buffer = io.BytesIO()
    torch.save([x, x[1:]], buffer, _use_new_zipfile_serialization=False)
    buffer.seek(0)
    a, b = torch.load(buffer, weights_only=False)
    _same_tensor(a, x, D0)
    _same_tensor(b, x[1:], D0)


def test_legacy_format_frees_device_memory(clean_memory):
    before = torch.mtia_sim.memory_allocated(0)
    buffer = io.BytesIO()
    torch.save(torch.randn(100, 10, device=D0), buffer, _use_new_zipfile_serialization=False)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    assert torch.mtia_sim.memory_allocated(0) - before == round_size(100 * 10 * 4)
    del loaded
    gc.collect()
    assert torch.mtia_sim.memory_allocated(0) == before


def test_mmap_load(tmp_path):
    path = tmp_path / "t.pt"
    x = torch.randn(16, 16, device=D0)
    torch.save({"x": x, "row": x[3]}, path)
    loaded = torch.load(path, mmap=True)
    _same_tensor(loaded["x"], x, D0)
    loaded["x"][3, 0] = 42.0
    assert loaded["row"][0].item() == 42.0


def test_saved_file_loads_on_cpu_in_plain_pytorch(tmp_path):
    path = tmp_path / "state.pt"
    model = torch.nn.Linear(4, 3).to(D1)
    torch.save(model.state_dict(), path)
    expected = {k: v.cpu() for k, v in model.state_dict().items()}
    torch.save(expected, tmp_path / "expected.pt")
    # The file names only PyTorch's own rebuild functions: plain torch loads it, with the default
    # weights_only=True, and never imports mtia_lab.
    script = (
        "import sys, torch\n"
        f"state = torch.load({str(path)!r}, map_location='cpu')\n"
        f"expected = torch.load({str(tmp_path / 'expected.pt')!r})\n"
        "assert 'mtia_lab' not in sys.modules\n"
        "assert all(v.device.type == 'cpu' for v in state.values())\n"
        "assert all(torch.equal(state[k], expected[k]) for k in expected)\n"
        "print('ok', sorted(state))\n"
    )
    done = run_python(script)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok ['bias', 'weight']"


def test_memory_accounting_after_load(clean_memory):
    x = torch.randn(300, 40, device=D0)
    saved = {"x": x, "x_t": x.t(), "row": x[5], "small": torch.ones(3, device=D0)}
    buffer = io.BytesIO()
    torch.save(saved, buffer)
    del saved, x
    gc.collect()
    before = torch.mtia_sim.memory_allocated(0)
    buffer.seek(0)
    on_host = torch.load(buffer, map_location="cpu")
    assert torch.mtia_sim.memory_allocated(0) == before  # nothing landed on the device
    buffer.seek(0)
    loaded = torch.load(buffer)
    # One block per saved storage: the three views of x count once.
    expected = round_size(300 * 40 * 4) + round_size(3 * 4)
    assert torch.mtia_sim.memory_allocated(0) - before == expected
    blocks = {id(mtia_lab.storage_of(t)) for t in loaded.values()}
    assert len(blocks) == 2
    del loaded["x"], loaded["x_t"]
    gc.collect()
    assert torch.mtia_sim.memory_allocated(0) - before == expected  # "row" keeps the storage
    del loaded, on_host
    gc.collect()
    assert torch.mtia_sim.memory_allocated(0) == before


def test_load_needs_no_cpu_fallback():
    saved = _layouts(D0)
    with mtia_lab.strict():
        loaded = _round_trip(saved)
        from_host = _round_trip(_layouts("cpu"), map_location="mtia_sim:0")
    for name, tensor in loaded.items():
        _same_tensor(tensor, saved[name], D0)
        _same_tensor(from_host[name], saved[name], D0)
