"""Export the Triton kernels the simulator interprets, with their inputs and outputs, so the GPU
side can launch the same source on a real GPU and compare (gpu_side.py --kernels).

    .venv/bin/python benchmarks/gpu_calibration/export_kernels.py --out kernels.pt

Compiles the three calibration models at their `small` sizes for `mtia_sim` (real Inductor,
Triton's interpreter) and records every Triton launch of one call: the kernel's @triton.jit
source as the simulator ran it, its grid and block sizes, its arguments before the launch and
after it. The sizes are small so that the file travels (a few MB).
"""

from __future__ import annotations

import argparse
import inspect
import re
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import gpu_side  # noqa: E402

import mtia_lab  # noqa: E402,F401
from mtia_lab.inductor import whole_grid  # noqa: E402


def jit_source(kernel) -> str:
    """The kernel's function as a @triton.jit definition (Inductor's decorators dropped)."""
    source = inspect.getsource(kernel.fn)
    return "@triton.jit\n" + source[re.search(r"^def ", source, re.MULTILINE).start():]


def export(scale: str = "small") -> list[dict]:
    launches: list[dict] = []
    original = whole_grid.launch

    def recording(kernel, name, grid, args, constexprs, written, state, per_program):
        before = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        result = original(kernel, name, grid, args, constexprs, written, state, per_program)
        launches.append({"name": name, "source": jit_source(kernel), "grid": list(grid),
                         "constexprs": dict(constexprs), "before": before,
                         "after": [a.clone() if isinstance(a, torch.Tensor) else a
                                   for a in args]})
        return result

    rows = []
    torch.manual_seed(0)
    whole_grid.launch = recording
    try:
        for model, (module, shape, dtype) in gpu_side.models(scale).items():
            module = module.to("mtia_sim", dtype).eval()
            x = torch.randn(shape, dtype=dtype).to("mtia_sim")
            torch.compiler.reset()
            compiled = torch.compile(module)
            with torch.no_grad():
                compiled(x)  # compile (its launches record tapes)
                launches.clear()
                compiled(x)
            rows += [dict(launch, model=model) for launch in launches]
    finally:
        whole_grid.launch = original
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    rows = export()
    torch.save(rows, args.out)
    print(f"{len(rows)} launches -> {args.out} ({Path(args.out).stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
