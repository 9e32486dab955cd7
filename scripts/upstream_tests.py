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

  Its Dynamo backend (`backend="openreg"`) is asked of this device's (`backend="mtia_lab"`).

Each file's passed / failed / errors / skipped come from pytest's JUnit report; the total
line counts a test as passing only when it passed (skips are left out of the rate). Then every
test that did not pass is listed with its reason from KNOWN_FAILURES (a PyTorch 2.13.0 / file
version mismatch that fails on the CPU too, a documented limit of a Python-registered device,
or a feature of torch_openreg's own), or as "unexplained": a new failure to look at.

`--memory-capacity 8GiB` gives each simulated device that much memory (MTIA_SIM_MEMORY_CAPACITY;
the default is 2 GiB, like a small GPU): test_indexing's large-tensor test needs about 6 GiB.
"""

from __future__ import annotations

import argparse
import ast
import io
import os
import pickletools
import re
import struct
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
import zipfile
from dataclasses import dataclass, field
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
    not_passed: list[str] = field(default_factory=list)  # "Class::test" of failures and errors

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
    source = _rename_in_saved_archives(source)
    source = _DYNAMO_BACKEND.sub(_to_mtia_lab_backend, source)
    source = "import mtia_lab  # noqa: F401\n" + source
    return (source.replace("openreg", "mtia_sim").replace("OPENREG", "MTIA_SIM")
            .replace("OpenReg", "mtia_sim"))  # in messages: "Cannot re-initialize OpenReg ..."


def _rename_in_saved_archives(source: str) -> str:
    """Checkpoints written into a test as bytes literals (a torch.save zip archive) name the
    device in their pickle ('openreg:0'). Renaming that text would break the archive: the
    pickled string's length prefix, then the zip's sizes, CRCs and offsets. Each such literal
    is rebuilt instead: the strings renamed with their lengths, the archive written anew."""
    if "PK\\x03\\x04" not in source:  # no archive written into this file
        return source
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, bytes)
                and node.value.startswith(b"PK\x03\x04") and b"openreg" in node.value):
            continue
        literal = ast.get_source_segment(source, node)
        archive = _renamed_archive(node.value)
        lines = [repr(archive[i:i + 48]) for i in range(0, len(archive), 48)]
        source = source.replace(literal, "\n".join(lines), 1)
    return source


def _renamed_archive(archive: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(archive)) as old, \
            zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as new:
        for info in old.infolist():
            data = old.read(info)
            new.writestr(info.filename, _renamed_pickle(data) if info.filename.endswith(
                ".pkl") else data)
    return out.getvalue()


def _renamed_pickle(data: bytes) -> bytes:
    """`openreg` renamed in every unicode string of a pickle, length prefixes rewritten.
    Protocols 2 and 3 only (torch.save's): a framed pickle (protocol 4+) is left as it is."""
    ops = list(pickletools.genops(data))
    if any(op.name == "FRAME" for op, _, _ in ops):
        return data
    pieces, start = [], 0
    for (op, arg, pos), (_, _, end) in zip(ops, [*ops[1:], (None, None, len(data))],
                                           strict=True):
        if op.name in ("BINUNICODE", "SHORT_BINUNICODE") and "openreg" in arg:
            text = arg.replace("openreg", "mtia_sim").encode()
            size = struct.pack("<I", len(text)) if op.name == "BINUNICODE" else bytes(
                [len(text)])
            pieces += [data[start:pos], op.code.encode("latin-1"), size, text]
            start = end
    return b"".join(pieces) + data[start:]


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
            result.not_passed.append(_test_id(case))
        elif "failure" in outcome:
            result.failed += 1
            result.not_passed.append(_test_id(case))
        else:
            result.passed += 1


def _test_id(case: ET.Element) -> str:
    return f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name', '')}"


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


CPU_TOO = ("fails on the CPU too with torch 2.13.0: the file's expectation is another PyTorch "
           "version's ({})")
BACKEND_META = ("backend metadata (BackendMeta) is a C++ registration a Python backend cannot "
                "make (README, Known limits)")
OPENREG_OWN = "a feature of torch_openreg's own, not of PyTorch's device API ({})"
OPENREG_OPS = "tests torch_openreg's own C++ operators (torch.ops.openreg.*), not PyTorch's"

# test-id pattern (re.search on "file::Class::test") -> why it does not pass.
KNOWN_FAILURES: dict[str, str] = {
    r"test_shape_ops.py::.*::test_rot90_": CPU_TOO.format("IndexError, not RuntimeError"),
    r"test_type_promotion.py::.*::test_promote_types_": CPU_TOO.format(
        "float8 promotion is refused by 2.13"),
    r"test_type_promotion.py::.*::test_cat_out_different_dtypes_": CPU_TOO.format(
        "cat raises TypeError, not RuntimeError"),
    r"test_ops.py::TestFactory::test_empty$": CPU_TOO.format("empty(names=, device=) refused"),
    r"test_autocast.py::.*autocast_error_message": CPU_TOO.format(
        "2.13's warning does not name the dtype"),
    r"test_opinfo.py::": CPU_TOO.format(
        "imports `skip` from common_methods_invocations, absent from 2.13: collection error"),
    r"test_device.py::TestDevice::test_device_properties$": CPU_TOO.format(
        "torch.accelerator.get_memory_info returns a tuple, the test wants a dict"),
    r"test_indexing.py::.*::test_index_put_accumulate_large_tensor_": (
        "needs about 6 GiB of device memory; a simulated device has 2 GiB by default (passes "
        "with --memory-capacity 8GiB)"),
    r"test_storage.py::TestSerialization::test_(serialization|copy_backend_meta|"
    r"serialization_metadata_preservation|fake_tensor_metadata_preservation\w*)$": BACKEND_META,
    r"test_compile.py::TestFakeTensor::test_backend_metadata_propagation$": BACKEND_META,
    r"test_storage.py::TestSerialization::test_serialization_storage_location_tag$": (
        "torch.UntypedStorage(n, device=...) needs a C++ allocator; refused clearly (README)"),
    r"test_storage.py::TestSerialization::test_open_device_cpu_serialization$": (
        "fakes a backend without storage (_has_storage patched) and wants skip_data refused; "
        "mtia_sim saves storages as CUDA does, so torch.save under skip_data works as on CUDA"),
    r"test_ops.py::.*(custom_(autograd_fn|abs)|compile_autograd_function)": OPENREG_OPS,
    r"test_autocast.py::.*autocast_float32_supported": OPENREG_OWN.format(
        "its autocast list runs dot in float32; CUDA's, which mtia_sim follows, leaves dot "
        "alone"),
    r"test_rng.py::TestRNG::test_offset_unsupported$": OPENREG_OWN.format(
        "torch.openreg.set_offset / get_offset"),
    r"test_memory.py::TestDeviceAllocator::test_tensor_shallow_copy$": OPENREG_OWN.format(
        "its tensors are shallow-copy compatible with CPU tensors (host memory); CUDA's and "
        "mtia_sim's are not"),
    r"test_rng.py::TestRNG::test_(generator|create_generator_and_seed)$": (
        "torch.Generator(device=...) needs the C++ PrivateUse1 hooks (getNewGenerator); use "
        "torch.mtia_sim.manual_seed (README, Known limits)"),
    r"test_autograd.py::TestAutograd::test_autograd_init$": (
        "PyTorch 2.13's Python device guard reports one device, so autograd starts one device "
        "thread (README, Known limits)"),
    r"test_utils.py::TestDLPack::": (
        "DLPack export of a device tensor is refused clearly: a capsule cannot describe memory "
        "behind a Python wrapper (README, Known limits)"),
    r"test_rnn.py::TestLSTM::test_lstm_cpu_parity$": (
        "Module.to() swaps the parameters of a tensor-subclass device; PyTorch refuses the swap "
        "while the CPU forward's autograd graph still holds them (CUDA sets .data instead)"),
    r"test_event.py::TestEvent::test_event_elapsed_time$": (
        "two events with no device work between them are 0 ms apart on the simulated clock; "
        "the test wants more than 0 (README, Known limits)"),
}


def not_a_device_question(reason: str) -> bool:
    """Failures that say nothing of the device: the CPU fails them too with this PyTorch, or
    they test torch_openreg's own operators. The report gives the rate without them as well."""
    return reason.startswith(CPU_TOO.split("(")[0]) or reason == OPENREG_OPS


def reason_for(test_id: str, known: dict[str, str] = KNOWN_FAILURES) -> str:
    return next((why for pattern, why in known.items() if re.search(pattern, test_id)),
                "unexplained")


def report(results: list[FileResult], known: dict[str, str] = KNOWN_FAILURES) -> str:
    lines = [f"{'file':<60} {'passed':>7} {'failed':>7} {'errors':>7} {'skipped':>8}"]
    for r in results:
        lines.append(f"{r.path:<60} {r.passed:>7} {r.failed:>7} {r.errors:>7} {r.skipped:>8}"
                     + (f"  ({r.note})" if r.note else ""))
    passed = sum(r.passed for r in results)
    ran = sum(r.ran for r in results)
    rate = f"{100 * passed / ran:.1f}%" if ran else "-"
    lines.append(f"total: {passed} of {ran} passed ({rate}); "
                 f"{sum(r.skipped for r in results)} skipped")
    elsewhere = sum(not_a_device_question(reason_for(f"{Path(r.path).name}::{t}", known))
                    for r in results for t in r.not_passed)
    if elsewhere and ran > elsewhere:
        lines.append(f"without the {elsewhere} that are not the device's (they fail on the CPU "
                     f"too, or test torch_openreg's own operators): {passed} of "
                     f"{ran - elsewhere} ({100 * passed / (ran - elsewhere):.1f}%)")
    return "\n".join(lines + _why_not_passed(results, known))


def _why_not_passed(results: list[FileResult], known: dict[str, str]) -> list[str]:
    """Each test that failed or errored, grouped under its reason, with counts."""
    by_reason: dict[str, list[str]] = {}
    for result in results:
        for test in result.not_passed:
            test_id = f"{Path(result.path).name}::{test}"
            by_reason.setdefault(reason_for(test_id, known), []).append(test_id)
    if not by_reason:
        return []
    lines = ["", "not passed, by reason:"]
    for reason, tests in sorted(by_reason.items(), key=lambda item: item[0] != "unexplained"):
        lines.append(f"  {len(tests):>3}  {reason}")
        lines.extend(f"         {test}" for test in tests)
    return lines


def _bytes(text: str) -> int:
    """'8GiB', '512MiB' or a number of bytes."""
    match = re.fullmatch(r"\s*(\d+)\s*(GiB|MiB|KiB|)\s*", text)
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r}: give bytes or a size such as 8GiB, 512MiB")
    return int(match.group(1)) * {"GiB": 2**30, "MiB": 2**20, "KiB": 2**10, "": 1}[match.group(2)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pytorch-src", default=os.environ.get("PYTORCH_SRC"),
                        help="a PyTorch source checkout (v2.13.0); or set PYTORCH_SRC")
    parser.add_argument("--files", nargs="*", help="paths inside the checkout (default: the "
                        "device-generic files and every torch_openreg test)")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per file")
    parser.add_argument("--memory-capacity", type=_bytes, help="memory of each simulated "
                        "device, e.g. 8GiB (default: the device's, 2 GiB)")
    parser.add_argument("pytest_args", nargs="*", help="passed to pytest (after --)")
    args = parser.parse_args(argv)
    if not args.pytorch_src:
        parser.error("give --pytorch-src DIR (a PyTorch checkout at v2.13.0) or set PYTORCH_SRC")
    source = Path(args.pytorch_src).expanduser()
    if not source.is_dir():
        parser.error(f"--pytorch-src {source}: no such folder")
    files = args.files or [*DEVICE_GENERIC, *openreg_files(source)]
    if args.memory_capacity:  # read by each test process's mtia_lab at import
        os.environ["MTIA_SIM_MEMORY_CAPACITY"] = str(args.memory_capacity)
    print(report(run(source, files, args.pytest_args,
                     args.timeout)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
