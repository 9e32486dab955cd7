"""GPU chip profiles, from what the GPU measured where it could and vendor figures elsewhere.

Measured on the lent machine by gpu_side.py (data/<chip>.json): copy bandwidth (bytes read +
written of a 512 MiB device-to-device copy), dense matmul rates in bf16 and fp32 (8192^3,
random data, TF32 off), the shortest kernel's device time (`kernel_launch_us`) and the host time
to issue one eager op (`host_op_us`). Vendor figures (NVIDIA's H100/H200 SXM datasheets) for
what a roofline of these kernels barely touches: the vector rates, capacities, the host link.
`SOURCES` names the source of every field.
"""

from __future__ import annotations

from functools import cache

from ..backend.runtime.cost import (
    WIDE_BLOCK_COLUMNS,
    loop_gathers,
    outer_block_columns,
    source_numel,
)
from ..backend.runtime.profile import GB, TB, ChipProfile, GiB, MiB
from .measurements import available, load

# Vendor figures, per chip (non-tensor-core FP32 rate; BF16 on the vector path is twice it)
_VENDOR = {
    "h100": {"name": "NVIDIA H100 SXM (calibrated)", "tdp_watts": 700, "dram_gib": 80,
             "l2_mib": 50, "clock_ghz": 1.98, "vector_fp32": 67 * TB},
    "h200": {"name": "NVIDIA H200 SXM (calibrated)", "tdp_watts": 700, "dram_gib": 141,
             "l2_mib": 60, "clock_ghz": 1.98, "vector_fp32": 67 * TB},
}

SOURCES = {
    "dram_bandwidth": "measured: device-to-device copy, bytes read + written",
    "gemm_flops_bf16": "measured: 8192^3 bf16 matmul, random data",
    "gemm_flops_fp32": "measured: 8192^3 fp32 matmul, TF32 off",
    "kernel_launch_us": "measured: the profiler's duration of a one-element add",
    "host_op_us": "measured: loop time of out-of-place one-element adds (the GPU waits)",
    "vector_flops_fp32": "vendor datasheet (non-tensor FP32)",
    "vector_flops_bf16": "vendor datasheet (twice FP32)",
    "reduction_launch_us": "measured: the profiler's duration of a sum over one 32-wide row",
    "gemm_launch_us": "measured: the profiler's duration of a 16x16 matmul (bf16, fp32: the "
                      "larger)",
    "cache_bytes": "L2 size as PyTorch reports it",
    "cache_bandwidth": "measured: an elementwise add over 8 MiB in and 8 MiB out, L2-resident; "
                       "bytes over its time less the pointwise launch floor",
    "sram_bytes": "L2 size as PyTorch reports it (the MTIA model's on-chip intermediates)",
    "sram_bandwidth": "assumption: 2.5x the measured DRAM bandwidth (not measured)",
    "dram_bytes": "vendor datasheet",
    "host_link_bandwidth": "vendor: PCIe Gen5 x16, one direction",
    "cache_curve": "measured (reduction_probes.py): an elementwise add run back to back over "
                   "working sets of 24 to 64 MiB, and the 16 MiB add of cache_bandwidth; each "
                   "bytes over its time less the pointwise launch floor",
    "row_efficiency": "measured (reduction_probes.py): ATen's sum, softmax and layer norm over "
                      "2^25 elements in rows of 256 to 16384, bytes over time over the copy "
                      "bandwidth (in the L2: a pass at the L2's rate plus the rows' own work, "
                      "cost.row_bandwidth)",
    "row_latency_us": "measured (reduction_probes.py): the same kernels over 16 rows of 256 to "
                      "16384",
    "gather_rate": "measured (loop_probes.py, on each chip): a layer norm backward's looped "
                   "column sum in bf16 at (4, 768, 1536), its time less the reduction floor and "
                   "its bytes at the run's elementwise rate, over the elements it gathers",
    "wide_reduction_launch_us": "measured (persistent_probes.py on the H200; reduction_probes.py "
                                "on both): the median time of Inductor's persistent reductions "
                                "launched with 128 columns a program (by their recorded config, "
                                "else Inductor's rule for an OUTER hint), at sizes none of the "
                                "calibrated kernels has",
    # not profile fields: what the calibration prices Inductor's kernels with besides them
    "model_hints": "recorded (persistent_probes.py --models, H200; Inductor's choice, the same "
                   "on both chips): each calibrated Triton kernel's reduction hint and launched "
                   "config, which its stored source (from @triton.jit on) does not show",
    "launch_sequences": "recorded (launch_sequence.py): the address ranges each kernel of one "
                        "eval call or training step reads and writes, in launch order; each "
                        "byte's reuse distance is priced on cache_curve (no new figure)",
    "reuse_probe": "measured (launch_sequence.py), held out: an 8+8 MiB multiply with 0 to 96 "
                   "MiB of other traffic between two of its launches; sets no figure",
}


def row_figures(probes: dict, peaks: dict) -> dict:
    """`row_efficiency` and `row_latency_us` from reduction_probes.py's ATen rows: per (op, low
    precision, row length), the share of the copy bandwidth reached over 2^25 elements (the
    reduction floor taken off: the cost model adds it back) and the time of a 16-row kernel."""
    efficiency, latency = [], []
    floor = peaks.get("reduction_floor_us", 0.0)
    for row in probes.get("aten", []):
        key = (row["op"], row["dtype"] != "float32", row["shape"][1])
        if row["regime"] == "dram":
            seconds = (row["kernel_us"] - floor) * 1e-6
            efficiency.append((*key, row["bytes"] / seconds / peaks["copy_bandwidth"]))
        elif row["regime"] == "latency":
            latency.append((*key, row["kernel_us"]))
    return {"row_efficiency": tuple(efficiency), "row_latency_us": tuple(latency)}


def net_rate(nbytes: float, kernel_us: float, floor_us: float) -> float:
    """Bytes over a kernel's time less its launch floor: the rate the cost model's memory term
    stands for (`roofline_us` adds the floor back; bytes over the whole time would count it
    twice)."""
    return nbytes / ((kernel_us - floor_us) * 1e-6)


def cache_curve(peaks: dict, probes: dict) -> tuple[tuple[int, float], ...]:
    """(working set, bandwidth) of the back-to-back adds: the 16 MiB one of the peaks, then
    reduction_probes.py's 24 to 64 MiB ones; each net of the pointwise launch floor."""
    floor = _pointwise_floor(peaks)
    points = [(row["working_set"], net_rate(row["working_set"], row["kernel_us"], floor))
              for row in probes.get("l2", [])]
    if not points:
        return ()
    if peaks.get("l2_copy_bytes"):
        points.insert(0, (peaks["l2_copy_bytes"], cache_bandwidth(peaks)))
    return tuple(sorted(points))


def _pointwise_floor(peaks: dict) -> float:
    return peaks.get("kernel_floor_us", peaks["device_floor_us"])


def cache_bandwidth(peaks: dict) -> float:
    """The L2-resident add's rate (gpu_side.py stored bytes over its whole time), net of the
    pointwise launch floor."""
    if not peaks.get("l2_copy_bytes"):
        return peaks.get("l2_bandwidth", 0.0)
    kernel_us = peaks["l2_copy_bytes"] / peaks["l2_bandwidth"] * 1e6
    return net_rate(peaks["l2_copy_bytes"], kernel_us, _pointwise_floor(peaks))


def gather_rate(probes: dict, peaks: dict) -> float:
    """Elements per second that a strided looped reduction gathers along its reduction axis
    (cost.loop_gathers), from loop_probes.py's kernels that gather: the time left once the
    reduction floor and the streaming bytes (at the same run's elementwise rate) are taken off
    (mean of the run and its repeat); 0 where no probe gathers."""
    rates = []
    bandwidth = probes.get("loops_peaks", {}).get("copy_bandwidth")
    for row in probes.get("loops", []):
        gathers = loop_gathers(row.get("source", ""))
        if not gathers or not bandwidth:
            continue
        kernel_us = (row["device_us"] + row.get("repeat_us", row["device_us"])) / 2
        left = (kernel_us - peaks.get("reduction_floor_us", 0.0)) * 1e-6
        left -= row["kernel_num_gb"] * 1e9 / bandwidth
        rates.append(gathers / left)
    return sum(rates) / len(rates) if rates else 0.0


def block_columns(row: dict) -> int:
    """Columns a program of a persistent reduction took: its launched XBLOCK where recorded,
    else what Inductor's config rule gives for its reduction hint (cost.outer_block_columns)."""
    if not row.get("kernel", "").startswith("triton_per_"):
        return 0
    config = row.get("config") or {}
    if "XBLOCK" in config:
        return int(config["XBLOCK"])
    numel = row.get("numel") or source_numel(row.get("source") or "")
    return outer_block_columns(row.get("hint") or "", numel.get("xnumel", 0),
                               numel.get("r0_numel", 0))


def calibrated_sizes() -> set:
    """(xnumel, r0_numel) of every calibrated Triton kernel, on either chip: probes that set a
    figure must have none of them."""
    return {tuple(sorted(k["numel"].items())) for chip in available()
            for k in load(chip).inductor if k.get("numel")}


def wide_reduction_floor(probes: dict) -> float:
    """The median time of the probes' persistent reductions launched with 128 columns a
    program (`block_columns`), at sizes none of the calibrated kernels has; 0 where none."""
    excluded = calibrated_sizes()
    times = sorted(row["device_us"] for part in ("inductor", "persistent")
                   for row in probes.get(part, [])
                   if "device_us" in row and block_columns(row) >= WIDE_BLOCK_COLUMNS
                   and tuple(sorted(row.get("numel", {}).items())) not in excluded)
    if not times:
        return 0.0
    middle = len(times) // 2
    return times[middle] if len(times) % 2 else (times[middle - 1] + times[middle]) / 2


def model_hints(chip: str) -> dict:
    """(model, train, kernel) -> (reduction hint, launched config) of the calibrated kernels:
    `chip`'s record, else another chip's (Inductor's choice: the hint follows from the graph
    and the SM count, 132 on both chips)."""
    for name in [chip, *(c for c in available() if c != chip)]:
        rows = load(name).probes.get("model_hints")
        if rows:
            return {(r["model"], r["train"], r["kernel"]): (r.get("hint"), r.get("config"))
                    for r in rows}
    return {}


def loop_probes(chip: str):
    """The measurements whose loop_probes.py rows `chip` is priced with: its own, else those of
    the first other chip that has them (both chips now have their own run)."""
    for name in [chip, *(c for c in available() if c != chip)]:
        measured = load(name)
        if measured.probes.get("loops"):
            return measured
    return None


@cache
def gpu_profile(chip: str = "h100", row_figures_from: str | None = None) -> ChipProfile:
    """The profile of `chip` ("h100", "h200") from its stored measurements.

    `row_figures_from` takes the row-kernel figures from the other chip's probes instead (a
    check that they describe the kernels, not the one chip's calibration set)."""
    vendor = _VENDOR.get(chip)
    if vendor is None:
        raise ValueError(f"no GPU profile {chip!r}; choose from {', '.join(_VENDOR)}")
    measured = load(chip)
    peaks = measured.peaks
    source = load(row_figures_from) if row_figures_from else measured
    rows = row_figures(source.probes, source.peaks)
    loops = loop_probes(chip)
    gathers = gather_rate(loops.probes, loops.peaks) if loops else 0.0
    bandwidth = peaks["copy_bandwidth"]
    return ChipProfile(
        name=vendor["name"], process_nm=4, clock_ghz=vendor["clock_ghz"],
        tdp_watts=vendor["tdp_watts"], pe_grid=(12, 11),  # 132 SMs
        gemm_flops_bf16=peaks["matmul_bfloat16_flops"],
        gemm_ops_int8=2 * peaks["matmul_bfloat16_flops"],
        vector_flops_fp32=vendor["vector_fp32"], vector_flops_bf16=2 * vendor["vector_fp32"],
        sram_bytes=vendor["l2_mib"] * MiB, sram_bandwidth=2.5 * bandwidth,  # unused by GPU code
        local_memory_per_pe=228 * 1024, dram_bytes=vendor["dram_gib"] * GiB,
        dram_bandwidth=bandwidth, host_link="PCIe Gen5 x16", host_link_bandwidth=64 * GB,
        kernel_launch_us=_pointwise_floor(peaks), major=9, minor=0,
        interconnect="NVLink 4 (vendor)", link_bandwidth=450 * GB, link_latency_us=5.0,
        gemm_flops_fp32=peaks["matmul_float32_flops"], host_op_us=peaks["host_op_us"],
        reduction_launch_us=peaks.get("reduction_floor_us", 0.0),
        gemm_launch_us=max(peaks.get("gemm_floor_us_bfloat16", 0.0),
                           peaks.get("gemm_floor_us_float32", 0.0)),
        cache_bytes=peaks.get("l2_bytes") or 0, cache_bandwidth=cache_bandwidth(peaks),
        cache_curve=cache_curve(peaks, measured.probes), gather_rate=gathers,
        wide_reduction_launch_us=wide_reduction_floor(measured.probes), **rows)
