"""The GPU side of the clock calibration: time eager ops and Inductor's kernels on a real GPU.

Standalone: needs only torch (with CUDA) and Triton, nothing of mtia_lab, so it runs on the
lent GPU machine (torch 2.11, Triton 3.6) that cannot take this project's pinned torch.

    python3 gpu_side.py --out measurements.json [--quick] [--kernels kernels.pt]

What it measures (every figure is the median of many timed calls, after a warm-up):
- `peaks`: device-to-device copy bandwidth (bytes read + written), dense matmul rates in bf16
  and fp32 (8192^3, random data), the shortest kernel (`device_floor_us`: an empty-ish launch,
  device time), and the eager per-op host cost (`host_op_us`: what the host spends issuing one
  small op, measured as the loop time of out-of-place 1-element adds with the device idle).
- `eager`: pointwise ops, reductions, softmax, layer norm and matmuls across sizes and dtypes.
  For each: `device_us` (device time of one call, Triton's `do_bench`, L2 flushed between
  calls) and `loop_us` (wall time per call of a loop of back-to-back calls, synchronized at
  the end: the larger of host and device cost, which is what a Python loop of eager ops sees).
- `inductor`: three models compiled by Inductor for CUDA (an MLP block, a transformer block, a
  conv block); for each generated Triton kernel its device time (torch.profiler), Inductor's own
  byte estimate (`kernel_num_gb` of its inductor_meta), its sizes and its source; extern calls
  (cuBLAS, cuDNN) are recorded by name and time.
- `same_source` (with `--kernels`): Triton kernels that mtia_lab's simulator generated and
  interpreted, each launched here as written on the same inputs, their outputs compared with
  the simulator's (see benchmarks/gpu_calibration/export_kernels.py).

The CPU side (mtia_lab/calibration/) re-prices every row with the simulator's cost model.
"""

from __future__ import annotations

import argparse
import itertools
import json
import platform
import re
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

# --- the three models, shared with the CPU side (mtia_lab imports these builders) -----------


class MLPBlock(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, 4 * dim)
        self.down = nn.Linear(4 * dim, dim)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(self.norm(x))))


class TransformerBlock(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = MLPBlock(dim)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, s, 3, self.heads, d // self.heads).unbind(2)
        attn = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                              v.transpose(1, 2), is_causal=True)
        x = x + self.proj(attn.transpose(1, 2).reshape(b, s, d))
        return self.mlp(self.norm2(x)) - self.norm2(x) + x


class ConvBlock(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(x + self.bn2(self.conv2(y)))


def models(scale: str) -> dict:
    """name -> (module, input shape, dtype): `full` sizes for timing, `small` for the
    same-source check (small enough to ship its tensors)."""
    if scale == "small":
        return {"mlp": (MLPBlock(64), (4, 16, 64), torch.float32),
                "transformer": (TransformerBlock(64, 4), (2, 16, 64), torch.float32),
                "conv": (ConvBlock(8), (2, 8, 12, 12), torch.float32)}
    return {"mlp": (MLPBlock(1024), (8, 512, 1024), torch.float32),
            "transformer": (TransformerBlock(1024, 16), (8, 512, 1024), torch.bfloat16),
            "conv": (ConvBlock(64), (32, 64, 56, 56), torch.float32)}


# --- timing ----------------------------------------------------------------------------------


def device_us(fn, quick: bool) -> float:
    """Median device time of one call (Triton's do_bench: CUDA events, L2 flushed between)."""
    import triton.testing

    return 1000 * triton.testing.do_bench(fn, warmup=5 if quick else 25,
                                          rep=10 if quick else 100, return_mode="median")


def loop_us(fn, calls: int) -> float:
    """Wall time per call of `calls` back-to-back calls, synchronized once at the end (median
    of 5 loops)."""
    times = []
    for _ in range(5):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(times)


def kernel_us(fn, calls: int = 20) -> tuple[float, float]:
    """(device execution time of the kernels of one call, kernels per call), from
    torch.profiler: the kernels' own durations, without the launch gaps and event overhead
    that do_bench's events include."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if _is_device_kernel(e)
               and not e.name.startswith(("Memcpy", "Memset"))]
    total = sum(e.device_time_total for e in kernels)
    return total / calls, len(kernels) / calls


def peaks(quick: bool) -> dict:
    dev = "cuda"
    n = (1 << 26) if quick else (1 << 28)  # bytes of fp32 elements: 256 MiB or 1 GiB
    src = torch.randn(n // 4, device=dev)
    dst = torch.empty_like(src)
    copy = device_us(lambda: dst.copy_(src), quick)
    out = {"copy_bytes": 2 * n, "copy_us": copy, "copy_bandwidth": 2 * n / (copy * 1e-6)}
    size = 4096 if quick else 8192
    for dtype in (torch.bfloat16, torch.float32):
        a = torch.randn(size, size, device=dev, dtype=dtype)
        b = torch.randn(size, size, device=dev, dtype=dtype)
        t = device_us(lambda a=a, b=b: a @ b, quick)
        out[f"matmul_{str(dtype)[6:]}_flops"] = 2 * size**3 / (t * 1e-6)
    tiny = torch.ones(1, device=dev)
    out["device_floor_us"] = device_us(lambda: tiny.add_(1), quick)
    out["kernel_floor_us"] = kernel_us(lambda: tiny.add_(1), 100)[0]
    # floors of the other kernel classes: a reduction of one short row, a 16x16 matmul
    row = torch.randn(1, 32, device=dev)
    out["reduction_floor_us"] = kernel_us(lambda: row.sum(-1), 100)[0]
    for dtype in (torch.bfloat16, torch.float32):
        a = torch.randn(16, 16, device=dev, dtype=dtype)
        out[f"gemm_floor_us_{str(dtype)[6:]}"] = kernel_us(lambda a=a: a @ a, 100)[0]
    # L2: an elementwise add whose input and output (16 MiB together) stay in the cache
    # between calls (a kernel: copy_ would be a memcpy, which the profiler times apart)
    small = torch.randn(2 << 20, device=dev)
    small_out = torch.empty_like(small)
    cached = kernel_us(lambda: torch.add(small, 1.0, out=small_out), 100)[0]
    out["l2_copy_bytes"] = 2 * small.nbytes
    out["l2_bandwidth"] = 2 * small.nbytes / (cached * 1e-6)
    out["l2_bytes"] = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", None)
    # the host's cost of one eager op as a program issues them: out of place (the caching
    # allocator gives each result its block), the device idle (one-element tensors)
    other = torch.ones(1, device=dev)
    out["host_op_us"] = loop_us(lambda: torch.add(tiny, other), 200 if quick else 2000)
    out["host_op_inplace_us"] = loop_us(lambda: tiny.add_(1), 200 if quick else 2000)
    out["allow_tf32"] = torch.backends.cuda.matmul.allow_tf32
    return out


# --- eager ops -------------------------------------------------------------------------------


def eager_cases(quick: bool) -> list[dict]:
    """(op, shapes, dtype) rows: the CPU side rebuilds each call on meta tensors to price it."""
    sizes = [1 << p for p in ((10, 16, 20, 24) if quick else (10, 13, 16, 18, 20, 22, 24, 26))]
    cases = []
    for n in sizes:
        for op in ("add", "mul", "exp", "gelu", "relu"):
            cases.append({"op": op, "shapes": [[n]], "dtype": "float32"})
        cases.append({"op": "add", "shapes": [[n]], "dtype": "bfloat16"})
    for rows, cols in ((64, 1024), (1024, 1024), (8192, 1024), (32768, 1024), (4096, 8192)):
        for op in ("sum", "amax", "softmax", "layer_norm"):
            cases.append({"op": op, "shapes": [[rows, cols]], "dtype": "float32"})
        cases.append({"op": "softmax", "shapes": [[rows, cols]], "dtype": "bfloat16"})
    for m in ((128, 512, 2048) if quick else (128, 256, 512, 1024, 2048, 4096, 8192)):
        for dtype in ("bfloat16", "float32"):
            cases.append({"op": "mm", "shapes": [[m, m], [m, m]], "dtype": dtype})
    for m, k, n in ((4096, 1024, 4096), (4096, 4096, 1024), (8192, 1024, 1024)):
        cases.append({"op": "mm", "shapes": [[m, k], [k, n]], "dtype": "bfloat16"})
    return cases


def eager_call(case: dict, device: str):
    dtype = getattr(torch, case["dtype"])
    args = [torch.randn(s, device=device, dtype=dtype) for s in case["shapes"]]
    op = case["op"]
    if op in ("add", "mul"):
        other = torch.randn_like(args[0])
        fn = getattr(torch, op)
        return lambda: fn(args[0], other)
    unary = {"exp": torch.exp, "gelu": F.gelu, "relu": torch.relu,
             "sum": lambda x: x.sum(-1), "amax": lambda x: x.amax(-1),
             "softmax": lambda x: x.softmax(-1),
             "layer_norm": lambda x: F.layer_norm(x, x.shape[-1:])}
    if op in unary:
        return lambda: unary[op](args[0])
    if op == "mm":
        return lambda: args[0] @ args[1]
    raise ValueError(op)


def measure_eager(quick: bool) -> list[dict]:
    rows = []
    for case in eager_cases(quick):
        fn = eager_call(case, "cuda")
        fn()
        row = dict(case, device_us=device_us(fn, quick),
                   loop_us=loop_us(fn, 20 if quick else 100))
        row["kernel_us"], row["kernels"] = kernel_us(fn)
        rows.append(row)
        print(f"eager {case['op']:>10} {case['dtype']:>8} {case['shapes']}: "
              f"{row['device_us']:9.1f} us device, {row['kernel_us']:9.1f} us kernels "
              f"({row['kernels']:.0f}), {row['loop_us']:9.1f} us loop", flush=True)
    return rows


# --- Inductor's kernels ----------------------------------------------------------------------

_KERNEL = re.compile(r"def (triton_\w+)\(")


def kernel_facts(sources: list[str]) -> dict:
    """Inductor's own facts of each Triton kernel in the generated code: its byte estimate,
    sizes and source (the @triton.jit function)."""
    facts = {}
    for code in sources:
        for block in re.split(r"\n(?=@triton_heuristics\.)", code):
            match = _KERNEL.search(block)
            if not match or "@triton.jit" not in block:
                continue
            name = match.group(1)
            num_gb = re.search(r"'kernel_num_gb': ([0-9.e+-]+)", block)
            flop = re.search(r"'kernel_flop': ([0-9.e+-]+)", block)
            numel = {m.group(1): int(m.group(2))
                     for m in re.finditer(r"\n    (\w*numel) = (\d+)(?=\n)", block)}
            body = block[block.index("@triton.jit"):].split("''', device_str")[0]
            facts[name] = {"kernel_num_gb": float(num_gb.group(1)) if num_gb else None,
                           "kernel_flop": float(flop.group(1)) if flop else None,
                           "numel": numel, "source": body}
    return facts


def measure_model(name: str, module: nn.Module, shape, dtype, quick: bool, train: bool):
    """Inductor's kernels of one model: an inference call, or (`train`) a training step."""
    import contextlib

    import torch._inductor.config as inductor_config
    from torch._inductor.utils import run_and_get_code
    from torch.profiler import ProfilerActivity, profile

    # Inductor writes its own per-kernel estimates (kernel_num_gb, kernel_flop) into each
    # kernel's metadata only when benchmarking kernels; the simulator prices from the same ones
    inductor_config.benchmark_kernel = True
    module = module.to("cuda", dtype).train(train)
    x = torch.randn(shape, device="cuda", dtype=dtype)
    torch.compiler.reset()
    compiled = torch.compile(module)

    def step():
        out = compiled(x)
        if train:
            out.float().square().mean().backward()
        return out

    with contextlib.nullcontext() if train else torch.no_grad():
        _, sources = run_and_get_code(step)
        for _ in range(3):
            step()
        torch.cuda.synchronize()
        calls = 5 if quick else 20
        summary = {"model": name, "train": train, "loop_us": loop_us(step, calls),
                   "device_us": device_us(step, quick)}
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(calls):
                step()
            torch.cuda.synchronize()
    facts = kernel_facts(sources)
    rows = []
    for event in prof.key_averages():
        if not _is_device_kernel(event) or event.key.startswith(("Memcpy", "Memset")):
            continue
        total = (getattr(event, "self_device_time_total", 0)
                 or getattr(event, "device_time_total", 0)
                 or getattr(event, "self_cuda_time_total", 0))
        kernel = facts.get(event.key)
        row = {"model": name, "train": train, "kernel": event.key, "count": event.count / calls,
               "device_us": total / event.count, "dtype": str(dtype)[6:],
               "kind": "triton" if kernel else "extern"}
        if kernel:
            row.update(kernel)
        rows.append(row)
        print(f"{name:>12} {row['kind']:>6} {event.key[:60]:<60} {row['device_us']:8.1f} us"
              f" x{row['count']:.0f}", flush=True)
    summary["launches"] = sum(r["count"] for r in rows)
    print(f"{name:>12} whole {'step' if train else 'call'}: {summary}", flush=True)
    return rows, summary


def _is_device_kernel(event) -> bool:
    return str(getattr(event, "device_type", "")).endswith("CUDA")


# --- the simulator's kernels, run here as written --------------------------------------------


def same_source(path: str) -> list[dict]:
    """Launch each kernel the simulator interpreted on its recorded inputs; compare outputs."""
    import importlib.util
    import tempfile

    device = "cuda" if torch.cuda.is_available() else "cpu"  # cpu: a dry run, interpreted
    header = ("import triton\nimport triton.language as tl\n"
              "from torch._inductor.runtime import triton_helpers\n"
              "from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math\n")
    folder = tempfile.mkdtemp()
    rows = []
    for number, item in enumerate(torch.load(path)):
        row = {"model": item["model"], "kernel": item["name"]}
        try:  # @triton.jit reads its function's source from a file: write one, import it
            file = f"{folder}/kernel_{number}.py"
            with open(file, "w") as handle:
                handle.write(header + item["source"])
            spec = importlib.util.spec_from_file_location(f"kernel_{number}", file)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            kernel = getattr(module, item["name"])
            args = [a.to(device) if isinstance(a, torch.Tensor) else a for a in item["before"]]
            kernel[tuple(item["grid"])](*args, **item["constexprs"])
            if device == "cuda":
                torch.cuda.synchronize()
            diffs = [(got.cpu().double() - want.double()).abs().max().item()
                     for got, want in zip(args, item["after"], strict=True)
                     if isinstance(want, torch.Tensor) and want.numel() and
                     want.is_floating_point()]
            exact = all(torch.equal(got.cpu(), want) for got, want
                        in zip(args, item["after"], strict=True)
                        if isinstance(want, torch.Tensor))
            row.update(max_abs_diff=max(diffs, default=0.0), bitwise=exact)
        except Exception as error:  # noqa: BLE001 - a kernel that does not run is a row
            row["error"] = f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
        rows.append(row)
        print(f"same source {row}", flush=True)
    return rows


def environment() -> dict:
    import triton

    props = torch.cuda.get_device_properties(0)
    try:
        driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,"
                                 "noheader"], capture_output=True, text=True).stdout.strip()
    except OSError:
        driver = None
    return {"gpu": props.name, "multiprocessors": props.multi_processor_count,
            "memory_bytes": props.total_memory, "driver": driver, "torch": torch.__version__,
            "cuda": torch.version.cuda, "triton": triton.__version__,
            "python": platform.python_version(), "date": time.strftime("%Y-%m-%d")}


def save(result: dict, path: str) -> None:
    with open(path, "w") as file:
        json.dump(result, file, indent=1)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--quick", action="store_true", help="fewer sizes, shorter timing")
    parser.add_argument("--kernels", help="kernels.pt from export_kernels.py (same source)")
    parser.add_argument("--same-source-only", action="store_true")
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    if args.same_source_only:
        return save({"environment": environment(), "same_source": same_source(args.kernels)},
                    args.out)
    result = {"environment": environment(), "peaks": peaks(args.quick)}
    print(json.dumps(result, indent=1), flush=True)
    save(result, args.out)  # after each part: a run cut short still leaves what it measured
    result["eager"] = measure_eager(args.quick)
    save(result, args.out)
    result["inductor"] = []
    for (name, (module, shape, dtype)), train in itertools.product(models("full").items(),
                                                                   (False, True)):
        try:
            rows, summary = measure_model(name, module, shape, dtype, args.quick, train)
            result["inductor"] += rows
            result.setdefault("models", []).append(summary)
        except Exception as error:  # noqa: BLE001 - a model that fails is recorded
            result.setdefault("errors", []).append(f"{name}: {type(error).__name__}: {error}")
            print(f"{name} failed: {error}", file=sys.stderr, flush=True)
        save(result, args.out)
    if args.kernels:
        result["same_source"] = same_source(args.kernels)
        save(result, args.out)
    print(f"wrote {args.out}: {len(result['eager'])} eager rows, "
          f"{len(result['inductor'])} kernel rows")


if __name__ == "__main__":
    main()
