"""How long the stride-layout and memory views take on large inputs.

1. Layout: `layout_view(t)` plus its text and SVG, for views of up to 16M elements, next to
   the baseline of the bare index computation PyTorch itself would do (the cell of every
   element via `as_strided` over a storage of indices, and a `bincount` of them). The ratio says
   what the record and both renderings cost on top of that; the renderings themselves are
   bounded (a 16 x 16 grid, 256 storage cells), so the figure is mostly the O(numel) record.
2. Memory: `memory_view(snapshot)` text and SVG (a `graphviz-pure` subprocess) for a snapshot
   of N live tensors, next to the baseline of taking the snapshot.

Both run in this process, best (min) of --rounds rounds, milliseconds. Target: a notebook
answers in well under a second for a 1M-element view and a 1000-tensor snapshot.

    python benchmarks/bench_viz.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import sys

import torch
from _timing import best_of

import mtia_lab  # noqa: F401  (registers mtia_sim)
from mtia_lab.viz import graphviz_render, layout_view, memory_view


def best_ms(fn, rounds: int) -> float:
    return best_of(fn, rounds) * 1e3


def bench_layout(rounds: int) -> None:
    cases = {
        "256 contiguous": torch.zeros(16, 16),
        "163k strided (1000x1000)[::3, 10:500]": torch.zeros(1000, 1000)[::3, 10:500],
        "1M transposed": torch.zeros(1000, 1000).t(),
        "1M expanded (stride 0)": torch.zeros(1000).expand(1000, 1000),
        "16M contiguous (4096x4096)": torch.zeros(4096, 4096),
    }
    print(f"{'layout view':42} {'baseline':>10} {'view':>10} {'ratio':>7}  (ms)")
    for name, t in cases.items():
        storage_len = t.untyped_storage().nbytes() // t.element_size()

        def baseline(t=t, n=storage_len):
            cells = torch.arange(n).as_strided(t.size(), t.stride(), t.storage_offset())
            torch.bincount(cells.flatten(), minlength=n)

        def view(t=t):
            v = layout_view(t)
            v.to_text()
            v.to_svg()

        base, full = best_ms(baseline, rounds), best_ms(view, rounds)
        print(f"{name:42} {base:>10.1f} {full:>10.1f} {full / base:>7.1f}")


def bench_memory(rounds: int) -> None:
    print(f"\n{'memory view (text + SVG)':42} {'snapshot':>10} {'view':>10} {'ratio':>7}  (ms)")
    for count in (10, 100, 1000):
        keep = [torch.empty(64 * (i % 7 + 1), device="mtia_sim") for i in range(count)]
        keep = keep[::2]  # free every other one: the segments hold used and cached blocks

        def view(count=count):
            graphviz_render._render.cache_clear()  # time the renderer, not the cache
            v = memory_view(torch.mtia_sim.memory_snapshot(), max_blocks=count)
            v.to_text()
            v.to_svg()

        base = best_ms(torch.mtia_sim.memory_snapshot, rounds)
        full = best_ms(view, rounds)
        blocks = sum(len(s["blocks"]) for s in torch.mtia_sim.memory_snapshot())
        print(f"{f'{count} tensors made, {blocks} blocks':42} {base:>10.2f} {full:>10.1f} "
              f"{full / base:>7.0f}")
        del keep


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    bench_layout(args.rounds)
    bench_memory(args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
