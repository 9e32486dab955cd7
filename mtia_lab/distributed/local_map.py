"""`local_map`: run a plain-tensor function on each rank's local shards, placements declared.

    @local_map(out_placements=[Shard(0)], in_placements=([Shard(0)], [Replicate()]))
    def scaled(x, w):          # x, w: this rank's local torch.Tensors
        return x * w

This is PyTorch's `torch.distributed.tensor.experimental.local_map`, with the declared input
placements checked first, by argument NAME. PyTorch's own check prints the whole DTensor
("arg DTensor(local_tensor=...) in local_map has a mismatched placements") and lets a plain
tensor through where a placement was declared, so the function silently runs on data that is
not what its author described. Here each mismatch raises `PlacementMismatchError`, naming the
argument, what was declared, what came, and the fix.
"""

from __future__ import annotations

import functools
import inspect

import torch

from .._compat import pytree


class PlacementMismatchError(ValueError):
    """An argument of a local_map function is not placed as its in_placements declare."""


def local_map(func=None, out_placements=None, in_placements=None, in_grad_placements=None,
              device_mesh=None, *, redistribute_inputs: bool = False):
    """PyTorch's local_map (same arguments) whose inputs are checked against `in_placements`
    by argument name. Usable as `local_map(f, ...)` or as a decorator `@local_map(...)`."""
    if func is None:
        return functools.partial(local_map, out_placements=out_placements,
                                 in_placements=in_placements,
                                 in_grad_placements=in_grad_placements, device_mesh=device_mesh,
                                 redistribute_inputs=redistribute_inputs)
    from torch.distributed.tensor.experimental import local_map as torch_local_map

    mapped = torch_local_map(func, out_placements, in_placements, in_grad_placements,
                             device_mesh, redistribute_inputs=redistribute_inputs)
    name = getattr(func, "__qualname__", repr(func))
    params = _positional_names(func)

    @functools.wraps(func)
    def checked(*args, **kwargs):
        if in_placements is not None:
            _check_inputs(name, params, args, in_placements, device_mesh, redistribute_inputs)
        return mapped(*args, **kwargs)

    return checked


def _positional_names(func) -> list[str]:
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):
        return []
    return [p.name for p in signature.parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _labels(params: list[str], args: tuple) -> list[str]:
    """A name for each flattened input: "argument 'x'", or "argument 'xs' item 2"."""
    labels = []
    for i, arg in enumerate(args):
        base = f"argument {params[i]!r}" if i < len(params) else f"positional argument {i}"
        leaves = pytree.tree_leaves(arg)
        if len(leaves) == 1 and leaves[0] is arg:
            labels.append(base)
        else:
            labels += [f"{base} item {j}" for j in range(len(leaves))]
    return labels


def _check_inputs(name, params, args, in_placements, device_mesh, redistribute) -> None:
    from torch.distributed.tensor import DTensor

    flat = pytree.tree_leaves(args)
    labels = _labels(params, args)
    if len(in_placements) != len(flat):
        raise PlacementMismatchError(
            f"local_map({name}): in_placements has {len(in_placements)} entries but the call "
            f"passed {len(flat)} inputs ({', '.join(labels)}); give one entry per input, "
            "None for inputs that are not DTensors")
    for label, arg, spec in zip(labels, flat, in_placements, strict=True):
        declared = None if spec is None else tuple(spec)
        if isinstance(arg, DTensor):
            if declared is None:
                raise PlacementMismatchError(
                    f"local_map({name}): {label} is a DTensor placed {_show(arg.placements)}, "
                    "but its in_placements entry is None (None is for non-tensor inputs); "
                    f"declare {_show(arg.placements)}")
            if device_mesh is not None and arg.device_mesh != device_mesh:
                raise PlacementMismatchError(
                    f"local_map({name}): {label} lives on {arg.device_mesh}, not on the "
                    f"declared device_mesh {device_mesh}")
            if arg.placements != declared and not redistribute:
                raise PlacementMismatchError(
                    f"local_map({name}): {label} is placed {_show(arg.placements)} but "
                    f"in_placements declares {_show(declared)}. Redistribute it first "
                    f"(x.redistribute(mesh, {_show(declared)})), pass "
                    "redistribute_inputs=True, or change the declaration")
        elif isinstance(arg, torch.Tensor) and declared is not None:
            raise PlacementMismatchError(
                f"local_map({name}): {label} is a plain torch.Tensor, but in_placements "
                f"declares {_show(declared)} for it: the function would run on it as if it "
                "were that shard. Pass a DTensor (distribute_tensor or DTensor.from_local), "
                "or declare None")
        elif not isinstance(arg, torch.Tensor) and declared is not None:
            raise PlacementMismatchError(
                f"local_map({name}): {label} is {type(arg).__name__}, not a tensor, but "
                f"in_placements declares {_show(declared)}; declare None for it")


def _show(placements) -> str:
    return "[" + ", ".join(repr(p) for p in placements) + "]"  # Shard(dim=0), not S(0)
