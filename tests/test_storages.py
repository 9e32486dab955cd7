"""Storages made directly on the device: a clear error, never a segfault (fresh process: a
regression kills only the child)."""

from __future__ import annotations

from fresh_python import run_python

CODE = r'''
import warnings, torch, mtia_lab
warnings.simplefilter("ignore")
calls = [
    lambda: torch.UntypedStorage(4, device="mtia_sim"),
    lambda: torch.UntypedStorage(device="mtia_sim:1"),
    lambda: torch.UntypedStorage([1, 2], device=torch.device("mtia_sim")),
    lambda: torch.TypedStorage(4, device="mtia_sim", dtype=torch.float),
    lambda: torch.UntypedStorage(4).to(device="mtia_sim"),
    lambda: torch.empty(4, device="mtia_sim").untyped_storage().clone(),
    lambda: torch.UntypedStorage._new_shared(4, device="mtia_sim"),
]
for call in calls:
    try:
        call()
    except RuntimeError as error:
        assert "torch.empty(n, dtype=torch.uint8, device='mtia_sim')" in str(error), error
        print("REFUSED")
# Host storages are untouched, and torch.load still puts storages on the device.
assert torch.UntypedStorage(4).nbytes() == 4 and torch.UntypedStorage([1, 2]).tolist() == [1, 2]
import io
buffer = io.BytesIO()
torch.save(torch.arange(3.0), buffer)
buffer.seek(0)
assert torch.load(buffer, map_location="mtia_sim").cpu().tolist() == [0.0, 1.0, 2.0]
print("ALIVE")
'''


def test_storages_on_the_device_are_refused_clearly():
    result = run_python(CODE)
    assert result.returncode == 0, (result.returncode, result.stderr[-2000:])
    assert result.stdout.count("REFUSED") == 7 and "ALIVE" in result.stdout, result.stdout
