"""Price a kernel of the plan with the backend's roofline model (mtia_lab/backend/runtime/cost.py).

A fused kernel reads its inputs from DRAM (LPDDR5) once and writes there only the buffers
someone outside it needs. Everything in between -- the intermediates -- stays on chip: each is
written once to the SRAM and read from there by the kernel's own nodes, at SRAM bandwidth
(2.7 TB/s on MTIA v2 against 204.8 GB/s of LPDDR5). That difference, summed over a graph, is
what fusion saves on this chip. Intermediates beyond the SRAM's capacity spill: they are
priced at DRAM bandwidth like inputs and outputs. Eager ops and fused kernels go through the
same `KernelCost.duration_us`, so the "before" and "after" times of a plan compare with the
device's eager trace.
"""

from __future__ import annotations

from ..backend.runtime.cost import KernelCost
from .ir import FusedSchedulerNode, GraphIR


def on_chip_traffic(group: FusedSchedulerNode, ir: GraphIR) -> tuple[int, int]:
    """(bytes of intermediates kept on chip, bytes read from them by the kernel's own nodes):
    every buffer a member writes and another member reads is written once and read once per
    reader, on chip."""
    kept = readers = 0
    for buf in group.writes:
        inside = sum(1 for u in ir.users.get(buf, ()) if u in group.names)
        if not inside:
            continue
        nbytes = ir.buffers[buf].nbytes
        if buf not in group.outputs(ir):
            kept += nbytes  # written to SRAM only; an output's write is DRAM traffic
        readers += nbytes * inside
    return kept, readers


def kernel_cost(group: FusedSchedulerNode, ir: GraphIR, profile=None) -> KernelCost:
    outputs = group.outputs(ir)
    kept, read_inside = on_chip_traffic(group, ir)
    sram = kept + read_inside
    fits = profile is None or kept <= profile.sram_bytes
    return KernelCost(
        gemm_flops=sum(n.gemm_flops for n in group.nodes),
        vector_flops=sum(n.vector_flops for n in group.nodes),
        bytes_read=ir.nbytes(group.reads),
        bytes_written=ir.nbytes(outputs),
        low_precision=any(n.low_precision for n in group.nodes),
        sram_bytes=sram if fits else 0,
        spill_bytes=0 if fits else sram,
        int8=any(n.int8 for n in group.nodes),
    )


def combo_cost(costs: list[KernelCost]) -> KernelCost:
    """Kernels packed into one launch: their work adds up, their launch overhead is paid once."""
    total = KernelCost()
    for cost in costs:
        total = total + cost
    return total


def unfused_cost(ir: GraphIR) -> list[KernelCost]:
    """Every scheduler node as its own kernel: the eager baseline a plan is compared with."""
    return [kernel_cost(FusedSchedulerNode([n]), ir) for n in ir.nodes]
