"""Probes of Inductor's small persistent column sums (triton_per_ with an OUTER hint).

Standalone like gpu_side.py (torch with CUDA and Triton only):

    python3 benchmarks/gpu_calibration/persistent_probes.py --out persistent.json [--models]

A split column sum ends in a small `triton_per_` kernel that sums r0 partial rows per column.
In Inductor's `_persistent_reduction_configs` an OUTER hint keeps only the last of its
candidate configs: the largest XBLOCK of (1, 8, 32, 128) with XBLOCK * r0 <= 4096, so
XBLOCK = 128 when r0 (rounded up to a power of two) is 32 or less, 32 when it is 64. These
probes time column sums `x.sum(0)` of (r0, columns) inputs on both sides of that step, at
shapes none of the calibrated kernels has (their second stages are 32 x 1024, 3072, 4096),
with each kernel's source and reduction hint; `split`: column sums of (rows, columns) inputs
large enough that Inductor splits them, so that the second step inherits the first's OUTER
hint (Inductor gives a reduction of 32 or fewer elements a DEFAULT hint of its own, and
autotunes its config). Each row records the config Inductor launched (XBLOCK, num_warps).
`--models` records, untimed, the hint, heuristic and launched config of every Triton kernel of
gpu_side.py's calibration models (the stored sources begin at @triton.jit, without them).

Every time is the kernels' own duration (torch.profiler), as gpu_side.py's `kernel_us`.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_side  # noqa: E402
from reduction_probes import kernel_hints  # noqa: E402

ROWS = (8, 20, 24, 28, 40, 48, 56)  # r0: XBLOCK 128 up to 32, 32 past it
COLUMNS = (768, 2560)
WIDE_COLUMNS = 6144  # more programs than SMs at XBLOCK 32, fewer at 128
WIDE_ROWS = (20, 48)
SPLIT = ((8192, 768), (32768, 768), (8192, 2560), (32768, 2560), (16384, 6144), (65536, 1536))
_HEURISTIC = re.compile(r"@triton_heuristics\.(\w+)\(")


def shapes() -> list[tuple[int, int]]:
    return ([(r, c) for c in COLUMNS for r in ROWS]
            + [(r, WIDE_COLUMNS) for r in WIDE_ROWS] + list(SPLIT))


def heuristics(sources: list[str]) -> dict:
    """Inductor's heuristic (persistent_reduction, reduction, pointwise) of each kernel."""
    found = {}
    for code in sources:
        for block in re.split(r"\n(?=@triton_heuristics\.)", code):
            name, heuristic = gpu_side._KERNEL.search(block), _HEURISTIC.search(block)
            if name and heuristic:
                found[name.group(1)] = heuristic.group(1)
    return found


def launched_configs(start: int) -> dict:
    """kernel name -> the config its launcher ran with (XBLOCK, R0_BLOCK, num_warps), from the
    compiled modules Inductor loaded since `start` (an index into PyCodeCache.modules)."""
    from torch._inductor.codecache import PyCodeCache

    configs = {}
    try:
        modules = list(PyCodeCache.modules)[start:]
    except TypeError:  # another torch keeps them otherwise: no configs, the rest still runs
        return configs
    for module in modules:
        for name, value in vars(module).items():
            launchers = getattr(value, "launchers", None)
            if not name.startswith("triton_") or not launchers:
                continue
            config = getattr(launchers[0], "config", None)
            if config is None:
                continue
            configs[name] = {**{k: v for k, v in config.kwargs.items() if isinstance(v, int)},
                             "num_warps": config.num_warps, "candidates": len(
                                 getattr(value, "configs", []) or [])}
    return configs


def _module_count() -> int:
    from torch._inductor.codecache import PyCodeCache

    return len(PyCodeCache.modules)


def model_hints() -> list[dict]:
    """Hint, heuristic and launched config of the calibration models' Triton kernels."""
    import contextlib

    import torch._inductor.config as inductor_config
    from torch._inductor.utils import run_and_get_code

    inductor_config.benchmark_kernel = True
    rows = []
    for (name, (module, shape, dtype)), train in [
            (item, train) for item in gpu_side.models("full").items() for train in (False, True)]:
        module = module.to("cuda", dtype).train(train)
        x = torch.randn(shape, device="cuda", dtype=dtype)
        torch.compiler.reset()
        compiled = torch.compile(module)

        def step(compiled=compiled, x=x, train=train):
            out = compiled(x)
            if train:
                out.float().square().mean().backward()
            return out

        start = _module_count()
        with contextlib.nullcontext() if train else torch.no_grad():
            _, sources = run_and_get_code(step)
            step()
        torch.cuda.synchronize()
        hints, kinds = kernel_hints(sources), heuristics(sources)
        configs = launched_configs(start)
        for kernel in sorted(kinds):
            rows.append({"model": name, "train": train, "kernel": kernel,
                         "heuristic": kinds[kernel], "hint": hints.get(kernel),
                         "config": configs.get(kernel)})
            print(f"hints {name} {train} {kernel[:50]:<50} {kinds[kernel]} {hints.get(kernel)} "
                  f"{configs.get(kernel)}", flush=True)
    return rows


def measure() -> list[dict]:
    import torch._inductor.config as inductor_config
    from torch._inductor.utils import run_and_get_code
    from torch.profiler import ProfilerActivity, profile

    inductor_config.benchmark_kernel = True
    rows = []
    for shape in shapes():
        x = torch.randn(shape, device="cuda")
        torch.compiler.reset()
        compiled = torch.compile(lambda x: x.sum(0))
        start = _module_count()
        try:
            _, sources = run_and_get_code(compiled, x)
            for _ in range(3):
                compiled(x)
            torch.cuda.synchronize()
            calls = 50
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(calls):
                    compiled(x)
                torch.cuda.synchronize()
        except Exception as error:  # noqa: BLE001 - a probe that fails is recorded
            rows.append({"shape": list(shape), "error": f"{type(error).__name__}: "
                         f"{str(error).splitlines()[0][:200]}"})
            continue
        facts, hints = gpu_side.kernel_facts(sources), kernel_hints(sources)
        configs = launched_configs(start)
        for event in prof.key_averages():
            if not gpu_side._is_device_kernel(event) or event.key not in facts:
                continue
            total = (getattr(event, "self_device_time_total", 0)
                     or getattr(event, "device_time_total", 0))
            row = {"shape": list(shape), "dtype": "float32", "kernel": event.key,
                   "device_us": total / event.count, "count": event.count / calls,
                   "hint": hints.get(event.key), "config": configs.get(event.key),
                   **facts[event.key]}
            rows.append(row)
            print(f"persistent {shape} {event.key[:36]:<36} {row['device_us']:7.2f} us "
                  f"{row['numel']} {row['hint']} {row['config']}", flush=True)
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--models", action="store_true",
                        help="also record the calibration models' kernel hints and configs")
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    result = {"environment": gpu_side.environment(), "persistent": measure()}
    gpu_side.save(result, args.out)
    if args.models:
        result["model_hints"] = model_hints()
        gpu_side.save(result, args.out)
    print(f"wrote {args.out}: {len(result['persistent'])} rows")


if __name__ == "__main__":
    main()
