"""Activation memory over one training step: what autograd saves, and when backward frees it.

    timeline = activation_timeline(lambda: model(x).square().sum(), model=model, inputs=(x,))
    timeline.peak_bytes, timeline.peak_holders, timeline.allocator_peak_bytes

How it is recorded (public PyTorch only):

1. `torch.autograd.graph.saved_tensors_hooks(pack, unpack)` around the forward: every tensor
   autograd saves goes through `pack`, which keeps it in a small handle (the saved variable
   then holds the handle, not the tensor: the same memory, kept alive as long). The handle's
   finalizer tells when autograd drops it -- after the node that needed it ran in backward.
   `unpack` (in backward) says which autograd node used it.
2. Bytes are counted once per storage (a view and its base are one block of device memory);
   the model's parameters and buffers and the step's `inputs` are alive anyway, so they are
   listed but not counted as activation memory.
3. The device allocator's own statistics (`torch.mtia_sim.max_memory_allocated` after
   `reset_peak_memory_stats`) give the peak the device really saw; the simulated clock of
   the current stream and the priced cost of every op (the dispatcher's observer, and the
   compiled runner's listeners) give the time and the floating-point work of each phase.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field

import torch

from .. import _compat
from ..backend.aten import dispatch
from ..compiler import runner


@dataclass(frozen=True)
class SavedEvent:
    """One step in the life of a saved tensor."""

    index: int
    action: str  # "saved" (forward) | "used" (backward unpacks it) | "freed"
    tensor: int  # the saved tensor's number, in order of saving
    producer: str  # the autograd node that made it ("AddmmBackward0"), or parameter / input
    shape: tuple[int, ...]
    dtype: str
    nbytes: int  # activation bytes it adds (saved) or releases (freed); 0 if shared or a param
    device: str  # where its bytes are: "mtia_sim:0", or "cpu" (a host tensor autograd saved)
    phase: str  # "forward" | "backward"
    node: str  # the backward node that used it ("used"); "" otherwise
    live_bytes: int  # activation bytes held by saved tensors after this event
    allocated_bytes: int  # the device allocator's allocated bytes after this event


@dataclass
class ActivationTimeline:
    """The saved-tensor events of one step, and what the device allocator and clock said."""

    label: str
    events: list[SavedEvent] = field(default_factory=list)
    baseline_bytes: int = 0  # allocated before the step (parameters, inputs, ...)
    allocator_peak_bytes: int = 0  # max_memory_allocated during the step, above the baseline
    forward_us: float = 0.0  # simulated device time of the forward
    backward_us: float = 0.0  # ... and of the backward (recomputation included)
    forward_flops: float = 0.0  # priced floating-point work of each phase
    backward_flops: float = 0.0

    @property
    def peak_bytes(self) -> int:
        """The most activation bytes saved tensors held at once."""
        return max((e.live_bytes for e in self.events), default=0)

    @property
    def host_bytes(self) -> int:
        """Activation bytes saved as host tensors (not on the device: the allocator does not
        see them). The teaching compile path saves its activations so."""
        return sum(e.nbytes for e in self.events if e.action == "saved" and e.device == "cpu")

    @property
    def saved_count(self) -> int:
        return sum(e.action == "saved" for e in self.events)

    @property
    def peak_holders(self) -> list[tuple[str, int]]:
        """(producer, bytes) of the saved tensors live at the peak, largest first."""
        live: dict[int, SavedEvent] = {}
        best: dict[int, SavedEvent] = {}
        top = -1
        for e in self.events:
            if e.action == "saved":
                live[e.tensor] = e
            elif e.action == "freed":
                live.pop(e.tensor, None)
            if e.live_bytes > top:
                top, best = e.live_bytes, dict(live)
        holders = [(e.producer, e.nbytes) for e in best.values() if e.nbytes]
        return sorted(holders, key=lambda h: -h[1])

    def to_dict(self) -> dict:
        return asdict(self)


class _Saved:
    """What autograd holds instead of a saved tensor while the recorder watches."""

    __slots__ = ("tensor", "number", "__weakref__")

    def __init__(self, tensor: torch.Tensor, number: int) -> None:
        self.tensor, self.number = tensor, number


def _host(t: torch.Tensor) -> torch.Tensor:
    """The tensor whose storage holds the bytes: a device tensor's inner host tensor."""
    return getattr(t, "_inner", t)  # MTIATensor (backend/aten/tensor.py) keeps its bytes there


def storage_key(t: torch.Tensor) -> int:
    """One number per block of memory: the address of the host storage behind the tensor.
    A view and its base share it, and so do a device tensor and the inner tensor a compiled
    graph saves in its place (AOTAutograd desugars the device tensor for the teaching path)."""
    return _host(t).untyped_storage().data_ptr()


def storage_bytes(t: torch.Tensor) -> int:
    return _host(t).untyped_storage().nbytes()


class _Recorder:
    """The hooks and the running totals of one timeline."""

    def __init__(self, timeline: ActivationTimeline, alive: set[int], device: int) -> None:
        self.timeline, self.alive, self.device = timeline, alive, device
        self.holders: dict[int, int] = {}  # storage key -> saved tensors holding it
        self.key_bytes: dict[int, int] = {}  # storage key -> activation bytes it counts for
        # tensor number -> (key, producer, shape, dtype, bytes, device)
        self.info: dict[int, tuple] = {}
        self.live = 0
        self.phase = "forward"
        self.count = 0

    def _event(self, action: str, number: int, nbytes: int, node: str = "") -> None:
        _, producer, shape, dtype, _, device = self.info[number]
        events = self.timeline.events
        events.append(SavedEvent(len(events), action, number, producer, shape, dtype, nbytes,
                                 device, self.phase, node, self.live,
                                 torch.mtia_sim.memory_allocated(self.device)))

    def pack(self, t: torch.Tensor) -> _Saved:
        number, self.count = self.count, self.count + 1
        key = storage_key(t)
        counted = key not in self.alive
        new = counted and self.holders.get(key, 0) == 0
        if t.grad_fn is not None:
            producer = t.grad_fn.name()
        elif t.requires_grad:
            producer = "parameter"
        elif t.device.type == "cpu":
            producer = "compiled graph (host)"  # the teaching path's desugared activations
        else:  # made in the step without autograd: a compiled graph's activation
            producer = "compiled graph" if counted else "input / constant"
        nbytes = storage_bytes(t) if new else 0
        if new:
            self.key_bytes[key] = nbytes
        self.holders[key] = self.holders.get(key, 0) + 1
        self.info[number] = (key, producer, tuple(t.shape), str(t.dtype).removeprefix("torch."),
                             nbytes, str(t.device))
        self.live += nbytes
        self._event("saved", number, nbytes)
        handle = _Saved(t, number)
        weakref.finalize(handle, self.freed, number)
        return handle

    def unpack(self, handle: _Saved) -> torch.Tensor:
        node = _compat.current_autograd_node()
        self._event("used", handle.number, 0, node.name() if node is not None else "")
        return handle.tensor

    def freed(self, number: int) -> None:
        key = self.info[number][0]
        self.holders[key] -= 1
        nbytes = 0
        if self.holders[key] == 0 and key not in self.alive:
            nbytes = self.key_bytes.pop(key, 0)
            self.live -= nbytes
        self._event("freed", number, nbytes)


class _CostMeter:
    """Adds up the priced work of every device op and compiled kernel, per phase (backward:
    an autograd node is running). Chains to the observer installed before it."""

    wants_prices = True

    def __init__(self) -> None:
        self.flops = {"forward": 0.0, "backward": 0.0}
        self.previous = None

    def _add(self, cost) -> None:
        if cost is not None:
            phase = "backward" if _compat.current_autograd_node() is not None else "forward"
            self.flops[phase] += cost.gemm_flops + cost.vector_flops

    def before_op(self, func, kind, args, kwargs, device) -> None:
        if self.previous is not None:
            self.previous.before_op(func, kind, args, kwargs, device)

    def after_op(self, func, kind, result, price, span) -> None:
        if self.previous is not None:
            self.previous.after_op(func, kind, result, price, span)
        self._add(price)

    def kernel(self, kernel, cost, span) -> None:  # a compiled kernel (compiler/runner.py)
        self._add(cost)

    def __enter__(self) -> _CostMeter:
        self.previous = dispatch.set_observer(self)
        runner.add_listener(self.kernel)
        return self

    def __exit__(self, *exc) -> None:
        runner.remove_listener(self.kernel)
        dispatch.set_observer(self.previous)


def _clock(device: int) -> float:
    torch.mtia_sim.synchronize(device)
    return torch.mtia_sim.current_stream(device).clock_us


def activation_timeline(step: Callable[[], torch.Tensor], *, model: torch.nn.Module | None = None,
                        inputs: Iterable[torch.Tensor] = (), label: str = "step",
                        device: int = 0) -> ActivationTimeline:
    """Run `step()` (the forward, returning a scalar loss) and `loss.backward()` once, and
    record every saved tensor's life, the allocator's peak, the simulated time and priced work
    of each phase. `model` and `inputs`: tensors alive anyway, not counted as activations."""
    if not callable(step):
        raise TypeError(f"step must be a callable that runs the forward and returns the loss, "
                        f"got {type(step).__name__}")
    alive = {storage_key(t) for t in inputs}
    if model is not None:
        alive |= {storage_key(t) for t in [*model.parameters(), *model.buffers()]}
    if model is not None:
        model.zero_grad(set_to_none=True)  # no accumulation into old gradients: a fair step
    timeline = ActivationTimeline(label)
    recorder = _Recorder(timeline, alive, device)
    gc.collect()
    timeline.baseline_bytes = torch.mtia_sim.memory_allocated(device)
    torch.mtia_sim.reset_peak_memory_stats(device)
    with _CostMeter() as meter:
        start = _clock(device)
        with torch.autograd.graph.saved_tensors_hooks(recorder.pack, recorder.unpack):
            loss = step()
        middle = _clock(device)
        recorder.phase = "backward"
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            raise ValueError("step() must return the loss: a one-element tensor to call "
                             f".backward() on, got {type(loss).__name__}")
        loss.backward()
        del loss
        gc.collect()
        end = _clock(device)
    timeline.forward_us, timeline.backward_us = middle - start, end - middle
    timeline.forward_flops, timeline.backward_flops = meter.flops["forward"], meter.flops[
        "backward"]
    timeline.allocator_peak_bytes = (torch.mtia_sim.max_memory_allocated(device)
                                     - timeline.baseline_bytes)
    return timeline
