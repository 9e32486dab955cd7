"""Collectives in a rank's trace: one "collective" event per call, and a "wait" event before it.

A collective runs on every rank of its group. On the simulated clock it starts when the LAST
rank's stream reaches it (agreement.py exchanges the arrival times) and takes the interconnect
model's duration (interconnect.py). A rank that arrived earlier waited; that idle time is an
event of its own, kind "wait", so timelines and summaries show who waited for whom:

    op      "c10d::allreduce"                   kind "collective"   [start, end]
    op      "c10d::wait"                        kind "wait"         [arrival, start]
    call    "allreduce #7 (group 0)"            the collective id: the same on every rank
    reason  "ring, 2 ranks, 4096 bytes: 2(p-1)a + 2(p-1)/p n b"   /   "waited for rank 1"

Like compiled kernels (compiler/trace_listener.py), these events are made by the code that
knows about them, here the mtia_ccl process group, and put into every open `mtia_lab.trace()`
through the recorder's public `emit()`.
"""

from __future__ import annotations

from time import perf_counter_ns

import torch

from .. import _compat
from ..backend.aten import tensor as _tensor
from ..source import user_source
from ..trace.events import DispatchPath, OpEvent, TensorRecord
from ..trace.recorder import RECORDER

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
    """Put the collective (and its wait, if any) into every open trace."""
    if not RECORDER.recording:
        return
    now = perf_counter_ns()
    number = RECORDER.new_call()
    node = _compat.current_autograd_node()
    common = {
        "phase": "forward" if node is None else "backward", "dispatch": _PATH, "device": device,
        "stream": stream, "module": RECORDER.module, "call": call_id, "call_id": number,
        # the user's line that issued it (DDP's hooks have none: "")
        "source": user_source(),
    }
    if start_us > arrival_us:
        RECORDER.emit(OpEvent(op="c10d::wait", kind=WAIT, reason=waited_for,
                              sim_start_us=arrival_us, sim_end_us=start_us, **common),
                      started_ns=host_start)
    RECORDER.emit(OpEvent(
        op=f"c10d::{name}", kind=COLLECTIVE, reason=reason, inputs=tuple(inputs),
        outputs=tuple(outputs), host_ns=now - host_start, sim_start_us=start_us,
        sim_end_us=end_us, **common), started_ns=host_start)
