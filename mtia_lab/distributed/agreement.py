"""Before every collective on device tensors, the ranks compare what they were asked to do.

Gloo, given mismatched shapes, may write past a buffer, hang until its timeout, or fail with a
message about bytes; and a rank that calls a different collective than its peers deadlocks.
So each rank first all-gathers a small header -- collective, sequence number, dtype, reduce op,
shape, root, and the simulated time at which its stream reached the collective -- and every
rank checks the headers before any payload moves. All ranks see the same headers, so all of
them raise the same `CollectiveMismatchError` together, naming each rank's call: no rank hangs.

The arrival times are what the simulated clock needs too: a collective starts on every rank
when the LAST rank arrives (interconnect.py prices it from there), and the time a rank spent
waiting for the slowest is recorded on its trace.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

COLLECTIVES = ("allreduce", "broadcast", "allgather", "reduce_scatter", "alltoall", "barrier",
               "send", "recv", "reduce", "gather", "scatter")
REDUCE_OPS = ("sum", "avg", "product", "min", "max", "band", "bor", "bxor", "premul_sum")
DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32,
          torch.int16, torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128)
MAX_DIMS = 6
# seq, collective, dtype, reduce op, root, ndim, shape (MAX_DIMS), numel, arrival_us
HEADER_LEN = 8 + MAX_DIMS


class CollectiveError(RuntimeError):
    """A collective on mtia_sim failed: a peer failed or left, or the timeout passed."""


class CollectiveMismatchError(CollectiveError):
    """The ranks called different collectives, or the same one with different tensors."""


@dataclass(frozen=True)
class Call:
    """What one rank was asked to do, as it tells its peers."""

    seq: int
    collective: str
    dtype: torch.dtype | None
    reduce: str = ""
    root: int = -1
    shape: tuple[int, ...] | None = None  # None: shapes may differ between ranks (all_to_all)
    numel: int = 0
    arrival_us: float = 0.0

    def header(self) -> torch.Tensor:
        shape = self.shape if self.shape is not None else ()
        dims = list(shape[:MAX_DIMS]) + [-1] * (MAX_DIMS - min(len(shape), MAX_DIMS))
        if len(shape) > MAX_DIMS:  # compare the rest through the element count
            dims[-1] = -2
        return torch.tensor(
            [self.seq, COLLECTIVES.index(self.collective), _dtype_code(self.dtype),
             REDUCE_OPS.index(self.reduce) if self.reduce else -1, self.root,
             len(shape) if self.shape is not None else -1, *dims, self.numel, self.arrival_us],
            dtype=torch.float64,
        )

    def describe(self) -> str:
        what = self.collective + (f"({self.reduce})" if self.reduce else "")
        if self.root >= 0:
            what += f" root={self.root}"
        if self.dtype is None:
            return f"{what} #{self.seq}"
        dtype = str(self.dtype).removeprefix("torch.")
        shape = "x".join(map(str, self.shape)) if self.shape is not None else f"{self.numel} el."
        return f"{what} #{self.seq} on {dtype}[{shape}]"


def from_header(row: list[float]) -> Call:
    seq, coll, dtype, reduce, root, ndim = (int(v) for v in row[:6])
    dims = [int(v) for v in row[6:6 + MAX_DIMS]]
    numel, arrival = int(row[6 + MAX_DIMS]), float(row[7 + MAX_DIMS])
    shape = None if ndim < 0 else tuple(d for d in dims[:min(ndim, MAX_DIMS)])
    return Call(seq, COLLECTIVES[coll], DTYPES[dtype] if dtype >= 0 else None,
                REDUCE_OPS[reduce] if reduce >= 0 else "", root, shape, numel, arrival)


def _dtype_code(dtype: torch.dtype | None) -> int:
    if dtype is None:
        return -1
    if dtype not in DTYPES:
        raise TypeError(f"mtia_ccl does not move {dtype} tensors; supported: "
                        f"{', '.join(str(d).removeprefix('torch.') for d in DTYPES)}")
    return DTYPES.index(dtype)


def check(calls: list[Call], group: str) -> None:
    """Raise CollectiveMismatchError unless every rank's call agrees with rank 0's."""
    first = calls[0]
    for rank, call in enumerate(calls[1:], start=1):
        same = (call.seq == first.seq and call.collective == first.collective
                and call.dtype == first.dtype and call.reduce == first.reduce
                and call.root == first.root and call.shape == first.shape
                and (first.shape is not None or call.numel == first.numel
                     or first.collective == "alltoall"))
        if not same:
            lines = "\n".join(f"  rank {r}: {c.describe()}" for r, c in enumerate(calls))
            raise CollectiveMismatchError(
                f"mtia_ccl (group {group}): the ranks disagree on collective #{first.seq} "
                f"(rank {rank} differs from rank 0):\n{lines}\n"
                "Every rank of a group must call the same collectives in the same order, on "
                "tensors of the same dtype and shape (and the same reduce op and root)."
            )
