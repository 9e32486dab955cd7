"""Run a generated Program on the device's memory and charge its kernels to the device clock.

Compiled code works on the inner CPU tensors that AOTAutograd unwrapped, so nothing it does
reaches `__torch_dispatch__`: the runner itself queues each kernel's simulated duration on
the device's current stream (backend/runtime/streams.py `charge`) and tells the listeners
(`add_listener`) about it -- one event per fused kernel, which is what the trace shows.

A graph with symbolic sizes (dynamic shapes) was planned at the sizes it was compiled for; at
any other size the runner prices the same kernels again from the graph (once per size, then
cached), so the clock moves by what this call's tensors cost.

Memory, as on a real device: the graph's outputs become device tensors after the call
(`MTIATensor.__tensor_unflatten__` wraps them with `tensor.wrap`, which takes a block from the
caching allocator, or shares the storage of an input they alias). Intermediates -- buffers one
kernel writes and a later one reads -- hold a block of the same allocator from the kernel that
writes them to the last kernel that reads them, so `memory_allocated` and the peak during a
compiled call count them; what fusion kept on chip never takes device memory at all. (The
outputs' blocks are taken as the call returns, after the intermediates went back: a call's peak
counts its intermediates, not the outputs next to them.)
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch

from .._compat import size_symbol
from ..backend.aten import tensor as device_tensor
from ..backend.runtime import oom
from ..backend.runtime.cost import KernelCost
from ..backend.runtime.device_state import RUNTIME
from ..backend.runtime.streams import charge
from . import layout, recompute, scatter
from .codegen import Kernel, Program
from .ir import FusedSchedulerNode, build_ir, sizes_at
from .pricing import combo_cost, kernel_cost

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


def _is_collective(kernel: Kernel) -> bool:
    """A kernel of a functional collective ("all_reduce: _c10d_functional.all_reduce..."). A
    collective is an extern node, never fused: at most views (getitem) share its kernel."""
    return any("_c10d_functional" in node for node in kernel.aten_nodes)


def _collective_context(has_collective: bool) -> Callable | None:
    """distributed's `device_context` when the graph has collectives (imported only then: a
    graph without one does not pay for torch.distributed)."""
    if not has_collective:
        return None
    from ..distributed.collective_steps import device_context

    return device_context


def _lifetimes(program: Program) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
    """Per kernel: the intermediates it writes, and those it is the last reader of. Graph
    outputs are not intermediates (they outlive the call as device tensors)."""
    outputs = set(program.outputs.inputs)
    last: dict[str, int] = {}
    held: list[tuple[str, ...]] = []
    for i, kernel in enumerate(program.kernels):
        for name in kernel.inputs:
            if name in last:
                last[name] = i
        written = tuple(b for b in kernel.outputs if b not in outputs)
        held.append(written)
        last.update((b, i) for b in written)  # unread: freed right after it is written
    last_read: list[list[str]] = [[] for _ in program.kernels]
    for name, i in last.items():
        last_read[i].append(name)
    return held, [tuple(names) for names in last_read]


class Runner:
    """Calls a Program's kernels in order; AOTAutograd calls it with a boxed argument list."""

    def __init__(self, program: Program, gm: torch.fx.GraphModule | None = None) -> None:
        self.program = program
        self.gm = gm
        # Graph inputs that are sizes (`s0` under dynamic shapes): (position, sympy symbol).
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"] if gm else []
        self._symbols = [(i, symbol) for i, n in enumerate(placeholders)
                         if (symbol := size_symbol(n.meta.get("val"))) is not None]
        self._costs: dict[tuple[int, ...], list[KernelCost]] = {}  # sizes -> cost per kernel
        self._held, self._last_read = _lifetimes(program)
        self._collective = [_is_collective(k) for k in program.kernels]
        self._device_context = _collective_context(any(self._collective))
        # AOTAutograd passes one list of arguments, which we may clear. An instance attribute,
        # so that the wrappers AOTAutograd puts around us (functools.wraps) copy it.
        self._boxed_call = True
        self.launches = 0  # kernels run so far (for tests and the trace)

    @contextmanager
    def running(self, program: Program) -> Iterator[Runner]:
        """Run `program` instead, within the block: another plan of the same graph (the same
        inputs and outputs), called through the compiled function that Dynamo and AOTAutograd
        already built, so that comparing two plans' results needs no second trace."""
        if program.inputs != self.program.inputs:
            raise ValueError("Runner.running: the program is of another graph (its inputs "
                             f"{program.inputs[:4]}... are not {self.program.inputs[:4]}...)")
        kept = dict(self.__dict__)
        self.__init__(program, self.gm)
        try:
            yield self
        finally:
            self.__dict__.clear()
            self.__dict__.update(kept)

    def __call__(self, args: list):
        program = self.program
        costs = self.costs_at(tuple(args[i] for i, _ in self._symbols)) if self._symbols else None
        env = dict(zip(program.inputs, args, strict=True))
        args.clear()  # boxed calling convention: let inputs die as soon as they are unused
        index = _device_index(env.values())
        state = RUNTIME.device(index) if index is not None else None
        plan = program.plan
        combo_of = {i: c for c in plan.combos for i in c}
        blocks: dict[str, object] = {}  # intermediate buffer -> its allocator block
        try:
            for i, kernel in enumerate(program.kernels):
                try:
                    outs = self._run(i, kernel, env, index)
                except RuntimeError as error:  # a host allocation failure is the device's OOM
                    if index is None:
                        raise
                    raise oom.device_error(error, index, f"compiled {kernel.name}")  # noqa: B904
                env.update(zip(kernel.outputs, outs, strict=True))
                if state is not None:
                    for name in self._held[i]:
                        blocks[name] = state.allocator.malloc(
                            env[name].untyped_storage().nbytes(), f"compiled {kernel.name}")
                if not (self._collective[i] and state is not None):  # mtia_ccl charged it
                    self._charge(kernel, state, combo_of.get(kernel.group.index), costs)
                for name in self._last_read[i]:  # its last reader ran: free it
                    env.pop(name, None)
                    if name in blocks:
                        state.allocator.free(blocks.pop(name))
        finally:
            for block in blocks.values():  # a kernel raised
                state.allocator.free(block)
        result = program.outputs.fn(*[env[name] for name in program.outputs.inputs])
        return list(result)

    def _run(self, i: int, kernel: Kernel, env: dict, index: int | None):
        """Run one kernel; a collective's host tensors are device `index`'s memory."""
        args = [env[name] for name in kernel.inputs]
        if not self._collective[i] or index is None:
            return kernel.fn(*args)
        with self._device_context(index):
            return kernel.fn(*args)

    def costs_at(self, sizes: tuple[int, ...]) -> list[KernelCost]:
        """The cost of each kernel of the plan when the graph's size inputs are `sizes`."""
        costs = self._costs.get(sizes)
        if costs is None:
            values = {symbol: size for (_, symbol), size in zip(self._symbols, sizes, strict=True)}
            ir = build_ir(self.gm, sizes_at(values))
            plan = self.program.plan
            if plan.layout_copies or any(  # Inductor's layout copies of convolution
                    n.startswith(layout.BIAS_PREFIX) for g in plan.groups for n in g.nodes):
                ir = layout.split(ir)  # operands, the bias adds it peeled off them
            if plan.scatter_copies:  # Inductor's copies of a scatter's input
                ir = scatter.split(ir)
            if plan.recomputed:  # each reader's kernel computes them again (recompute.py)
                ir = recompute.split(ir, plan.recomputed)
            costs = self._costs[sizes] = [
                kernel_cost(FusedSchedulerNode(recompute.members(ir, group.nodes)), ir)
                for group in plan.groups
            ]
        return costs

    def _charge(self, kernel: Kernel, state, combo, costs: list[KernelCost] | None) -> None:
        self.launches += 1
        index = kernel.group.index
        cost = kernel.cost if costs is None else costs[index]
        if state is None:  # host tensors: nothing ran on the device, its clock stays put
            span = None
        elif combo is None:
            span = charge(state, cost.duration_us(state.profile))
        elif index == combo[0]:  # one launch for the whole combo, priced together
            members = [(costs[i] if costs is not None else self.program.plan.groups[i].cost)
                       for i in combo]
            span = charge(state, combo_cost(members).duration_us(state.profile))
        else:  # the rest of a combo ran inside the first member's launch
            charged = charge(state, 0.0)
            span = charged._replace(start_us=charged.end_us)
        for listener in LISTENERS:
            listener(kernel, cost, span)
