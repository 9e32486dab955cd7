"""Rank functions the package ships, for notebook 08 and the tests: a small transformer block
sharded over the ranks, tensor parallel (DTensor's ColwiseParallel / RowwiseParallel) and data
parallel (DistributedDataParallel), each beside the same computation on one device.

They live in a module because `launch` starts fresh processes that import the function by name
(a function defined in a notebook cell cannot be found there). Every function returns plain
values and CPU tensors; `traced=True` also returns the trace of the step itself (not of the
model set-up), ready for `merge_traces`.
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from ..trace import trace as tracing

DEVICE = "mtia_sim"
TP_PLAN_NAMES = {"q": "colwise", "k": "colwise", "v": "colwise", "o": "rowwise",
                 "up": "colwise", "down": "rowwise"}


class Block(nn.Module):
    """Pre-norm transformer block: attention, then an MLP. The head count is read from q's
    width, so the same code runs whole (one device) or with heads split across ranks."""

    def __init__(self, dim: int = 32, heads: int = 4, hidden: int = 64) -> None:
        super().__init__()
        self.head_dim = dim // heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.q, self.k, self.v = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.o = nn.Linear(dim, dim)
        self.up, self.down = nn.Linear(dim, hidden), nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x)
        q, k, v = self.q(h), self.k(h), self.v(h)
        b, s, width = q.shape
        heads = width // self.head_dim  # all heads, or this rank's share under TP

        def split(t):
            return t.view(b, s, heads, self.head_dim).transpose(1, 2)

        scores = split(q) @ split(k).transpose(-2, -1) / math.sqrt(self.head_dim)
        att = (scores.softmax(-1) @ split(v)).transpose(1, 2).reshape(b, s, width)
        x = x + self.o(att)
        return x + self.down(F.gelu(self.up(self.norm2(x))))


def make_block(seed: int = 0) -> Block:
    torch.manual_seed(seed)
    return Block()


def make_batch(batch: int = 4, seq: int = 8, seed: int = 1) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(batch, seq, 32, generator=generator)


def _busy(slow_rank: int | None, extra: int) -> None:
    """The slow rank does `extra` more matmuls first (say, its share of the data needed more
    preprocessing): the others will wait for it at the first collective."""
    if slow_rank is not None and dist.get_rank() == slow_rank:
        a = torch.ones(256, 256, device=DEVICE)
        for _ in range(extra):
            a = a @ a / 256


def tensor_parallel(traced: bool = False, slow_rank: int | None = None, extra: int = 4) -> dict:
    """One forward and backward of the block with its linear layers split across the ranks
    (attention heads and MLP columns): returns the output and two weight gradients, whole."""
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    mesh = dist.init_device_mesh(DEVICE, (dist.get_world_size(),))
    block = make_block().to(DEVICE)
    styles = {"colwise": ColwiseParallel, "rowwise": RowwiseParallel}
    block = parallelize_module(block, mesh, {n: styles[s]() for n, s in TP_PLAN_NAMES.items()})
    x = make_batch().to(DEVICE)
    with tracing(f"rank {dist.get_rank()}: tensor parallel") as trace:
        _busy(slow_rank, extra)
        out = block(x)
        out.sum().backward()
    return {"out": out.detach().cpu(), "q_grad": block.q.weight.grad.full_tensor().cpu(),
            "down_grad": block.down.weight.grad.full_tensor().cpu(),
            "trace": trace if traced else None}


def sgd_steps(model, optimizer, x, steps: int, average: bool = False) -> list[float]:
    """`steps` optimizer steps of the mean squared output; the losses (`average`: each the mean
    over the ranks, as every rank of a data-parallel run reports it)."""
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()
        if average:
            loss = loss.detach().clone()
            dist.all_reduce(loss, op=dist.ReduceOp.AVG)
        losses.append(loss.item())
    return losses


def data_parallel(steps: int = 2, lr: float = 0.1, traced: bool = False,
                  slow_rank: int | None = None, extra: int = 4) -> dict:
    """`steps` SGD steps of DistributedDataParallel(block), each rank on its slice of the
    batch: returns the mean loss of every step and the final weights of two layers."""
    from torch.nn.parallel import DistributedDataParallel

    rank, world = dist.get_rank(), dist.get_world_size()
    block = make_block().to(DEVICE)
    model = DistributedDataParallel(block)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    x = make_batch(batch=4 * world).chunk(world)[rank].to(DEVICE)
    with tracing(f"rank {rank}: data parallel") as trace:
        _busy(slow_rank, extra)
        losses = sgd_steps(model, optimizer, x, steps, average=True)
    return {"losses": losses, "q": block.q.weight.detach().cpu(),
            "down": block.down.weight.detach().cpu(), "trace": trace if traced else None}


def one_device_reference(world: int, steps: int = 2, lr: float = 0.1,
                         device: str = "cpu") -> dict:
    """What tensor_parallel and data_parallel compute, on one device: the TP output and
    gradients, and the DP losses and weights (the whole batch of `world` slices)."""
    block = make_block().to(device)
    out = block(make_batch().to(device))
    out.sum().backward()
    result = {"out": out.detach().cpu(), "q_grad": block.q.weight.grad.cpu(),
              "down_grad": block.down.weight.grad.cpu()}
    block = make_block().to(device)
    optimizer = torch.optim.SGD(block.parameters(), lr=lr)
    x = make_batch(batch=4 * world).to(device)
    losses = sgd_steps(block, optimizer, x, steps)
    result.update(losses=losses, q=block.q.weight.detach().cpu(),
                  down=block.down.weight.detach().cpu())
    return result


def tp_then_dp(traced: bool = True, slow_rank: int | None = None) -> dict:
    """Both, in one launch (starting ranks costs seconds): tensor parallel, then data parallel
    (where `slow_rank`, if given, starts late)."""
    return {"tp": tensor_parallel(traced=traced),
            "dp": data_parallel(traced=traced, slow_rank=slow_rank)}
