"""Real Inductor on the model zoo: compiled on the device against eager and CPU Inductor.

    .venv/bin/python benchmarks/bench_inductor_zoo.py [--models gpt2 bert ...] [--rounds 3]
                                                      [--train] [--parts eager,device,cpu]

For each zoo model (mtia_lab/testing/zoo.py, tiny test configs, random weights), in one process:
  eager      steady eval forward on mtia_sim, eager (the baseline of the compiled call)
  device     torch.compile(model) -- Inductor for mtia_sim, Triton interpreted: first call
             (compile + run, fresh Inductor caches) and the steady call
  cpu        torch.compile(model) of the same model on the CPU: Inductor's C++ kernels, first
             call (fresh caches) and the steady call
`--train` times a training step instead (forward, a loss, backward). The ratios are the issue's
targets: steady device compiled / eager device (at most 3x) and first device call / first CPU
Inductor call (at most 2x). `max err` is the device result against CPU eager: a speed-up that
changed results would show there. Times are wall seconds, best of `--rounds`.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _timing import best_of  # noqa: E402

import mtia_lab  # noqa: E402,F401
from mtia_lab.testing.zoo import NAMES, build, logits  # noqa: E402

DEV = "mtia_sim"


def _step(model, batch: dict, train: bool):
    if not train:
        with torch.no_grad():
            return logits(model(**batch))
    out = logits(model(**batch))
    out.float().square().mean().backward()
    return out


def _on(batch: dict, device: str) -> dict:
    return {k: v.to(device) for k, v in batch.items()}


def _timed(fn) -> tuple[float, object]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def measure(name: str, parts: set[str], rounds: int, train: bool) -> dict:
    from torch._inductor.utils import fresh_cache

    model, batch = build(name)
    model.train(train)
    expected = _step(copy.deepcopy(model), batch, train).detach()
    row: dict = {"name": name}
    dev_model, dev_batch = copy.deepcopy(model).to(DEV), _on(batch, DEV)
    if "eager" in parts:
        row["eager"] = best_of(lambda: _step(dev_model, dev_batch, train), rounds)
    if "device" in parts:
        torch.compiler.reset()
        compiled = torch.compile(copy.deepcopy(model).to(DEV))
        try:
            with fresh_cache():
                row["device_first"], out = _timed(lambda: _step(compiled, dev_batch, train))
            row["device"] = best_of(lambda: _step(compiled, dev_batch, train), rounds)
            row["err"] = (out.detach().cpu().float() - expected.float()).abs().max().item()
        except Exception as error:  # a model that fails is a row of the table, not the end
            row["device_error"] = f"{type(error).__name__}: {str(error).splitlines()[0][:90]}"
    if "cpu" in parts:
        torch.compiler.reset()
        compiled = torch.compile(copy.deepcopy(model))
        with fresh_cache():
            row["cpu_first"], _ = _timed(lambda: _step(compiled, batch, train))
        row["cpu"] = best_of(lambda: _step(compiled, batch, train), rounds)
    return row


def _fmt(value, unit: float = 1.0, spec: str = ".3f") -> str:
    return "-" if value is None else format(value * unit, spec)


def report(rows: list[dict], train: bool) -> None:
    what = "training step (forward, loss, backward)" if train else "eval forward"
    print(f"Inductor on the zoo, {what}; wall seconds, steady = best of rounds")
    head = (f"{'model':14}{'eager':>9}{'device':>9}{'x eager':>9}{'device 1st':>12}"
            f"{'cpu 1st':>9}{'x cpu 1st':>11}{'cpu':>9}{'max err':>10}")
    print(head)
    for r in rows:
        if "device_error" in r:
            print(f"{r['name']:14}{_fmt(r.get('eager')):>9}  fails: {r['device_error']}")
            continue
        ratio = r["device"] / r["eager"] if "device" in r and "eager" in r else None
        first = (r["device_first"] / r["cpu_first"]
                 if "device_first" in r and "cpu_first" in r else None)
        print(f"{r['name']:14}{_fmt(r.get('eager')):>9}{_fmt(r.get('device')):>9}"
              f"{_fmt(ratio, spec='.1f'):>8}x{_fmt(r.get('device_first'), spec='.1f'):>12}"
              f"{_fmt(r.get('cpu_first'), spec='.1f'):>9}{_fmt(first, spec='.2f'):>10}x"
              f"{_fmt(r.get('cpu')):>9}{_fmt(r.get('err'), spec='.1e'):>10}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(NAMES), choices=NAMES)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--train", action="store_true")
    parser.add_argument("--parts", default="eager,device,cpu")
    args = parser.parse_args()
    torch.set_num_threads(1)  # one thread: the comparison is the host's work, not parallelism
    parts = set(args.parts.split(","))
    rows = []
    for name in args.models:
        rows.append(measure(name, parts, args.rounds, args.train))
        print(f"  measured {name}", file=sys.stderr, flush=True)
    report(rows, args.train)


if __name__ == "__main__":
    main()
