"""Run a generated Program on the device's memory and charge its kernels to the device clock.

Compiled code works on the inner CPU tensors that AOTAutograd unwrapped, so nothing it does
reaches `__torch_dispatch__`: the runner itself queues each kernel's simulated duration on
the device's current stream (backend/streams.py `charge`) and tells the listeners
(`add_listener`) about it -- one event per fused kernel, which is what the trace shows.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable

import torch

from ..backend import tensor as device_tensor
from ..backend.runtime import RUNTIME
from ..backend.streams import charge
from .codegen import Kernel, Program
from .pricing import combo_cost

# Called as listener(kernel, cost, span) after each kernel, span = (stream, start_us, end_us),
# or None when the graph ran on host tensors.
LISTENERS: list[Callable] = []


def add_listener(fn: Callable) -> Callable:
    """Be told about every compiled kernel that runs; returns fn (usable as a decorator)."""
    LISTENERS.append(fn)
    return fn


def remove_listener(fn: Callable) -> None:
    if fn in LISTENERS:
        LISTENERS.remove(fn)


def _device_index(args) -> int | None:
    """The device whose memory the inputs are (inner tensors keep their DeviceStorage);
    None when no input lives on the device (a graph compiled for CPU tensors)."""
    for value in args:
        if isinstance(value, torch.Tensor) and value.device.type == "cpu":
            entry = device_tensor._LIVE_STORAGES.get(value.untyped_storage().data_ptr())
            storage = entry() if isinstance(entry, weakref.ref) else entry
            if storage is not None:
                return storage.device_index
    return None


class Runner:
    """Calls a Program's kernels in order; AOTAutograd calls it with a boxed argument list."""

    def __init__(self, program: Program) -> None:
        self.program = program
        # AOTAutograd passes one list of arguments, which we may clear. An instance attribute,
        # so that the wrappers AOTAutograd puts around us (functools.wraps) copy it.
        self._boxed_call = True
        self.launches = 0  # kernels run so far (for tests and the trace)

    def __call__(self, args: list):
        program = self.program
        env = dict(zip(program.inputs, args, strict=True))
        args.clear()  # boxed calling convention: let inputs die as soon as they are unused
        index = _device_index(env.values())
        state = RUNTIME.device(index) if index is not None else None
        plan = program.plan
        combo_of = {i: c for c in plan.combos for i in c}
        for kernel in program.kernels:
            outs = kernel.fn(*[env[name] for name in kernel.inputs])
            env.update(zip(kernel.outputs, outs, strict=True))
            self._charge(kernel, state, combo_of.get(kernel.group.index))
        result = program.outputs.fn(*[env[name] for name in program.outputs.inputs])
        return list(result)

    def _charge(self, kernel: Kernel, state, combo) -> None:
        self.launches += 1
        if state is None:  # host tensors: nothing ran on the device, its clock stays put
            span = None
        elif combo is None:
            span = charge(state, kernel.cost.duration_us(state.profile))
        elif kernel.group.index == combo[0]:  # one launch for the whole combo, priced together
            groups = self.program.plan.groups
            span = charge(state, combo_cost([groups[i].cost for i in combo])
                          .duration_us(state.profile))
        else:  # the rest of a combo ran inside the first member's launch
            stream, _, end = charge(state, 0.0)
            span = (stream, end, end)
        for listener in LISTENERS:
            listener(kernel, kernel.cost, span)
