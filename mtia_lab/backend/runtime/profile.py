"""Chip profiles: the published figures of the chip the simulated device imitates.

Every number here is a public figure or a named assumption, not a measurement; docs/chip-profile.md
is the one table of figures with the source of each. The cost model
(mtia_lab/backend/runtime/cost.py) and `get_device_properties` read them from here and nowhere else.
Users can describe their own chip with `ChipProfile(...)` and `mtia_lab.configure(profile=...)`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

GB = 10**9
TB = 10**12
MiB = 2**20
GiB = 2**30


@dataclass(frozen=True)
class ChipProfile:
    name: str
    process_nm: int
    clock_ghz: float
    tdp_watts: float
    pe_grid: tuple[int, int]
    gemm_flops_bf16: float  # dense FLOP/s on the GEMM engine
    gemm_ops_int8: float
    vector_flops_fp32: float  # FLOP/s on the vector/SIMD units
    vector_flops_bf16: float
    sram_bytes: int  # on-chip SRAM shared by the PEs
    sram_bandwidth: float  # bytes/s
    local_memory_per_pe: int
    dram_bytes: int  # off-chip LPDDR5 per chip
    dram_bandwidth: float  # bytes/s
    host_link: str
    host_link_bandwidth: float  # bytes/s, one direction
    kernel_launch_us: float  # fixed cost of one kernel launch (modelling assumption)
    major: int
    minor: int
    # Chip-to-chip interconnect, read by mtia_lab/distributed/interconnect.py (docs/interconnect.md)
    interconnect: str = "PCIe peer-to-peer through a switch (assumed)"
    link_bandwidth: float = 32 * GB  # bytes/s one direction, per chip
    link_latency_us: float = 5.0  # alpha: fixed cost of one message (modelling assumption)
    vector_ops_int8: float = 0.0  # OP/s on the vector units in INT8 (0: 2x the BF16 rate)
    gemm_flops_fp32: float = 0.0  # not published for either chip (0: half the BF16 rate)
    # Host time to issue one eager op (Python, dispatcher, launch call). The device cannot start
    # an op before the host issued it, so a run of small ops is host-bound. 0: not modelled (the
    # MTIA profiles: no published figure); the GPU profiles measure it (mtia_lab/calibration/).
    host_op_us: float = 0.0
    # The shortest kernel differs by class: a reduction's dependent load-reduce-store chain, a
    # matmul library call. 0: the same as kernel_launch_us (the MTIA profiles: not published).
    reduction_launch_us: float = 0.0
    gemm_launch_us: float = 0.0
    # A hardware cache (a GPU's L2) that serves a kernel whose whole working set fits in it, at
    # cache_bandwidth: inputs a kernel just wrote are still there. 0: none (the MTIA profiles:
    # their SRAM is priced as on-chip intermediates of fused kernels, `sram_bandwidth`).
    cache_bytes: int = 0
    cache_bandwidth: float = 0.0
    # How the cache's help fades as a kernel's working set grows toward and past its size:
    # (working-set bytes, bandwidth) points measured with the same back-to-back kernel, between
    # which the bandwidth is interpolated; past the last point, dram_bandwidth. Empty: the one
    # cut at cache_bytes above.
    cache_curve: tuple[tuple[int, float], ...] = ()
    # Library row kernels (ATen's reductions, softmax, layer norm along the last axis) are not
    # one pass at the copy bandwidth: their speed depends on the row length, which sets how many
    # rows a block takes and how often it synchronizes. Measured per (op, low precision, row
    # length): `row_efficiency`, the share of the bandwidth they reach over many rows, and
    # `row_latency_us`, the time of a kernel of 16 such rows (the chip mostly idle). Between
    # measured lengths, interpolated in log2(length). Empty: priced as any other kernel (the MTIA
    # profiles: nothing measured).
    row_efficiency: tuple[tuple[str, bool, int, float], ...] = ()
    row_latency_us: tuple[tuple[str, bool, int, float], ...] = ()
    # Inductor's looped reductions over a strided axis that also load, in the same loop, an
    # operand laid along the reduction axis (a layer norm backward's per-row mean and rstd):
    # those elements are gathered one by one across the tile, at `gather_rate` elements per
    # second, on top of the streaming bytes (loop_probes.py). 0: not modelled (MTIA profiles).
    gather_rate: float = 0.0
    # Inductor's persistent reductions with an OUTER hint run the one config its heuristic keeps:
    # 128 columns a program when the reduction is 32 long or less (cost.outer_block_columns).
    # Such a kernel takes at least `wide_reduction_launch_us`, not `reduction_launch_us`
    # (persistent_probes.py). 0: not modelled (the MTIA profiles).
    wide_reduction_launch_us: float = 0.0

    def __post_init__(self) -> None:
        if not self.vector_ops_int8:
            object.__setattr__(self, "vector_ops_int8", 2 * self.vector_flops_bf16)
        if not self.gemm_flops_fp32:  # assumption: FP32 GEMM at half the BF16 rate
            object.__setattr__(self, "gemm_flops_fp32", self.gemm_flops_bf16 / 2)

    @property
    def num_pes(self) -> int:
        return self.pe_grid[0] * self.pe_grid[1]

    def with_changes(self, **changes) -> ChipProfile:
        return replace(self, **changes)


# MTIA v2, "next-generation MTIA", Meta engineering blog, April 2024 (TSMC 5 nm): the chip
# column of its comparison table. Sources and assumptions: docs/chip-profile.md.
MTIA_V2 = ChipProfile(
    name="MTIA v2 (simulated)",
    process_nm=5,
    clock_ghz=1.35,
    tdp_watts=90,
    pe_grid=(8, 8),
    gemm_flops_bf16=177 * TB,  # 177 TFLOPS FP16/BF16 dense (354 with sparsity)
    gemm_ops_int8=354 * TB,  # 354 TOPS INT8 dense
    vector_flops_fp32=2.76 * TB,  # vector/SIMD: 2.76 TFLOPS FP32
    vector_flops_bf16=5.53 * TB,  # vector/SIMD: 5.53 TFLOPS FP16/BF16
    sram_bytes=256 * MiB,  # 256 MB on-chip SRAM
    sram_bandwidth=2.7 * TB,  # at 2.7 TB/s
    local_memory_per_pe=384 * 1024,  # 384 KB per PE at 1 TB/s
    dram_bytes=128 * GiB,  # off-chip LPDDR5: 128 GB (the table's MTIA v2 column)
    dram_bandwidth=204.8 * GB,  # 204.8 GB/s
    host_link="PCIe Gen5 x8",
    host_link_bandwidth=32 * GB,  # PCIe Gen5: 32 GT/s x 8 lanes, about 32 GB/s per direction
    kernel_launch_us=4.0,  # assumption: a few microseconds, as on other accelerators
    major=2,
    minor=0,
    # No chip-to-chip link is published for MTIA v2: chips on a board talk over PCIe Gen5 x8
    # through the board's switch, the same 32 GB/s per direction as the host link.
    interconnect="PCIe Gen5 x8 peer-to-peer (assumed)",
    link_bandwidth=32 * GB,
    link_latency_us=5.0,  # assumption: one PCIe peer-to-peer round trip plus software
    vector_ops_int8=11.06 * TB,  # vector/SIMD: 11.06 TOPS INT8
    gemm_flops_fp32=177 * TB / 2,  # assumption: not published; half the BF16 rate
)

# MTIA v1, Firoozshahian et al., "MTIA: First Generation Silicon Targeting Meta's Recommendation
# Systems", ISCA 2023 (TSMC 7 nm); vector figures from the MTIA v1 column of the April 2024
# blog's comparison table (docs/chip-profile.md).
MTIA_V1 = ChipProfile(
    name="MTIA v1 (simulated)",
    process_nm=7,
    clock_ghz=0.8,
    tdp_watts=25,
    pe_grid=(8, 8),
    gemm_flops_bf16=51.2 * TB,
    gemm_ops_int8=102.4 * TB,
    vector_flops_fp32=0.8 * TB,  # vector: 0.8 TFLOPS FP32
    vector_flops_bf16=1.6 * TB,  # vector: 1.6 TFLOPS FP16/BF16
    sram_bytes=128 * MiB,  # 128 MB at 800 GB/s
    sram_bandwidth=800 * GB,
    local_memory_per_pe=128 * 1024,
    dram_bytes=64 * GiB,  # LPDDR5, 64 GB at 176 GB/s
    dram_bandwidth=176 * GB,
    host_link="PCIe Gen4 x8",
    host_link_bandwidth=16 * GB,  # PCIe Gen4: 16 GT/s x 8 lanes
    kernel_launch_us=4.0,
    major=1,
    minor=0,
    interconnect="PCIe Gen4 x8 peer-to-peer (assumed)",
    link_bandwidth=16 * GB,
    link_latency_us=5.0,
    vector_ops_int8=3.2 * TB,  # vector: 3.2 TOPS INT8
    gemm_flops_fp32=51.2 * TB / 2,  # assumption: not published; half the BF16 rate
)

PROFILES = {"mtia_v2": MTIA_V2, "mtia_v1": MTIA_V1}
DEFAULT_PROFILE = MTIA_V2
