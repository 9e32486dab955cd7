"""The GPU's measurements as stored in data/*.json (written by gpu_side.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

DATA = Path(__file__).parent / "data"
_SECTIONS = ("environment", "peaks", "eager", "inductor")


@dataclass(frozen=True)
class Measurements:
    """One run of gpu_side.py: where it ran and what it measured."""

    chip: str  # the file's name: "h100"
    environment: dict  # gpu, driver, torch, cuda, triton, date
    peaks: dict  # copy_bandwidth, matmul_*_flops, device_floor_us, host_op_us
    eager: list[dict]  # op, shapes, dtype, device_us, loop_us
    inductor: list[dict]  # model, train, kernel, kind, device_us, kernel_num_gb, numel...
    models: list[dict]  # a whole compiled call or step per model: loop_us, device_us
    same_source: list[dict]  # the simulator's kernels run on the GPU: max_abs_diff, bitwise
    # reduction_probes.py: separate kernels that the reduction and cache figures come from
    # (environment, aten, l2, inductor); {} in a file written before the probes existed
    probes: dict = field(default_factory=dict)
    # launch_sequence.py: per model (eval call, training step), three steps of launches with the
    # address ranges each reads and writes; [] in a file written before it existed
    sequences: list[dict] = field(default_factory=list)

    @property
    def gpu(self) -> str:
        return self.environment["gpu"]


def available() -> list[str]:
    return sorted(p.stem for p in DATA.glob("*.json"))


def load(chip: str | Path) -> Measurements:
    """The measurements of `chip` ("h100", "h200") or of a JSON file written by gpu_side.py."""
    path = Path(chip) if str(chip).endswith(".json") else DATA / f"{chip}.json"
    if not path.exists():
        raise FileNotFoundError(f"no GPU measurements at {path}; stored ones: "
                                f"{', '.join(available())} (or give a gpu_side.py JSON file)")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not JSON ({error}); write it with "
                         "benchmarks/gpu_calibration/gpu_side.py --out") from None
    missing = [s for s in _SECTIONS if s not in data]
    if missing:
        raise ValueError(f"{path} lacks {', '.join(missing)}: not a complete gpu_side.py run")
    return Measurements(path.stem, data["environment"], data["peaks"], data["eager"],
                        data["inductor"], data.get("models", []), data.get("same_source", []),
                        data.get("probes", {}), data.get("sequences", []))
