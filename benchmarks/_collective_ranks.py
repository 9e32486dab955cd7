"""The rank side of bench_collectives.py (a module: launched ranks import it by name)."""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from mtia_lab.distributed import collective_cost

COLLECTIVES = ("all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor",
               "all_to_all_single", "broadcast")


def _call(name: str, x: torch.Tensor, out: torch.Tensor, group) -> None:
    if name == "all_reduce":
        dist.all_reduce(x, group=group)
    elif name == "all_gather_into_tensor":
        dist.all_gather_into_tensor(out, x, group=group)
    elif name == "reduce_scatter_tensor":
        dist.reduce_scatter_tensor(x[: x.numel() // dist.get_world_size()], x, group=group)
    elif name == "all_to_all_single":
        dist.all_to_all_single(out[: x.numel()], x, group=group)
    elif name == "broadcast":
        dist.broadcast(x, src=0, group=group)


def _best_us(fn, calls: int, rounds: int, sync) -> float:
    best = float("inf")
    for _ in range(rounds):
        sync()  # every rank starts the round together
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls)
    return best * 1e6


def measure(sizes: tuple[int, ...], rounds: int, calls: int) -> list[dict]:
    """Per-call host time of each collective: device tensors through mtia_ccl (the default
    group), and host tensors through a plain gloo group, in the same processes."""
    torch.set_num_threads(1)
    world = dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    from mtia_lab.backend.runtime.device_state import RUNTIME

    rows = []
    for nbytes in sizes:
        n = nbytes // 4
        host = torch.ones(n)
        host_out = torch.empty(n * world)
        device = host.to("mtia_sim")
        device_out = host_out.to("mtia_sim")
        for name in COLLECTIVES:
            sync = lambda: dist.barrier(group=gloo)  # noqa: E731
            dev_us = _best_us(lambda a=(name, device, device_out, None): _call(*a), calls,
                              rounds, sync)
            gloo_us = _best_us(lambda a=(name, host, host_out, gloo): _call(*a), calls,
                               rounds, sync)
            kind = {"all_reduce": "allreduce", "all_gather_into_tensor": "allgather",
                    "reduce_scatter_tensor": "reduce_scatter", "all_to_all_single": "alltoall",
                    "broadcast": "broadcast"}[name]
            model_bytes = nbytes * world if kind == "allgather" else nbytes
            sim = collective_cost(kind, model_bytes, world, RUNTIME.profile).duration_us
            rows.append({"collective": name, "bytes": nbytes, "device_us": dev_us,
                         "gloo_us": gloo_us, "sim_us": sim})
    return rows
