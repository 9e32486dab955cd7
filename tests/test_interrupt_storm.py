"""A storm of KeyboardInterrupts during device ops (one at the n-th line the backend runs, for
every n): afterwards nothing is allocated that no tensor holds, and the allocator's books
agree with its blocks."""

from __future__ import annotations

import gc
import os
import sys

import torch

import mtia_lab.backend as backend
from mtia_lab.backend import RUNTIME

_BACKEND_DIR = os.path.dirname(backend.__file__)
_ALLOCATOR_DIR = os.path.join(_BACKEND_DIR, "runtime", "allocator")


# The allocator's entry points take and give back its lock and flags; as in
# test_allocator_safety.py, an interrupt is assumed not to split those few lines (Python
# cannot make a lock release interrupt-proof). Every other line of the backend is fair game.
_ENTRY_POINTS = {"malloc", "free", "_drain", "_settle", "_guarded", "_really_busy", "_frame_key"}


class _InterruptAt:
    """A trace function raising KeyboardInterrupt at the n-th line run in mtia_lab/backend/."""

    def __init__(self, n: int) -> None:
        self.left = n

    def __call__(self, frame, event, arg):
        code = frame.f_code
        if not code.co_filename.startswith(_BACKEND_DIR):
            return None
        if code.co_filename.startswith(_ALLOCATOR_DIR) and code.co_name in _ENTRY_POINTS:
            return None
        return self._line

    def _line(self, frame, event, arg):
        if event == "line" and self.left > 0:
            self.left -= 1
            if self.left == 0:
                raise KeyboardInterrupt
        return self._line


def _ops(x, y):
    device = x.device
    return [
        lambda: (x @ y).relu().sum(),
        lambda: torch.randn(100, device=device) + 1,
        lambda: torch.cat([x, y]),
        lambda: torch.tensor([1.0, 2.0]).to(device),
        lambda: x.nonzero(),
    ]


def test_interrupts_anywhere_in_ops_leave_no_memory_behind(device, clean_memory, monkeypatch):
    # An interrupt inside a __del__ is "ignored" (reported, then dropped); pytest's own hook
    # would keep it, and the frames it holds, until the test ends.
    ignored = []
    monkeypatch.setattr(sys, "unraisablehook", lambda info: ignored.append(info.exc_type))
    allocator = RUNTIME.devices[device.index].allocator
    x, y = torch.randn(16, 16, device=device), torch.randn(16, 16, device=device)
    held = torch.mtia_sim.memory_allocated(device)
    for n in range(1, 120, 9):
        for op in _ops(x, y):
            sys.settrace(_InterruptAt(n))
            try:
                op()
            except KeyboardInterrupt:
                pass
            finally:
                sys.settrace(None)
        gc.collect()
        assert torch.mtia_sim.memory_allocated(device) == held, f"after an interrupt at {n}"
        assert allocator.consistency_errors() == []
    assert torch.equal((x + 0).cpu(), x.cpu())  # the device still works


class _InterruptInDel(_InterruptAt):
    """Raise KeyboardInterrupt at the n-th line of DeviceStorage.__del__ (a storage dying while
    a signal arrives: Python reports the exception from __del__ and drops it)."""

    def __call__(self, frame, event, arg):
        if frame.f_code.co_name == "__del__" and frame.f_code.co_filename.endswith("tensor.py"):
            return self._line
        return None


def test_an_interrupt_inside_a_dying_storage_still_frees_its_memory(device, clean_memory,
                                                                   monkeypatch):
    monkeypatch.setattr(sys, "unraisablehook", lambda info: None)
    allocator = RUNTIME.devices[device.index].allocator
    before = torch.mtia_sim.memory_allocated(device)
    for n in range(1, 16):
        t = torch.ones(256, device=device)
        sys.settrace(_InterruptInDel(n))
        try:
            del t
        finally:
            sys.settrace(None)
        gc.collect()
        assert torch.mtia_sim.memory_allocated(device) == before, f"interrupt at line {n}"
        assert allocator.consistency_errors() == []


def test_a_storage_in_a_collected_cycle_is_freed_once(device, clean_memory, monkeypatch):
    """The garbage collector runs weak-reference callbacks before __del__: the block must be
    given back once (no double free), by whichever comes first."""
    ignored = []  # errors raised in __del__ or callbacks ("Exception ignored in ...")
    monkeypatch.setattr(sys, "unraisablehook", lambda info: ignored.append(info.exc_value))
    before = torch.mtia_sim.memory_allocated(device)
    for _ in range(3):
        t = torch.ones(64, device=device)
        holder = {"t": t}
        holder["self"] = holder
        t.holder = holder  # a cycle through the tensor
        del t, holder
        gc.collect()
    assert ignored == []
    assert torch.mtia_sim.memory_allocated(device) == before
    assert RUNTIME.devices[device.index].allocator.consistency_errors() == []
