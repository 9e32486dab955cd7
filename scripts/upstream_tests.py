"""PyTorch's own device tests on mtia_sim: the device-generic test files and the reference
backend's (torch_openreg's) tests, adapted to this device.

These files are PyTorch's, not ours, so they are not in this repository: point the script at a
PyTorch source checkout of the pinned release (v2.13.0) with `--pytorch-src DIR` (or the
PYTORCH_SRC environment variable). Files missing from the checkout are reported and skipped.

    python scripts/upstream_tests.py --pytorch-src ~/src/pytorch
    python scripts/upstream_tests.py --pytorch-src ~/src/pytorch --files test/test_view_ops.py

How each kind is run:
- A device-generic file (`instantiate_device_type_tests`) runs in a process that imports
  mtia_lab before PyTorch's test harness, with PYTORCH_TESTING_DEVICE_ONLY_FOR=mtia_sim: its
  tests are instantiated for the PrivateUse1 device only (`...MTIA_SIMTests`, PyTorch's naming).
- A torch_openreg test is copied to a scratch folder with `openreg` renamed `mtia_sim` and
  `import torch_openreg` replaced by `import mtia_lab` (the reference backend's own tests, asking
  the same of this device), then run the same way.

Each file's passed / failed / errors / skipped come from pytest's JUnit report; the total
line counts a test as passing only when it passed (skips are left out of the rate).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

DEVICE_GENERIC = (
    "test/test_view_ops.py",
    "test/test_shape_ops.py",
    "test/test_type_promotion.py",
    "test/test_indexing.py",
)
OPENREG_DIR = "test/cpp_extensions/open_registration_extension/torch_openreg/tests"
# What a test process runs: the device first, then pytest on the file.
_RUNNER = "import sys, mtia_lab, pytest; sys.exit(pytest.main(sys.argv[1:]))"


@dataclass
class FileResult:
    path: str
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    note: str = ""

    @property
    def ran(self) -> int:
        return self.passed + self.failed + self.errors


# torch_openreg's Dynamo backend is named after its device (`backend="openreg"`); this
# device's own Dynamo backend is `backend="mtia_lab"` (compare/engine.py).
_DYNAMO_BACKEND = re.compile(r'(backend=|CompileCounterWithBackend\(|assertIn\()"openreg"'
                             r'(\)|, backends\))?')


def adapt_openreg(source: str) -> str:
    """torch_openreg's test, asking its questions of mtia_sim. torch_openreg is loaded by
    `import torch` itself (its `torch.backends` entry point), so some of its tests never import
    it: the adapted test imports mtia_lab first, which a spawned child process needs too. Its
    Dynamo backend becomes this device's (`_DYNAMO_BACKEND`)."""
    source = re.sub(r"^import torch_openreg\b.*$", "", source, flags=re.M)
    source = _DYNAMO_BACKEND.sub(_to_mtia_lab_backend, source)
    source = "import mtia_lab  # noqa: F401\n" + source
    return source.replace("openreg", "mtia_sim").replace("OPENREG", "MTIA_SIM")


def _to_mtia_lab_backend(match: re.Match) -> str:
    prefix, suffix = match.group(1), match.group(2) or ""
    if prefix == "assertIn(" and suffix != ", backends)":
        return match.group(0)  # some other assertIn("openreg", ...): the device name
    return f'{prefix}"mtia_lab"{suffix}'


def _junit_counts(report: Path, result: FileResult) -> None:
    for case in ET.parse(report).getroot().iter("testcase"):
        outcome = {child.tag for child in case}
        if "skipped" in outcome:
            result.skipped += 1
        elif "error" in outcome:
            result.errors += 1
        elif "failure" in outcome:
            result.failed += 1
        else:
            result.passed += 1


REPO_ROOT = Path(__file__).resolve().parent.parent


def run_file(path: Path, cwd: Path, label: str, extra: list[str], timeout: int) -> FileResult:
    result = FileResult(label)
    # This checkout's mtia_lab, not whichever one the environment has installed.
    python_path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, PYTORCH_TESTING_DEVICE_ONLY_FOR="mtia_sim", PYTHONPATH=python_path)
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.xml"
        command = [sys.executable, "-c", _RUNNER, str(path), "-q", "-p", "no:cacheprovider",
                   f"--junitxml={report}", *extra]
        try:
            done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            result.note = f"timed out after {timeout} s"
            return result
        if report.exists():
            _junit_counts(report, result)
        if not result.ran and not result.skipped:
            result.note = (done.stdout + done.stderr).strip().splitlines()[-1:] or ["no tests"]
            result.note = result.note[0][:120]
    return result


def run(source: Path, files: list[str], extra: list[str], timeout: int) -> list[FileResult]:
    results = []
    for name in files:
        path = source / name
        if not path.exists():
            results.append(FileResult(name, note="not in this checkout"))
            continue
        if OPENREG_DIR in name:
            with tempfile.TemporaryDirectory() as scratch:
                adapted = Path(scratch) / path.name
                adapted.write_text(adapt_openreg(path.read_text()))
                results.append(run_file(adapted, REPO_ROOT, name, extra, timeout))
        else:
            results.append(run_file(path, path.parent, name, extra, timeout))
    return results


def openreg_files(source: Path) -> list[str]:
    folder = source / OPENREG_DIR
    if not folder.is_dir():
        return []
    return sorted(f"{OPENREG_DIR}/{p.name}" for p in folder.glob("test_*.py"))


def report(results: list[FileResult]) -> str:
    lines = [f"{'file':<60} {'passed':>7} {'failed':>7} {'errors':>7} {'skipped':>8}"]
    for r in results:
        lines.append(f"{r.path:<60} {r.passed:>7} {r.failed:>7} {r.errors:>7} {r.skipped:>8}"
                     + (f"  ({r.note})" if r.note else ""))
    passed = sum(r.passed for r in results)
    ran = sum(r.ran for r in results)
    rate = f"{100 * passed / ran:.1f}%" if ran else "-"
    lines.append(f"total: {passed} of {ran} passed ({rate}); "
                 f"{sum(r.skipped for r in results)} skipped")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pytorch-src", default=os.environ.get("PYTORCH_SRC"),
                        help="a PyTorch source checkout (v2.13.0); or set PYTORCH_SRC")
    parser.add_argument("--files", nargs="*", help="paths inside the checkout (default: the "
                        "device-generic files and every torch_openreg test)")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per file")
    parser.add_argument("pytest_args", nargs="*", help="passed to pytest (after --)")
    args = parser.parse_args(argv)
    if not args.pytorch_src:
        parser.error("give --pytorch-src DIR (a PyTorch checkout at v2.13.0) or set PYTORCH_SRC")
    source = Path(args.pytorch_src).expanduser()
    if not source.is_dir():
        parser.error(f"--pytorch-src {source}: no such folder")
    files = args.files or [*DEVICE_GENERIC, *openreg_files(source)]
    print(report(run(source, files, args.pytest_args,
                     args.timeout)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
