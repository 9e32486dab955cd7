"""What the fusion views cost next to the scheduling they show.

For generated chains of 100 and 1,000 aten ops (sin and mul, so kernels fuse up to
max_fusion_size), at the default guardrails and with max_fusion_size=1 (one kernel per op):
the baseline is `schedule(ir)` itself, run in this process; then the FusionGraph tree text, its
DOT and its SVG (pinned renderer, capped at 60 kernels x 12 nodes), and one playground edit
(re-schedule + redraw, with and without the picture). Each figure is the best of N rounds of
process CPU time (the renderer subprocess is wall time, so SVG is timed by the wall clock), with
its ratio to scheduling. Target: a playground edit on a 1,000-op graph well under a second.

    python benchmarks/bench_fusion_views.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import time

import torch

import mtia_lab  # noqa: F401  (registers the device the scheduler prices for)
from mtia_lab import compiler
from mtia_lab.compiler import config
from mtia_lab.viz import FusionGraph, playground
from mtia_lab.viz.graphviz_render import _render


def chain_of(n: int):
    def chain(x):
        for i in range(n):
            x = torch.sin(x) if i % 3 else x * 2
        return x
    return chain


def best(fn, rounds: int, clock=time.process_time) -> float:
    times = []
    for _ in range(rounds):
        start = clock()
        fn()
        times.append(clock() - start)
    return min(times) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    print(f"{'graph':<22}{'kernels':>8}{'schedule':>11}{'tree':>9}{'dot':>9}{'svg':>9}"
          f"{'edit':>9}{'edit+svg':>10}   (ms, best of {rounds}; x = / schedule)")
    for n in (100, 1000):
        ir = compiler.trace(chain_of(n), torch.randn(8))
        for size in (64, 1):
            with config.patch(max_fusion_size=size):
                base = best(lambda ir=ir: compiler.schedule(ir, "chain"), rounds)
                plan = compiler.schedule(ir, "chain")
            view = FusionGraph(plan)
            tree = best(view.to_text, rounds)
            dot = best(view.to_dot, rounds)

            def svg(view=view) -> None:
                _render.cache_clear()  # the renderer caches by DOT source: draw afresh
                view.to_svg()

            drawn = best(svg, rounds, time.perf_counter)
            pg = playground(plan)
            quiet, pictured = pg.widget(show_graph=False), pg.widget(show_graph=True)
            values = iter(range(2, 2 + 2 * rounds + 2))
            edit = best(lambda w=quiet, v=values: w.set(max_fusion_size=next(v)), rounds,
                        time.perf_counter)
            edit_svg = best(lambda w=pictured, v=values: w.set(max_fusion_size=next(v)), rounds,
                            time.perf_counter)
            name = f"chain {n}, mfs={size}"
            print(f"{name:<22}{plan.kernel_count:>8}{base:>11.1f}{tree:>9.1f}{dot:>9.1f}"
                  f"{drawn:>9.1f}{edit:>9.1f}{edit_svg:>10.1f}   tree {tree / base:.2f}x, "
                  f"svg {drawn / base:.2f}x, edit+svg {edit_svg / base:.2f}x")


if __name__ == "__main__":
    main()
