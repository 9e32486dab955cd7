"""Probes of how reductions move bytes on a real GPU, apart from the kernels they price.

Standalone like gpu_side.py (torch with CUDA and Triton only):

    python3 benchmarks/gpu_calibration/reduction_probes.py --out probes.json

The calibration (gpu_side.py) times 139 kernels that the cost model is held to; a reduction
figure fitted on those would be tuned on the test set. These probes are separate kernels, at
shapes none of those kernels has, each asking one question of the chip:

- `aten`: ATen's row reductions (sum), softmax and layer norm over rows of 256 to 16384
  elements: 16 rows (the latency of one row: few blocks, the chip mostly idle), 2^25 elements
  (past the L2: the bandwidth a reduction reaches) and 2^21 elements (L2-resident).
- `inductor`: the Triton kernels Inductor generates for a sum over the contiguous inner axis,
  a sum over a strided outer axis (Inductor splits it in two kernels: a looped triton_red_ that
  reduces column blocks, a small triton_per_ that finishes), a weight-gradient-like reduction
  over the outer axis with several inputs and accumulators, layer norm and softmax; with
  Inductor's own byte estimate and its reduction hint for each kernel.
- `l2`: an elementwise add whose working set (in + out) grows from 24 to 64 MiB: where the L2
  stops serving a kernel that runs back to back on the same buffers.

Every time is the kernels' own duration (torch.profiler), as gpu_side.py's `kernel_us`.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import torch
import torch.nn.functional as F  # noqa: N812

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_side  # noqa: E402

# Row lengths none of the calibrated kernels has (those reduce rows of 1024 and 8192, or are
# Inductor's 128- and 32-long column blocks)
LENGTHS = (256, 512, 2048, 4096, 16384)
LATENCY_ROWS = 16
DRAM_ELEMENTS = 1 << 25  # 128 MiB of fp32 in: past the L2 of both chips
L2_ELEMENTS = 1 << 21  # 8 MiB of fp32 in, 8 MiB out at most


def aten_shapes() -> list[tuple[str, int, int]]:
    shapes = [("latency", LATENCY_ROWS, n) for n in (256, 2048, 4096, 16384)]
    shapes += [("dram", DRAM_ELEMENTS // n, n) for n in LENGTHS]
    shapes += [("l2", L2_ELEMENTS // n, n) for n in (512, 2048)]
    return shapes


_ATEN = {"sum": lambda x: x.sum(-1), "softmax": lambda x: x.softmax(-1),
         "layer_norm": lambda x: F.layer_norm(x, x.shape[-1:])}


def measure_aten() -> list[dict]:
    rows = []
    for regime, r, n in aten_shapes():
        for op, dtype in (("sum", torch.float32), ("softmax", torch.float32),
                          ("layer_norm", torch.float32), ("softmax", torch.bfloat16)):
            x = torch.randn(r, n, device="cuda", dtype=dtype)
            fn = _ATEN[op]
            us, kernels = gpu_side.kernel_us(lambda fn=fn, x=x: fn(x))
            out = fn(x)
            row = {"op": op, "regime": regime, "shape": [r, n], "dtype": str(dtype)[6:],
                   "kernel_us": us, "kernels": kernels,
                   "bytes": x.nbytes + out.nbytes}
            rows.append(row)
            print(f"aten {op:>10} {regime:>7} {r:>7}x{n:<6} {row['dtype']:>8}: {us:8.2f} us "
                  f"({kernels:.0f} kernels), {row['bytes'] / us / 1e3:7.0f} GB/s", flush=True)
    return rows


def _wgrad(a, b, c):
    return (a * b).sum(0), a.sum(0), ((b - c) * a).sum(0)


def inductor_cases() -> list[tuple[str, object, list[tuple[int, ...]], torch.dtype]]:
    """(name, function, input shapes, dtype)."""
    f32, bf16 = torch.float32, torch.bfloat16
    return [
        ("sum_inner", lambda x: x.sum(-1), [(65536, 512)], f32),
        ("sum_inner", lambda x: x.sum(-1), [(8192, 4096)], f32),
        ("sum_inner", lambda x: x.sum(-1), [(2048, 512)], f32),
        ("sum_outer", lambda x: x.sum(0), [(8192, 4096)], f32),
        ("sum_outer", lambda x: x.sum(0), [(2048, 2048)], f32),
        ("sum_outer", lambda x: x.sum(0), [(16384, 2048)], bf16),
        ("wgrad_outer", _wgrad, [(8192, 2048)] * 3, f32),
        ("wgrad_outer", _wgrad, [(8192, 2048)] * 3, bf16),
        ("layer_norm", lambda x: F.layer_norm(x, x.shape[-1:]), [(16384, 512)], f32),
        ("layer_norm", lambda x: F.layer_norm(x, x.shape[-1:]), [(4096, 2048)], f32),
        ("softmax", lambda x: x.softmax(-1), [(16384, 2048)], f32),
    ]


_HINT = re.compile(r"reduction_hint=ReductionHint\.(\w+)")


def kernel_hints(sources: list[str]) -> dict:
    """Inductor's reduction hint (INNER, OUTER, OUTER_TINY, DEFAULT) of each kernel."""
    hints = {}
    for code in sources:
        for block in re.split(r"\n(?=@triton_heuristics\.)", code):
            name = gpu_side._KERNEL.search(block)
            hint = _HINT.search(block)
            if name and hint:
                hints[name.group(1)] = hint.group(1)
    return hints


def measure_inductor() -> list[dict]:
    import torch._inductor.config as inductor_config
    from torch._inductor.utils import run_and_get_code
    from torch.profiler import ProfilerActivity, profile

    inductor_config.benchmark_kernel = True
    rows = []
    for name, fn, shapes, dtype in inductor_cases():
        args = [torch.randn(s, device="cuda", dtype=dtype) for s in shapes]
        torch.compiler.reset()
        compiled = torch.compile(fn)
        try:
            _, sources = run_and_get_code(compiled, *args)
            for _ in range(3):
                compiled(*args)
            torch.cuda.synchronize()
            calls = 20
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(calls):
                    compiled(*args)
                torch.cuda.synchronize()
        except Exception as error:  # noqa: BLE001 - a probe that fails is recorded
            rows.append({"case": name, "shapes": shapes, "error": f"{type(error).__name__}: "
                         f"{str(error).splitlines()[0][:200]}"})
            continue
        facts, hints = gpu_side.kernel_facts(sources), kernel_hints(sources)
        for event in prof.key_averages():
            if not gpu_side._is_device_kernel(event) or event.key not in facts:
                continue
            total = (getattr(event, "self_device_time_total", 0)
                     or getattr(event, "device_time_total", 0))
            kernel = facts[event.key]
            row = {"case": name, "shapes": [list(s) for s in shapes], "dtype": str(dtype)[6:],
                   "kernel": event.key, "device_us": total / event.count,
                   "count": event.count / calls, "hint": hints.get(event.key),
                   **kernel}
            rows.append(row)
            gb = kernel["kernel_num_gb"] or 0.0
            print(f"inductor {name:>12} {shapes[0]} {row['dtype']:>8} {event.key[:40]:<40} "
                  f"{row['device_us']:8.2f} us {gb * 1e6 / row['device_us']:7.0f} GB/s "
                  f"{kernel['numel']} {row['hint']}", flush=True)
    return rows


def measure_l2() -> list[dict]:
    rows = []
    for mib in (24, 32, 40, 48, 64):
        x = torch.randn(mib * (1 << 20) // 8, device="cuda")  # in + out = mib MiB
        y = torch.empty_like(x)
        us, _ = gpu_side.kernel_us(lambda x=x, y=y: torch.add(x, 1.0, out=y), 50)
        rows.append({"working_set": 2 * x.nbytes, "kernel_us": us})
        print(f"l2 add over {mib} MiB: {us:8.2f} us, {2 * x.nbytes / us / 1e3:7.0f} GB/s",
              flush=True)
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    result = {"environment": gpu_side.environment()}
    for part, measure in (("aten", measure_aten), ("l2", measure_l2),
                          ("inductor", measure_inductor)):
        result[part] = measure()
        gpu_side.save(result, args.out)  # after each part: a run cut short keeps what it has
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
