"""`mtia_lab.trace()`: the context manager and decorator that open a `Trace` on the recorder."""

from __future__ import annotations

import functools
import time

import torch

from .._version import __version__
from ..backend.runtime.device_state import RUNTIME
from .events import Trace
from .recorder import RECORDER


class Tracer:
    """What `mtia_lab.trace()` returns: a context manager, and a decorator.

        with mtia_lab.trace() as t:     # t is the Trace, filled as ops run
            y = model(x)

        @mtia_lab.trace()
        def step(x): ...
        step(x); step.last_trace        # the Trace of the latest call
    """

    def __init__(self, label: str = "") -> None:
        if not isinstance(label, str):  # saved in the trace's metadata, which must load back
            raise TypeError(f"trace(label): expected a string, got {label!r} "
                            f"({type(label).__name__})")
        self.label = label
        self.trace: Trace | None = None

    def __enter__(self) -> Trace:
        if self.trace is not None and any(t is self.trace for t, _ in RECORDER.traces):
            raise RuntimeError(
                "this mtia_lab.trace() is already open; open a new one for a nested trace: "
                "`with mtia_lab.trace() as inner:`"
            )
        self.trace = Trace([], _metadata(self.label))
        try:
            RECORDER.open(self.trace)
            return self.trace
        except BaseException:  # e.g. a KeyboardInterrupt: `with` will not call __exit__
            RECORDER.close(self.trace, None)
            raise

    def __exit__(self, exc_type, exc, tb) -> None:
        RECORDER.close(self.trace, exc)

    def __call__(self, fn):
        @functools.wraps(fn)
        def traced(*args, **kwargs):
            tracer = Tracer(self.label or getattr(fn, "__qualname__", ""))
            with tracer as recorded:
                traced.last_trace = recorded
                return fn(*args, **kwargs)

        traced.last_trace = None
        return traced


def trace(label: str = "") -> Tracer:
    """Record every op that reaches the device: `with mtia_lab.trace() as t:` or
    `@mtia_lab.trace()` (then `fn.last_trace`). See mtia_lab/trace/events.py for what is kept."""
    return Tracer(label)


def _metadata(label: str) -> dict:
    return {
        "label": label,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "torch": torch.__version__,
        "mtia_lab": __version__,
        "profile": getattr(RUNTIME.profile, "name", str(RUNTIME.profile)),
        "device_count": len(RUNTIME.devices),
        # each device's simulated clock when the trace began (streams' latest finish time)
        "sim_start_us": {
            str(d.index): max([d.now_us] + [s.clock_us for s in d.streams]) for d in RUNTIME.devices
        },
    }
