"""MTIA's keep-list: ops neither compiler decomposes, each with why.

The teaching scheduler (mtia_lab/compiler/aot.py) leaves them out of AOTAutograd's
decompositions, so that each is one scheduler node; the Inductor engine
(mtia_lab/inductor/entry.py) leaves them out of Inductor's and lowers those it has no lowering
for as ATen calls; the plan comparison (mtia_lab/compare) does both. One list, so that both
compilers start from the same graph.
"""

from __future__ import annotations

import torch

aten = torch.ops.aten

# Ops left undecomposed on purpose, and why: the scheduler sees them as one node.
KEEP = {
    aten.native_layer_norm: "runs as its ATen kernel (extern): one fused pass on real backends",
    aten.native_layer_norm_backward: "runs as its ATen kernel (extern), like its forward",
    aten.mm: "matmul template (GEMM engine)",
    aten.addmm: "matmul template with its bias",
    aten.bmm: "batched matmul template",
    aten.baddbmm: "batched matmul template with its bias",
    aten.convolution: "runs as its ATen kernel (extern), as in Inductor",
    aten.convolution_backward: "runs as its ATen kernel (extern), as in Inductor",
}


def keep_ops() -> set:
    """Every overload of the KEEP ops (`aten.mm.default`, `aten.mm.out`...): what a
    decomposition table is keyed by."""
    return {getattr(packet, name) for packet in KEEP for name in packet.overloads()}
