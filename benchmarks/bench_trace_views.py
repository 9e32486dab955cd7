"""How long the trace renderers take on a 100,000-event trace.

Records an MLP training loop (modules, backward, views, a CPU-fallback op) until the trace
holds --events events, then times each renderer, best (min) of --rounds rounds, in this
process. The baseline is the data model's own one pass, `Trace.summary()`: the ratio says
what a renderer costs on top of reading every event once. Targets (issue 4): a 100k-event
trace summarises and renders a page in seconds; an explorer page turn is O(page).

    python benchmarks/bench_trace_views.py [--events 100000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import time

import torch
from _timing import best_of
from torch import nn

import mtia_lab
from mtia_lab.viz import (
    graphviz_render,
    trace_explorer,
    trace_graph,
    trace_summary,
    trace_table,
    trace_tree,
)
from mtia_lab.viz.trace_format import rich_html

DEVICE = "mtia_sim:0"


def best_s(fn, rounds: int) -> float:
    return best_of(fn, rounds)


def record(events: int) -> mtia_lab.Trace:
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4)).to(DEVICE)
    x = torch.randn(8, 16, device=DEVICE)
    with mtia_lab.trace("bench") as t:
        while len(t) < events:
            loss = model(x).sum()
            loss.backward()
            torch.cumsum(x, 0)
    return t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    start = time.perf_counter()
    t = record(options.events)
    print(f"recorded {len(t):,} events in {time.perf_counter() - start:.1f} s")
    rounds = options.rounds
    baseline = best_s(t.summary, rounds)
    explorer = trace_explorer(t, page_size=50)
    summary = trace_summary(t)
    cases = {
        "summary table (text)": lambda: trace_summary(t).to_text(),
        "summary table (notebook HTML, rows built)": lambda: rich_html(summary.to_rich()),
        "module tree (text)": lambda: trace_tree(t).to_text(),
        "static table, one page (text + HTML)":
            lambda: trace_table(t, page=10, page_size=50)._repr_mimebundle_(),
        "explorer: open (widgets + first page)": lambda: trace_explorer(t, page_size=50),
        "explorer: filter kind=native, and back (2x)":
            lambda: _set(explorer.kind, "native", "(all)"),
        "explorer: sort by sim time, and back (2x)":
            lambda: _set(explorer.sort, "simulated time", "order"),
        "explorer: turn a page": lambda: explorer.turn(+1),
        "explorer: select an event (details + layout)": lambda: explorer.select(
            explorer.rows[explorer.page * 50 + 1].index),
        "dataflow graph, first 100 events (SVG)": lambda: (
            graphviz_render._render.cache_clear(), trace_graph(t, max_events=100).to_svg()),
    }
    print(f"baseline Trace.summary(): {baseline * 1e3:.1f} ms (best of {rounds})")
    print(f"{'renderer':<48} {'ms':>9} {'x baseline':>11}")
    for name, fn in cases.items():
        seconds = best_s(fn, rounds)
        print(f"{name:<48} {seconds * 1e3:>9.1f} {seconds / baseline:>11.2f}")


def _set(control, value, back) -> None:
    control.value = value
    control.value = back  # two refilters: leave the explorer as it was for the next round


if __name__ == "__main__":
    main()
