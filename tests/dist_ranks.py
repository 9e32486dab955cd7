"""Rank functions for tests/test_distributed.py (a module: launched ranks import them by name).

`world_checks` runs every check of one world size in one launch (starting ranks costs
seconds: torch is imported once per rank); it returns plain values and CPU tensors, and the
test compares them with what one device computes."""

from __future__ import annotations

import os
import signal
import time

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as fc
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor

import mtia_lab
from mtia_lab.backend.runtime.streams import current_stream
from mtia_lab.distributed import CollectiveMismatchError, PlacementMismatchError, examples
from mtia_lab.distributed import local_map as checked_local_map

DEVICE = "mtia_sim"
N = 6  # elements per rank in the collective checks


def rank_input(rank: int, n: int = N) -> torch.Tensor:
    """What rank `rank` contributes: distinct per rank and element (the test rebuilds it)."""
    return torch.arange(n, dtype=torch.float32) + 100 * rank


def _all_inputs(world: int) -> list[torch.Tensor]:
    return [rank_input(r) for r in range(world)]


def _collectives(out: dict) -> None:
    rank, world = dist.get_rank(), dist.get_world_size()
    mine = rank_input(rank).to(DEVICE)
    for name, op in (("sum", dist.ReduceOp.SUM), ("avg", dist.ReduceOp.AVG),
                     ("max", dist.ReduceOp.MAX)):
        t = mine.clone()
        dist.all_reduce(t, op=op)
        out[f"all_reduce_{name}"] = t.cpu()
    gathered = torch.empty(world * N, device=DEVICE)
    dist.all_gather_into_tensor(gathered, mine)
    out["all_gather_into_tensor"] = gathered.cpu()
    pieces = [torch.empty(N, device=DEVICE) for _ in range(world)]
    dist.all_gather(pieces, mine)
    out["all_gather"] = torch.stack([p.cpu() for p in pieces])
    big = rank_input(rank, world * N).to(DEVICE)
    shard = torch.empty(N, device=DEVICE)
    dist.reduce_scatter_tensor(shard, big)
    out["reduce_scatter_tensor"] = shard.cpu()
    shard = torch.empty(N, device=DEVICE)
    dist.reduce_scatter(shard, list(big.chunk(world)))
    out["reduce_scatter"] = shard.cpu()
    swapped = torch.empty(world * N, device=DEVICE)
    dist.all_to_all_single(swapped, big)
    out["all_to_all_single"] = swapped.cpu()
    pieces = [torch.empty(N, device=DEVICE) for _ in range(world)]
    dist.all_to_all(pieces, list(big.chunk(world)))
    out["all_to_all"] = torch.cat([p.cpu() for p in pieces])
    t = mine.clone()
    dist.broadcast(t, src=world - 1)
    out["broadcast"] = t.cpu()
    dist.barrier()
    # send/recv around a ring, async handles
    received = torch.empty(N, device=DEVICE)
    request = dist.isend(mine * 2, dst=(rank + 1) % world)
    dist.recv(received, src=(rank - 1) % world)
    request.wait()
    out["recv"] = received.cpu()
    t = mine.clone()
    work = dist.all_reduce(t, async_op=True)
    out["async_completed_before_wait"] = work.is_completed()
    work.wait()
    out["async_all_reduce"] = t.cpu()
    # a non-contiguous device tensor (a transposed view): written back through its strides
    square = (rank_input(rank, 16).view(4, 4)).to(DEVICE).t()
    dist.all_reduce(square)
    out["all_reduce_transposed"] = square.cpu()
    # host tensors go through the same group, to gloo untouched
    host = rank_input(rank)
    dist.all_reduce(host)
    out["all_reduce_host"] = host
    # functional collectives (what DTensor calls)
    group = dist.group.WORLD
    out["fc_all_reduce"] = fc.all_reduce(mine, "sum", group).cpu()
    out["fc_all_gather"] = fc.all_gather_tensor(mine, 0, group).cpu()
    out["fc_reduce_scatter"] = fc.reduce_scatter_tensor(big, "sum", 0, group).cpu()
    out["fc_all_to_all"] = fc.all_to_all_single(big, None, None, group).cpu()
    out["fc_broadcast"] = fc.broadcast(mine, 0, group).cpu()
    # rooted collectives, objects, other dtypes
    pieces = [torch.empty(N, device=DEVICE) for _ in range(world)] if rank == 0 else None
    dist.gather(mine, pieces, dst=0)
    out["gather"] = torch.stack([p.cpu() for p in pieces]) if pieces else None
    t = torch.empty(N, device=DEVICE)
    dist.scatter(t, [x.to(DEVICE) for x in _all_inputs(world)] if rank == 0 else None, src=0)
    out["scatter"] = t.cpu()
    t = mine.clone()
    dist.reduce(t, dst=world - 1, op=dist.ReduceOp.AVG)
    out["reduce_avg"] = t.cpu()
    objects = [None] * world
    dist.all_gather_object(objects, {"rank": rank})
    out["all_gather_object"] = objects
    t = torch.ones(N, dtype=torch.bfloat16, device=DEVICE)
    dist.all_reduce(t)
    out["all_reduce_bf16"] = t.cpu()
    t = torch.full((N,), 3 + rank, dtype=torch.int64, device=DEVICE)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    out["all_reduce_avg_int64"] = t.cpu()
    # the simulated clocks agree after a collective
    dist.barrier()
    out["clock_us"] = current_stream(0).clock_us
    out["device"] = str(mine.device)
    out["chip"] = torch.mtia_sim.get_device_properties(0).name
    out["visible"] = os.environ["MTIA_SIM_VISIBLE_DEVICES"]


def _mismatches(out: dict) -> None:
    """Mismatched calls raise on every rank at once, and the group stays usable."""
    rank = dist.get_rank()
    errors = {}
    cases = {
        "shape": lambda: dist.all_reduce(torch.ones(4 + 4 * (rank == 1), device=DEVICE)),
        "dtype": lambda: dist.all_reduce(torch.ones(4, device=DEVICE,
                                                    dtype=(torch.float64 if rank == 1
                                                           else torch.float32))),
        "collective": lambda: (dist.broadcast(torch.ones(4, device=DEVICE), src=0) if rank == 1
                               else dist.all_reduce(torch.ones(4, device=DEVICE))),
    }
    for name, call in cases.items():
        try:
            call()
            errors[name] = None
        except CollectiveMismatchError as error:
            errors[name] = str(error)
    out["mismatch"] = errors
    t = torch.ones(4, device=DEVICE)
    dist.all_reduce(t)
    out["after_mismatch"] = t.cpu()


def _dtensor(out: dict) -> None:
    world = dist.get_world_size()
    mesh = dist.init_device_mesh(DEVICE, (world,))
    torch.manual_seed(0)
    x, w = torch.randn(8, 4 * world), torch.randn(4 * world, 3)
    d = distribute_tensor(x.to(DEVICE), mesh, [Shard(0)])
    out["dt_local"] = d.to_local().cpu()
    out["dt_full"] = d.full_tensor().cpu()
    out["dt_replicate"] = d.redistribute(mesh, [Replicate()]).to_local().cpu()
    out["dt_shard1_local"] = d.redistribute(mesh, [Shard(1)]).to_local().cpu()
    out["dt_matmul"] = (d @ distribute_tensor(w.to(DEVICE), mesh, [Replicate()])).full_tensor(
    ).cpu()
    colwise = distribute_tensor(x.to(DEVICE), mesh, [Shard(1)])
    rowwise = distribute_tensor(w.to(DEVICE), mesh, [Shard(0)])
    product = colwise @ rowwise  # a Partial result: the sum is reduced on full_tensor()
    out["dt_partial_placement"] = str(product.placements[0])
    out["dt_partial_full"] = product.full_tensor().cpu()
    p = DTensor.from_local(torch.ones(3, device=DEVICE) * (dist.get_rank() + 1), mesh,
                           [Partial()])
    out["dt_from_partial"] = p.full_tensor().cpu()
    out["dt_sum"] = d.sum().full_tensor().cpu()
    uneven = torch.arange(7 * 3, dtype=torch.float32).view(7, 3)  # 7 rows over the ranks
    du = distribute_tensor(uneven.to(DEVICE), mesh, [Shard(0)])
    out["dt_uneven_local_rows"] = du.to_local().shape[0]
    out["dt_uneven_full"] = (du * 2).full_tensor().cpu()
    # local_map: the function sees local shards; mismatches name the argument
    scaled = checked_local_map(lambda_free_scale, out_placements=[Shard(0)],
                               in_placements=([Shard(0)], [Replicate()]))
    scale = distribute_tensor(torch.full((4 * world,), 3.0).to(DEVICE), mesh, [Replicate()])
    out["local_map"] = scaled(d, scale).full_tensor().cpu()
    errors = {}
    for name, args in (("replicated_x", (d.redistribute(mesh, [Replicate()]), scale)),
                       ("plain_scale", (d, torch.ones(4 * world, device=DEVICE)))):
        try:
            scaled(*args)
            errors[name] = None
        except PlacementMismatchError as error:
            errors[name] = str(error)
    out["local_map_errors"] = errors
    if world == 4:
        mesh2 = dist.init_device_mesh(DEVICE, (2, 2), mesh_dim_names=("dp", "tp"))
        d2 = distribute_tensor(x.to(DEVICE), mesh2, [Shard(0), Shard(1)])
        out["dt2_local"] = d2.to_local().cpu()
        out["dt2_full"] = d2.full_tensor().cpu()
        out["dt2_redistributed_local"] = d2.redistribute(
            mesh2, [Replicate(), Shard(0)]).to_local().cpu()
        dp = mesh2.get_coordinate()[0]
        p2 = DTensor.from_local(torch.ones(3, device=DEVICE) * (dp + 1), mesh2,
                                [Partial(), Replicate()])
        out["dt2_partial_full"] = p2.full_tensor().cpu()
        out["coordinate"] = mesh2.get_coordinate()


def lambda_free_scale(x, scale):
    """A local_map body: x is this rank's rows, scale the whole (replicated) vector."""
    return x * scale


def _traced(out: dict) -> None:
    """A trace of two collectives in which rank 1 is slower: the others wait for it."""
    rank = dist.get_rank()
    with mtia_lab.trace(f"rank {rank}") as trace:
        a = torch.ones(64, 64, device=DEVICE)
        if rank == 1:
            for _ in range(3):
                a = a @ a
        dist.all_reduce(a)
        dist.all_gather_into_tensor(torch.empty(dist.get_world_size() * 8, device=DEVICE),
                                    torch.ones(8, device=DEVICE))
    out["trace"] = trace


def fsdp2_training(steps: int = 2, lr: float = 0.1) -> dict:
    """`steps` SGD steps of the block under FSDP2 (fully_shard: parameters sharded over the
    ranks, gathered for compute, freed after by resizing their storage to zero), each rank on
    its slice of the batch, as examples.data_parallel does with DDP."""
    from torch.distributed.fsdp import fully_shard

    rank, world = dist.get_rank(), dist.get_world_size()
    block = examples.make_block().to(DEVICE)
    fully_shard(block, mesh=dist.init_device_mesh(DEVICE, (world,)))
    optimizer = torch.optim.SGD(block.parameters(), lr=lr)
    x = examples.make_batch(batch=4 * world).chunk(world)[rank].to(DEVICE)
    losses = examples.sgd_steps(block, optimizer, x, steps, average=True)
    return {"losses": losses, "q": block.q.weight.full_tensor().detach().cpu(),
            "down": block.down.weight.full_tensor().detach().cpu()}


def world_checks() -> dict:
    out: dict = {}
    _collectives(out)
    _mismatches(out)
    _dtensor(out)
    _traced(out)
    out["tp"] = examples.tensor_parallel()
    out["dp"] = examples.data_parallel()
    out["fsdp2"] = fsdp2_training()
    return out


def small_traced() -> int:
    """For launch(trace=True): each rank prints, computes, all-reduces; returns its rank x 10."""
    print(f"hello from rank {dist.get_rank()}")
    t = torch.ones(8, device=DEVICE) * (dist.get_rank() + 1)
    dist.all_reduce(t.relu_())
    return dist.get_rank() * 10


# -- failures ----------------------------------------------------------------------------------
def raises_on_rank_1() -> None:
    if dist.get_rank() == 1:
        raise ValueError("rank 1 broke on purpose")
    dist.all_reduce(torch.ones(4, device=DEVICE))


def dies_on_rank_1() -> None:
    if dist.get_rank() == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    dist.all_reduce(torch.ones(4, device=DEVICE))


def rank_1_stuck() -> None:
    if dist.get_rank() == 1:
        time.sleep(120)
    dist.all_reduce(torch.ones(4, device=DEVICE))


# -- collectives inside torch.compile ----------------------------------------------------------
def _scaled_all_reduce(x: torch.Tensor) -> torch.Tensor:
    return fc.all_reduce(x * 2, "sum", dist.group.WORLD) + 1


def _collective_record(fn, x: torch.Tensor) -> dict:
    """fn(x) once to compile, then traced: its result, its collective events, the clock's move."""
    fn(x)
    before = current_stream(0).clock_us
    with mtia_lab.trace(f"rank {dist.get_rank()}") as trace:
        result = fn(x)
    collectives = [e for e in trace.events if e.kind == "collective" and e.op.startswith("c10d::")]
    return {
        "result": result.cpu(), "clock_us": current_stream(0).clock_us - before,
        "collectives": [(e.op, e.reason, [(r.shape, r.nbytes) for r in e.inputs],
                         e.sim_end_us - e.sim_start_us) for e in collectives],
        "ids": [e.call for e in collectives],
    }


def _mismatched_compiled(fn) -> str | None:
    """An all_reduce of 4 elements on rank 0 and 8 on the others, inside compiled code."""
    x = torch.ones(4 + 4 * (dist.get_rank() != 0), device=DEVICE)
    try:
        fn(x)
    except CollectiveMismatchError as error:
        return str(error)
    return None


def compiled_collectives() -> dict:
    """Eager, the teaching compiler and Inductor on the same all_reduce; then a mismatch."""
    x = rank_input(dist.get_rank(), 8).to(DEVICE)
    paths = {"eager": _scaled_all_reduce,
             "mtia_lab": torch.compile(_scaled_all_reduce, backend="mtia_lab", dynamic=False),
             "inductor": torch.compile(_scaled_all_reduce, dynamic=False)}
    out = {name: _collective_record(fn, x) for name, fn in paths.items()}
    for name in ("mtia_lab", "inductor"):
        torch._dynamo.reset()
        fn = torch.compile(_scaled_all_reduce, dynamic=False,
                           **({"backend": "mtia_lab"} if name == "mtia_lab" else {}))
        out[f"{name} mismatch"] = _mismatched_compiled(fn)
    return out


# -- gathers, scatters and backward collectives inside torch.compile ---------------------------
def _scaled_all_gather(x: torch.Tensor) -> torch.Tensor:
    return fc.all_gather_tensor(x * 2, 0, dist.group.WORLD) + 1


def _scaled_reduce_scatter(x: torch.Tensor) -> torch.Tensor:
    return fc.reduce_scatter_tensor(x * 2, "sum", 0, dist.group.WORLD) + 1


class _SumGradOverRanks(torch.autograd.Function):
    """Identity forward; backward all-reduces the gradient, as DDP does to gradients."""

    @staticmethod
    def forward(ctx, w):
        return w.clone()

    @staticmethod
    def backward(ctx, grad):
        return fc.all_reduce(grad, "sum", dist.group.WORLD)


def _ddp_like_loss(w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return (_SumGradOverRanks.apply(w) * x).sin().sum()


def _gathered_loss(w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """all_gather with autograd: its backward is a reduce_scatter."""
    return fc.all_gather_tensor_autograd(w * x, 0, dist.group.WORLD).sin().sum()


def _compiled(fn, path: str):
    torch._dynamo.reset()
    if path == "eager":
        return fn
    return torch.compile(fn, dynamic=False, **({"backend": "mtia_lab"} if path == "mtia_lab"
                                                 else {}))


def _step_record(fn, args: tuple) -> dict:
    """fn(*args) (and backward, when args[0] requires grad) once to compile, then traced: the
    result, the gradient, the collective events, and the clock's move split into the time of
    the other timed events and the rest."""
    training = args[0].requires_grad

    def step():
        args[0].grad = None
        result = fn(*args)
        if training:
            result.backward()
        return result

    step()
    before = current_stream(0).clock_us
    with mtia_lab.trace(f"rank {dist.get_rank()}") as trace:
        result = step()
    clock_us = current_stream(0).clock_us - before  # before the copies to the host below
    timed = [e for e in trace.events if e.sim_start_us is not None]
    collectives = [e for e in timed if e.kind == "collective"]
    return {
        "result": result.detach().cpu(), "grad": args[0].grad.cpu() if training else None,
        "clock_us": clock_us,
        "compute_us": sum(e.sim_end_us - e.sim_start_us for e in timed if e.kind != "collective"),
        "collectives": [(e.op, e.reason, [(r.shape, r.nbytes) for r in e.inputs],
                         e.sim_end_us - e.sim_start_us) for e in collectives],
        "ids": [e.call for e in collectives],
    }


def _mismatch(fn, *args, backward: bool = False) -> str | None:
    """The CollectiveMismatchError that fn(*args) (and its backward) raises, as text."""
    try:
        result = fn(*args)
        if backward:
            result.backward()
    except CollectiveMismatchError as error:
        return str(error)
    return None


def compiled_collectives_gather_scatter_backward() -> dict:
    """Eager, the teaching compiler and Inductor on all_gather and reduce_scatter (forward) and
    on collectives in backward (a DDP-like gradient all_reduce, all_gather's reduce_scatter);
    then the same calls with rank 0's tensors of another size, and a step after that."""
    rank = dist.get_rank()
    x = rank_input(rank, 8).to(DEVICE)
    w = (torch.arange(4.0) / 10 + rank).to(DEVICE).requires_grad_()
    scale = (torch.arange(4.0) + 1).to(DEVICE)
    cases = {"all_gather": (_scaled_all_gather, (x,)),
             "reduce_scatter": (_scaled_reduce_scatter, (x,)),
             "ddp_like backward": (_ddp_like_loss, (w, scale)),
             "all_gather autograd": (_gathered_loss, (w, scale))}
    out = {(case, path): _step_record(_compiled(fn, path), args)
           for case, (fn, args) in cases.items() for path in ("eager", "mtia_lab", "inductor")}
    n = 4 + 4 * (rank != 0)
    for path in ("mtia_lab", "inductor"):
        wrong = torch.ones(n, device=DEVICE, requires_grad=True)
        ddp_like = _compiled(_ddp_like_loss, path)
        out[("mismatch in backward", path)] = _mismatch(
            ddp_like, wrong, torch.ones(n, device=DEVICE), backward=True)
        for case in ("all_gather", "reduce_scatter"):
            out[(f"mismatch in {case}", path)] = _mismatch(
                _compiled(cases[case][0], path), torch.ones(n, device=DEVICE))
        out[("after the mismatches", path)] = _step_record(ddp_like, (w, scale))
    return out


def mesh_first() -> tuple[str, int, int]:
    """A rank whose first device work is a DeviceMesh: the launcher chose its chip, so the
    mesh keeps mtia_sim:0 rather than setting mtia_sim:<LOCAL_RANK>."""
    mesh = dist.init_device_mesh(DEVICE, (dist.get_world_size(),))
    total = torch.ones(1, device=DEVICE)
    dist.all_reduce(total)
    return mesh.device_type, torch.mtia_sim.current_device(), int(total.item())
