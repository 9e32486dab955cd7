"""Each Triton kernel launch of Inductor-compiled code: run on host memory, charge, tell.

Inductor's wrapper calls `kernel.run(*args, stream=...)` on its CachingAutotuner with device
tensors (MTIATensors). The hook (installed once on the CachingAutotuner class, inert for other
devices):
  1. hands Triton's interpreter the inner host tensors -- the device memory itself, so writes
     land where the device tensors see them;
  2. prices the launch with the roofline (backend/runtime/cost.py): bytes from Inductor's own
     estimate of the kernel (`kernel_num_gb`, written bytes = the arguments it mutates), flops
     from its `estimate_flops` when it has one, else one vector op per element written (the
     eager rule); a kernel of symbolic sizes (dynamic shapes) has no estimate (it would hold at
     one size only): its bytes are those of the tensor arguments of this launch;
  3. charges it to the current stream of the device (streams.charge), as an eager op would be;
  4. tells LISTENERS (the trace: trace_events.py) with a `TritonLaunch` record.
While a device graph captures, step 3 is a recorded graph node instead (`_captured`).
Extern kernels (mm, convolution, the keep-list) are not launches here: they are eager ATen
calls on device tensors, served and charged by the dispatcher like any eager op.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..backend.aten import graph_capture
from ..backend.aten.tensor import MTIATensor
from ..backend.runtime.cost import (
    REDUCTION_PREFIXES,
    KernelCost,
    loop_gathers,
    outer_block_columns,
    source_numel,
)
from ..backend.runtime.device_state import RUNTIME
from ..backend.runtime.streams import charge
from . import _compat, errors
from .kernels import KernelInfo, kernel_info

_LOW = (torch.bfloat16, torch.float16)
# listener(launch: TritonLaunch, cost: KernelCost, span: (stream, start_us, end_us))
LISTENERS: list[Callable] = []


@dataclass(frozen=True)
class TritonLaunch:
    kernel: KernelInfo
    grid: tuple[int, ...]
    blocks: dict[str, int]  # Inductor's block sizes for it (XBLOCK, R0_BLOCK...): its config
    inputs: tuple[torch.Tensor, ...]  # device tensors it read (only those it did not write)
    outputs: tuple[torch.Tensor, ...]  # device tensors it wrote (in_out_ptr and out_ptr)


def launch_cost(autotuner, args) -> KernelCost:
    """The roofline terms of one launch (see the module docstring)."""
    names = list(autotuner.fn.arg_names)
    mutated = _compat.written_arg_names(autotuner)
    written = sum(a.nbytes for n, a in zip(names, args, strict=False)
                  if n in mutated and isinstance(a, torch.Tensor))
    total_args = sum(a.nbytes for a in args if isinstance(a, torch.Tensor))
    num_gb = autotuner.inductor_meta.get("kernel_num_gb")
    total = int(round(num_gb * 1e9)) if num_gb else total_args
    flops = autotuner.inductor_meta.get("kernel_flop")
    elements = sum(a.numel() for n, a in zip(names, args, strict=False)
                   if n in mutated and isinstance(a, torch.Tensor))
    low = any(isinstance(a, torch.Tensor) and a.dtype in _LOW for a in args)
    name = _compat.kernel_name_of(autotuner)
    reduction = name.startswith(REDUCTION_PREFIXES)
    source = _compat.kernel_source(autotuner) if reduction else ""
    gathers = loop_gathers(source) if reduction else 0
    columns = 0  # a persistent reduction's columns a program, where its hint sets its config
    if name.startswith("triton_per_"):
        numel = source_numel(source)
        columns = outer_block_columns(_compat.reduction_hint(autotuner),
                                      numel.get("xnumel", 0), numel.get("r0_numel", 0))
    return KernelCost(0.0, float(flops or elements), max(total - written, 0), written, 0, low,
                      reduction=reduction, gathers=gathers, block_columns=columns)


def _split(autotuner, args) -> tuple[tuple, tuple]:
    mutated = _compat.written_arg_names(autotuner)
    pairs = list(zip(autotuner.fn.arg_names, args, strict=False))
    outs = tuple(a for n, a in pairs if n in mutated and isinstance(a, MTIATensor))
    ins = tuple(a for n, a in pairs if n not in mutated and isinstance(a, MTIATensor))
    return ins, outs


def _info(autotuner) -> KernelInfo:
    info = getattr(autotuner, "_mtia_lab_info", None)
    if info is None:
        info = autotuner._mtia_lab_info = kernel_info(
            _compat.kernel_name_of(autotuner), _compat.kernel_source(autotuner))
    return info


def _execute(original, autotuner, host: list, launch: tuple, stream, kwargs: dict):
    """Run one launch on host memory: the whole grid as one NumPy program (whole_grid/)
    when the kernel allows it, else program by program, as Triton's interpreter does.
    `launch`: (arguments, grid, constexprs), as Inductor's interpreted launch makes them."""
    from . import whole_grid

    def per_program():
        return original(autotuner, *host, stream=stream, **kwargs)

    name = _compat.kernel_name_of(autotuner)
    refusal = "keyword arguments" if kwargs else _compat.whole_grid_refusal(autotuner)
    if refusal is not None:
        return whole_grid.run_per_program(name, refusal, per_program)
    args, grid, constexprs = launch
    written = [a for n, a in zip(autotuner.fn.arg_names, args, strict=False)
               if n in _compat.written_arg_names(autotuner) and isinstance(a, torch.Tensor)]
    state = autotuner.__dict__.setdefault("_mtia_lab_grid", {})
    return whole_grid.launch(autotuner.fn, name, grid, args, constexprs, written, state,
                             per_program)


def install() -> None:
    """Wrap CachingAutotuner.run (idempotent)."""
    cls = _compat.caching_autotuner()
    original = cls.run
    if getattr(original, "_mtia_lab", False):
        return

    def run(self, *args, stream, **kwargs):
        device = next((a for a in args if isinstance(a, MTIATensor)), None)
        if device is None:
            return original(self, *args, stream=stream, **kwargs)
        host = [a._inner if isinstance(a, MTIATensor) else a for a in args]
        launch = _compat.interpreter_launch(self, host)
        try:
            result = _execute(original, self, host, launch, stream, kwargs)
        except Exception as error:  # one clear error naming the kernel and its aten nodes
            info = _info(self)
            clear = errors.kernel_failed(info.name, ", ".join(info.nodes) or "?", error)
            clear.interpreter_error = error  # kept, not chained: its traceback is Triton's
            raise clear from None
        state = RUNTIME.device(device._storage.device_index)
        cost = launch_cost(self, args)
        ins, outs = _split(self, args)
        span = None
        if not _captured(self, state, cost, ins, outs, (self, *host), {"stream": stream, **kwargs}):
            span = charge(state, cost.duration_us(state.profile))
        if LISTENERS:
            record = TritonLaunch(_info(self), launch[1], launch[2], ins, outs)
            for listener in LISTENERS:
                listener(record, cost, span)
        return result

    run._mtia_lab = True
    cls.run = run
    _ORIGINAL_RUN.append(original)


_ORIGINAL_RUN: list[Callable] = []


def _captured(autotuner, state, cost, ins, outs, args, kwargs) -> bool:
    """While a device graph captures (torch.mtia_sim.graph, or mode="reduce-overhead"), the
    launch is recorded for replays (which redo Inductor's own launcher on the same host memory)
    instead of charged now: the graph's clock moves at replay, as for eager ops."""
    return graph_capture.record_launch(
        state.index, _info(autotuner).name, tuple(t._inner for t in ins),
        tuple(t._inner for t in outs), cost.duration_us(state.profile), _ORIGINAL_RUN[0], args,
        kwargs)
