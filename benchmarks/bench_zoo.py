"""Eager forward of the model zoo on the device, next to CPU eager and the bare-wrapper floor.

For each zoo model (mtia_lab/testing/zoo.py, at its "bench" size unless --size test), in eval
mode under no_grad, one forward as:

- cpu:  plain CPU eager (the work itself);
- bare: the same model with every parameter and buffer a `Bare` wrapper (bench_ops.py): the
        smallest Python device there is, which unwraps, runs the CPU op and rewraps;
- mtia: the model on `mtia_sim`.

Targets (issue 9): mtia/cpu <= 2x for the CNNs, <= 4x for the transformers, one torch thread.
The ops per forward column is how many aten ops reach the device: the Python cost of a device
is per op, so a model of many small ops (the CNNs' BatchNorm) pays more of it.
The last column is the CPU fallbacks of one training step (forward, backward, AdamW step): the
ops that still run on the host, as `mtia_lab.fallback_counts()` counts them.

Each figure is the best of --rounds interleaved rounds (the kinds in a shuffled order each round).
The exit status is non-zero only if something fails (a model raises, or the device's logits
differ from the CPU's); a missed target is printed, not failed.

    python benchmarks/bench_zoo.py [--models resnet gpt2] [--size bench] [--rounds 15]
"""

from __future__ import annotations

import argparse
import copy
import random
import sys
import time

import torch
from bench_ops import Bare
from rich.console import Console
from rich.table import Table

import mtia_lab
from mtia_lab.testing import to_device
from mtia_lab.testing.zoo import NAMES, SIZES, build, logits, zoo_model

TARGETS = {"cnn": 2.0, "transformer": 4.0}  # mtia / cpu


def _bare(model: torch.nn.Module) -> torch.nn.Module:
    """A copy whose parameters and buffers are Bare wrappers (forward only: no autograd)."""
    model = copy.deepcopy(model)
    for module in model.modules():
        for table in (module._parameters, module._buffers):
            for name, value in table.items():
                if value is not None:
                    table[name] = Bare(value.detach())
    return model


def _bare_batch(batch: dict) -> dict:
    return {k: Bare(v) for k, v in batch.items()}


def _ops_per_forward(model, batch) -> int:
    with torch.no_grad(), mtia_lab.trace() as trace:
        model(**batch)
    return len(trace.events)


def _training_fallbacks(name: str) -> dict[str, int]:
    model, batch = build(name)
    model = model.to("mtia_sim").train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    mtia_lab.reset_fallback_counts()
    logits(model(**to_device(batch))).float().square().mean().backward()
    optimizer.step()
    return mtia_lab.fallback_counts()


def measure(name: str, rounds: int, size: str) -> dict:
    model, batch = build(name, size=size)
    model.eval()
    device_model, device_batch = copy.deepcopy(model).to("mtia_sim"), to_device(batch)
    bare_model, bare_batch = _bare(model), _bare_batch(batch)
    with torch.no_grad():
        expected = logits(model(**batch))
        got = logits(device_model(**device_batch)).cpu()
        bare = logits(bare_model(**bare_batch))._inner
    for kind, value in (("mtia_sim", got), ("bare", bare)):
        if not torch.allclose(value, expected, rtol=1e-4, atol=1e-5):
            raise AssertionError(f"{name}: {kind} logits differ from CPU eager")
    calls = {
        "cpu": lambda: model(**batch),
        "bare": lambda: bare_model(**bare_batch),
        "mtia": lambda: device_model(**device_batch),
    }
    best = dict.fromkeys(calls, float("inf"))
    order = list(calls.items())
    shuffle = random.Random(0).shuffle
    with torch.no_grad():
        for _ in range(rounds):
            shuffle(order)
            for kind, call in order:
                start = time.perf_counter()
                call()
                best[kind] = min(best[kind], time.perf_counter() - start)
    return {
        "name": name, "family": zoo_model(name, size).family, **{k: v * 1e3 for k, v in best.items()},
        "ops": _ops_per_forward(device_model, device_batch),
        "fallbacks": _training_fallbacks(name),
    }


def render(rows: list[dict], console: Console, size: str) -> None:
    table = Table(title=f"eager forward in ms, best of rounds (torch threads: "
                  f"{torch.get_num_threads()}; zoo size {size!r})")
    columns = ("model", "ops", "cpu", "bare", "mtia", "bare/cpu", "mtia/bare", "mtia/cpu",
               "target", "training-step fallbacks")
    for column in columns:
        table.add_column(column, justify="left" if column in ("model", "target") else "right")
    for row in rows:
        ratio, target = row["mtia"] / row["cpu"], TARGETS[row["family"]]
        verdict = f"{'[green]met[/]' if ratio <= target else '[red]MISSED[/]'} <= {target}x"
        fallbacks = ", ".join(f"{op.removeprefix('aten::')} {n}"
                              for op, n in sorted(row["fallbacks"].items())) or "none"
        table.add_row(
            row["name"], str(row["ops"]), f"{row['cpu']:.2f}", f"{row['bare']:.2f}",
            f"{row['mtia']:.2f}", f"{row['bare'] / row['cpu']:.2f}",
            f"{row['mtia'] / row['bare']:.2f}", f"{ratio:.2f}", verdict, fallbacks,
        )
    console.print(table)
    met = sum(row["mtia"] / row["cpu"] <= TARGETS[row["family"]] for row in rows)
    console.print(f"targets met: {met}/{len(rows)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(NAMES), choices=list(NAMES))
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--size", default="bench", choices=list(SIZES),
                        help="zoo sizes (mtia_lab/testing/zoo.py); 'test' is the zoo test's")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch intra-op threads; 0 keeps torch's default"
    )
    options = parser.parse_args(argv)
    if options.threads:
        torch.set_num_threads(options.threads)
    console = Console(width=max(Console().width, 150))
    rows, failures = [], []
    for name in options.models:
        try:
            rows.append(measure(name, options.rounds, options.size))
        except Exception as error:  # report every failure, then exit non-zero
            failures.append(f"{name}: {type(error).__name__}: {error}")
    render(rows, console, options.size)
    for failure in failures:
        console.print(f"[red]ERROR[/] {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
