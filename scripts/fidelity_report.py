"""Print the scheduler-fidelity tables: our plans against Inductor's device plans, for the
TUNING suite (tests/fidelity_graphs.py and fidelity_tuning_hf.py: the graphs the rules were
changed against) and the HELD-OUT suite (tests/fidelity_heldout.py: transformers' modules, not
tuned on), each graph audited launch by launch against Inductor's generated wrapper.

    PYTHONPATH=$PWD .venv/bin/python scripts/fidelity_report.py [--summary]

--summary: the per-graph table and totals only, without the list of differences.
"""

import sys
from pathlib import Path

root = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(root))
sys.path.insert(0, str(root / "tests"))

from fidelity_graphs import GRAPHS, INDUCTOR_CONFIG, TUNING  # noqa: E402
from fidelity_heldout import heldout_graphs  # noqa: E402
from fidelity_tuning_hf import tuning_hf_graphs  # noqa: E402

import mtia_lab  # noqa: E402,F401
from mtia_lab.compare.fidelity import fidelity_rows, fidelity_table  # noqa: E402

if __name__ == "__main__":
    summary = "--summary" in sys.argv
    suites = (("TUNING", {**GRAPHS, **TUNING, **tuning_hf_graphs()}),
              ("HELD-OUT", heldout_graphs()))
    for title, suite in suites:
        table = fidelity_table(fidelity_rows(suite, INDUCTOR_CONFIG), title)
        print(f"== {title} ==")
        print(table.split("\n\n")[0] if summary else table)
        print()
