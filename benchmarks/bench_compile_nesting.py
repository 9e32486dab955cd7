"""Compile cost of deep nesting: a linear layer inside 1..64 levels of modules, by phase.

    .venv/bin/python benchmarks/bench_compile_nesting.py                 # both engines
    .venv/bin/python benchmarks/bench_compile_nesting.py --engines mtia_lab --rounds 1

For each depth and engine (the teaching scheduler "mtia_lab", real Inductor "inductor"), one
training step of `Nest(depth)` on mtia_sim is compiled afresh `--rounds` times and each
phase's fastest round is kept (a shared 2-core machine: the least disturbed measurement);
the total is the sum of those. `cpu s` is the process's CPU time for the whole compile and
step (best round): it does not grow when other processes share the cores, so its growth is
the steadiest figure on a busy machine. Phases
come from Dynamo's own `compilation_metrics` (mtia_lab/instruments/nesting.py says how each
is derived). The graph is the same at every depth (two ops): what grows is what Dynamo walks
and guards -- the growth rate printed is the exponent k of time ~ depth**k (least squares on
log-log; 1 means linear) beside the cost of one more level (the slope of a linear fit):
with a fixed cost at depth 1, a linear growth shows as k < 1 over this range. Inductor's FX
graph cache is off (the graph is the same at every depth). A first, unmeasured compile
warms up imports.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mtia_lab  # noqa: E402,F401
from mtia_lab.instruments.nesting import (  # noqa: E402
    PHASES,
    CompileCost,
    compile_cost,
    deepest_guard,
    growth_rate,
    per_level,
)

DEPTHS = (1, 8, 16, 32, 64)


def best_cost(depth: int, engine: str, rounds: int) -> CompileCost:
    """Each phase's fastest of `rounds` fresh compiles (the least disturbed measurement of
    that phase: on a shared machine one slow moment spoils one phase, not the others)."""
    costs = [compile_cost(depth, engine) for _ in range(rounds)]
    best = {f"{phase}_s": min(getattr(c, f"{phase}_s") for c in costs)
            for phase in (*PHASES, "cpu")}
    return replace(costs[0], **best)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", nargs="+", default=["mtia_lab", "inductor"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--depths", type=int, nargs="+", default=list(DEPTHS),
                        help="at least two different depths (a growth rate needs two points)")
    args = parser.parse_args()
    if len(set(args.depths)) < 2 or min(args.depths) < 1:
        parser.error(f"--depths {' '.join(map(str, args.depths))}: give at least two different "
                     "depths of 1 or more (the growth rate is fitted through them)")
    print("| engine | depth | guards | dynamo s | aot_autograd s | scheduler s | backward s "
          "| total s | cpu s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for engine in args.engines:
        compile_cost(1, engine)  # warm-up: imports, Triton's interpreter, first-use caches
        compile_cost(8, engine)
        costs = [best_cost(d, engine, args.rounds) for d in args.depths]
        for c in costs:
            print(f"| {engine} | {c.depth} | {c.guards} | {c.dynamo_s:.3f} | "
                  f"{c.aot_autograd_s:.3f} | {c.scheduler_s:.3f} | {c.backward_s:.3f} | "
                  f"{c.total_s:.3f} | {c.cpu_s:.3f} |")
        for phase in ("dynamo_s", "aot_autograd_s", "scheduler_s", "total_s", "cpu_s"):
            seconds = [getattr(c, phase) for c in costs]
            k = growth_rate(args.depths, seconds)
            slope = per_level(args.depths, seconds) * 1e3
            print(f"{engine}: {phase[:-2]}: {slope:+.2f} ms per level (linear fit), "
                  f"time ~ depth^{k:.2f}")
        print(f"{engine}: guards grow {costs[0].guards} -> {costs[-1].guards} "
              f"(depth {args.depths[0]} -> {args.depths[-1]})")
    deepest = deepest_guard(min(8, max(args.depths)))
    print(f"longest guard at depth {min(8, max(args.depths))}: {deepest}")


if __name__ == "__main__":
    main()
