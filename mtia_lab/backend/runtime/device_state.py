"""The simulated devices' runtime state: one `DeviceState` per device, and the switches.

This is the only mutable global state of the backend. Everything that a real driver would own
(memory, the random generator, the chip profile, later streams and the clock) hangs off a
`DeviceState`; the device module (device_module.py) is a thin PyTorch-shaped API over it.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from .allocator import CachingAllocator
from .profile import DEFAULT_PROFILE, PROFILES, ChipProfile, GiB

DEFAULT_DEVICE_COUNT = 2
# The most devices a process can have: device tensors are made with one torch.device per index,
# made once at registration (tensor.device_of), and torch.device indices are small ints.
MAX_DEVICES = 64
DEFAULT_CAPACITY = 2 * GiB  # per device; the profile's real DRAM size is only reported
# torch.cuda's words, with the device's name.
FORK_MESSAGE = ("Cannot re-initialize mtia_sim in forked subprocess. To use mtia_sim with "
                "multiprocessing, you must use the 'spawn' start method")


class BadForkError(RuntimeError):
    """The device used in a child forked after the parent initialized it (a RuntimeError, as
    CUDA's)."""


class _UnusableAfterFork(Sequence):
    """`Runtime.devices` in a child forked after the device was initialized. A CUDA context
    does not survive a fork, so every use of the device in the child fails there; here the
    device state would be a silent copy of the parent's, so every access to it raises CUDA's
    error instead. The count stays readable, as `torch.cuda.device_count()` in a bad fork."""

    def __init__(self, count: int) -> None:
        self._count = count

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index):
        raise BadForkError(FORK_MESSAGE)


@dataclass
class DeviceState:
    index: int  # the index this process uses: mtia_sim:<index>
    profile: ChipProfile
    allocator: CachingAllocator
    physical_index: int = -1  # the simulated chip behind it (see MTIA_SIM_VISIBLE_DEVICES)
    generator: torch.Generator = field(default_factory=torch.Generator)
    initial_seed: int = 0
    now_us: float = 0.0  # the device's simulated "now": every synchronized work is done by then
    streams: weakref.WeakSet = field(default_factory=weakref.WeakSet)
    default_stream: object = None

    def __post_init__(self) -> None:
        self.initial_seed = self.generator.initial_seed()
        if self.physical_index < 0:
            self.physical_index = self.index


class Runtime:
    """All simulated devices of this process, and the settings that apply to them."""

    def __init__(self) -> None:
        self.profile: ChipProfile = DEFAULT_PROFILE
        self.capacity: int = _env_int("MTIA_SIM_MEMORY_CAPACITY", DEFAULT_CAPACITY, 1)
        count = _env_int("MTIA_SIM_DEVICE_COUNT", DEFAULT_DEVICE_COUNT, 1, MAX_DEVICES)
        # Like CUDA_VISIBLE_DEVICES: "1" makes simulated chip 1 this process's mtia_sim:0. It is
        # how one process drives one chip, e.g. for autograd on a chip other than the first
        # (PyTorch 2.13's Python device guard reports a single device to the autograd engine).
        visible = os.environ.get("MTIA_SIM_VISIBLE_DEVICES", "").strip()
        self.visible = [int(v) for v in visible.split(",") if v.strip()] or None
        if self.visible is not None:
            count = len(self.visible)
        self.devices: list[DeviceState] = []
        self._thread = threading.local()  # holds `current_index`, one per thread
        self.strict = False  # True: an op without a native kernel raises instead of falling back
        self.record_alloc_source = True  # attribute each allocation to the user's source line
        # the device was used (PyTorch calls _lazy_init at first use). A rank that our launcher
        # started (distributed/spawn.py) starts with its one chip chosen for it, as a torchrun
        # script's set_device(local_rank) chooses one: DeviceMesh then keeps that mtia_sim:0
        # instead of setting mtia_sim:<LOCAL_RANK>, which this process does not have.
        self.initialized = os.environ.get("MTIA_SIM_LAUNCHED_RANK") == "1"
        self.in_bad_fork = False  # this process is a fork of one that had initialized it
        self.set_device_count(count)

    def lazy_init(self) -> None:
        """The first use of the device in this process (torch.mtia_sim._lazy_init, which
        PyTorch calls at the first device tensor, and init()). Refused in a bad fork, as
        torch.cuda refuses it."""
        if self.in_bad_fork:
            raise BadForkError(FORK_MESSAGE)
        self.initialized = True

    def after_fork_in_child(self) -> None:
        """os.register_at_fork's child hook: a child of a process that initialized the device
        cannot use it (CUDA's poison_fork); one forked before the first use can."""
        if self.initialized:
            self.in_bad_fork = True
            self.devices = _UnusableAfterFork(len(self.devices))

    @property
    def current_index(self) -> int:
        """This thread's current device. Per thread, as CUDA's is: threads that switch devices
        do not move each other's tensors, and a new thread starts on device 0."""
        return getattr(self._thread, "index", 0)

    @current_index.setter
    def current_index(self, index: int) -> None:
        self._thread.index = index

    def set_device_count(self, count: int) -> None:
        _check_int("device_count", count, 1, MAX_DEVICES)
        while len(self.devices) < count:
            index = len(self.devices)
            physical = self.visible[index] if self.visible and index < len(self.visible) else index
            self.devices.append(
                DeviceState(
                    index, self.profile, CachingAllocator(index, self.capacity, physical), physical
                )
            )
        if len(self.devices) > count:
            busy = [d.index for d in self.devices[count:] if d.allocator.allocated_bytes]
            if busy:
                raise RuntimeError(
                    f"cannot remove mtia_sim devices {busy}: tensors still live on them"
                )
            del self.devices[count:]
        self.current_index = min(self.current_index, count - 1)

    def device(self, index: int | None = None) -> DeviceState:
        if index is None or index < 0:
            index = self.current_index
        if index >= len(self.devices):
            raise RuntimeError(
                f"The device index is out of range: mtia_sim:{index} does not exist: this "
                f"process has {len(self.devices)} simulated device(s) (valid indices "
                f"0..{len(self.devices) - 1}). Ask for more with "
                "mtia_lab.configure(device_count=N) or MTIA_SIM_DEVICE_COUNT=N."
            )
        return self.devices[index]


def _check_int(name: str, value, low: int, high: int | None = None) -> None:
    """A clear error for a setting that is not an int in [low, high] (bools and floats too)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {value!r} ({type(value).__name__})")
    if value < low or (high is not None and value > high):
        accepted = f"from {low} to {high}" if high is not None else f"at least {low}"
        raise ValueError(f"{name} must be {accepted}, got {value}")


def _env_int(variable: str, default: int, low: int, high: int | None = None) -> int:
    """An int setting from the environment, with an error naming the variable."""
    text = os.environ.get(variable, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{variable}={text!r}: expected a whole number") from None
    _check_int(variable, value, low, high)
    return value


def _check_bool(name: str, value) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r} ({type(value).__name__})")


def _profile(profile) -> ChipProfile:
    """A ChipProfile, or the name of a known one ("mtia_v1", "mtia_v2")."""
    if isinstance(profile, ChipProfile):
        return profile
    if isinstance(profile, str) and profile in PROFILES:
        return PROFILES[profile]
    raise ValueError(
        f"profile must be a ChipProfile or one of {sorted(PROFILES)}, got {profile!r}"
    )


RUNTIME = Runtime()
os.register_at_fork(after_in_child=RUNTIME.after_fork_in_child)


def configure(
    *,
    device_count: int | None = None,
    memory_capacity: int | None = None,
    profile: ChipProfile | str | None = None,
    strict: bool | None = None,
    record_alloc_source: bool | None = None,
) -> None:
    """Change the simulated devices. Capacity and profile apply to every device. Every argument
    is checked before anything changes."""
    if device_count is not None:
        _check_int("device_count", device_count, 1, MAX_DEVICES)
    if memory_capacity is not None:
        _check_int("memory_capacity (bytes)", memory_capacity, 1)
    if profile is not None:
        profile = _profile(profile)
    for name, value in (("strict", strict), ("record_alloc_source", record_alloc_source)):
        if value is not None:
            _check_bool(name, value)
    if device_count is not None:
        RUNTIME.set_device_count(device_count)
    if memory_capacity is not None:
        RUNTIME.capacity = memory_capacity
        for device in RUNTIME.devices:
            device.allocator.capacity = memory_capacity
    if profile is not None:
        RUNTIME.profile = profile
        for device in RUNTIME.devices:
            device.profile = profile
    if strict is not None:
        RUNTIME.strict = strict
    if record_alloc_source is not None:
        RUNTIME.record_alloc_source = record_alloc_source
