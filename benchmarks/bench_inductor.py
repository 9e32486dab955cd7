"""Inductor + Triton (interpreted) against backend="mtia_lab" and eager, on the device.

    .venv/bin/python benchmarks/bench_inductor.py [--steps 5]

The notebook-6 transformer (one pre-norm block, DIM 32, SEQ 16, BATCH 8) on mtia_sim, one
training step = loss forward + backward (the optimizer stays out). In one process, for each of
eager, torch.compile(backend="mtia_lab") and torch.compile() (TorchInductor for the device):
  compile   wall time of the first step minus a steady one (Dynamo + AOTAutograd + the
            backend, forward and backward); Inductor's caches are fresh (a temporary
            directory): a cold compile
  step      best wall time of a steady-state step (host time: Python, the interpreter)
  simulated the device's simulated time for one step (stream events), what the chip would take
Ratios are against eager.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _timing import best_of  # noqa: E402

import mtia_lab  # noqa: E402,F401

DEV = "mtia_sim"
VOCAB, DIM, HEADS, SEQ, BATCH = 32, 32, 2, 16, 8


class CausalSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv, self.proj = nn.Linear(DIM, 3 * DIM), nn.Linear(DIM, DIM)
        self.register_buffer("future", torch.ones(SEQ, SEQ, dtype=torch.bool).triu(1))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=-1)
        q, k, v = (z.view(b, t, HEADS, c // HEADS).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (c // HEADS) ** -0.5
        att = torch.softmax(att.masked_fill(self.future[:t, :t], float("-inf")), dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.attn = nn.LayerNorm(DIM), CausalSelfAttention()
        self.ln2, self.fc1 = nn.LayerNorm(DIM), nn.Linear(DIM, 4 * DIM)
        self.fc2 = nn.Linear(4 * DIM, DIM)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.tokens, self.positions = nn.Embedding(VOCAB, DIM), nn.Embedding(SEQ, DIM)
        self.block, self.ln_f, self.head = Block(), nn.LayerNorm(DIM), nn.Linear(DIM, VOCAB)
        self.register_buffer("pos", torch.arange(SEQ))

    def forward(self, idx):
        x = self.tokens(idx) + self.positions(self.pos[: idx.shape[1]])
        return self.head(self.ln_f(self.block(x)))


def loss_of(model, idx, targets):
    return F.cross_entropy(model(idx).flatten(0, 1), targets.flatten())


def batch():
    gen = torch.Generator().manual_seed(0)
    start = torch.randint(0, VOCAB, (BATCH, 1), generator=gen)
    seq = (start + torch.arange(SEQ + 1)) % VOCAB
    return seq[:, :-1].to(DEV), seq[:, 1:].to(DEV)


def simulated_us(step) -> float:
    mt = torch.mtia_sim
    mt.synchronize()
    start, end = mt.Event(enable_timing=True), mt.Event(enable_timing=True)
    start.record()
    step()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000


def measure(name, model, loss_fn, steps: int) -> dict:
    idx, targets = batch()

    def step():
        loss = loss_fn(model, idx, targets)
        loss.backward()
        return loss

    start = time.perf_counter()
    loss = step()
    first = time.perf_counter() - start
    return {"name": name, "first": first, "step": best_of(step, steps),
            "sim": simulated_us(step), "loss": loss.item()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    steps = parser.parse_args().steps
    torch.manual_seed(0)
    base = TinyLM().to(DEV)
    rows = [measure("eager", copy.deepcopy(base), loss_of, steps)]
    torch.compiler.reset()
    rows.append(measure("backend=mtia_lab", copy.deepcopy(base),
                        torch.compile(loss_of, backend="mtia_lab", dynamic=False), steps))
    torch.compiler.reset()
    from torch._inductor.utils import fresh_cache

    with fresh_cache():
        rows.append(measure("Inductor+Triton", copy.deepcopy(base),
                            torch.compile(loss_of, dynamic=False), steps))
    eager = rows[0]
    print(f"notebook-6 transformer, one training step (forward + backward), {steps} rounds")
    print(f"{'':18}{'compile s':>11}{'step ms':>11}{'vs eager':>10}{'simulated us':>14}"
          f"{'vs eager':>10}{'loss':>9}")
    for r in rows:
        compile_s = r["first"] - r["step"] if r is not eager else 0.0
        print(f"{r['name']:18}{compile_s:>11.2f}{r['step'] * 1e3:>11.2f}"
              f"{r['step'] / eager['step']:>9.2f}x{r['sim']:>14.1f}"
              f"{r['sim'] / eager['sim']:>9.2f}x{r['loss']:>9.4f}")
    print("compile s = first step minus a steady step (Dynamo, AOTAutograd, the backend)")


if __name__ == "__main__":
    main()
