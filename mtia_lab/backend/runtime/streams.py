"""Streams and events on the simulated clock of each device.

A stream is an ordered queue of device work. Here each stream keeps `clock_us`: the simulated
time at which the last work queued on it finishes. Work queued on a stream starts when the stream
is free (and after whatever it was told to wait for) and advances it by the work's simulated
duration (see cost.py). Host code never waits in wall time; `synchronize` only moves the device's
notion of "now" forward to when everything queued has finished.
"""

from __future__ import annotations

import itertools
import threading
from typing import NamedTuple

import torch

from ..._compat import DEVICE_NAME, PRIVATEUSE1_DEVICE_TYPE, NativeEvent, NativeStream
from .device_state import RUNTIME

_stream_ids = itertools.count(1)
_event_ids = itertools.count(1)
_local = threading.local()
# What torch.Stream / torch.Event report as `device_type`: the DeviceType enum's value.
DEVICE_TYPE = PRIVATEUSE1_DEVICE_TYPE


class Stream(NativeStream):
    """An ordered queue of work on one simulated device (shaped like torch.cuda.Stream).

    A `torch.Stream` too, as torch.cuda.Stream is: its device index and id are PyTorch's own
    fields, so `torch.accelerator.current_stream()` is a torch.Stream that names its device."""

    def __new__(cls, device=None, priority: int = 0) -> Stream:
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise TypeError(f"Stream(priority): expected an int, got {priority!r} "
                            f"({type(priority).__name__})")
        index = _device_index(device)  # None or a negative int: the current device, as on CUDA
        RUNTIME.device(index)  # a clear error for a device that does not exist
        stream_id = 0 if getattr(_local, "creating_default", False) else next(_stream_ids)
        return super().__new__(cls, stream_id=stream_id, device_index=index,
                               device_type=DEVICE_TYPE)

    def __init__(self, device=None, priority: int = 0) -> None:
        self.priority = priority
        state = RUNTIME.device(self.device_index)
        self.clock_us = state.now_us
        state.streams.add(self)

    @property
    def device(self) -> torch.device:
        return torch.device(DEVICE_NAME, self.device_index)

    def __enter__(self) -> Stream:
        """`with stream:` queues the block's work on this stream (as torch.Stream does)."""
        context = StreamContext(self)
        context.__enter__()
        self.__dict__.setdefault("_contexts", []).append(context)
        return self

    def __exit__(self, *exc) -> None:
        self.__dict__["_contexts"].pop().__exit__(*exc)

    def enqueue(self, duration_us: float, not_before_us: float = 0.0) -> tuple[float, float]:
        """Queue `duration_us` of work; returns its (start, end) on the simulated clock."""
        start = max(self.clock_us, not_before_us)
        self.clock_us = start + duration_us
        return start, self.clock_us

    def wait_event(self, event: Event) -> None:
        """Work queued after this waits until the event's recorded work has finished."""
        _require_event(event, "Stream.wait_event(event)")
        if event.recorded_us is not None:
            self.clock_us = max(self.clock_us, event.recorded_us)

    def wait_stream(self, stream: Stream) -> None:
        require_stream(stream, "Stream.wait_stream(stream)")
        self.clock_us = max(self.clock_us, stream.clock_us)

    def record_event(self, event: Event | None = None) -> Event:
        event = event or Event()
        event.record(self)
        return event

    def query(self) -> bool:
        return self.clock_us <= RUNTIME.device(self.device_index).now_us

    def synchronize(self) -> None:
        state = RUNTIME.device(self.device_index)
        state.now_us = max(state.now_us, self.clock_us)

    def __eq__(self, other) -> bool:
        return isinstance(other, Stream) and other is self

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        return f"{super().__repr__()} (simulated clock at {self.clock_us:.3f} us)"


class Event(NativeEvent):
    """A marker in a stream's queue (shaped like torch.cuda.Event); times are simulated.
    A `torch.Event` too; its device and id are kept here (PyTorch's are set by C++ only)."""

    def __new__(cls, enable_timing: bool = False, blocking: bool = False,
                interprocess: bool = False) -> Event:
        return super().__new__(cls, torch.device(DEVICE_NAME), enable_timing=enable_timing)

    def __init__(
        self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False
    ):
        self.enable_timing = enable_timing
        self.recorded_us: float | None = None
        self.device_index: int | None = None
        self._event_id = 0  # as CUDA: 0 until first recorded (the event is created lazily)
        self.generic = False  # made by torch.Event(...): answers as torch.Event does

    @property
    def event_id(self) -> int:
        return self._event_id

    @property
    def device(self) -> torch.device | None:
        """The device of the stream it was recorded on. Before: None (as torch.cuda.Event), or
        the device type without an index for one made by torch.Event (as torch.Event)."""
        if self.device_index is None:
            return torch.device(DEVICE_NAME) if self.generic else None
        return torch.device(DEVICE_NAME, self.device_index)

    def record(self, stream: Stream | None = None) -> None:
        if stream is not None:
            require_stream(stream, "Event.record(stream)")
        stream = stream or current_stream()
        if self.device_index is not None and self.device_index != stream.device_index:
            raise RuntimeError(
                f"Event was recorded on {self.device} and cannot be recorded on stream of "
                f"{stream.device}: make one event per device (as CUDA requires)."
            )
        self.device_index = stream.device_index
        self._event_id = self._event_id or next(_event_ids)
        # On an idle stream the event completes as soon as the host records it.
        self.recorded_us = max(stream.clock_us, RUNTIME.device(stream.device_index).now_us)

    def wait(self, stream: Stream | None = None) -> None:
        if stream is not None:
            require_stream(stream, "Event.wait(stream)")
        (stream or current_stream()).wait_event(self)

    def query(self) -> bool:
        if self.recorded_us is None:
            return True
        return self.recorded_us <= RUNTIME.device(self.device_index).now_us

    def synchronize(self) -> None:
        if self.recorded_us is not None:
            state = RUNTIME.device(self.device_index)
            state.now_us = max(state.now_us, self.recorded_us)

    def elapsed_time(self, end_event: Event) -> float:
        """Simulated milliseconds between this event and `end_event`, as CUDA reports them."""
        _require_event(end_event, "Event.elapsed_time(end_event)")
        if not (self.enable_timing and end_event.enable_timing):
            if self.generic:  # torch.Event's own error
                raise ValueError("Both events must be created with argument "
                                 "'enable_timing=True'.")
            raise RuntimeError(
                "Both events must be created with enable_timing=True to measure elapsed time"
            )
        if self.recorded_us is None or end_event.recorded_us is None:
            raise RuntimeError("Both events must be recorded before calling elapsed_time")
        return (end_event.recorded_us - self.recorded_us) / 1000.0

    def __repr__(self) -> str:
        where = "unrecorded" if self.recorded_us is None else f"at {self.recorded_us:.3f} us"
        index = -1 if self.device_index is None else self.device_index
        return (f"torch.Event device_type={DEVICE_NAME}, device_index={index}, "
                f"event_id={self.event_id} ({where})")


def require_stream(value, what: str) -> None:
    """A TypeError naming the argument, not an AttributeError from inside, for a non-stream."""
    if not isinstance(value, Stream):
        raise TypeError(
            f"{what} expects a stream of the device (torch.Stream('{DEVICE_NAME}'), "
            f"torch.{DEVICE_NAME}.Stream(), torch.{DEVICE_NAME}.current_stream()), got "
            f"{value!r} ({type(value).__name__})"
        )


def _require_event(value, what: str) -> None:
    if not isinstance(value, Event):
        raise TypeError(f"{what} expects a torch.{DEVICE_NAME}.Event (or torch.Event('"
                        f"{DEVICE_NAME}')), got {value!r} ({type(value).__name__})")


def _device_index(device) -> int:
    """The index a `device=` argument names: None or a negative int mean the current device."""
    if device is None:
        return RUNTIME.current_index
    if isinstance(device, bool) or not isinstance(device, (int, str, torch.device)):
        raise TypeError(
            f"device must be an int, a string such as '{DEVICE_NAME}:0' or a torch.device, got "
            f"{device!r}"
        )
    if isinstance(device, int):
        return device if device >= 0 else RUNTIME.current_index
    device = torch.device(device)
    if device.type != DEVICE_NAME:
        raise ValueError(f"expected a {DEVICE_NAME} device, got {device}")
    return device.index if device.index is not None else RUNTIME.current_index


def find_stream(device_index: int, stream_id: int) -> Stream:
    """The live stream with this id on this device (torch.Stream(stream_id=..., ...))."""
    if stream_id == 0:
        return default_stream(device_index)
    for stream in RUNTIME.device(device_index).streams:
        if stream.stream_id == stream_id:
            return stream
    raise ValueError(f"no live stream {stream_id} on {DEVICE_NAME}:{device_index}")


def default_stream(device=None) -> Stream:
    state = RUNTIME.device(_device_index(device))
    stream = state.default_stream
    if stream is None:
        _local.creating_default = True
        try:
            stream = Stream(state.index)
        finally:
            _local.creating_default = False
        state.default_stream = stream
    return stream


def current_stream(device=None) -> Stream:
    index = _device_index(device)
    current = getattr(_local, "current", {})
    return current.get(index) or default_stream(index)


def set_stream(stream: Stream | None) -> None:
    """Make `stream` current on its device, and its device the current device (as CUDA's
    set_stream does). None: no-op."""
    if stream is None:
        return
    if not isinstance(stream, Stream):
        raise TypeError(f"set_stream expects a torch.{DEVICE_NAME}.Stream or None, got "
                        f"{type(stream).__name__}")
    _set_current(stream)
    RUNTIME.current_index = stream.device_index


def _set_current(stream: Stream) -> None:
    if not hasattr(_local, "current"):
        _local.current = {}
    _local.current[stream.device_index] = stream


class StreamContext:
    """Queue the block's device work on `stream` (None: a no-op), shaped like
    torch.cuda.StreamContext: on exit the previous streams of both devices and the previous
    current device come back."""

    def __init__(self, stream: Stream | None) -> None:
        if stream is not None:
            require_stream(stream, f"torch.{DEVICE_NAME}.stream(stream)")
        self.stream = stream

    def __enter__(self) -> Stream | None:
        stream = self.stream
        if stream is None:
            return None
        self.previous_index = RUNTIME.current_index
        self.previous = current_stream(stream.device_index)
        self.previous_here = current_stream(self.previous_index)
        set_stream(stream)
        return stream

    def __exit__(self, *exc) -> None:
        if self.stream is None:
            return
        _set_current(self.previous)
        _set_current(self.previous_here)
        RUNTIME.current_index = self.previous_index


def stream(stream: Stream | None) -> StreamContext:
    """Queue the block's device work on `stream` (None: leave the current stream as it is)."""
    return StreamContext(stream)


def synchronize(device=None) -> None:
    """Wait (in simulated time) until every stream of the device is idle."""
    state = RUNTIME.device(_device_index(device))
    state.now_us = max([state.now_us] + [s.clock_us for s in state.streams])


class Charge(NamedTuple):
    """What `charge` queued: the stream and the work's simulated interval on it, and the host's
    interval issuing it (`host_op_us` wide; empty on the MTIA profiles)."""

    stream: Stream
    start_us: float
    end_us: float
    host_start_us: float
    host_end_us: float


def charge(state, duration_us: float) -> Charge:
    """Queue `duration_us` of work on the device's current stream, after the host issued it."""
    current = getattr(_local, "current", None)
    queue = (current.get(state.index) if current else None) or state.default_stream
    if queue is None:
        queue = default_stream(state.index)
    # Work cannot start before the host issued it: after a synchronize, the host's "now" is the
    # device's now_us, and an idle stream starts from there, not from its old clock. Issuing
    # takes the host `host_op_us` (a profile's figure; 0 on the MTIA profiles): ops shorter
    # than that leave the device waiting, as small eager ops do on a real GPU.
    issued = state.now_us
    state.now_us += state.profile.host_op_us
    start, end = queue.enqueue(duration_us, state.now_us)
    return Charge(queue, start, end, issued, state.now_us)
