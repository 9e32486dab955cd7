"""Sweep PyTorch's op_db on mtia_sim: the device's output layouts against the fake kernel's.

    .venv/bin/python scripts/meta_strides_sweep.py                  # every layout, forward
    .venv/bin/python scripts/meta_strides_sweep.py --backward       # and backward (about 3 min)
    .venv/bin/python scripts/meta_strides_sweep.py --ops native_batch_norm --layouts transposed
    .venv/bin/python scripts/meta_strides_sweep.py --json strides.json

For every float32 (or --dtype) OpInfo and input layout (mtia_lab/testing/meta_strides.py),
prints how many (op, layout) runs matched, mismatched or could not be compared, then every
mismatch with the aten op, the device's and the fake's metadata, and whether the fake kernel
promises the CPU the same ("also on cpu") or this device only ("device-specific"), and the most
common reasons for skipped samples. Exit status 1 if any run mismatched.
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
from mtia_lab.testing.meta_strides import LAYOUTS, STRIDE_CLASSES, StrideResult, check_op_strides
from mtia_lab.testing.opinfo import supported_ops


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", help="comma-separated OpInfo names (default: all of op_db)")
    parser.add_argument("--layouts", default=",".join(LAYOUTS),
                        help=f"comma-separated, of {','.join(LAYOUTS)} (default: all)")
    parser.add_argument("--dtype", default="float32", help="sample dtype (default float32)")
    parser.add_argument("--max-samples", type=int, default=8, help="samples per op (default 8)")
    parser.add_argument("--backward", action="store_true",
                        help="differentiate each sample too: backward kernels are compared")
    parser.add_argument("--json", dest="json_path", help="write every result to this file")
    options = parser.parse_args(argv)
    layouts = options.layouts.split(",")
    unknown = set(layouts) - set(LAYOUTS)
    if unknown:
        parser.error(f"--layouts: unknown {', '.join(sorted(unknown))}; use {', '.join(LAYOUTS)}")
    dtype = getattr(torch, options.dtype, None)
    if not isinstance(dtype, torch.dtype):
        parser.error(f"--dtype {options.dtype}: not a torch dtype (try float32, bfloat16)")
    ops = supported_ops(options.ops.split(",") if options.ops else None, dtype)
    jobs = [(op, layout) for op in ops for layout in layouts]
    console = Console()
    results: list[StrideResult] = []
    start = time.perf_counter()
    columns = (TextColumn("{task.description:<36}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task(f"op_db {options.dtype}", total=len(jobs))
        for op, layout in jobs:
            progress.update(task, description=f"{op.full_name[:22]} {layout}")
            results.append(check_op_strides(op, layout, max_samples=options.max_samples,
                                            dtype=dtype, backward=options.backward))
            progress.advance(task)
    report(console, results, time.perf_counter() - start, options.dtype)
    if options.json_path:
        with open(options.json_path, "w") as handle:
            json.dump([r.to_json() for r in results], handle, indent=1)
    return 1 if any(r.klass == "mismatch" for r in results) else 0


def report(console: Console, results: list[StrideResult], elapsed: float, dtype: str) -> None:
    calls = sum(r.calls for r in results)
    console.print(f"op_db {dtype} meta-stride sweep on mtia_sim: {len(results)} (op, layout) "
                  f"runs, {calls} aten calls compared, in {elapsed:.0f} s")
    table = Table()
    table.add_column("layout")
    for klass in STRIDE_CLASSES:
        table.add_column(klass, justify="right")
    for layout in dict.fromkeys(r.layout for r in results):
        counts = Counter(r.klass for r in results if r.layout == layout)
        table.add_row(layout, *(str(counts.get(k, 0)) for k in STRIDE_CLASSES))
    console.print(table)
    mismatches = [r for r in results if r.klass == "mismatch"]
    if mismatches:
        console.print(f"\n[bold]mismatch[/bold] ({len(mismatches)})")
        for r in mismatches:
            for where, problem in r.mismatches.items():
                console.print(f"  {r.name:<32} {r.layout:<14} {where}: {problem}", markup=False,
                              highlight=False, soft_wrap=True)
    reasons = Counter()
    for r in results:
        reasons.update(r.skipped)
    if reasons:
        top = ", ".join(f"{why} ({n})" for why, n in reasons.most_common(8))
        console.print(f"\nskipped samples: {top}", highlight=False, soft_wrap=True)


if __name__ == "__main__":
    sys.exit(main())
