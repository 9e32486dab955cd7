"""Every measured kernel priced by the simulator's cost model, prediction beside measurement.

Two clocks, priced apart as on a real GPU:
- the **device** time of one kernel: `roofline_us` of backend/runtime/cost.py on the GPU profile
  (launch floor + the larger of bytes over bandwidth and flops over peak). Eager ops get their
  bytes and flops from `cost.estimate` on meta tensors of the measured shapes (what the device
  charges for the same call); Inductor's Triton kernels from Inductor's own estimates
  (`kernel_num_gb`, and numel for flops), as the simulator's launch hook prices them.
  A Triton kernel of a recorded launch sequence moves its bytes at the rate the L2 gives them
  after what ran before it (sequence.py: each byte's reuse distance, priced on the cache probes);
  one without moves them at the rate of its own working set, as if it ran back to back.
- the **loop** time per op of back-to-back eager calls: the host issues each op in
  `host_op_us` and the device runs it in its device time, so a loop takes the larger of the
  two per op (streams.py `charge`).

Kernels the cost model cannot price from what was recorded are kept with their reason, out of
the share (cuBLAS/cuDNN calls inside compiled code: the profiler names them, not their shapes).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from math import prod

import torch

from ..backend.runtime import cost
from ..backend.runtime.profile import ChipProfile
from .measurements import Measurements, load
from .profiles import block_columns, gpu_profile, model_hints
from .sequence import kernel_bandwidths

aten = torch.ops.aten
TARGET_RATIO = 1.5  # "within 1.5x of the measured time"
TARGET_SHARE = 0.90  # of the priced kernels
FAR_OFF = 3.0  # a kernel off by more needs a named reason


@dataclass(frozen=True)
class Row:
    source: str  # "eager" | "inductor"
    name: str  # "add float32 [1048576]", "mlp train: triton_poi_fused_gelu_view_1"
    clock: str  # "device" | "loop"
    measured_us: float
    predicted_us: float | None  # None: not priced (see reason)
    bound: str = ""  # "memory" | "compute" | "launch" | "host": the larger term
    reason: str = ""  # why it is not priced, or a named reason for a large miss

    @property
    def ratio(self) -> float | None:
        """predicted / measured."""
        return None if self.predicted_us is None else self.predicted_us / self.measured_us

    def within(self, factor: float = TARGET_RATIO) -> bool:
        ratio = self.ratio
        return ratio is not None and 1 / factor <= ratio <= factor


@dataclass
class Calibration:
    chip: str
    measurements: Measurements
    profile: ChipProfile
    rows: list[Row] = field(default_factory=list)

    def priced(self, clock: str = "device") -> list[Row]:
        return [r for r in self.rows if r.clock == clock and r.predicted_us is not None]

    def share_within(self, factor: float = TARGET_RATIO, clock: str = "device") -> float:
        rows = self.priced(clock)
        return sum(r.within(factor) for r in rows) / max(1, len(rows))

    def far_off(self, clock: str = "device") -> list[Row]:
        return [r for r in self.priced(clock) if not r.within(FAR_OFF)]

    def unexplained(self) -> list[Row]:
        """Kernels off by more than FAR_OFF without a named reason."""
        return [r for r in self.far_off() + self.far_off("loop") if not r.reason]


# --- eager ops: the call rebuilt on meta tensors, priced as the device prices it -------------

def _eager_call(op: str, shapes: list, dtype: torch.dtype):
    """(aten overload, inner args) of a gpu_side.py eager case."""
    a = torch.empty(shapes[0], device="meta", dtype=dtype)
    calls = {
        "add": (aten.add.Tensor, (a, torch.empty_like(a))),
        "mul": (aten.mul.Tensor, (a, torch.empty_like(a))),
        "exp": (aten.exp.default, (a,)), "relu": (aten.relu.default, (a,)),
        "gelu": (aten.gelu.default, (a,)),
        "sum": (aten.sum.dim_IntList, (a, [-1])), "amax": (aten.amax.default, (a, [-1])),
        "softmax": (aten._softmax.default, (a, -1, False)),
        "layer_norm": (aten.native_layer_norm.default, (a, [a.shape[-1]], None, None, 1e-5)),
    }
    if op == "mm":
        return aten.mm.default, (a, torch.empty(shapes[1], device="meta", dtype=dtype))
    if op not in calls:
        raise ValueError(f"unknown eager op {op!r} in the measurements")
    return calls[op]


def _bound(profile: ChipProfile, price: cost.KernelCost) -> str:
    """Which term of the roofline sets the price: launch, latency (a row kernel's least time),
    memory (dram or cache), compute."""
    low = price.low_precision
    gemm = price.gemm_flops / (profile.gemm_flops_bf16 if low else profile.gemm_flops_fp32)
    vector = price.vector_flops / (profile.vector_flops_bf16 if low else profile.vector_flops_fp32)
    moved = price.bytes_read + price.bytes_written
    bandwidth = price.bandwidth or cost.memory_bandwidth(profile, moved)
    cached = bandwidth > profile.dram_bandwidth
    efficiency, latency = 1.0, 0.0
    if price.row_op:
        efficiency, latency = cost.row_figures(profile, price.row_op, low, price.row_length)
        bandwidth = cost.row_bandwidth(profile, bandwidth, efficiency)
    memory = moved / bandwidth
    if price.gathers and profile.gather_rate:
        memory += price.gathers / profile.gather_rate
    largest = max(gemm, vector, memory)
    duration = price.duration_us(profile)
    if latency and duration <= latency:
        return "row latency"
    floor = duration - largest * 1e6
    if largest * 1e6 < floor:
        return "launch"
    if largest == memory:
        return "memory (L2)" if cached else "memory"
    return "compute"


def eager_rows(measured: Measurements, profile: ChipProfile) -> list[Row]:
    rows = []
    for case in measured.eager:
        func, args = _eager_call(case["op"], case["shapes"], getattr(torch, case["dtype"]))
        price = cost.estimate(func, args, func(*args))
        device = price.duration_us(profile)
        name = f"{case['op']} {case['dtype']} {'x'.join(map(str, case['shapes'][0]))}"
        if case["op"] == "mm":
            name += f" @ {'x'.join(map(str, case['shapes'][1]))}"
        bound = _bound(profile, price)
        # the kernels' own duration (profiler) where recorded; older runs: do_bench's events
        measured_device = case.get("kernel_us") or case["device_us"]
        rows.append(Row("eager", name, "device", measured_device, device, bound))
        host_bound = profile.host_op_us > device
        rows.append(Row("eager", name, "loop", case["loop_us"], max(profile.host_op_us, device),
                        "host" if host_bound else bound))
    return rows


# --- Inductor's kernels: priced from Inductor's own estimates --------------------------------

def sequence_rates(measured: Measurements, profile: ChipProfile) -> dict:
    """(model, train) -> kernel name -> the L2's rate for each of its launches in one step."""
    return {(s["model"], s["train"]): kernel_bandwidths(profile, s["steps"])
            for s in measured.sequences}


def inductor_rows(measured: Measurements, profile: ChipProfile,
                  sequences: bool = True) -> list[Row]:
    """Inductor's Triton kernels priced; `sequences=False`: each from its own working set, as
    if it ran back to back (the model before the launch sequences were recorded)."""
    rates = sequence_rates(measured, profile) if sequences else {}
    hints = model_hints(measured.chip)
    rows = []
    for kernel in measured.inductor:
        name = (f"{kernel['model']} {'train' if kernel.get('train') else 'eval'}: "
                f"{kernel['kernel'][:70]}")
        if kernel["kind"] != "triton" or kernel.get("kernel_num_gb") is None:
            reason = ("an extern call (cuBLAS, cuDNN, ATen): the profiler names the kernel, "
                      "not its shapes" if kernel["kind"] != "triton"
                      else "Inductor wrote no byte estimate for it")
            rows.append(Row("inductor", name, "device", kernel["device_us"], None, "", reason))
            continue
        elements = prod(kernel.get("numel", {}).values()) or 0
        total = int(kernel["kernel_num_gb"] * 1e9)
        price = cost.KernelCost(0.0, float(kernel.get("kernel_flop") or elements), total, 0, 0,
                                kernel.get("dtype") in ("bfloat16", "float16"),
                                reduction=kernel["kernel"].startswith(cost.REDUCTION_PREFIXES),
                                gathers=cost.loop_gathers(kernel.get("source") or ""),
                                block_columns=_block_columns(kernel, hints))
        launches = rates.get((kernel["model"], kernel.get("train", False)), {})
        prices = [replace(price, bandwidth=rate) for rate in launches.get(kernel["kernel"], ())]
        prices = prices or [price]  # not in the recorded sequence: its own working set
        predicted = sum(p.duration_us(profile) for p in prices) / len(prices)
        rows.append(Row("inductor", name, "device", kernel["device_us"], predicted,
                        _bound(profile, prices[0])))
    return rows


def _block_columns(kernel: dict, hints: dict) -> int:
    """Columns a program of this persistent reduction took, from its recorded hint and config."""
    hint, config = hints.get((kernel["model"], kernel.get("train", False), kernel["kernel"]),
                             (None, None))
    return block_columns({**kernel, "hint": hint, "config": config})


# Known ways a kernel leaves the roofline, each with what gives it away. A row off by more than
# FAR_OFF gets the first that matches; one that matches none is "unexplained".
KNOWN_MISSES = (
    (lambda r: ": triton_red_" in r.name,
     "a looped reduction of many inputs into many accumulators (Inductor's triton_red_ of a "
     "backward pass): the probes' strided looped reductions of one to three inputs reach the "
     "copy bandwidth, this one reaches a third of it"),
    (lambda r: r.bound == "host",
     "host-bound: this op's host cost is not the one-element add's (a library call, several "
     "kernels), and loop times vary up to 2x between runs of the same script"),
    (lambda r: r.bound == "launch",
     "at its class's launch floor: the floor probe is one kernel, this one is another"),
)


def _named(row: Row) -> Row:
    if row.predicted_us is None or row.within(FAR_OFF):
        return row
    for matches, reason in KNOWN_MISSES:
        if matches(row):
            return replace(row, reason=reason)
    return row


def compare(chip: str = "h100", profile: ChipProfile | None = None,
            sequences: bool = True) -> Calibration:
    """Every kernel `chip`'s GPU measured, priced on `profile` (default: its own profile);
    `sequences=False` prices Inductor's kernels without their launch sequences."""
    measured = load(chip)
    profile = profile or gpu_profile(chip)
    rows = eager_rows(measured, profile) + inductor_rows(measured, profile, sequences)
    return Calibration(chip, measured, profile, [_named(r) for r in rows])
