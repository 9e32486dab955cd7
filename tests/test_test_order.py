"""The test run's own set-up: the longest files start first on `make test`'s two workers.

CI's time is the longer worker's: a file of minutes handed out last runs alone at the end.
pytest-xdist 3.8 re-sorts files by their number of tests unless told not to, which put the
fidelity suites (few tests, the longest file) last, to run alone at the end."""

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _longest_first() -> tuple[str, ...]:
    # tests/conftest.py by its path: `import conftest` finds whichever conftest module pytest
    # loaded first (tests/browser/ has one too)
    spec = importlib.util.spec_from_file_location("tests_conftest", ROOT / "tests" / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.LONGEST_FIRST


def _xdist_args() -> list[str]:
    makefile = (ROOT / "Makefile").read_text()
    match = re.search(r"^XDIST_ARGS \?=(.*)$", makefile, re.MULTILINE)
    assert match, "the Makefile no longer sets XDIST_ARGS"
    return match.group(1).split()


def test_the_workers_take_files_in_collection_order():
    args = _xdist_args()
    assert "loadfile" in args, args
    assert "--no-loadscope-reorder" in args, (
        "without it pytest-xdist re-sorts files by test count and LONGEST_FIRST is ignored")


def test_every_file_named_longest_first_is_a_test_file_here():
    files = {path.name for path in (ROOT / "tests").rglob("test_*.py")}
    missing = [name for name in _longest_first() if name not in files]
    assert not missing, f"renamed or removed: {missing}; update tests/conftest.py"
