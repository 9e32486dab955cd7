"""scripts/upstream_tests.py: PyTorch's device-generic test files are instantiated for mtia_sim
only, and torch_openreg's tests are asked of mtia_sim (checked on small files of our own)."""

from __future__ import annotations

import argparse
import importlib.util
import io
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "upstream_tests.py"
spec = importlib.util.spec_from_file_location("upstream_tests", SCRIPT)
upstream = sys.modules["upstream_tests"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(upstream)

DEVICE_GENERIC = '''
import torch
from torch.testing._internal.common_device_type import instantiate_device_type_tests
from torch.testing._internal.common_utils import TestCase


class TestProbe(TestCase):
    def test_runs_on_the_device(self, device):
        self.assertEqual(torch.device(device).type, "mtia_sim")

    def test_fails_on_purpose(self, device):
        self.assertEqual(torch.ones(2, device=device).sum().item(), 3.0)


instantiate_device_type_tests(TestProbe, globals())
'''


def test_openreg_tests_are_asked_of_mtia_sim():
    source = 'import torch_openreg  # noqa\nx = torch.ones(1, device="openreg:1")\n' \
             'torch.openreg.synchronize()\nactivity = ProfilerActivity.OPENREG\n'
    adapted = upstream.adapt_openreg(source)
    assert adapted.splitlines()[0].startswith("import mtia_lab")
    assert 'device="mtia_sim:1"' in adapted and "torch.mtia_sim.synchronize()" in adapted
    assert "ProfilerActivity.MTIA_SIM" in adapted  # the alias PyTorch makes from the name
    assert "openreg" not in adapted.lower()
    # torch_openreg loads itself at `import torch`: a test that never imports it still gets
    # the device (a spawned child process imports the test module, and needs it too)
    compiled = upstream.adapt_openreg(
        '@torch.compile(backend="openreg")\ncounter = CompileCounterWithBackend("openreg")\n'
        'self.assertIn("openreg", backends)\nself.assertIn("openreg", str(x.device))\n')
    assert compiled.splitlines()[1:] == [  # the reference backend's Dynamo backend -> ours
        '@torch.compile(backend="mtia_lab")', 'counter = CompileCounterWithBackend("mtia_lab")',
        'self.assertIn("mtia_lab", backends)', 'self.assertIn("mtia_sim", str(x.device))']
    autoloaded = upstream.adapt_openreg('import torch\nx = torch.ones(1, device="openreg")\n')
    assert autoloaded.splitlines()[0].startswith("import mtia_lab")
    assert autoloaded.count("import mtia_lab") == adapted.count("import mtia_lab") == 1


def test_device_generic_files_run_for_the_device_only(tmp_path):
    checkout = tmp_path / "pytorch"
    (checkout / "test").mkdir(parents=True)
    (checkout / "test" / "test_probe.py").write_text(DEVICE_GENERIC)
    (result,) = upstream.run(checkout, ["test/test_probe.py"], [], timeout=300)
    assert (result.passed, result.failed, result.errors) == (1, 1, 0), result
    missing = upstream.run(checkout, ["test/test_absent.py"], [], timeout=300)
    assert missing[0].note == "not in this checkout"
    text = upstream.report([result, *missing])
    assert "total: 1 of 2 passed (50.0%)" in text
    # every test that did not pass is listed under its reason; unknown ones as "unexplained"
    listed = "1  unexplained\n         test_probe.py::TestProbePRIVATEUSE1::test_fails_on_purpose"
    assert listed in text
    known = {r"test_probe.py::.*::test_fails_on_purpose": "the probe fails on purpose"}
    assert "1  the probe fails on purpose" in upstream.report([result], known)
    assert "unexplained" not in upstream.report([result], known)
    # a failure the CPU shares says nothing of the device: the rate without it is given too
    cpu_too = {r"test_fails_on_purpose": upstream.CPU_TOO.format("the probe")}
    assert "not the device's" in upstream.report([result], cpu_too)
    assert "1 of 1 (100.0%)" in upstream.report([result], cpu_too)


def test_memory_capacity_sizes_are_read_as_bytes():
    assert upstream._bytes("8GiB") == 8 * 2**30 and upstream._bytes("1024") == 1024
    with pytest.raises(argparse.ArgumentTypeError, match="such as 8GiB"):
        upstream._bytes("8 gigs")


def test_a_checkpoint_written_into_a_test_is_renamed_whole():
    """torch_openreg's serialization tests hold torch.save archives as bytes literals whose
    pickles name 'openreg:0': renamed, the archive still loads (string length, zip sizes)."""
    buffer = io.BytesIO()
    torch.save({"where": "openreg:0", "x": torch.arange(3.0)}, buffer)
    archive = buffer.getvalue()
    literal = "\n    ".join(repr(archive[i:i + 60]) for i in range(0, len(archive), 60))
    adapted = upstream.adapt_openreg(f"data = (\n    {literal}\n)\n")
    namespace: dict = {}
    exec(adapted.split("\n", 1)[1], namespace)  # past the `import mtia_lab` line
    loaded = torch.load(io.BytesIO(namespace["data"]), weights_only=True)
    assert loaded["where"] == "mtia_sim:0"
    torch.testing.assert_close(loaded["x"], torch.arange(3.0))
