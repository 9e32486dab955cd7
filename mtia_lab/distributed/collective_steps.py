"""The steps every collective on device tensors takes, under each method of MTIAProcessGroup.

1. find the device whose memory the tensors are (`_device_of`; host tensors go to gloo as is);
2. agree with the other ranks on the call (`_begin`, agreement.py), learning when the last rank
   arrived on the simulated clock;
3. move the bytes of the inner host tensors with gloo (reductions: `_reduce_into`);
4. charge the current stream for the interconnect model's duration and tell the trace
   (`_charge`: interconnect.py, events.py);
5. hand back a `_Work` that finishes the call on `wait()` (AVG divides the sum; staged copies of
   non-contiguous tensors are written back), turning gloo's failures into `CollectiveError`s
   that say which rank and why (`_wait`, `_failure`).

`CollectiveSteps` is mixed into MTIAProcessGroup (process_group.py), whose fields it uses
(`_gloo`, `_size`, `_rank`, `_global`, `_seq`, `_group_name`, `_timeout`).
"""

from __future__ import annotations

import threading
from datetime import timedelta
from time import perf_counter_ns

import torch
import torch.distributed as dist
from torch.futures import Future

from ..backend.aten.tensor import MTIATensor
from ..backend.runtime.device_state import RUNTIME
from ..backend.runtime.streams import current_stream
from . import agreement, events
from .agreement import Call, CollectiveError
from .interconnect import collective_cost

_REDUCE = {op.value: name for name, op in (
    ("sum", dist.ReduceOp.RedOpType.SUM), ("avg", dist.ReduceOp.RedOpType.AVG),
    ("product", dist.ReduceOp.RedOpType.PRODUCT), ("min", dist.ReduceOp.RedOpType.MIN),
    ("max", dist.ReduceOp.RedOpType.MAX), ("band", dist.ReduceOp.RedOpType.BAND),
    ("bor", dist.ReduceOp.RedOpType.BOR), ("bxor", dist.ReduceOp.RedOpType.BXOR),
    ("premul_sum", dist.ReduceOp.RedOpType.PREMUL_SUM))}

_context = threading.local()  # functional.py: host tensors of this call are device memory


def device_context(index: int | None):
    """Within the block, host tensors handed to mtia_ccl are the memory of mtia_sim:<index>."""
    return _DeviceContext(index)


class _DeviceContext:
    def __init__(self, index):
        self.index = index

    def __enter__(self):
        self.previous = getattr(_context, "index", None)
        _context.index = self.index

    def __exit__(self, *exc):
        _context.index = self.previous


class _Work(dist._Work):
    """An async handle: gloo's work (or ours), then what finishes the call on the host."""

    def __init__(self, pg, works, result, finish=None, what: str = "") -> None:
        super().__init__()
        self._pg, self._works, self._result = pg, works, result
        self._finish, self._what, self._done = finish, what, False

    def wait(self, timeout: timedelta | None = None) -> bool:
        if not self._done:
            for work in self._works:
                self._pg._wait(work, self._what)
            if self._finish is not None:
                self._finish()
            self._done = True
        return True

    def is_completed(self) -> bool:
        return self._done

    def is_success(self) -> bool:
        return self._done

    def result(self):
        return self._result

    def get_future(self) -> Future:
        """A completed future (the wait happens here): DDP's comm hooks chain on it."""
        self.wait()
        future = Future()
        future.set_result(self._result)
        return future


class _Begun:
    """A collective the ranks agreed on: where its simulated time starts."""

    __slots__ = ("call", "calls", "start_us", "slowest", "stream", "state", "host_start")


class CollectiveSteps:
    """The steps of a device collective, shared by every collective of MTIAProcessGroup."""

    def _device_of(self, tensors) -> int | None:
        """The device index whose memory these tensors are, or None for host tensors."""
        found = set()
        for t in tensors:
            if isinstance(t, _DeviceView):
                found.add(t.device_index)
            elif type(t) is MTIATensor:
                found.add(t._storage.device_index)
            elif isinstance(t, torch.Tensor) and t.device.type == "cpu":
                index = getattr(_context, "index", None)
                found.add(index)
            else:
                raise TypeError(f"mtia_ccl moves mtia_sim and cpu tensors, not {t.device}")
        if len(found) > 1:
            raise ValueError(f"mtia_ccl: one collective got tensors on several devices "
                             f"({sorted(map(str, found))}); move them to one device first")
        return found.pop() if found else None

    def _reduce_name(self, opts) -> str:
        name = _REDUCE[opts.reduceOp.op.value]
        if name == "premul_sum":
            raise NotImplementedError("mtia_ccl: PREMUL_SUM is not supported; scale the "
                                      "tensor, then reduce with SUM")
        return name

    def _reduce_into(self, staged, inner, reduce, what, begun):
        """gloo all-reduce of `staged` (SUM for AVG, then divided); copied into `inner`."""
        gloo_opts = dist.AllreduceOptions()
        gloo_opts.reduceOp = dist.ReduceOp.SUM if reduce == "avg" else getattr(
            dist.ReduceOp, reduce.upper())
        work = self._gloo.allreduce([staged], gloo_opts)
        size = self._size

        def finish():
            if reduce == "avg":
                if staged.is_floating_point() or staged.is_complex():
                    staged.div_(size)
                else:
                    staged.floor_divide_(size)
            if inner is not None and staged is not inner:
                inner.copy_(staged)

        return _Work(self, [work], None, finish, what)

    def _begin(self, collective, device, inner, reduce="", root=-1, any_shape=False) -> _Begun:
        """Agree with the other ranks on this call (raising on a mismatch) and learn when the
        last of them arrived on the simulated clock."""
        begun = _Begun()
        begun.host_start = perf_counter_ns()
        state = RUNTIME.device(device)
        stream = current_stream(device)
        self._seq += 1
        arrival = max(stream.clock_us, state.now_us)
        if inner is None:
            call = Call(self._seq, collective, None, arrival_us=arrival)
        else:
            shape = None if any_shape else tuple(inner.shape)
            call = Call(self._seq, collective, inner.dtype, reduce, root, shape, inner.numel(),
                        arrival)
        headers = torch.empty(self._size * agreement.HEADER_LEN, dtype=torch.float64)
        self._wait(self._gloo._allgather_base(headers, call.header()), call.describe())
        calls = [agreement.from_header(row) for row in headers.view(self._size, -1).tolist()]
        agreement.check(calls, self._group_name)
        arrivals = [c.arrival_us for c in calls]
        begun.call, begun.calls, begun.stream, begun.state = call, calls, stream, state
        begun.start_us = max(arrivals)
        begun.slowest = self._global[arrivals.index(begun.start_us)]
        return begun

    def _charge(self, begun: _Begun, collective, nbytes, inputs, outputs, device) -> None:
        cost = collective_cost(collective, nbytes, self._size, begun.state.profile)
        arrival = begun.call.arrival_us
        start, end = begun.stream.enqueue(cost.duration_us, begun.start_us)
        call_id = f"{collective} #{begun.call.seq} (group {self._group_name or '?'})"
        waited = (f"{call_id}: waited {start - arrival:.3f} us for rank {begun.slowest}"
                  if start > arrival else "")
        events.emit(collective, call_id, [events.record_of(t, device) for t in inputs],
                    [events.record_of(t, device) for t in outputs], device,
                    begun.stream.stream_id, arrival, start, end, _reason(cost), waited,
                    begun.host_start)

    def _wait(self, work, what: str) -> None:
        try:
            work.wait()
        except CollectiveError:
            raise
        except RuntimeError as error:
            raise self._failure(error, what) from error

    def _failure(self, error: BaseException, what: str) -> CollectiveError:
        text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        seconds = self._timeout.total_seconds()
        if "timeout" in text.lower() or "timed out" in text.lower():
            why = (f"it timed out after {seconds:g} s: a rank of the group did not reach this "
                   "collective (stuck, much slower, or calling something else)")
        else:
            why = ("a peer rank failed or exited (the launcher names it), or finished without "
                   "calling this collective")
        return CollectiveError(
            f"mtia_ccl (group {self._group_name or '?'}, rank {self._global[self._rank]} of "
            f"{self._size}): {what} failed: {why}. gloo said: {text}")


class _DeviceView:
    """A host tensor that stands for device memory of `like`'s device (reduce_scatter lists)."""

    def __init__(self, host: torch.Tensor, like: torch.Tensor) -> None:
        self.host = host
        self.device_index = (like._storage.device_index if type(like) is MTIATensor
                             else getattr(_context, "index", None))


def _inner(t):
    if type(t) is MTIATensor:
        return t._inner
    if isinstance(t, _DeviceView):
        return t.host
    return t


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _copy_back(staged: torch.Tensor, inner: torch.Tensor):
    if staged is inner:
        return None
    return lambda: inner.copy_(staged)


def _reason(cost) -> str:
    return (f"{cost.algorithm}, {cost.ranks} ranks, {cost.nbytes} bytes: {cost.formula} "
            f"= {cost.duration_us:.3f} us")
