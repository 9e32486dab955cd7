"""What the checks before an op cost on the host, next to the op itself, in one process.

Two checks run in `MTIATensor.__torch_dispatch__` before an op (dispatch._BEFORE_RUN): every op
pays one dict lookup; `clone`, `repeat`, `new_*` and `*_like` also compute their result's size to
refuse an allocation the device cannot hold before the host makes it
(backend/runtime/oom.py). Printed:
microseconds per call (best of several rounds) and the share of the op's own host time.

    python benchmarks/bench_prerun_checks.py [--calls 20000] [--rounds 7]
"""

from __future__ import annotations

import argparse

import torch
from _timing import best_of

import mtia_lab  # noqa: F401  (registers mtia_sim)
from mtia_lab.backend.aten import dispatch
from mtia_lab.backend.runtime import oom


def per_call_us(fn, calls: int, rounds: int) -> float:
    def many() -> None:
        for _ in range(calls):
            fn()

    return best_of(many, rounds) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(1)
    x = torch.ones(16, device="mtia_sim")
    clone, add = torch.ops.aten.clone.default, torch.ops.aten.add.Tensor
    clone_us = per_call_us(lambda: x.clone(), args.calls, args.rounds)
    add_us = per_call_us(lambda: x + x, args.calls, args.rounds)
    check_us = per_call_us(lambda: oom.check_result(clone, (x,), {}), args.calls, args.rounds)
    lookup_us = per_call_us(lambda: dispatch._BEFORE_RUN.get(add), args.calls, args.rounds)
    print(f"x.clone() {clone_us:8.2f} us   its size check {check_us:6.2f} us "
          f"({check_us / clone_us:.1%} of the op)")
    print(f"x + x     {add_us:8.2f} us   the lookup     {lookup_us:6.2f} us "
          f"({lookup_us / add_us:.2%} of the op)")


if __name__ == "__main__":
    main()
