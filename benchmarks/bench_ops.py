"""Per-op host cost of the simulated device, next to its two baselines, in one process.

What an op costs on the host, for three kinds of tensor:

- cpu:  plain CPU eager (the work itself);
- bare: the smallest Python device there is, a `__torch_dispatch__` wrapper subclass that unwraps,
        calls the CPU op and rewraps (PyTorch's documented minimal subclass). Every Python-level
        device pays at least this; see /work/shared/notes/pytorch-hooks.md;
- hand: the same wrapper with its unwrapping written out instead of `tree_map` (positional
        tensors in, one tensor out): how much of "bare" is pytree rather than the subclass
        machinery itself. Shown for context; no target refers to it;
- mtia: `mtia_sim`, which on top of that checks devices, charges the simulated clock and
        accounts each result in its caching allocator.

Targets: small ops (16 and 65,536 elements) within 1.5x of the bare wrapper (the Python that
mtia_sim adds is small next to the floor), and 4,194,304-element ops within 1.15x of CPU eager
(at that size the data, not Python, dominates). A view moves no data, so its time does not grow
with size: the 4M target does not apply to it.

Each figure is the best (min) of many short interleaved rounds of `timeit` (at least --rounds,
more while they fit a time budget), in microseconds per op.
Torch runs one intra-op thread unless told otherwise (`--threads`): on a shared machine, waking a
second thread that another process holds costs milliseconds and swamps what is measured here.
The three kinds run the same CPU kernels, so the ratios measure what each wrapper adds.
The exit status is non-zero only if something fails (an op raises, or the device's result
differs from the CPU's); a missed target is printed, not failed.

    python benchmarks/bench_ops.py [--sizes 16 65536] [--ops add mm] [--rounds 25] [--threads 0]
"""

from __future__ import annotations

import argparse
import math
import random
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
# Short rounds, many of them: on a busy shared machine the min needs a round that nobody
# preempted, and a short round is more likely to be one.
ROUND_SECONDS = 0.002
BUDGET_SECONDS = 0.25  # per kind and row: more rounds than --rounds while they fit in this
SLOW_CALL_SECONDS = 0.02  # ops slower than this (mm at 4M) get at most SLOW_ROUNDS rounds
SLOW_ROUNDS = 3


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


class Hand(Bare):
    """The bare wrapper without pytree: enough for the ops measured here, not a general device."""

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        out = func(*[a._inner if type(a) is Hand else a for a in args], **(kwargs or {}))
        return Hand(out) if isinstance(out, torch.Tensor) else out


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
    hand_us: float
    mtia_us: float

    @property
    def vs_bare(self) -> float:
        return self.mtia_us / self.bare_us

    @property
    def vs_hand(self) -> float:
        return self.mtia_us / self.hand_us

    @property
    def vs_cpu(self) -> float:
        return self.mtia_us / self.cpu_us

    def target(self) -> tuple[str, bool] | None:
        """(description, met) of the target that applies to this row, or None."""
        if self.n < LARGE:
            return f"<= {SMALL_TARGET}x bare", self.vs_bare <= SMALL_TARGET
        if self.op == "view":
            return None  # O(1) whatever the size: nothing to amortize Python over
        return f"<= {LARGE_TARGET}x cpu", self.vs_cpu <= LARGE_TARGET


def _check(op: str, n: int, fn: Callable, cpu_in: tuple, **others: tuple) -> None:
    """The device and the wrappers must compute what the CPU computes."""
    expected = fn(*cpu_in)
    for name, inputs in others.items():
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
    dev_in = tuple(t.to("mtia_sim") for t in make(n))
    # Every kind reads the same bytes (the device tensors' own host memory): at 4M elements where
    # a buffer sits (page alignment, huge pages) moves a memory-bound op by tens of percent.
    cpu_in = tuple(t._inner for t in dev_in)
    bare_in = tuple(Bare(t) for t in cpu_in)
    hand_in = tuple(Hand(t) for t in cpu_in)
    _check(op, n, fn, cpu_in, mtia_sim=dev_in, bare=bare_in, hand=hand_in)
    calls = {
        "cpu": lambda: fn(*cpu_in),
        "bare": lambda: fn(*bare_in),
        "hand": lambda: fn(*hand_in),
        "mtia": lambda: fn(*dev_in),
    }
    number = min(_calibrate(call) for call in calls.values())
    call_seconds = timeit.timeit(calls["cpu"], number=1)
    if call_seconds > SLOW_CALL_SECONDS:
        rounds = min(rounds, SLOW_ROUNDS)
    else:
        rounds = max(rounds, min(400, int(BUDGET_SECONDS / (number * max(call_seconds, 1e-7)))))
    best = dict.fromkeys(calls, math.inf)
    # Interleave the kinds round by round, in a shuffled order: a noisy moment on a shared
    # machine, or the state one kind leaves behind (caches, the heap), favours none of them.
    order = list(calls.items())
    shuffle = random.Random(n).shuffle
    for _ in range(rounds):
        shuffle(order)
        for name, call in order:
            (seconds,) = timeit.repeat(call, number=number, repeat=1)
            best[name] = min(best[name], seconds / number * 1e6)
    return Row(op, n, best["cpu"], best["bare"], best["hand"], best["mtia"])


def render(rows: list[Row], console: Console) -> None:
    table = Table(title=f"per-op host time in us, best of rounds (torch threads: "
                  f"{torch.get_num_threads()})")
    columns = ("op", "elements", "cpu", "bare", "hand", "mtia", "mtia/bare", "mtia/hand",
               "mtia/cpu", "target")
    for column in columns:
        table.add_column(column, justify="left" if column in ("op", "target") else "right")
    for row in rows:
        target = row.target()
        if target is None:
            verdict = "n/a: a view is O(1)"
        else:
            verdict = f"{'[green]met[/]' if target[1] else '[red]MISSED[/]'} {target[0]}"
        table.add_row(
            row.op, f"{row.n:,}", f"{row.cpu_us:.2f}", f"{row.bare_us:.2f}",
            f"{row.hand_us:.2f}", f"{row.mtia_us:.2f}", f"{row.vs_bare:.2f}",
            f"{row.vs_hand:.2f}", f"{row.vs_cpu:.2f}", verdict,
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
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument(
        "--threads", type=int, default=1, help="torch intra-op threads; 0 keeps torch's default"
    )
    options = parser.parse_args(argv)
    if options.threads:
        torch.set_num_threads(options.threads)
    console = Console(width=max(Console().width, 130))
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
