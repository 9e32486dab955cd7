"""What recording a trace costs: host time per op, memory per event, and 100,000-event traces.

1. Overhead: the same workloads run untraced and inside `mtia_lab.trace()`, in interleaved
   rounds in this process; the figure is the best (min) round, in microseconds of process CPU
   time per aten op (CPU time, not wall time: the machines this runs on are shared, and a
   descheduled round would say nothing about the recorder), and the ratio traced / untraced.
   Target: under 2x. A view costs the device almost nothing (no data moves), so there the
   recorder's fixed cost per event shows as a large ratio.
2. Memory: `tracemalloc` measures what a trace keeps alive (events, records, maps) after an MLP
   training loop, divided by its events; the untraced loop is the baseline. Target: < 1 KB/event.
3. Scale: record 100,000 events, then summarise, group, filter, save, load and export them to
   the Chrome format, each timed. Target: seconds, not minutes.

The exit status is non-zero only if something fails; a missed target is printed, not failed.

    python benchmarks/bench_trace.py [--rounds 7] [--events 100000]
"""

from __future__ import annotations

import argparse
import gc
import os
import tempfile
import time
import tracemalloc

import torch
from torch import nn

import mtia_lab
from mtia_lab.trace.io import load_trace, save_trace, to_chrome_trace

DEVICE = "mtia_sim:0"
OVERHEAD_TARGET = 2.0
BYTES_TARGET = 1024


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 8)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


def workloads():
    """name -> (fn(n) running n iterations, aten ops per iteration)."""
    a, b = torch.randn(16, device=DEVICE), torch.randn(16, device=DEVICE)
    m = torch.randn(64, 64, device=DEVICE)
    model = MLP().to(DEVICE)
    x = torch.randn(16, 32, device=DEVICE)

    def add(n):
        for _ in range(n):
            a + b

    def view(n):
        for _ in range(n):
            m.t()

    def matmul(n):
        for _ in range(n):
            torch.matmul(m, m)

    def train_step(n):
        for _ in range(n):
            model(x).sum().backward()

    out = {"add (16 elements)": add, "view (t)": view, "matmul 64x64": matmul,
           "MLP forward+backward": train_step}
    result = {}
    for name, fn in out.items():
        with mtia_lab.trace() as t:
            fn(1)
        result[name] = (fn, len(t))
    model.zero_grad(set_to_none=True)
    return result


def best_per_op(fn, ops_per_iter: int, iters: int, traced: bool) -> float:
    start = time.process_time()
    if traced:
        with mtia_lab.trace():
            fn(iters)
    else:
        fn(iters)
    return (time.process_time() - start) / (iters * ops_per_iter) * 1e6


def overhead(rounds: int) -> list[tuple[str, float, float]]:
    rows = []
    for name, (fn, ops) in workloads().items():
        iters = max(1, 400 // ops)
        fn(iters)  # warm up
        untraced, traced = [], []
        for _ in range(rounds):
            untraced.append(best_per_op(fn, ops, iters, False))
            traced.append(best_per_op(fn, ops, iters, True))
        rows.append((name, min(untraced), min(traced)))
    return rows


def bytes_per_event(steps: int = 30) -> tuple[float, int]:
    model = MLP().to(DEVICE)
    x = torch.randn(16, 32, device=DEVICE)

    def loop():
        for _ in range(steps):
            model(x).sum().backward()

    loop()  # warm caches (allocator segments, op plans) outside the measurement
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    loop()
    gc.collect()
    untraced = tracemalloc.get_traced_memory()[0] - base
    base = tracemalloc.get_traced_memory()[0]
    with mtia_lab.trace() as t:
        loop()
    gc.collect()
    kept = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    return (kept - untraced) / len(t), len(t)


def scale(events: int) -> list[tuple[str, float, str]]:
    a, b = torch.randn(8, 8, device=DEVICE), torch.randn(8, 8, device=DEVICE)
    rows = []
    start = time.perf_counter()
    with mtia_lab.trace() as t:
        while len(t) < events:
            c = a @ b
            c = c.t() + a
            c.relu_()
    rows.append(("record", time.perf_counter() - start, f"{len(t):,} events"))
    for label, fn in (
        ("summary()", t.summary),
        ("calls()", t.calls),
        ("filter(kind='view')", lambda: t.filter(kind="view")),
    ):
        start = time.perf_counter()
        out = fn()
        rows.append((label, time.perf_counter() - start, f"{len(out):,} rows"))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        start = time.perf_counter()
        save_trace(t, path)
        rows.append(("save_trace", time.perf_counter() - start,
                     f"{os.path.getsize(path) / 1e6:.1f} MB"))
        start = time.perf_counter()
        loaded = load_trace(path)
        rows.append(("load_trace", time.perf_counter() - start,
                     "equal" if loaded == t else "DIFFERENT"))
        if loaded != t:
            raise SystemExit("load_trace(save_trace(t)) differs from t")
        # The same load without its progress bar (tqdm.auto, from io.PROGRESS_FROM events).
        import mtia_lab.trace.io as trace_io

        saved, trace_io.PROGRESS_FROM = trace_io.PROGRESS_FROM, float("inf")
        start = time.perf_counter()
        load_trace(path)
        quiet = time.perf_counter() - start
        trace_io.PROGRESS_FROM = saved
        rows.append(("load_trace, no bar", quiet,
                     f"the bar costs x{rows[-1][1] / quiet:.2f}"))
    start = time.perf_counter()
    chrome = to_chrome_trace(t)
    rows.append(("to_chrome_trace", time.perf_counter() - start,
                 f"{len(chrome['traceEvents']):,} chrome events"))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--events", type=int, default=100_000)
    options = parser.parse_args()

    print("1. Recording overhead, host CPU microseconds per aten op (best of "
          f"{options.rounds} interleaved rounds)")
    print(f"   {'workload':<24}{'untraced':>10}{'traced':>10}{'added':>8}{'ratio':>8}")
    for name, untraced, traced in overhead(options.rounds):
        ratio = traced / untraced
        mark = "" if ratio < OVERHEAD_TARGET else f"  (target < {OVERHEAD_TARGET}x: missed)"
        print(f"   {name:<24}{untraced:>10.1f}{traced:>10.1f}{traced - untraced:>8.1f}"
              f"{ratio:>7.2f}x{mark}")

    per_event, count = bytes_per_event()
    mark = "" if per_event < BYTES_TARGET else f"  (target < {BYTES_TARGET} B: missed)"
    print(f"\n2. Memory kept per event (tracemalloc, {count:,} MLP training events): "
          f"{per_event:.0f} bytes{mark}")

    print(f"\n3. A {options.events:,}-event trace")
    for label, seconds, note in scale(options.events):
        print(f"   {label:<22}{seconds:>8.3f} s   {note}")


if __name__ == "__main__":
    main()
