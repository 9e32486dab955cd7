"""Per-op host cost of the simulated device, next to its two baselines, in one process.

What an op costs on the host, for three kinds of tensor:

- cpu:  plain CPU eager (the work itself);
- bare: the smallest Python device there is, a `__torch_dispatch__` wrapper subclass that unwraps,
        calls the CPU op and rewraps (PyTorch's documented minimal subclass). Every Python-level
        device pays at least this; see /work/shared/notes/pytorch-hooks.md;
- mtia: `mtia_sim`, which on top of that checks devices, charges the simulated clock and
        accounts each result in its caching allocator.

Targets: small ops (16 and 65,536 elements) within 1.5x of the bare wrapper (the Python that
mtia_sim adds is small next to the floor), and 4,194,304-element ops within 1.15x of CPU eager
(at that size the data, not Python, dominates). A view moves no data, so its time does not grow
with size: the 4M target does not apply to it.

Each figure is the best (min) of several interleaved rounds of `timeit`, in microseconds per op.
The exit status is non-zero only if something fails (an op raises, or the device's result
differs from the CPU's); a missed target is printed, not failed.

    python benchmarks/bench_ops.py [--sizes 16 65536] [--ops add mm] [--rounds 7]
"""

from __future__ import annotations

import argparse
import math
import sys
import timeit
from collections.abc import Callable
from dataclasses import dataclass

import torch
from rich.console import Console
from rich.table import Table
from torch.utils._pytree import tree_map

import mtia_lab  # noqa: F401  (registers mtia_sim)

SIZES = (16, 65_536, 4_194_304)
SMALL_TARGET = 1.5  # mtia / bare, sizes below LARGE
LARGE_TARGET = 1.15  # mtia / cpu, at LARGE
LARGE = 4_194_304
ROUND_SECONDS = 0.02  # aim each timed round at about this long


class Bare(torch.Tensor):
    """The floor of a Python device: unwrap, run the CPU op, rewrap. Nothing else."""

    __torch_function__ = torch._C._disabled_torch_function_impl

    @staticmethod
    def __new__(cls, inner: torch.Tensor) -> Bare:
        out = torch.Tensor._make_wrapper_subclass(
            cls, inner.size(), strides=inner.stride(), storage_offset=inner.storage_offset(),
            dtype=inner.dtype, device=inner.device,
        )
        out._inner = inner
        return out

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        def unwrap(x):
            return x._inner if isinstance(x, Bare) else x

        def rewrap(x):
            return Bare(x) if isinstance(x, torch.Tensor) else x

        out = func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs or {}))
        return tree_map(rewrap, out)


# op name -> (function of the inputs, inputs made from n elements)
def _vector(n: int) -> tuple[torch.Tensor, ...]:
    return torch.randn(n), torch.randn(n)


def _square(n: int) -> tuple[torch.Tensor, ...]:
    side = math.isqrt(n)
    return torch.randn(side, side), torch.randn(side, side)


OPS: dict[str, tuple[Callable, Callable[[int], tuple]]] = {
    "add": (lambda a, b: a + b, _vector),
    "mul": (lambda a, b: a * b, _vector),
    "relu": (lambda a, b: a.relu(), _vector),
    "sum": (lambda a, b: a.sum(), _vector),
    "mm": (lambda a, b: a @ b, _square),
    "view": (lambda a, b: a.view(4, -1), _vector),
    "clamp": (lambda a, b: a.clamp(-0.5, 0.5), _vector),
}


@dataclass
class Row:
    op: str
    n: int
    cpu_us: float
    bare_us: float
    mtia_us: float

    @property
    def vs_bare(self) -> float:
        return self.mtia_us / self.bare_us

    @property
    def vs_cpu(self) -> float:
        return self.mtia_us / self.cpu_us

    def target(self) -> tuple[str, bool] | None:
        """(description, met) of the target that applies to this row, or None."""
        if self.n < LARGE:
            return f"mtia/bare <= {SMALL_TARGET}", self.vs_bare <= SMALL_TARGET
        if self.op == "view":
            return None  # O(1) whatever the size: nothing to amortize Python over
        return f"mtia/cpu <= {LARGE_TARGET}", self.vs_cpu <= LARGE_TARGET


def _check(op: str, n: int, fn: Callable, cpu_in: tuple, dev_in: tuple, bare_in: tuple) -> None:
    """The device and the bare wrapper must compute what the CPU computes."""
    expected = fn(*cpu_in)
    for name, inputs in (("mtia_sim", dev_in), ("bare", bare_in)):
        got = fn(*inputs)
        got = got.cpu() if name == "mtia_sim" else got._inner
        if got.shape != expected.shape or not torch.allclose(got, expected, rtol=1e-4, atol=1e-4):
            raise AssertionError(f"{op} at {n} elements: {name} result differs from CPU eager")


def _calibrate(fn: Callable[[], object]) -> int:
    """How many calls make one round of about ROUND_SECONDS."""
    number = 1
    while True:
        elapsed = timeit.timeit(fn, number=number)
        if elapsed >= ROUND_SECONDS / 4 or number >= 100_000:
            return max(1, int(number * ROUND_SECONDS / max(elapsed, 1e-9)))
        number *= 4


def measure(op: str, n: int, rounds: int) -> Row:
    fn, make = OPS[op]
    cpu_in = make(n)
    dev_in = tuple(t.to("mtia_sim") for t in cpu_in)
    bare_in = tuple(Bare(t) for t in cpu_in)
    _check(op, n, fn, cpu_in, dev_in, bare_in)
    calls = {
        "cpu": lambda: fn(*cpu_in),
        "bare": lambda: fn(*bare_in),
        "mtia": lambda: fn(*dev_in),
    }
    number = min(_calibrate(call) for call in calls.values())
    best = dict.fromkeys(calls, math.inf)
    # Interleave the three kinds round by round: a noisy moment on a shared machine hits all.
    for _ in range(rounds):
        for name, call in calls.items():
            (seconds,) = timeit.repeat(call, number=number, repeat=1)
            best[name] = min(best[name], seconds / number * 1e6)
    return Row(op, n, best["cpu"], best["bare"], best["mtia"])


def render(rows: list[Row], console: Console) -> None:
    table = Table(title=f"per-op host time in us, best of rounds (torch threads: "
                  f"{torch.get_num_threads()})")
    for column in ("op", "elements", "cpu", "bare", "mtia", "mtia/bare", "mtia/cpu", "target"):
        table.add_column(column, justify="left" if column in ("op", "target") else "right")
    for row in rows:
        target = row.target()
        if target is None:
            verdict = "n/a: a view is O(1)"
        else:
            verdict = f"{'[green]met[/]' if target[1] else '[red]MISSED[/]'} {target[0]}"
        table.add_row(
            row.op, f"{row.n:,}", f"{row.cpu_us:.2f}", f"{row.bare_us:.2f}",
            f"{row.mtia_us:.2f}", f"{row.vs_bare:.2f}", f"{row.vs_cpu:.2f}", verdict,
        )
    console.print(table)
    judged = [(row, row.target()) for row in rows if row.target() is not None]
    missed = [f"{row.op}@{row.n:,}" for row, (_, met) in judged if not met]
    labels = (
        (f"small ops within {SMALL_TARGET}x of bare", True),
        (f"4M ops within {LARGE_TARGET}x of cpu", False),
    )
    for label, small in labels:
        group = [(row, met) for row, (_, met) in judged if (row.n < LARGE) == small]
        if group:
            ok = sum(met for _, met in group)
            console.print(f"{label}: {ok}/{len(group)} met")
    if missed:
        console.print(f"missed: {', '.join(missed)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--ops", nargs="+", default=list(OPS), choices=list(OPS))
    parser.add_argument("--rounds", type=int, default=7)
    options = parser.parse_args(argv)
    console = Console(width=max(Console().width, 104))
    torch.manual_seed(0)
    rows, failures = [], []
    for n in options.sizes:
        for op in options.ops:
            try:
                rows.append(measure(op, n, options.rounds))
            except Exception as error:  # report every failure, then exit non-zero
                failures.append(f"{op}@{n}: {type(error).__name__}: {error}")
    render(rows, console)
    for failure in failures:
        console.print(f"[red]ERROR[/] {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
