"""Price a kernel of the plan with the backend's roofline model (mtia_lab/backend/cost.py).

A fused kernel reads its inputs from memory once and writes only the buffers someone outside
it needs; everything in between stays on chip. That difference, summed over a graph, is what
fusion saves. Eager ops and fused kernels go through the same `KernelCost.duration_us`, so
the "before" and "after" times of a plan are comparable with the device's eager trace.
"""

from __future__ import annotations

from ..backend.cost import KernelCost
from .ir import FusedSchedulerNode, GraphIR


def kernel_cost(group: FusedSchedulerNode, ir: GraphIR) -> KernelCost:
    outputs = group.outputs(ir)
    return KernelCost(
        gemm_flops=sum(n.gemm_flops for n in group.nodes),
        vector_flops=sum(n.vector_flops for n in group.nodes),
        bytes_read=ir.nbytes(group.reads),
        bytes_written=ir.nbytes(outputs),
        low_precision=any(n.low_precision for n in group.nodes),
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
