"""The L2 over a launch sequence: how warm a kernel's bytes are, from what ran before it.

A GPU's L2 serves a kernel's bytes if few other bytes went through it since they were last
touched. The cache probes (reduction_probes.py `l2`, and the 16 MiB add of gpu_side.py) run
one kernel back to back over a working set W: every byte is touched again after W distinct
bytes, so they measure the rate a kernel reaches when its bytes' **reuse distance** is W. A
kernel inside a model is priced the same way, byte by byte: each byte's reuse distance is read
off the recorded launch sequence (launch_sequence.py: the address ranges every kernel of a
step reads and writes, in order; the steps repeat exactly, so the sequence is taken as a loop
of its last step), and the byte moves at the probes' rate for that distance. A kernel of an
eval loop finds its inputs where the kernel before it left them; in a training step the
forward's input was last read a backward pass ago.

A byte last touched by launch j and touched again by launch k is reused after half of j's
bytes, every distinct byte of the launches between, and half of k's (the cache probe's case,
j = k - 1 over the same buffers, gives W). Addresses are taken in 64 KiB blocks.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..backend.runtime.cost import memory_bandwidth
from ..backend.runtime.profile import ChipProfile

BLOCK = 1 << 16


def _blocks(launch: dict) -> dict[int, int]:
    """Block -> bytes of it that the launch reads or writes."""
    covered: dict[int, int] = {}
    for address, size in [*launch["reads"], *launch["writes"]]:
        end = address + size
        block = address // BLOCK
        while block * BLOCK < end:
            low, high = max(address, block * BLOCK), min(end, (block + 1) * BLOCK)
            covered[block] = max(covered.get(block, 0), high - low)
            block += 1
    return covered


def reuse_distances(step: Sequence[dict]) -> list[list[tuple[int, float]]]:
    """(bytes, reuse distance) of the blocks each launch of `step` touches, with the step run
    in a loop (as gpu_side.py timed it): a block's last touch may be in the step before."""
    blocks = [_blocks(launch) for launch in step]
    loop = blocks + blocks  # the previous step, then this one
    sizes = [sum(b.values()) for b in loop]
    last: dict[int, int] = {}
    for j, touched in enumerate(blocks):
        last.update(dict.fromkeys(touched, j))
    result = []
    for k in range(len(blocks), len(loop)):
        result.append(_distances(loop, sizes, last, k))
        last.update(dict.fromkeys(loop[k], k))
    return result


def _distances(blocks, sizes, last, k) -> list[tuple[int, float]]:
    pending: dict[int, list[int]] = {}  # launch that last touched them -> bytes of k's blocks
    out = []
    for block, size in blocks[k].items():
        j = last.get(block)
        if j is None:  # touched by no launch of the step before: a fresh allocation
            out.append((size, float("inf")))
        else:
            pending.setdefault(j, []).append(size)
    between: dict[int, int] = {}  # distinct blocks of the launches after j, before k
    between_bytes = 0
    for j in range(k - 1, -1, -1):
        for size in pending.pop(j, []):
            out.append((size, sizes[j] / 2 + between_bytes + sizes[k] / 2))
        if not pending:
            break
        for block, size in blocks[j].items():
            grown = size - between.get(block, 0)
            if grown > 0:
                between[block] = size
                between_bytes += grown
    return out


def sequence_bandwidth(profile: ChipProfile, distances: Sequence[tuple[int, float]]) -> float:
    """The rate at which a kernel moves bytes of these reuse distances: each byte at the cache
    probes' rate for its distance (`memory_bandwidth` of a working set that size; DRAM's for a
    byte nothing touched in the step before)."""
    total = sum(size for size, _ in distances)
    if not total:
        return profile.dram_bandwidth
    seconds = sum(size / (profile.dram_bandwidth if distance == float("inf")
                          else memory_bandwidth(profile, distance))
                  for size, distance in distances)
    return total / seconds


def kernel_bandwidths(profile: ChipProfile, steps: Sequence[Sequence[dict]]) -> dict[str, list]:
    """Kernel name -> the rates of its launches in one step of the loop (the last recorded)."""
    rates: dict[str, list] = {}
    for launch, distances in zip(steps[-1], reuse_distances(steps[-1]), strict=True):
        rates.setdefault(launch["kernel"], []).append(sequence_bandwidth(profile, distances))
    return rates
