"""Collectives in a rank's trace: one "collective" event per call, and a "wait" event before it.

A collective runs on every rank of its group. On the simulated clock it starts when the LAST
rank's stream reaches it (agreement.py exchanges the arrival times) and takes the interconnect
model's duration (interconnect.py). A rank that arrived earlier waited; that idle time is an
event of its own, kind "wait", so timelines and summaries show who waited for whom:

    op      "c10d::allreduce"                   kind "collective"   [start, end]
    op      "c10d::wait"                        kind "wait"         [arrival, start]
    call    "allreduce #7 (group 0)"            the collective id: the same on every rank
    reason  "ring, 2 ranks, 4096 bytes: 2(p-1)a + 2(p-1)/p n b"   /   "waited for rank 1"

Like compiled kernels (trace/compiled.py), these events are appended by the code that knows
about them, here the mtia_ccl process group, to every open `mtia_lab.trace()`.
"""

from __future__ import annotations

from time import perf_counter_ns

import torch

from ..backend.aten import tensor as _tensor
from ..trace.compiled import _user_source
from ..trace.events import DispatchPath, OpEvent, TensorRecord

COLLECTIVE = "collective"
WAIT = "wait"
_PATH = DispatchPath((), (), (  # route: mtia_ccl -> agreement -> gloo -> interconnect model
    "mtia_ccl: torch.distributed called the Python ProcessGroup (process_group.py)",
    "agreement: the ranks compared their calls and arrival times (agreement.py)",
    "gloo: moved the bytes of the inner host tensors",
    "interconnect: the model charged the simulated clock (interconnect.py)",
), "interconnect model (alpha-beta, docs/interconnect.md)")


def record_of(inner: torch.Tensor, device_index: int) -> TensorRecord:
    """A tensor record for a device tensor's inner host tensor (its DeviceStorage's address)."""
    untyped = inner.untyped_storage()
    entry = _tensor._LIVE_STORAGES.get(untyped.data_ptr())
    storage = entry() if entry is not None else None
    nbytes = inner.numel() * inner.element_size()
    return TensorRecord(
        tuple(inner.shape), str(inner.dtype).removeprefix("torch."), tuple(inner.stride()),
        inner.storage_offset(), storage.address if storage is not None else 0,
        untyped.nbytes(), f"mtia_sim:{device_index}", None, nbytes,
    )


def emit(name: str, call_id: str, inputs, outputs, device: int, stream, arrival_us: float,
         start_us: float, end_us: float, reason: str, waited_for: str, host_start: int) -> None:
    """Append the collective (and its wait, if any) to every open trace."""
    from ..trace.recorder import _RECORDER

    recorder = _RECORDER
    if not recorder.traces:
        return
    now = perf_counter_ns()
    recorder.next_call += 1
    node = torch._C._current_autograd_node()
    phase = "forward" if node is None else "backward"
    module = recorder.modules[-1] if recorder.modules else ""
    source = _user_source()  # the user's line that issued it (DDP's hooks have none: "")
    allocated = _current_bytes(device)
    for trace, trace_start in recorder.traces:
        events = trace.events
        if start_us > arrival_us:
            events.append(OpEvent(
                len(events), "c10d::wait", WAIT, phase, waited_for, _PATH, (), (), 0, 0,
                allocated, host_start - trace_start, 0, arrival_us, start_us, stream, device,
                source, module, call_id, recorder.next_call))
        events.append(OpEvent(
            len(events), f"c10d::{name}", COLLECTIVE, phase, reason, _PATH, tuple(inputs),
            tuple(outputs), 0, 0, allocated, host_start - trace_start, now - host_start,
            start_us, end_us, stream, device, source, module, call_id, recorder.next_call))


def _current_bytes(device: int) -> int:
    from ..backend.runtime.device_state import RUNTIME

    return RUNTIME.device(device).allocator._stats["all"].allocated_bytes.current
