"""Print the scheduler-fidelity tables: our plans against Inductor's device plans, for the
TUNING suite (tests/fidelity_graphs.py and fidelity_tuning_hf.py: the graphs the rules were
changed against), the HELD-OUT suite (tests/fidelity_heldout.py: transformers' modules, looked
at once the first rules were in), the HELD-OUT-2 suite (tests/fidelity_heldout2.py: families
in neither, written before any tuning against it, never tuned on), the HELD-OUT-3 suite
(tests/fidelity_heldout3.py: families in none of them, written blind while the rules were being
tuned elsewhere) and the HELD-OUT-4 suite (tests/fidelity_heldout4.py: families in none of the
others, written blind, measured once HELD-OUT-3 had been tuned on), the HELD-OUT-5 suite
(tests/fidelity_heldout5.py: sixteen more families, a training step among them, written blind
while the others were tuned on), the HELD-OUT-6 suite (tests/fidelity_heldout6.py: sixteen
more families, a training step among them, written blind as the fifth was), the HELD-OUT-7
suite (tests/fidelity_heldout7.py: fourteen graphs of thirteen more families, a training step
among them, written blind as the sixth was), the HELD-OUT-8 suite (tests/fidelity_heldout8.py:
fifteen more families, a training step among them, written blind as the seventh was), the
HELD-OUT-9 suite (tests/fidelity_heldout9.py: fifteen more families, two training steps among
them, written blind as the eighth was), the HELD-OUT-10 suite (tests/fidelity_heldout10.py:
fifteen more families, three training steps among them, written blind as the ninth was), the
HELD-OUT-11 suite (tests/fidelity_heldout11.py: fifteen more families, three training steps
among them, written blind as the tenth was), the HELD-OUT-12 suite
(tests/fidelity_heldout12.py: fifteen more families, two training steps among them, written
blind as the eleventh was), the HELD-OUT-13 suite (tests/fidelity_heldout13.py: fifteen
more families, two training steps among them, written blind as the twelfth was), the
HELD-OUT-14 suite (tests/fidelity_heldout14.py: fifteen more families, two training steps
among them, written blind as the thirteenth was), the HELD-OUT-15 suite
(tests/fidelity_heldout15.py: fifteen more families, two training steps among them, written
blind as the fourteenth was), the HELD-OUT-16 suite (tests/fidelity_heldout16.py: fifteen
more families, two training steps among them, written blind as the fifteenth was) and the
HELD-OUT-17 suite (tests/fidelity_heldout17.py: fifteen more families, two training steps
among them, written blind as the sixteenth was), each graph audited launch by launch against
Inductor's generated wrapper.

    PYTHONPATH=$PWD .venv/bin/python scripts/fidelity_report.py [--summary] [SUITE...] [--graph G]

--summary: the per-graph table and totals only, without the list of differences.
SUITE: tuning, heldout, heldout2, heldout3, heldout4, heldout5, heldout6, heldout7, heldout8,
heldout9, heldout10, heldout11, heldout12, heldout13, heldout14, heldout15, heldout16,
heldout17 (default: all eighteen, one after the other).
--graph G: only graph G (of the suites named).
"""

import argparse
import sys
from pathlib import Path

root = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(root))
sys.path.insert(0, str(root / "tests"))

from fidelity_graphs import GRAPHS, INDUCTOR_CONFIG, TUNING  # noqa: E402
from fidelity_heldout import heldout_graphs  # noqa: E402
from fidelity_heldout2 import heldout2_graphs  # noqa: E402
from fidelity_heldout3 import heldout3_graphs  # noqa: E402
from fidelity_heldout4 import heldout4_graphs  # noqa: E402
from fidelity_heldout5 import heldout5_graphs  # noqa: E402
from fidelity_heldout6 import heldout6_graphs  # noqa: E402
from fidelity_heldout7 import heldout7_graphs  # noqa: E402
from fidelity_heldout8 import heldout8_graphs  # noqa: E402
from fidelity_heldout9 import heldout9_graphs  # noqa: E402
from fidelity_heldout10 import heldout10_graphs  # noqa: E402
from fidelity_heldout11 import heldout11_graphs  # noqa: E402
from fidelity_heldout12 import heldout12_graphs  # noqa: E402
from fidelity_heldout13 import heldout13_graphs  # noqa: E402
from fidelity_heldout14 import heldout14_graphs  # noqa: E402
from fidelity_heldout15 import heldout15_graphs  # noqa: E402
from fidelity_heldout16 import heldout16_graphs  # noqa: E402
from fidelity_heldout17 import heldout17_graphs  # noqa: E402
from fidelity_tuning_hf import tuning_hf_graphs  # noqa: E402

import mtia_lab  # noqa: E402,F401
from mtia_lab.compare.fidelity import fidelity_rows, fidelity_table  # noqa: E402

SUITES = {
    "tuning": ("TUNING", lambda: {**GRAPHS, **TUNING, **tuning_hf_graphs()}),
    "heldout": ("HELD-OUT", heldout_graphs),
    "heldout2": ("HELD-OUT-2", heldout2_graphs),
    "heldout3": ("HELD-OUT-3", heldout3_graphs),
    "heldout4": ("HELD-OUT-4", heldout4_graphs),
    "heldout5": ("HELD-OUT-5", heldout5_graphs),
    "heldout6": ("HELD-OUT-6", heldout6_graphs),
    "heldout7": ("HELD-OUT-7", heldout7_graphs),
    "heldout8": ("HELD-OUT-8", heldout8_graphs),
    "heldout9": ("HELD-OUT-9", heldout9_graphs),
    "heldout10": ("HELD-OUT-10", heldout10_graphs),
    "heldout11": ("HELD-OUT-11", heldout11_graphs),
    "heldout12": ("HELD-OUT-12", heldout12_graphs),
    "heldout13": ("HELD-OUT-13", heldout13_graphs),
    "heldout14": ("HELD-OUT-14", heldout14_graphs),
    "heldout15": ("HELD-OUT-15", heldout15_graphs),
    "heldout16": ("HELD-OUT-16", heldout16_graphs),
    "heldout17": ("HELD-OUT-17", heldout17_graphs),
}

def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("suites", nargs="*", metavar="SUITE",
                        help=f"one or more of {', '.join(SUITES)} (default: all)")
    parser.add_argument("--summary", action="store_true",
                        help="the per-graph table and totals only")
    parser.add_argument("--graph", help="only this graph (of the suites named)")
    args = parser.parse_args(argv)
    unknown = [name for name in args.suites if name not in SUITES]
    if unknown:
        parser.error(f"no suite {', '.join(unknown)}: choose from {', '.join(SUITES)}")
    found = False
    for key in args.suites or list(SUITES):
        title, build = SUITES[key]
        suite = build()
        if args.graph is not None:
            suite = {args.graph: suite[args.graph]} if args.graph in suite else {}
            if not suite:
                continue
        found = True
        table = fidelity_table(fidelity_rows(suite, INDUCTOR_CONFIG), title)
        print(f"== {title} ==")
        print(table.split("\n\n")[0] if args.summary else table)
        print()
    if not found:
        parser.error(f"no graph {args.graph!r} in the suites named")


if __name__ == "__main__":
    main()
