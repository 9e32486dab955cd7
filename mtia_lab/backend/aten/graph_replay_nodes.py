"""What a captured graph is made of: one `GraphNode` per recorded kernel (graph_capture.py
records them).

A node is a prepared call on the device's memory (inner CPU tensors), chosen so that a replay
needs no dispatch and no allocation:

- "out="      the op's `out=` overload writes the captured output buffers (`mm` -> `mm.out`);
- "in-place"  the op writes its arguments, exactly as captured (`add_`, `copy_`, `normal_`);
- "copy"      no usable `out=` overload: the kernel runs, its results are copied into the buffers;
- "launch"    a kernel launched without the dispatcher (Inductor's Triton kernels), redone as is.

Buffers that only live inside the graph then share host memory, as their device blocks share the
graph's private pool (`share_dead_buffers`): a chain of 50 ops touches a few buffers, not 50.
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from ..._compat import OpOverload, op_schema
from .registry import Kernel, run_on_device
from .schema import facts


@dataclass(frozen=True, eq=False)
class GraphNode:
    """One recorded kernel: `call(*args, **kwargs)` redoes it on the captured buffers."""

    op: str  # "aten::addmm"
    how: str  # "out=", "in-place", "copy" or "launch" (see the module docstring)
    inputs: tuple[torch.Tensor, ...]  # inner (CPU) tensors of the device memory it reads
    outputs: tuple[torch.Tensor, ...]  # inner tensors of the buffers it writes
    device_us: float  # simulated kernel time without the launch (a replay launches once)
    call: Callable[..., object]
    args: tuple
    kwargs: dict

    def prepared(self) -> Callable[[], object]:
        return functools.partial(self.call, *self.args, **self.kwargs)

    def __repr__(self) -> str:
        shapes = ", ".join(str(tuple(t.shape)) for t in self.outputs)
        return f"GraphNode({self.op}, {self.how}, -> {shapes}, {self.device_us:.3f} us)"


def node_for(func, kernel: Kernel, args: tuple, kwargs: dict, out, device) -> GraphNode | None:
    """How a replay redoes `func` (which `kernel` just ran on `args`, giving `out`); None if
    it wrote nothing on the device."""
    op_facts = facts(func)
    name = op_facts.name
    inputs = tuple(tensors_in((args, kwargs)))
    results = out if isinstance(out, (tuple, list)) else (out,)
    aliases = op_facts.return_aliases
    input_ptrs = {t.untyped_storage().data_ptr() for t in inputs}
    fresh = [
        (i, r) for i, r in enumerate(results)
        if isinstance(r, torch.Tensor)
        and not (i < len(aliases) and aliases[i] is not None)
        and r.untyped_storage().data_ptr() not in input_ptrs
    ]
    written = tuple(tensors_in([op_facts.arg(args, kwargs, where) for where in op_facts.mutated]))
    direct = kernel.fn is run_on_device
    if not fresh:
        if not written:
            return None
        if direct:
            return GraphNode(name, "in-place", inputs, written, 0.0, func, args, kwargs)
        return GraphNode(
            name, "in-place", inputs, written, 0.0, kernel.fn, (func, args, kwargs, device), {}
        )
    positions = tuple(i for i, _ in fresh)
    buffers = tuple(r for _, r in fresh)
    variant = out_variant(func) if direct and not written else None
    if (
        variant is not None
        and len(fresh) == len(results) == len(variant[1])
        and (op_facts.has_generator or _out_variant_fits(variant, args, kwargs, buffers))
    ):
        outs = dict(zip(variant[1], buffers, strict=True))
        return GraphNode(name, "out=", inputs, buffers, 0.0, variant[0], args, {**kwargs, **outs})
    call_args = (kernel.fn, func, args, kwargs, device, positions, buffers)
    return GraphNode(name, "copy", inputs, written + buffers, 0.0, _run_and_copy, call_args, {})


def _run_and_copy(kernel_fn, func, args, kwargs, device, positions, buffers) -> None:
    new = kernel_fn(func, args, kwargs, device)
    new = new if isinstance(new, (tuple, list)) else (new,)
    for position, buffer in zip(positions, buffers, strict=True):
        buffer.copy_(new[position])


def tensors_in(value) -> list[torch.Tensor]:
    """Every tensor in nested tuples, lists and dicts."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in tensors_in(item)]
    if isinstance(value, dict):
        return [t for item in value.values() for t in tensors_in(item)]
    return []


_OUT_VARIANTS: dict = {}


def out_variant(func) -> tuple[OpOverload, tuple[str, ...]] | None:
    """The `out=` overload of a functional op and its out argument names, if it has one:
    same arguments (names and types) plus keyword-only out tensors, one per result."""
    if func in _OUT_VARIANTS:
        return _OUT_VARIANTS[func]
    schema = op_schema(func)
    signature = [(a.name, str(a.type)) for a in schema.arguments]
    found = None
    packet = func.overloadpacket
    for overload_name in packet.overloads():
        candidate = getattr(packet, overload_name)
        arguments = op_schema(candidate).arguments
        outs = tuple(a.name for a in arguments if a.is_out)
        if not outs or len(outs) != len(schema.returns):
            continue
        if [(a.name, str(a.type)) for a in arguments if not a.is_out] == signature:
            found = (candidate, outs)
            break
    _OUT_VARIANTS[func] = found
    return found


def _out_variant_fits(variant, args, kwargs, buffers) -> bool:
    """Run the out= overload once into empty tensors: does it give the captured values, using
    only the room of its results? (Some use `out` as scratch space first: mse_loss.out resizes
    a 0-d out to the input's size, which on a real buffer warns or moves its memory.)"""
    op, names = variant
    trial = [torch.empty(0, dtype=b.dtype) for b in buffers]
    try:
        op(*args, **kwargs, **dict(zip(names, trial, strict=True)))
    except Exception:  # noqa: BLE001  (any failure: replay uses the kernel and copy_ instead)
        return False
    return all(
        t.shape == b.shape and t.untyped_storage().nbytes() == t.nbytes and torch.equal(t, b)
        for t, b in zip(trial, buffers, strict=True)
    )


def share_dead_buffers(
    nodes: list[GraphNode], made_in_capture: set[int], alive: Callable[[int], bool]
) -> list[GraphNode]:
    """Let the buffers nobody outside the graph can see share host memory.

    A buffer qualifies if it was allocated during the capture (`made_in_capture`: host
    pointers) and no device tensor uses it any more (`alive(ptr)` is False): an intermediate.
    Walking the nodes in order, a qualifying buffer first used by node i takes the host memory
    of one whose last use came before i (best fit by size), the same reuse the private pool
    made of their device blocks. Tensors on a moved buffer (views too) are rebuilt on the new
    memory with their own size, strides and offset."""
    storages: dict[int, torch.UntypedStorage] = {}
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for i, node in enumerate(nodes):
        for t in tensors_in((node.args, node.kwargs)):
            storage = t.untyped_storage()
            ptr = storage.data_ptr()
            storages[ptr] = storage
            first.setdefault(ptr, i)
            last[ptr] = i
    movable = [p for p in storages if p and p in made_in_capture and not alive(p)]
    born: dict[int, list[int]] = {}
    dying: dict[int, list[int]] = {}
    for ptr in movable:
        born.setdefault(first[ptr], []).append(ptr)
        dying.setdefault(last[ptr], []).append(ptr)
    free: list[tuple[int, int, torch.UntypedStorage]] = []  # (nbytes, ptr, memory), sorted
    home: dict[int, torch.UntypedStorage] = {}  # buffer ptr -> the memory it now uses
    for i in range(len(nodes)):
        for ptr in born.get(i, ()):
            need = storages[ptr].nbytes()
            index = bisect.bisect_left(free, (need, -1))
            home[ptr] = free.pop(index)[2] if index < len(free) else storages[ptr]
        for ptr in dying.get(i, ()):
            memory = home[ptr]
            bisect.insort(free, (memory.nbytes(), memory.data_ptr(), memory))
    moved = {ptr: memory for ptr, memory in home.items() if memory.data_ptr() != ptr}
    if not moved:
        return nodes
    memo: dict[int, torch.Tensor] = {}

    def rebuilt(value):
        if isinstance(value, torch.Tensor):
            memory = moved.get(value.untyped_storage().data_ptr())
            if memory is None:
                return value
            if id(value) not in memo:
                memo[id(value)] = torch.empty(0, dtype=value.dtype).set_(
                    memory, value.storage_offset(), value.size(), value.stride()
                )
            return memo[id(value)]
        if type(value) in (tuple, list):
            return type(value)(rebuilt(item) for item in value)
        if type(value) is dict:
            return {key: rebuilt(item) for key, item in value.items()}
        return value

    return [
        replace(
            node, inputs=rebuilt(node.inputs), outputs=rebuilt(node.outputs),
            args=rebuilt(node.args), kwargs=rebuilt(node.kwargs),
        )
        for node in nodes
    ]
