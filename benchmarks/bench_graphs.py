"""Host time of a graph replay next to eager re-execution of the same 50 device ops.

An eager op on `mtia_sim` pays the host a trip through `__torch_dispatch__` (unwrap, choose the
kernel, price it, rewrap, account the result in the allocator). A graph replay runs the same
kernels as a flat list of prepared `out=` calls on the static buffers: no dispatch, no
allocation. Target: replay / eager <= 0.3 for a 50-op region of small tensors, where the
host's overhead, not the arithmetic, is the cost. A larger size is printed beside it: there
the kernels' own work dominates both, so the ratio rises towards 1 (the target does not apply).

Both run in this process, interleaved, best (min) of several rounds, microseconds per region,
with one intra-op thread by default: on a small shared machine, CPU kernels split over threads
wait for cores that other processes hold, and the figures would measure the OS scheduler.
The exit status is non-zero only if the replay's result differs from eager's.

    python benchmarks/bench_graphs.py [--sizes 64 256] [--rounds 7] [--threads 1]
"""

from __future__ import annotations

import argparse
import sys
import timeit

import torch

import mtia_lab  # noqa: F401  (registers mtia_sim)

DEVICE = "mtia_sim:0"
NUM_OPS = 50
TARGET = 0.3
TARGET_SIZES = (64,)  # the sizes the target applies to (host-bound)
ROUND_SECONDS = 0.05


def region(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """50 device ops: 10 times (mm, add, tanh, mul, relu). Values stay bounded."""
    y = x
    for _ in range(NUM_OPS // 5):
        y = y @ w
        y = y + 0.25
        y = torch.tanh(y)
        y = y * 0.9
        y = torch.relu(y)
    return y


def best_us(fn, rounds: int) -> float:
    number = max(1, int(ROUND_SECONDS / max(timeit.timeit(fn, number=1), 1e-7)))
    return min(timeit.repeat(fn, number=number, repeat=rounds)) / number * 1e6


def measure(size: int, rounds: int) -> tuple[float, float, int]:
    gen = torch.Generator().manual_seed(size)
    x = torch.randn(size, size, generator=gen).to(DEVICE)
    w = (torch.randn(size, size, generator=gen) / size**0.5).to(DEVICE)
    g = torch.mtia_sim.MTIAGraph()
    with torch.no_grad():
        with torch.mtia_sim.graph(g):
            static_y = region(x, w)
        if len(g.nodes) != NUM_OPS:
            raise SystemExit(f"expected {NUM_OPS} recorded kernels, got {len(g.nodes)}")
        x.copy_(torch.randn(size, size, generator=gen))
        g.replay()
        expected = region(x, w)
        torch.testing.assert_close(static_y.cpu(), expected.cpu())

        def eager():
            region(x, w)

        eager_us = replay_us = float("inf")
        for _ in range(2):  # interleave, so drifts in machine load hit both
            eager_us = min(eager_us, best_us(eager, rounds))
            replay_us = min(replay_us, best_us(g.replay, rounds))
    g.destroy()
    return eager_us, replay_us, len(g.nodes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(
        f"{NUM_OPS}-op region (mm, add, tanh, mul, relu) x10, float32 NxN, us per region, "
        f"{args.threads} thread(s)"
    )
    print(f"{'N':>6} {'eager':>10} {'replay':>10} {'ratio':>7}  target")
    for size in args.sizes:
        eager_us, replay_us, _ = measure(size, args.rounds)
        ratio = replay_us / eager_us
        if size in TARGET_SIZES:
            verdict = f"<= {TARGET}: " + ("met" if ratio <= TARGET else "MISSED")
        else:
            verdict = "(compute-bound: n/a)"
        print(f"{size:>6} {eager_us:>10.1f} {replay_us:>10.1f} {ratio:>7.3f}  {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
