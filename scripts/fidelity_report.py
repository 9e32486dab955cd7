"""Print the scheduler-fidelity table: our plans against Inductor's device plans.

    PYTHONPATH=$PWD .venv/bin/python scripts/fidelity_report.py
"""

import sys
from pathlib import Path

root = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(root))
sys.path.insert(0, str(root / "tests"))

from fidelity_graphs import GRAPHS, INDUCTOR_CONFIG  # noqa: E402

import mtia_lab  # noqa: E402,F401
from mtia_lab.compiler.fidelity import fidelity_rows, fidelity_table  # noqa: E402

if __name__ == "__main__":
    print(fidelity_table(fidelity_rows(GRAPHS, INDUCTOR_CONFIG)))
