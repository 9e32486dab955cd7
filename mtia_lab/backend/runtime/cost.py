"""The roofline cost model: how long a kernel would take on the simulated chip.

A kernel is limited either by arithmetic or by memory traffic, whichever is slower (the
"roofline"), plus a fixed launch overhead:

    duration = launch + max(gemm_flops / gemm_peak, vector_flops / vector_peak,
                            dram_bytes / dram_bandwidth + sram_bytes / sram_bandwidth)

`launch` is the shortest kernel of its class (pointwise, reduction, matmul), and a kernel whose
whole working set fits a hardware cache moves it at the cache's bandwidth, less so as the
working set nears the cache's size; a library row kernel (ATen's sum, softmax, layer norm
along the last axis) moves its bytes at the share of the bandwidth such kernels reach at its
row length, and takes no less than a kernel of a few such rows; an Inductor looped reduction
that gathers operands across its tile (`loop_gathers`) pays for each gathered element at the
profile's `gather_rate`. All figures the GPU profiles
measure, the row kernels' on separate probes (mtia_lab/calibration/); on the MTIA profiles the
three floors are one assumed figure, and there is no such cache, row-kernel or gather figure.

GEMM-like ops (mm, addmm, bmm, baddbmm) run on the chip's GEMM engine; everything else on its
vector units. The peak follows the data type: INT8, FP16/BF16, or FP32 (the FP32 GEMM rate is
not published: half the BF16 rate, an assumption -- see docs/chip-profile.md). A kernel's
inputs and outputs move at LPDDR5 bandwidth; the intermediates a fused kernel keeps on chip
move at SRAM bandwidth (13x faster on MTIA v2), which is why fusion pays on this chip. Data
that moves between host and device (copies, the CPU fallback) goes over the host link.
The same function prices an eager op and a fused kernel of the scheduler, so their simulated
times are comparable.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import torch

from .profile import ChipProfile

aten = torch.ops.aten
_LOW_PRECISION = (torch.bfloat16, torch.float16)
_INT8 = (torch.int8, torch.uint8)


@dataclass(frozen=True)
class KernelCost:
    gemm_flops: float = 0.0
    vector_flops: float = 0.0
    bytes_read: int = 0
    bytes_written: int = 0
    host_link_bytes: int = 0  # bytes that cross PCIe (copies, fallbacks)
    low_precision: bool = False  # FP16/BF16 peaks
    sram_bytes: int = 0  # intermediates written and read inside a fused kernel, on chip
    spill_bytes: int = 0  # intermediates that did not fit the SRAM: they go through DRAM
    int8: bool = False  # INT8 peaks
    reduction: bool = False  # a reduction kernel: its own launch floor (profile)
    row_op: str = ""  # a library row kernel ("sum", "softmax", "layer_norm"; see row_kernel)
    row_length: int = 0  # ... and the length of the rows it reduces
    bandwidth: float = 0.0  # the rate its bytes move at, where known (0: from its working set)
    gathers: int = 0  # elements gathered across a strided reduction's tile (loop_gathers)
    block_columns: int = 0  # columns a program of a persistent reduction takes, where known

    def duration_us(self, profile: ChipProfile) -> float:
        return roofline_us(
            profile, self.gemm_flops, self.vector_flops,
            self.bytes_read + self.bytes_written + self.spill_bytes, self.host_link_bytes,
            self.low_precision, self.sram_bytes, self.int8, self.reduction, self.row_op,
            self.row_length, self.bandwidth, self.gathers, self.block_columns,
        )

    def __add__(self, other: KernelCost) -> KernelCost:
        return KernelCost(
            self.gemm_flops + other.gemm_flops,
            self.vector_flops + other.vector_flops,
            self.bytes_read + other.bytes_read,
            self.bytes_written + other.bytes_written,
            self.host_link_bytes + other.host_link_bytes,
            self.low_precision or other.low_precision,
            self.sram_bytes + other.sram_bytes,
            self.spill_bytes + other.spill_bytes,
            self.int8 or other.int8,
            self.reduction or other.reduction,
            # one row kernel's figures do not describe a fused group of kernels
            self.row_op if self.row_op == other.row_op else "",
            max(self.row_length, other.row_length),
            gathers=self.gathers + other.gathers,
            block_columns=max(self.block_columns, other.block_columns),
        )


def roofline_us(
    profile: ChipProfile,
    gemm_flops: float,
    vector_flops: float,
    bytes_moved: int,
    host_link_bytes: int = 0,
    low_precision: bool = False,
    sram_bytes: int = 0,
    int8: bool = False,
    reduction: bool = False,
    row_op: str = "",
    row_length: int = 0,
    bandwidth: float = 0.0,
    gathers: int = 0,
    block_columns: int = 0,
) -> float:
    """The formula of the module docstring, in microseconds (`bytes_moved`: DRAM bytes).

    A library row kernel (`row_op` over rows of `row_length`) on a profile that measured such
    kernels moves its bytes at its measured share of the bandwidth, and takes no less than a
    kernel of a few such rows took (`row_figures`). `gathers` elements gathered across a
    strided reduction's tile (`loop_gathers`) take their own time on a profile that measured
    `gather_rate`, after the streaming bytes (one loop issues both). A persistent reduction
    whose config takes `block_columns` >= 128 columns a program (`outer_block_columns`) has the
    profile's `wide_reduction_launch_us` as its floor, where measured."""
    if int8:
        gemm_peak, vector_peak = profile.gemm_ops_int8, profile.vector_ops_int8
    elif low_precision:
        gemm_peak, vector_peak = profile.gemm_flops_bf16, profile.vector_flops_bf16
    else:
        gemm_peak, vector_peak = profile.gemm_flops_fp32, profile.vector_flops_fp32
    if not bandwidth:
        bandwidth = profile.dram_bandwidth
        if profile.cache_bytes or profile.cache_curve:  # the GPU profiles: a cache term
            bandwidth = memory_bandwidth(profile, bytes_moved)
    latency = 0.0
    if row_op and profile.row_efficiency:
        efficiency, latency = row_figures(profile, row_op, low_precision, row_length)
        bandwidth = row_bandwidth(profile, bandwidth, efficiency)
    memory = bytes_moved / bandwidth + sram_bytes / profile.sram_bandwidth
    if gathers and profile.gather_rate:
        memory += gathers / profile.gather_rate
    seconds = max(gemm_flops / gemm_peak, vector_flops / vector_peak, memory)
    seconds += host_link_bytes / profile.host_link_bandwidth
    floor = 0.0  # the class's own floor where the profile has one (0: kernel_launch_us)
    if gemm_flops:
        floor = profile.gemm_launch_us
    elif reduction:
        floor = profile.reduction_launch_us
        if block_columns >= WIDE_BLOCK_COLUMNS and profile.wide_reduction_launch_us:
            floor = profile.wide_reduction_launch_us
    return max(latency, (floor or profile.kernel_launch_us) + seconds * 1e6)


def row_bandwidth(profile: ChipProfile, bandwidth: float, efficiency: float) -> float:
    """The rate a library row kernel moves its bytes at, in two terms: one pass over its
    bytes at `bandwidth` (DRAM's, or the cache's where the working set fits), plus the rows'
    own work, which is the time its measured `efficiency` (taken past the L2) adds to a pass
    at DRAM's rate. The L2 speeds up the pass, not the per-row work: a layer norm's rows cost
    as much in the L2 as past it. (A variant that takes the slower of the two as a bound of its
    own priced the L2-resident sums and fp32 softmaxes of the held-out probes at DRAM's work
    rate, up to 1.5x over; not kept.)"""
    extra = 1 / (profile.dram_bandwidth * efficiency) - 1 / profile.dram_bandwidth
    return 1 / (1 / bandwidth + max(0.0, extra))


def memory_bandwidth(profile: ChipProfile, bytes_moved: float) -> float:
    """The rate at which a kernel moving `bytes_moved` (its working set) moves them: the cache's
    where it fits (fading along the measured `cache_curve` where the profile has one), else
    DRAM's."""
    curve = profile.cache_curve
    if curve:
        if bytes_moved >= curve[-1][0]:
            return profile.dram_bandwidth
        if bytes_moved <= curve[0][0]:
            return curve[0][1]
        for (size0, rate0), (size1, rate1) in zip(curve, curve[1:], strict=False):
            if bytes_moved <= size1:
                return rate0 + (rate1 - rate0) * (bytes_moved - size0) / (size1 - size0)
    if profile.cache_bytes and bytes_moved <= profile.cache_bytes:  # it fits the cache (L2)
        return profile.cache_bandwidth
    return profile.dram_bandwidth


def _interpolate(table, op: str, low: bool, length: int) -> float | None:
    """The table's figure for (op, low) at `length`, linear in log2(length) between measured
    lengths and held at the ends; None where nothing was measured for (op, low)."""
    points = sorted((n, value) for name, precision, n, value in table
                    if name == op and precision == low)
    if not points:
        return None
    if length <= points[0][0]:
        return points[0][1]
    for (n0, v0), (n1, v1) in zip(points, points[1:], strict=False):
        if length <= n1:
            share = (math.log2(length) - math.log2(n0)) / (math.log2(n1) - math.log2(n0))
            return v0 + (v1 - v0) * share
    return points[-1][1]


def row_figures(profile: ChipProfile, op: str, low: bool, length: int) -> tuple[float, float]:
    """(share of the bandwidth, least time in us) of a library row kernel on `profile`:
    (1.0, 0.0) where the profile measured none of its kind."""
    efficiency = _interpolate(profile.row_efficiency, op, low, length)
    latency = _interpolate(profile.row_latency_us, op, low, length)
    return efficiency or 1.0, latency or 0.0


# Reductions (and normalizations, scans, softmax: a reduction along a row inside): their
# kernels have their own launch floor on the GPU profiles.
_REDUCTION_NAMES = frozenset({
    "sum", "mean", "amax", "amin", "max", "min", "prod", "var", "std", "var_mean", "std_mean",
    "norm", "linalg_vector_norm", "argmax", "argmin", "logsumexp", "cumsum", "cumprod", "any",
    "all", "_softmax", "_log_softmax", "_softmax_backward_data", "_log_softmax_backward_data",
    "native_layer_norm", "native_layer_norm_backward", "native_group_norm",
    "native_group_norm_backward", "native_batch_norm", "native_batch_norm_backward",
    "_native_batch_norm_legit", "_native_batch_norm_legit_no_training", "nll_loss_forward",
    "nll_loss2d_forward", "_fused_rms_norm",
})
_REDUCTION: dict = {}
# Inductor names its reduction kernels triton_per_* (persistent) and triton_red_* (looped)
REDUCTION_PREFIXES = ("triton_per_", "triton_red_")
_STRIDED_R = re.compile(r"\d+\*r0_\d+")  # the reduction index times a stride
_ALONG_R = re.compile(r"(?<![\w*])r0_\d+")  # the reduction index itself: laid along it


def loop_gathers(source: str) -> int:
    """Elements an Inductor looped reduction (triton_red_) gathers across its tile: where its
    loop streams operands strided along the reduction axis (a column sum: the tile is laid
    along x) and also loads operands laid along the reduction axis (`r0_2 + 128*x1`: a layer
    norm backward's per-row mean and rstd), each of the latter is one element per tile entry,
    gathered, not streamed: xnumel * r0_numel per such load. 0 for any other kernel, or where
    the sizes are not constants of the source (dynamic shapes)."""
    numel = source_numel(source)
    loop = re.search(r"^    for r0_offset in .*?:\n((?:        .*\n)+)", source, re.M)
    if loop is None or len(numel) < 2:
        return 0
    strided = along = 0
    for line in loop.group(1).splitlines():
        if "tl.load(" not in line:
            continue
        index = line.split("tl.load(", 1)[1]
        if _STRIDED_R.search(index):
            strided += 1
        elif _ALONG_R.search(index):
            along += 1
    if not strided:
        return 0
    return along * int(numel["xnumel"]) * int(numel["r0_numel"])


# Inductor's persistent reductions (_persistent_reduction_configs): candidate XBLOCKs, the
# most elements one program holds, and the XBLOCK whose programs take their own floor
_PERSISTENT_XBLOCKS = (1, 8, 32, 128)
_MAX_PERSISTENT_BLOCK_NUMEL = 4096
WIDE_BLOCK_COLUMNS = 128


def _next_power_of_2(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


def outer_block_columns(hint: str, xnumel: int, r0_numel: int) -> int:
    """Columns (XBLOCK) a program of an Inductor persistent reduction takes, where its config
    follows from its reduction hint and sizes alone: with an OUTER hint Inductor keeps only the
    last candidate, the largest XBLOCK of (1, 8, 32, 128) with XBLOCK * r0 <= 4096 and XBLOCK
    <= xnumel (sizes rounded up to powers of two, as its size hints are). So a second step of a
    split column sum of 32 or fewer partial rows takes 128 columns a program. 0 where the hint
    is not OUTER (INNER and OUTER_TINY have other rules; DEFAULT is autotuned) or a size is
    unknown."""
    if hint != "OUTER" or not xnumel or not r0_numel:
        return 0
    x, r = _next_power_of_2(xnumel), _next_power_of_2(r0_numel)
    return [b for b in _PERSISTENT_XBLOCKS
            if b == 1 or (r * b <= _MAX_PERSISTENT_BLOCK_NUMEL and b <= x)][-1]


def source_numel(source: str) -> dict:
    """{"xnumel": n, "r0_numel": m} of an Inductor Triton kernel whose sizes are constants of
    its source ({} for dynamic shapes)."""
    return {k: int(v) for k, v in re.findall(r"^    (xnumel|r0_numel) = (\d+)$", source, re.M)}


def is_reduction(func) -> bool:
    """Whether an aten overload reduces along an axis (cached per overload)."""
    known = _REDUCTION.get(func)
    if known is None:
        packet = getattr(func, "_overloadpacket", None)
        known = _REDUCTION[func] = getattr(packet, "__name__", "") in _REDUCTION_NAMES
    return known


def _nbytes(tensor: torch.Tensor) -> int:
    """numel * element_size; for a sparse COO tensor, the bytes of its indices and values (the
    memory it reads or writes), which is what `nbytes` refuses to guess."""
    try:
        return tensor.nbytes
    except RuntimeError:
        return tensor._indices().nbytes + tensor._values().nbytes


def tensor_bytes(value) -> int:
    """Bytes of the tensors in `value` (a tensor, or lists/tuples of them); 0 for the rest."""
    if isinstance(value, torch.Tensor):
        return _nbytes(value)
    if isinstance(value, (list, tuple)):
        total = 0
        for item in value:
            total += tensor_bytes(item)
        return total
    return 0


# GEMM-like overloads -> (position of the first matrix operand, batched?)
_GEMM_OPERANDS = {
    aten.mm.default: (0, False),
    aten.mm.out: (0, False),
    aten.addmm.default: (1, False),
    aten.addmm.out: (1, False),
    aten.addmm_.default: (1, False),
    aten.bmm.default: (0, True),
    aten.bmm.out: (0, True),
    aten.baddbmm.default: (1, True),
    aten.baddbmm.out: (1, True),
    aten.baddbmm_.default: (1, True),
}


# overload -> rule(inner_args, out) -> (gemm_flops, vector_flops, bytes_written or None): ops
# whose work is not one vector op per output element (convolutions on the GEMM engine, fused
# optimizer steps that write their arguments); filled by kernels_nn.py.
FLOP_RULES: dict = {}


def gemm_flops(func, args) -> float:
    """2*M*N*K multiply-adds of the matmul-like ops (times the batch); 0 for anything else."""
    operands = _GEMM_OPERANDS.get(func)
    if operands is None:
        return 0.0
    first, batched = operands
    a, b = args[first].shape, args[first + 1].shape
    if batched:
        return 2.0 * a[0] * a[1] * a[2] * b[2]
    return 2.0 * a[0] * a[1] * b[1]


def estimate_terms(func, inner_args, out) -> tuple[float, float, int, int, bool, bool]:
    """(gemm_flops, vector_flops, bytes_read, bytes_written, low_precision, int8) of one eager
    kernel: bytes of its tensor inputs and outputs, flops by class (one vector op per output
    element), the precision from the output's dtype (INT8 also from an int8 GEMM operand)."""
    read = 0
    for arg in inner_args:  # tensor_bytes(inner_args), unrolled one level: this runs once per op
        if isinstance(arg, torch.Tensor):
            try:  # inline: a call per tensor shows in the per-op cost (bench_ops.py)
                read += arg.nbytes
            except RuntimeError:  # sparse COO
                read += _nbytes(arg)
        elif isinstance(arg, (list, tuple)):
            read += tensor_bytes(arg)
    if isinstance(out, torch.Tensor):
        try:
            written = out.nbytes
        except RuntimeError:  # sparse COO
            written = _nbytes(out)
        low, int8 = out.dtype in _LOW_PRECISION, out.dtype in _INT8
    else:
        written, low, int8 = tensor_bytes(out), False, False
    rule = FLOP_RULES.get(func)
    if rule is not None:
        gemm, vector, rule_written = rule(inner_args, out)
        return (gemm, vector, read, written if rule_written is None else rule_written, low,
                int8)
    flops = gemm_flops(func, inner_args) if func in _GEMM_OPERANDS else 0.0
    if flops:
        first = inner_args[_GEMM_OPERANDS[func][0]]
        int8 = int8 or getattr(first, "dtype", None) in _INT8
        return flops, 0.0, read, written, low, int8
    elements = written // 4 if written else read // 4
    return 0.0, float(elements), read, written, low, int8


# ATen's row kernels along the last axis, by the family whose speed the GPU profiles measure:
# the reduce kernel (sum, and the max/min/mean reductions that share it), softmax, layer norm.
_ROW_FAMILIES = {"sum": "sum", "mean": "sum", "amax": "sum", "amin": "sum",
                 "_softmax": "softmax", "_log_softmax": "softmax",
                 "native_layer_norm": "layer_norm"}


def row_kernel(func, inner_args) -> tuple[str, int]:
    """(family, row length) of an ATen op that reduces its input's last axis row by row;
    ("", 0) for any other op or axis."""
    packet = getattr(func, "_overloadpacket", None)
    family = _ROW_FAMILIES.get(getattr(packet, "__name__", ""))
    if family is None or not inner_args or not isinstance(inner_args[0], torch.Tensor):
        return "", 0
    x = inner_args[0]
    if x.dim() == 0:
        return "", 0
    axis = inner_args[1] if len(inner_args) > 1 else None
    if family == "layer_norm":  # normalized_shape: the trailing axes, one row
        if not isinstance(axis, (list, tuple)):
            return "", 0
        length = 1
        for size in axis:
            length *= int(size)
        return family, length
    axes = list(axis) if isinstance(axis, (list, tuple)) else [axis]
    if len(axes) != 1 or axes[0] is None or axes[0] % x.dim() != x.dim() - 1:
        return "", 0
    return family, x.shape[-1]


def estimate(func, inner_args, out) -> KernelCost:
    """Cost of one eager kernel (see `estimate_terms`)."""
    gemm, vector, read, written, low, int8 = estimate_terms(func, inner_args, out)
    reduction = is_reduction(func)
    row_op, row_length = row_kernel(func, inner_args) if reduction else ("", 0)
    return KernelCost(gemm, vector, read, written, 0, low, int8=int8, reduction=reduction,
                      row_op=row_op, row_length=row_length)


def estimate_us(func, inner_args, out, profile: ChipProfile) -> float:
    """`estimate(...).duration_us(profile)` without building the KernelCost: the dispatcher's
    path when nobody is watching (no observer to hand the KernelCost to)."""
    gemm, vector, read, written, low, int8 = estimate_terms(func, inner_args, out)
    reduction = is_reduction(func)
    row_op, row_length = ("", 0)
    if reduction and profile.row_efficiency:  # only the GPU profiles measured row kernels
        row_op, row_length = row_kernel(func, inner_args)
    return roofline_us(profile, gemm, vector, read + written, 0, low, 0, int8, reduction,
                       row_op, row_length)


def transfer(nbytes: int) -> KernelCost:
    """A copy across the host link (host->device or device->host)."""
    return KernelCost(host_link_bytes=nbytes, bytes_written=nbytes)
