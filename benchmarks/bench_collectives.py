"""Per-call host overhead of mtia_ccl's collectives on device tensors, against raw gloo on host
tensors, in the same ranks of the same run.

A collective on mtia_sim tensors does more host work than gloo's own call: the ranks first
all-gather a small header to agree on the call (agreement.py: a second, tiny gloo collective),
the Python process group unwraps the device tensors and stages non-contiguous ones, the
simulated clock is charged and, in a trace, events are recorded. At 1 KiB that overhead is
most of the call; at 4 MiB gloo's copying dominates and the ratio falls towards 1. The
simulated duration from the interconnect model is printed beside it (what the simulated chip
would spend, not the host).

Two ranks by default (launched with mtia_lab.distributed.launch), best of several rounds of
many calls, one intra-op thread per rank.

    python benchmarks/bench_collectives.py [--nproc 2] [--rounds 5] [--calls 20]

Measured on the shared 2-core development machine at a load average of 10 to 11 (eight work
streams), three runs: mtia_ccl / gloo at 1 KiB between 1.5 and 11 (most near 3 to 6: the header
exchange is a second gloo collective), at 4 MiB between 1.0 and 2.2 (one outlier at 0.27, the
gloo round hit by the machine's load). Absolute times are inflated by that load (a 1 KiB gloo
all_reduce took about 1 ms); on a quiet machine expect smaller times, the same shape.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _collective_ranks  # noqa: E402  (the ranks import it by name)

from mtia_lab.distributed import launch  # noqa: E402

SIZES = (1024, 4 << 20)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()
    result = launch(_collective_ranks.measure, nprocs=args.nproc,
                    args=(SIZES, args.rounds, args.calls), timeout=300)
    print(f"{args.nproc} ranks, best of {args.rounds} rounds x {args.calls} calls, "
          "host microseconds per call (rank 0)")
    print(f"{'collective':<24} {'bytes':>8} {'mtia_ccl':>10} {'gloo':>10} {'ratio':>7}"
          f" {'simulated':>10}")
    for row in result.values[0]:
        ratio = row["device_us"] / row["gloo_us"]
        print(f"{row['collective']:<24} {row['bytes']:>8} {row['device_us']:>10.1f} "
              f"{row['gloo_us']:>10.1f} {ratio:>7.2f} {row['sim_us']:>10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
