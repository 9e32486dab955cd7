"""Sweep PyTorch's op_db on mtia_sim: every float32 OpInfo, device result against CPU.

    .venv/bin/python scripts/opinfo_sweep.py                 # the whole op_db (under a minute)
    .venv/bin/python scripts/opinfo_sweep.py --ops add,clamp,nn.functional.conv2d
    .venv/bin/python scripts/opinfo_sweep.py --variants op,method,inplace,out --json sweep.json
    .venv/bin/python scripts/opinfo_sweep.py --noncontiguous --dtype complex64

Prints the number of ops in each class (see mtia_lab/testing/opinfo.py), then every op that is
"wrong" or "error" with the first line of what went wrong. Errors that are a stated limit of a
Python wrapper device (KNOWN_LIMITS) are listed apart. Exit status 1 if any op is a bug.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter

import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

import mtia_lab  # noqa: F401  (registers the device)
from mtia_lab.testing.opinfo import CLASSES, OpResult, check_op, has_variant, supported_ops

# Device errors that are a stated limit of a Python wrapper device, not a bug: (text in the
# error, why). Device tensors are strided or sparse COO (backend/aten/sparse.py).
KNOWN_LIMITS: list[tuple[str, str]] = [
    ("mtia_sim stores strided (dense) tensors and sparse COO tensors only",
     "compressed sparse layouts (CSR, CSC, BSR, BSC): only COO is supported"),
]


def known_limit(result: OpResult) -> str:
    """Why this error is a known limit, or "" if it is a bug."""
    if result.klass != "error":
        return ""
    return next((why for text, why in KNOWN_LIMITS if text in result.problem), "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", help="comma-separated OpInfo names (default: all of op_db)")
    parser.add_argument("--json", dest="json_path", help="write every result to this file")
    parser.add_argument("--variants", default="op",
                        help="comma-separated: op,method,inplace,out (default: op)")
    parser.add_argument("--dtype", default="float32", help="sample dtype (default float32)")
    parser.add_argument("--noncontiguous", action="store_true",
                        help="make every sample tensor a strided view (SampleInput.noncontiguous)")
    parser.add_argument("--max-samples", type=int, default=8, help="samples per op (default 8)")
    options = parser.parse_args(argv)
    console = Console()
    dtype = getattr(torch, options.dtype, None)
    if not isinstance(dtype, torch.dtype):
        parser.error(f"--dtype {options.dtype}: not a torch dtype (try float32, int64, complex64)")
    ops = supported_ops(options.ops.split(",") if options.ops else None, dtype)
    variants = options.variants.split(",")
    jobs = [(op, v) for op in ops for v in variants if has_variant(op, v)]
    results: list[OpResult] = []
    start = time.perf_counter()
    columns = (TextColumn("{task.description:<36}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("op_db float32", total=len(jobs))
        for op, variant in jobs:
            progress.update(task, description=op.full_name[:36])
            results.append(check_op(op, max_samples=options.max_samples, variant=variant,
                                    dtype=dtype, noncontiguous=options.noncontiguous))
            progress.advance(task)
    elapsed = time.perf_counter() - start
    layout = ", noncontiguous" if options.noncontiguous else ""
    report(console, results, elapsed, f"{options.dtype}{layout}")
    if options.json_path:
        with open(options.json_path, "w") as handle:
            json.dump([r.to_json() for r in results], handle, indent=1)
    bugs = [r for r in results if r.klass == "wrong" or (r.klass == "error" and not known_limit(r))]
    return 1 if bugs else 0


def report(console: Console, results: list[OpResult], elapsed: float, what: str) -> None:
    counts = Counter(r.klass for r in results)
    console.print(f"op_db {what} sweep on mtia_sim: {len(results)} OpInfo runs in {elapsed:.0f} s")
    table = Table()
    table.add_column("class")
    table.add_column("ops", justify="right")
    for klass in CLASSES:
        table.add_row(klass, str(counts.get(klass, 0)))
    console.print(table)
    # Which missing kernels would make the most ops native: aten ops by how many OpInfo runs
    # they sent to the CPU fallback.
    fallbacks = Counter(name for r in results if r.klass == "fallback" for name in r.fallbacks)
    if fallbacks:
        top = ", ".join(f"{name} ({n})" for name, n in fallbacks.most_common(8))
        console.print(f"most used fallbacks (runs): {top}", highlight=False, soft_wrap=True)
    for klass in ("wrong", "error"):
        found = [r for r in results if r.klass == klass and not known_limit(r)]
        if found:
            console.print(f"\n[bold]{klass}[/bold] ({len(found)})")
            for r in found:
                console.print(f"  {r.name:<36} {r.problem[:200]}", markup=False, highlight=False,
                              soft_wrap=True)
    limits = [r for r in results if known_limit(r)]
    if limits:
        console.print(f"\n[bold]known limits[/bold] ({len(limits)} of the errors, not bugs)")
        for r in limits:
            console.print(f"  {r.name:<36} {known_limit(r)}", markup=False, highlight=False,
                          soft_wrap=True)


if __name__ == "__main__":
    sys.exit(main())
