"""`python -m mtia_lab.distributed --nproc N script.py [args]`: the script on N ranks."""

from __future__ import annotations

import argparse
import sys

from .spawn import run_command


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mtia_lab.distributed",
        description="Run a script on N ranks, each owning one simulated chip as its "
                    "mtia_sim:0, with torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, "
                    "MASTER_ADDR, MASTER_PORT). The script calls "
                    "torch.distributed.init_process_group() after `import mtia_lab`.")
    parser.add_argument("--nproc", "--nproc-per-node", "--nproc_per_node", type=int, default=2,
                        dest="nproc", help="number of ranks (default 2)")
    parser.add_argument("--grace", type=float, default=5.0,
                        help="seconds the other ranks get after one fails (default 5)")
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    options = parser.parse_args(argv)
    if options.nproc < 1:
        parser.error("--nproc must be at least 1")
    return run_command([options.script, *options.args], options.nproc, options.grace)


if __name__ == "__main__":
    sys.exit(main())
