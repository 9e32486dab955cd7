"""Record what each kernel of the calibration models touches, in launch order, on a real GPU.

Standalone like gpu_side.py (torch with CUDA and Triton only):

    python3 benchmarks/gpu_calibration/launch_sequence.py --out sequence.json

The L2 that serves a kernel depends on what ran before it: an input that the previous kernel
wrote is still in the cache, one last touched a gigabyte of traffic ago is not. The GPU caches
by address, so this records addresses:

- `sequences`: for each model of gpu_side.py (eval call and training step, as gpu_side.py runs
  them back to back), three steady-state steps of launches, each with the address ranges it
  reads and writes: Inductor's Triton kernels (their `in_ptr`, `out_ptr`, `in_out_ptr`
  arguments, from a wrapper around the kernels' `run`) and every other kernel-launching op
  (cuBLAS and cuDNN calls inside the compiled code, the eager loss and its backward, the
  gradient accumulation: a TorchDispatchMode, tensor arguments read, results written).
  `triton_only`: one step's Triton launches recorded with no dispatch mode active;
  `profiled`: the profiler's kernel names of one step in launch order, to check the record.
- `reuse`: a held-out probe of the cache model: an elementwise multiply over 8 MiB in and
  8 MiB out, with a kernel over S MiB of other data between two of its launches (S = 0 to
  96): how the multiply's time grows with the bytes touched since its inputs were last used.

No times of the calibrated kernels are taken here: gpu_side.py measured those. The CPU side
(mtia_lab/calibration/sequence.py) reads `sequences` (each model's `steps`) and `reuse` (under
`probes`) from data/<chip>.json, where this script's output on that chip was copied.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_side  # noqa: E402

STEPS = 3
LOG: list[dict] = []


def span(t: torch.Tensor) -> list[int]:
    """[address, bytes] of the memory a tensor view covers."""
    if t.numel() == 0:
        return [t.data_ptr(), 0]
    extent = sum((s - 1) * abs(st) for s, st in zip(t.shape, t.stride(), strict=True) if s)
    return [t.data_ptr(), (extent + 1) * t.element_size()]


def _tensors(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value] if value.device.type == "cuda" else []
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors(item)]
    if isinstance(value, dict):
        return [t for item in value.values() for t in _tensors(item)]
    return []


_NO_KERNEL = {"empty", "empty_strided", "empty_like", "as_strided", "detach", "alias",
              "view", "_unsafe_view", "t", "transpose", "permute", "expand", "unsqueeze",
              "squeeze", "select", "slice", "reshape", "_reshape_alias", "split",
              "split_with_sizes", "unbind", "set_", "resize_", "_local_scalar_dense",
              "is_same_size", "lift_fresh", "size", "stride"}


class Recorder(TorchDispatchMode):
    """Every op that launches a kernel: its tensor arguments read, its results written.

    Dynamo runs a compiled function eagerly under a dispatch mode (and skips its frame for
    good) unless the mode says it ignores compile internals: this one only watches."""

    @classmethod
    def ignore_compile_internals(cls) -> bool:
        return True

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = func._overloadpacket.__name__
        if name not in _NO_KERNEL and not getattr(func, "is_view", False):
            written = _tensors(out)
            ids = {id(t) for t in written}
            read = [t for t in _tensors((args, kwargs)) if id(t) not in ids]
            LOG.append({"kernel": str(func), "kind": "aten",
                        "reads": [span(t) for t in read], "writes": [span(t) for t in written]})
        return out


def patch_triton():
    """Wrap Inductor's kernel launcher: each launch logs its pointer arguments by role."""
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    original = CachingAutotuner.run

    def run(self, *args, **kwargs):
        names = list(getattr(self.fn, "arg_names", []))
        reads, writes = [], []
        for arg_name, value in zip(names, args, strict=False):
            if isinstance(value, torch.Tensor):
                if arg_name.startswith(("in_ptr", "in_out_ptr")):
                    reads.append(span(value))
                if arg_name.startswith(("out_ptr", "in_out_ptr")):
                    writes.append(span(value))
        LOG.append({"kernel": getattr(self.fn, "__name__", "?"), "kind": "triton",
                    "reads": reads, "writes": writes})
        return original(self, *args, **kwargs)

    CachingAutotuner.run = run


def record_model(name: str, module, shape, dtype, train: bool) -> dict:
    import contextlib

    from torch.profiler import ProfilerActivity, profile

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
        for _ in range(4):  # compile, then reach the allocator's steady state
            step()
        torch.cuda.synchronize()
        LOG.clear()
        step()  # the Triton launches alone, before any dispatch mode
        triton_only = list(LOG)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            step()
            torch.cuda.synchronize()
        steps = []
        for _ in range(STEPS):
            LOG.clear()
            with Recorder():
                step()
            steps.append(list(LOG))
        LOG.clear()
        torch.cuda.synchronize()
    kernels = sorted((e for e in prof.events() if gpu_side._is_device_kernel(e)),
                     key=lambda e: e.time_range.start)
    triton = sum(r["kind"] == "triton" for r in steps[-1])
    print(f"{name:>12} {'train' if train else 'eval'}: {len(steps[-1])} launches recorded "
          f"({triton} Triton; {len(triton_only)} with no mode), {len(kernels)} kernels profiled",
          flush=True)
    return {"model": name, "train": train, "steps": steps, "triton_only": triton_only,
            "profiled": [e.name for e in kernels]}


def measure_reuse() -> list[dict]:
    """The multiply's kernel time with S MiB of other traffic between two of its launches."""
    x = torch.randn(2 << 20, device="cuda")  # 8 MiB in, 8 MiB out
    y = torch.empty_like(x)
    rows = []
    for mib in (0, 8, 16, 24, 32, 48, 64, 96):
        z = torch.randn(max(1, mib << 17), device="cuda")  # mib/2 MiB read, mib/2 written
        w = torch.empty_like(z)

        def pair(z=z, w=w, mib=mib):
            torch.mul(x, 2.0, out=y)
            if mib:
                torch.neg(z, out=w)

        from torch.profiler import ProfilerActivity, profile

        for _ in range(5):
            pair()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(50):
                pair()
            torch.cuda.synchronize()
        times = {e.key: e.device_time_total / e.count for e in prof.key_averages()
                 if gpu_side._is_device_kernel(e)}
        mul = [t for key, t in times.items() if "Mul" in key]
        rows.append({"between_bytes": 2 * z.nbytes if mib else 0, "working_set": 2 * x.nbytes,
                     "kernel_us": mul[0] if mul else None, "kernels": times})
        print(f"reuse: {mib:3d} MiB between, multiply {rows[-1]['kernel_us']} us", flush=True)
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    patch_triton()
    result = {"environment": gpu_side.environment(), "reuse": measure_reuse(), "sequences": []}
    gpu_side.save(result, args.out)
    for name, (module, shape, dtype) in gpu_side.models("full").items():
        for train in (False, True):
            try:
                result["sequences"].append(record_model(name, module, shape, dtype, train))
            except Exception as error:  # noqa: BLE001 - a model that fails is recorded
                result.setdefault("errors", []).append(f"{name}: {type(error).__name__}: "
                                                       f"{str(error)[:300]}")
                print(f"{name} failed: {error}", file=sys.stderr, flush=True)
            gpu_side.save(result, args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
