"""Probes of Inductor's looped reductions (triton_red_*): what slows one below the copy rate.

Standalone like gpu_side.py (torch with CUDA and Triton only):

    python3 benchmarks/gpu_calibration/loop_probes.py --out loops.json [--families family]

The calibrated backward passes have looped reductions that run at a third to two thirds of the
copy bandwidth while reduction_probes.py's looped sums of one to three inputs reach it. These
kernels, at shapes none of the calibrated kernels has, vary what a looped reduction's own
source shows (the Triton source is stored with each row, as for the calibrated kernels):

- `grid`: sums over the strided outer axis of (rows, 1536) inputs, as a weight or bias
  gradient, with L inputs loaded and M accumulators per loop iteration (L, M from 1 to 9);
  past the L2 (each case moves 100 MiB or more), fp32 and bf16.
- `inner`: the same over the contiguous inner axis (rows of 6144).
- `family`: the backward passes themselves at other shapes: layer norm after a residual add
  (bf16 and fp32) and batch norm in training (fp32), with every Triton kernel they launch.

Every time is the kernels' own duration (torch.profiler), as gpu_side.py's `kernel_us`.
"""

from __future__ import annotations

import argparse
import functools
import operator
import sys
from pathlib import Path

import torch
import torch.nn.functional as F  # noqa: N812

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_side  # noqa: E402

GRID = ((1, 1), (2, 2), (3, 3), (4, 2), (5, 5), (6, 4), (8, 2), (8, 8), (9, 7))
GRID_BF16 = ((1, 1), (4, 2), (9, 7))
INNER = ((1, 1), (4, 2), (8, 8))
COLUMNS = 1536  # the calibrated models' columns are 1024 (and 64 channels)
INNER_LENGTH = 6144
TARGET_BYTES = 160 << 20  # per case: past the L2 of both chips


def sums(loads: int, accumulators: int, axis: int):
    """A function of `loads` inputs with `accumulators` distinct sums along `axis`."""
    def fn(*xs):
        if accumulators == 1:
            return (functools.reduce(operator.mul, xs),)
        if accumulators < loads:  # every input read, fewer sums: fold the rest into the first
            head = functools.reduce(operator.mul, xs[accumulators - 1:])
            parts = [*xs[:accumulators - 1], head]
        else:
            parts = [xs[j % loads] * xs[(j + 1) % loads] + j for j in range(accumulators)]
        return tuple(p.sum(axis) for p in parts)
    return fn


def _cases(families: tuple[str, ...] = ("grid", "inner", "family")
           ) -> list[tuple[str, dict, object, list, bool]]:
    """(family, facts, function, inputs, backward) of the chosen families."""
    cases = []
    for dtype, grid in ((torch.float32, GRID), (torch.bfloat16, GRID_BF16)):
        for loads, accumulators in grid:
            size = torch.finfo(dtype).bits // 8
            rows = TARGET_BYTES // (loads * COLUMNS * size) // 64 * 64
            xs = [torch.randn(rows, COLUMNS, device="cuda", dtype=dtype) for _ in range(loads)]
            cases.append(("grid", {"loads": loads, "accumulators": accumulators,
                                   "shape": [rows, COLUMNS]},
                          sums(loads, accumulators, 0), xs, False))
    for loads, accumulators in INNER:
        rows = TARGET_BYTES // (loads * INNER_LENGTH * 4)
        xs = [torch.randn(rows, INNER_LENGTH, device="cuda") for _ in range(loads)]
        cases.append(("inner", {"loads": loads, "accumulators": accumulators,
                                "shape": [rows, INNER_LENGTH]},
                      sums(loads, accumulators, -1), xs, False))
    for shape, dtype in (((4, 768, 1536), torch.bfloat16), ((16, 384, 768), torch.float32)):
        x, r = (torch.randn(shape, device="cuda", dtype=dtype, requires_grad=True)
                for _ in range(2))
        norm = torch.nn.LayerNorm(shape[-1]).to("cuda", dtype)
        cases.append(("family", {"what": "layer_norm_residual", "shape": list(shape)},
                      lambda x, r, norm=norm: (norm(x + r) * 1.5,), [x, r], True))
    for shape in ((16, 48, 40, 40), (24, 96, 20, 20)):
        x = torch.randn(shape, device="cuda", requires_grad=True)
        norm = torch.nn.BatchNorm2d(shape[1]).to("cuda").train()
        cases.append(("family", {"what": "batch_norm_relu", "shape": list(shape)},
                      lambda x, norm=norm: (F.relu(norm(x)) * 1.5,), [x], True))
    return [case for case in cases if case[0] in families]


def measure(families: tuple[str, ...] = ("grid", "inner", "family")) -> list[dict]:
    import torch._inductor.config as inductor_config
    from torch._inductor.utils import run_and_get_code
    from torch.profiler import ProfilerActivity, profile

    inductor_config.benchmark_kernel = True
    rows = []
    for family, facts, fn, args, backward in _cases(families):
        torch.compiler.reset()
        compiled = torch.compile(fn)

        def step(compiled=compiled, args=args, backward=backward):
            outs = compiled(*args)
            if backward:
                outs[0].float().square().mean().backward()
            return outs

        try:
            _, sources = run_and_get_code(step)
            for _ in range(3):
                step()
            torch.cuda.synchronize()
            calls = 20
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(calls):
                    step()
                torch.cuda.synchronize()
        except Exception as error:  # noqa: BLE001 - a probe that fails is recorded
            rows.append({"family": family, **facts, "error": f"{type(error).__name__}: "
                         f"{str(error).splitlines()[0][:200]}"})
            continue
        kernels = gpu_side.kernel_facts(sources)
        for event in prof.key_averages():
            if not gpu_side._is_device_kernel(event) or event.key not in kernels:
                continue
            total = (getattr(event, "self_device_time_total", 0)
                     or getattr(event, "device_time_total", 0))
            kernel = kernels[event.key]
            row = {"family": family, **facts, "dtype": str(args[0].dtype)[6:],
                   "kernel": event.key, "device_us": total / event.count,
                   "count": event.count / calls, **kernel}
            rows.append(row)
            gb = kernel["kernel_num_gb"] or 0.0
            print(f"{family:>6} {str(facts)[:44]:<44} {row['dtype']:>8} {event.key[:34]:<34} "
                  f"{row['device_us']:8.2f} us {gb * 1e6 / row['device_us']:7.0f} GB/s "
                  f"{kernel['numel']}", flush=True)
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--families", nargs="+", default=["grid", "inner", "family"],
                        help="which probe families to run (a short run: family)")
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    result = {"environment": gpu_side.environment(), "peaks": {}}
    x = torch.randn(1 << 27, device="cuda")  # an elementwise pass, on this run's card
    y = torch.empty_like(x)
    us, _ = gpu_side.kernel_us(lambda x=x, y=y: torch.mul(x, 1.0, out=y), 20)
    result["peaks"]["copy_bandwidth"] = 2 * x.nbytes / (us * 1e-6)
    del x, y
    result["loops"] = measure(tuple(args.families))
    gpu_side.save(result, args.out)
    print(f"wrote {args.out}: {len(result['loops'])} rows, copy "
          f"{result['peaks']['copy_bandwidth'] / 1e12:.2f} TB/s")


if __name__ == "__main__":
    main()
