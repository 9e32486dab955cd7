"""`mtia_ccl`: the collective library of the simulated chips, as a torch.distributed backend.

PyTorch 2.13 lets Python implement a whole `ProcessGroup` (its pybind trampoline forwards every
collective to our methods; `torch.distributed.Backend` itself has no Python constructor), so
`MTIAProcessGroup` is one. `Backend.register_backend("mtia_ccl", ..., devices=["mtia_sim"])`
(registration.py) makes `init_process_group("cpu:gloo,mtia_sim:mtia_ccl")` and, with mtia_sim
as the accelerator, plain `init_process_group()` create it. A Python process group replaces the
whole group (distributed_c10d's `_new_process_group_helper` stops at it), so it serves host
tensors too: those go to gloo untouched.

A collective on device tensors:
1. the ranks agree on the call (agreement.py): mismatches raise on every rank at once;
2. gloo moves the bytes of the device tensors' inner host tensors, asynchronously;
3. every rank's current stream is charged from the moment the last rank arrived, for the
   interconnect model's duration (interconnect.py), and the trace gets the collective and the
   time this rank waited (events.py);
4. the returned work handle finishes the call on `wait()` (AVG divides the sum; staged copies of
   non-contiguous tensors are written back) and turns gloo's failures into `CollectiveError`s.

What every device collective does (agree, move, charge, finish) is collective_steps.py; this
file is the API torch.distributed calls.

Functional collectives (`torch.distributed._functional_collectives`, used by DTensor) run the
C++ ops on the inner host tensors; functional.py marks those as device memory for the call.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from time import perf_counter_ns

import torch
import torch.distributed as dist

from .. import _compat
from ..backend.runtime.device_state import RUNTIME
from ..backend.runtime.streams import current_stream
from . import agreement, events
from .agreement import Call, CollectiveError, CollectiveMismatchError
from .collective_steps import (
    CollectiveSteps,
    _copy_back,
    _DeviceView,
    _inner,
    _nbytes,
    _reason,
    _Work,
    device_context,
)
from .interconnect import collective_cost

BACKEND_NAME = "mtia_ccl"


class MTIAProcessGroup(CollectiveSteps, dist.ProcessGroup):
    """A process group whose collectives on mtia_sim tensors are priced on the simulated
    interconnect and recorded in traces; bytes move through an inner gloo group."""

    def __init__(self, store, rank: int, size: int, timeout: timedelta,
                 global_ranks: list[int] | None = None) -> None:
        super().__init__(rank, size)
        self._rank, self._size, self._timeout = rank, size, timeout
        gloo = _compat.gloo_process_group()
        self._gloo = gloo(dist.PrefixStore(f"{BACKEND_NAME}/", store), rank, size, timeout)
        self._global = list(global_ranks) if global_ranks else list(range(size))
        self._seq = 0
        self._p2p: Counter = Counter()
        self._group_name = ""
        self._group_desc = ""

    # -- what torch.distributed asks of a process group --------------------------------------
    def getBackendName(self) -> str:
        return BACKEND_NAME

    def getRank(self) -> int:
        return self._rank

    def getSize(self) -> int:
        return self._size

    def setGroupName(self, name: str) -> None:
        self._group_name = name

    def getGroupName(self) -> str:
        return self._group_name

    def setGroupDesc(self, desc: str) -> None:
        self._group_desc = desc

    def getGroupDesc(self) -> str:
        return self._group_desc

    def __repr__(self) -> str:
        return f"<MTIAProcessGroup {self._group_name or '?'}: rank {self._rank} of {self._size}>"

    # -- collectives -------------------------------------------------------------------------
    def allreduce(self, tensors, opts=None):
        opts = opts or dist.AllreduceOptions()
        device = self._device_of(tensors)
        if device is None:
            return self._gloo.allreduce(tensors, opts)
        reduce = self._reduce_name(opts)
        works = []
        for tensor in tensors:
            inner = _inner(tensor)
            begun = self._begin("allreduce", device, inner, reduce=reduce)
            staged = inner.contiguous()
            works.append(self._reduce_into(staged, inner, reduce, "allreduce", begun))
            self._charge(begun, "allreduce", _nbytes(inner), [inner], [inner], device)
        return _Work(self, works, tensors, what="allreduce")

    def allreduce_coalesced(self, tensors, opts=None):
        plain = dist.AllreduceOptions()
        if opts is not None:
            plain.reduceOp = opts.reduceOp
        return self.allreduce(tensors, plain)

    def broadcast(self, tensors, opts=None):
        opts = opts or dist.BroadcastOptions()
        device = self._device_of(tensors)
        if device is None:
            return self._gloo.broadcast(tensors, opts)
        works = []
        for tensor in tensors:
            inner = _inner(tensor)
            begun = self._begin("broadcast", device, inner, root=opts.rootRank)
            staged = inner.contiguous()
            gloo_opts = dist.BroadcastOptions()
            gloo_opts.rootRank = opts.rootRank
            work = self._gloo.broadcast([staged], gloo_opts)
            works.append(_Work(self, [work], None, _copy_back(staged, inner), "broadcast"))
            self._charge(begun, "broadcast", _nbytes(inner), [inner], [inner], device)
        return _Work(self, works, tensors, what="broadcast")

    def _allgather_base(self, output, input, opts=None):
        device = self._device_of([input, output])
        if device is None:
            return self._gloo._allgather_base(output, input)
        out, inp = _inner(output), _inner(input)
        if out.numel() != inp.numel() * self._size:
            raise ValueError(
                f"all_gather_into_tensor: the output has {out.numel()} elements, expected "
                f"{self._size} x {inp.numel()} (world size x input); allocate it as "
                f"torch.empty({self._size} * input.shape[0], *input.shape[1:])")
        begun = self._begin("allgather", device, inp)
        staged = out.contiguous()
        work = self._gloo._allgather_base(staged.view(-1), inp.contiguous().view(-1))
        self._charge(begun, "allgather", _nbytes(out), [inp], [out], device)
        return _Work(self, [work], output, _copy_back(staged, out), "all_gather_into_tensor")

    def allgather(self, output_lists, input_tensors, opts=None):
        device = self._device_of([*input_tensors, *output_lists[0]])
        if device is None:
            return self._gloo.allgather(output_lists, input_tensors, opts or
                                        dist.AllgatherOptions())
        works = []
        for outputs, tensor in zip(output_lists, input_tensors, strict=True):
            inp = _inner(tensor)
            outs = [_inner(o) for o in outputs]
            if len(outs) != self._size or any(o.numel() != inp.numel() for o in outs):
                raise ValueError(
                    f"all_gather: expected {self._size} output tensors shaped like the input "
                    f"{list(inp.shape)}, got {[list(o.shape) for o in outs]}")
            begun = self._begin("allgather", device, inp)
            flat = torch.empty(self._size * inp.numel(), dtype=inp.dtype)
            work = self._gloo._allgather_base(flat, inp.contiguous().view(-1))
            numel = inp.numel()

            def finish(flat=flat, outs=outs, n=numel):
                for i, o in enumerate(outs):
                    o.copy_(flat[i * n:(i + 1) * n].view(o.shape))

            works.append(_Work(self, [work], None, finish, "all_gather"))
            self._charge(begun, "allgather", _nbytes(inp) * self._size, [inp], outs, device)
        return _Work(self, works, output_lists, what="all_gather")

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        works = [self._allgather_base(o, i) for o, i in zip(outputs, inputs, strict=True)]
        return _Work(self, works, outputs, what="all_gather_into_tensor_coalesced")

    def allgather_coalesced(self, output_lists, inputs, opts=None):
        works = [self.allgather([o], [i]) for o, i in zip(output_lists, inputs, strict=True)]
        return _Work(self, works, output_lists, what="all_gather_coalesced")

    def _reduce_scatter_base(self, output, input, opts=None):
        opts = opts or dist.ReduceScatterOptions()
        device = self._device_of([input, output])
        if device is None:
            return self._gloo._reduce_scatter_base(output, input, opts)
        out, inp = _inner(output), _inner(input)
        if inp.numel() != out.numel() * self._size:
            raise ValueError(
                f"reduce_scatter_tensor: the input has {inp.numel()} elements, expected "
                f"{self._size} x {out.numel()} (world size x output)")
        reduce = self._reduce_name(opts)
        begun = self._begin("reduce_scatter", device, inp, reduce=reduce)
        # gloo reduces the whole input on every rank; each rank keeps its own chunk.
        whole = inp.contiguous().clone()
        work = self._reduce_into(whole, None, reduce, "reduce_scatter_tensor", begun)
        n, rank = out.numel(), self._rank

        def finish():
            work.wait()
            out.copy_(whole.view(-1)[rank * n:(rank + 1) * n].view(out.shape))

        self._charge(begun, "reduce_scatter", _nbytes(inp), [inp], [out], device)
        return _Work(self, [], output, finish, "reduce_scatter_tensor")

    def reduce_scatter(self, outputs, input_lists, opts=None):
        opts = opts or dist.ReduceScatterOptions()
        device = self._device_of([*outputs, *input_lists[0]])
        if device is None:
            return self._gloo.reduce_scatter(outputs, input_lists, opts)
        works = []
        for output, inputs in zip(outputs, input_lists, strict=True):
            flat = torch.cat([_inner(t).reshape(-1) for t in inputs])
            if any(_inner(t).numel() != _inner(output).numel() for t in inputs):
                raise ValueError("reduce_scatter: every input tensor must have the output's "
                                 f"{_inner(output).numel()} elements")
            works.append(self._reduce_scatter_base(output, _DeviceView(flat, output), opts))
        return _Work(self, works, outputs, what="reduce_scatter")

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts=None):
        works = [self._reduce_scatter_base(o, i, opts) for o, i in zip(outputs, inputs,
                                                                       strict=True)]
        return _Work(self, works, outputs, what="reduce_scatter_tensor_coalesced")

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        opts = opts or dist.AllToAllOptions()
        device = self._device_of([input, output])
        if device is None:
            return self._gloo.alltoall_base(output, input, output_split_sizes,
                                            input_split_sizes, opts)
        out, inp = _inner(output), _inner(input)
        begun = self._begin("alltoall", device, inp, any_shape=True)
        staged = out.contiguous()
        work = self._gloo.alltoall_base(staged, inp.contiguous(), list(output_split_sizes),
                                        list(input_split_sizes), dist.AllToAllOptions())
        self._charge(begun, "alltoall", _nbytes(inp), [inp], [out], device)
        return _Work(self, [work], output, _copy_back(staged, out), "all_to_all_single")

    def alltoall(self, outputs, inputs, opts=None):
        device = self._device_of([*inputs, *outputs])
        if device is None:
            return self._gloo.alltoall(outputs, inputs, opts or dist.AllToAllOptions())
        ins = [_inner(t) for t in inputs]
        outs = [_inner(t) for t in outputs]
        flat_in = torch.cat([t.reshape(-1) for t in ins])
        flat_out = torch.empty(sum(t.numel() for t in outs), dtype=flat_in.dtype)
        begun = self._begin("alltoall", device, flat_in, any_shape=True)
        work = self._gloo.alltoall_base(flat_out, flat_in, [t.numel() for t in outs],
                                        [t.numel() for t in ins], dist.AllToAllOptions())

        def finish():
            at = 0
            for t in outs:
                t.copy_(flat_out[at:at + t.numel()].view(t.shape))
                at += t.numel()

        self._charge(begun, "alltoall", _nbytes(flat_in), ins, outs, device)
        return _Work(self, [work], outputs, finish, "all_to_all")

    # torch 2.13's names for the single-tensor forms (distributed_c10d calls these)
    def all_gather_single(self, output, input, opts=None):
        return self._allgather_base(output, input, opts)

    def all_gather_single_coalesced(self, outputs, inputs, opts=None):
        return self.allgather_into_tensor_coalesced(outputs, inputs, opts)

    def reduce_scatter_single(self, output, input, opts=None):
        return self._reduce_scatter_base(output, input, opts)

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts=None):
        return self.reduce_scatter_tensor_coalesced(outputs, inputs, opts)

    def all_to_all_single(self, output, input, output_split_sizes, input_split_sizes,
                          opts=None):
        if not isinstance(opts, (dist.AllToAllOptions, type(None))):  # the timeout overload
            opts = None
        return self.alltoall_base(output, input, output_split_sizes, input_split_sizes, opts)

    def barrier(self, opts=None):
        device = RUNTIME.current_index
        begun = self._begin("barrier", device, None)  # the agreement itself is a barrier
        self._charge(begun, "barrier", 0, [], [], device)
        return _Work(self, [], [], None, "barrier")

    # -- point to point ----------------------------------------------------------------------
    def send(self, tensors, dst: int, tag: int = 0):
        device = self._device_of(tensors)
        if device is None:
            return self._gloo.send(tensors, dst, tag)
        inner = _inner(tensors[0])
        key = (self._rank, dst)
        self._p2p[key] += 1
        stream, state = current_stream(device), RUNTIME.device(device)
        arrival = max(stream.clock_us, state.now_us)
        call = Call(self._p2p[key], "send", inner.dtype, shape=tuple(inner.shape),
                    numel=inner.numel(), arrival_us=arrival)
        host_start = perf_counter_ns()
        works = [self._gloo.send([call.header()], dst, tag),
                 self._gloo.send([inner.contiguous()], dst, tag)]
        cost = collective_cost("send", _nbytes(inner), 2, state.profile)
        start, end = stream.enqueue(cost.duration_us, arrival)
        call_id = f"send/recv {self._global[self._rank]}->{self._global[dst]} #{call.seq}"
        events.emit("send", call_id, [events.record_of(inner, device)], [], device,
                    stream.stream_id, start, start, end, _reason(cost), "", host_start)
        return _Work(self, works, tensors, what=f"send to rank {dst}")

    def recv(self, tensors, src: int, tag: int = 0):
        device = self._device_of(tensors)
        if device is None:
            return self._gloo.recv(tensors, src, tag)
        inner = _inner(tensors[0])
        key = (src, self._rank)
        self._p2p[key] += 1
        stream, state = current_stream(device), RUNTIME.device(device)
        arrival = max(stream.clock_us, state.now_us)
        host_start = perf_counter_ns()
        header = torch.empty(agreement.HEADER_LEN, dtype=torch.float64)
        self._wait(self._gloo.recv([header], src, tag), f"recv from rank {src}")
        sent = agreement.from_header(header.tolist())
        mine = Call(self._p2p[key], "send", inner.dtype, shape=tuple(inner.shape),
                    numel=inner.numel())
        if (sent.dtype, sent.numel) != (mine.dtype, mine.numel):
            raise CollectiveMismatchError(
                f"mtia_ccl: rank {self._global[self._rank]} posted recv of "
                f"{mine.describe().replace('send', 'a tensor')} from rank {self._global[src]}, "
                f"which sent {sent.describe()}. Receive into a tensor of the sender's dtype "
                "and number of elements.")
        staged = inner.contiguous()
        work = self._gloo.recv([staged], src, tag)
        cost = collective_cost("recv", _nbytes(inner), 2, state.profile)
        start, end = stream.enqueue(cost.duration_us, max(arrival, sent.arrival_us))
        call_id = f"send/recv {self._global[src]}->{self._global[self._rank]} #{mine.seq}"
        events.emit("recv", call_id, [], [events.record_of(inner, device)], device,
                    stream.stream_id, arrival, start, end, _reason(cost),
                    f"{call_id}: waited for rank {self._global[src]} to send", host_start)
        return _Work(self, [work], tensors, _copy_back(staged, inner), f"recv from rank {src}")

    def recv_anysource(self, tensors, tag: int = 0):
        raise NotImplementedError("mtia_ccl: recv from any source is not supported; name the "
                                  "sender: dist.recv(tensor, src=rank)")

    def reduce(self, tensors, opts=None):
        opts = opts or dist.ReduceOptions()
        device = self._device_of(tensors)
        if device is None:
            return self._gloo.reduce(tensors, opts)
        inner = _inner(tensors[0])
        reduce = self._reduce_name(opts)
        begun = self._begin("reduce", device, inner, reduce=reduce, root=opts.rootRank)
        # gloo all-reduces (it has no AVG); only the root keeps the result, as reduce does.
        whole = inner.contiguous().clone()
        work = self._reduce_into(whole, None, reduce, "reduce", begun)
        root, rank = opts.rootRank, self._rank

        def finish():
            work.wait()
            if rank == root:
                inner.copy_(whole)

        self._charge(begun, "reduce", _nbytes(inner), [inner], [inner], device)
        return _Work(self, [], tensors, finish, "reduce")

    def gather(self, output_lists, inputs, opts=None):
        opts = opts or dist.GatherOptions()
        device = self._device_of([*inputs, *(output_lists[0] if output_lists else [])])
        if device is None:
            return self._gloo.gather(output_lists, inputs, opts)
        inp = _inner(inputs[0])
        begun = self._begin("gather", device, inp, root=opts.rootRank)
        outs = [_inner(o) for o in output_lists[0]] if output_lists else []
        staged = [o.contiguous() for o in outs]
        gloo_opts = dist.GatherOptions()
        gloo_opts.rootRank = opts.rootRank
        work = self._gloo.gather([staged] if staged else [], [inp.contiguous()], gloo_opts)

        def finish():
            for o, s in zip(outs, staged, strict=True):
                if s is not o:
                    o.copy_(s)

        self._charge(begun, "gather", _nbytes(inp) * self._size, [inp], outs, device)
        return _Work(self, [work], output_lists, finish, "gather")

    def scatter(self, outputs, input_lists, opts=None):
        opts = opts or dist.ScatterOptions()
        device = self._device_of([*outputs, *(input_lists[0] if input_lists else [])])
        if device is None:
            return self._gloo.scatter(outputs, input_lists, opts)
        out = _inner(outputs[0])
        begun = self._begin("scatter", device, out, root=opts.rootRank)
        ins = [_inner(t).contiguous() for t in input_lists[0]] if input_lists else []
        staged = out.contiguous()
        gloo_opts = dist.ScatterOptions()
        gloo_opts.rootRank = opts.rootRank
        work = self._gloo.scatter([staged], [ins] if ins else [], gloo_opts)
        self._charge(begun, "scatter", _nbytes(out) * self._size, ins, [out], device)
        return _Work(self, [work], outputs, _copy_back(staged, out), "scatter")


__all__ = ["BACKEND_NAME", "CollectiveError", "CollectiveMismatchError", "MTIAProcessGroup",
           "device_context"]
