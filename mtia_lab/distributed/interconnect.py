"""What a collective costs on the simulated interconnect: the alpha-beta model.

Each message costs `alpha + n * beta`: alpha is the link latency (`ChipProfile.link_latency_us`),
beta the time per byte (1 / `ChipProfile.link_bandwidth`). The formulas for each collective are
the classic ones for p ranks and n bytes (docs/interconnect.md gives the sources):

    ring all-reduce        2 (p-1) alpha + 2 (p-1)/p n beta      (Patarasuk & Yuan 2009)
    tree all-reduce        2 log2(p) (alpha + n beta)            (reduce up, broadcast down)
    ring all-gather        (p-1) alpha + (p-1)/p n beta          n = bytes of the whole output
    ring reduce-scatter    (p-1) alpha + (p-1)/p n beta          n = bytes of the whole input
    pairwise all-to-all    (p-1) alpha + (p-1)/p n beta          n = bytes one rank sends
    binomial broadcast     log2(p) (alpha + n beta)
    binomial reduce        log2(p) (alpha + n beta)
    binomial scatter       log2(p) alpha + (p-1)/p n beta        n = bytes of all the pieces
    binomial gather        log2(p) alpha + (p-1)/p n beta        n = bytes of all the pieces
    dissemination barrier  log2(p) alpha
    send / recv            alpha + n beta

(Thakur, Rabenseifner & Gropp 2005 derive all but the first.) All-reduce takes whichever of
ring and tree is cheaper, as NCCL does between its ring and tree algorithms: tree for small
messages (latency-bound), ring for large ones (bandwidth-bound). This is a model for comparing
choices (which collective, how many ranks, how many bytes), not a prediction of a real fabric.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..backend.runtime.profile import ChipProfile


@dataclass(frozen=True, slots=True)
class CommCost:
    """One collective's price: the algorithm chosen and its simulated duration."""

    collective: str
    algorithm: str  # "ring", "tree", "pairwise", "binomial tree", "dissemination", "direct"
    ranks: int
    nbytes: int  # the n of the formula
    duration_us: float

    @property
    def formula(self) -> str:
        return FORMULAS[self.collective, self.algorithm]


FORMULAS = {
    ("allreduce", "ring"): "2(p-1)a + 2(p-1)/p n b",
    ("allreduce", "tree"): "2 log2(p) (a + n b)",
    ("allgather", "ring"): "(p-1)a + (p-1)/p n b",
    ("reduce_scatter", "ring"): "(p-1)a + (p-1)/p n b",
    ("alltoall", "pairwise"): "(p-1)a + (p-1)/p n b",
    ("broadcast", "binomial tree"): "log2(p) (a + n b)",
    ("reduce", "binomial tree"): "log2(p) (a + n b)",
    ("scatter", "binomial tree"): "log2(p) a + (p-1)/p n b",
    ("gather", "binomial tree"): "log2(p) a + (p-1)/p n b",
    ("barrier", "dissemination"): "log2(p) a",
    ("send", "direct"): "a + n b",
    ("recv", "direct"): "a + n b",
}


def _log2(p: int) -> int:
    return math.ceil(math.log2(p)) if p > 1 else 0


def collective_cost(collective: str, nbytes: int, ranks: int, profile: ChipProfile) -> CommCost:
    """The simulated cost of `collective` moving `nbytes` (see the table above) over `ranks`."""
    a = profile.link_latency_us
    b = 1e6 / profile.link_bandwidth  # us per byte
    p, n = ranks, nbytes
    if p <= 1 and collective not in ("send", "recv"):
        return CommCost(collective, _ALGORITHM.get(collective, "ring"), p, n, 0.0)
    if collective == "allreduce":
        ring = 2 * (p - 1) * a + 2 * (p - 1) / p * n * b
        tree = 2 * _log2(p) * (a + n * b)
        if tree < ring:
            return CommCost(collective, "tree", p, n, tree)
        return CommCost(collective, "ring", p, n, ring)
    if collective in ("allgather", "reduce_scatter", "alltoall"):
        return CommCost(collective, _ALGORITHM[collective], p, n,
                        (p - 1) * a + (p - 1) / p * n * b)
    if collective in ("broadcast", "reduce"):
        return CommCost(collective, "binomial tree", p, n, _log2(p) * (a + n * b))
    if collective in ("scatter", "gather"):
        return CommCost(collective, "binomial tree", p, n, _log2(p) * a + (p - 1) / p * n * b)
    if collective == "barrier":
        return CommCost(collective, "dissemination", p, 0, _log2(p) * a)
    if collective in ("send", "recv"):
        return CommCost(collective, "direct", 2, n, a + n * b)
    raise ValueError(f"no cost formula for collective {collective!r}; known: {sorted(_KNOWN)}")


_ALGORITHM = {"allgather": "ring", "reduce_scatter": "ring", "alltoall": "pairwise",
              "broadcast": "binomial tree", "barrier": "dissemination", "allreduce": "ring",
              "reduce": "binomial tree", "scatter": "binomial tree", "gather": "binomial tree"}
_KNOWN = {c for c, _ in FORMULAS}
