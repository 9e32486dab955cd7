"""`%load_ext mtia_lab` and the %mtia_trace magics, run in an in-process IPython shell.

Each test compares what the magic records with what `mtia_lab.trace()` records for the same
code, and the values it returns with the CPU's.
"""

from __future__ import annotations

import json

import pytest
import torch
from IPython.core.error import UsageError
from IPython.testing import globalipapp
from IPython.utils.capture import capture_output

import mtia_lab
from mtia_lab.backend import KERNELS
from mtia_lab.backend.aten.registry import resolve_overloads
from mtia_lab.trace import Trace, load_trace
from mtia_lab.viz import trace_summary, trace_tree

FORMATS = ["text/plain", "text/html", "image/svg+xml"]


@pytest.fixture(scope="module")
def ip():
    shell = globalipapp.get_ipython()  # looked up now: a second start_ipython gives None
    saved = shell.display_formatter.active_types
    shell.display_formatter.active_types = FORMATS  # the test shell shows only text by default
    shell.run_line_magic("load_ext", "mtia_lab")
    shell.run_cell(
        "import torch, mtia_lab\n"
        "host = torch.arange(12.0).reshape(3, 4) / 10\n"
        "x = host.to('mtia_sim')\n"
    )
    yield shell
    shell.display_formatter.active_types = saved
    # The shell outlives this module: drop the cells' device tensors and compiled graphs, so
    # later tests start from a clean allocator.
    shell.reset(new_session=False)
    torch.compiler.reset()


@pytest.fixture
def no_cumsum_kernel():
    saved = {op: KERNELS.pop(op) for op in resolve_overloads("aten::cumsum") if op in KERNELS}
    yield
    KERNELS.update(saved)


def run(ip, cell: str):
    with capture_output() as captured:
        result = ip.run_cell(cell)
    return result, captured


def test_line_magic_returns_the_value_and_binds_the_trace(ip):
    result, out = run(ip, "%mtia_trace --view none (x * 2).sin().sum()")
    assert result.success
    torch.testing.assert_close(result.result.cpu(), (ip.user_ns["host"] * 2).sin().sum())
    recorded = ip.user_ns["_mtia_trace"]
    with mtia_lab.trace() as direct:
        (ip.user_ns["x"] * 2).sin().sum()
    assert isinstance(recorded, Trace) and [e.op for e in recorded] == [e.op for e in direct]
    assert recorded.metadata["label"] == "%mtia_trace"
    assert out.outputs == []  # --view none shows nothing


def test_user_code_is_not_expanded(ip):
    result, _ = run(ip, '%mtia_trace --view none s = "{x} $x"')
    assert result.success and ip.user_ns["s"] == "{x} $x"


def test_cell_magic_shows_the_view_and_keeps_names(ip):
    cell = ("%%mtia_trace --var t --view tree --no-times\n"
            "y = x + 1\n"
            "z = torch.relu(y - 0.5)\n"
            "z.shape\n")
    result, out = run(ip, cell)
    assert result.success and result.result == torch.Size([3, 4])
    torch.testing.assert_close(ip.user_ns["z"].cpu(), torch.relu(ip.user_ns["host"] + 0.5))
    t = ip.user_ns["t"]
    assert [e.op for e in t] == ["aten::add.Tensor", "aten::sub.Tensor", "aten::relu"]
    (shown,) = out.outputs
    assert shown.data["text/plain"] == trace_tree(t, times="sim").to_text()
    assert "<pre" in shown.data["text/html"]
    # events name the cell's own lines as their source
    assert [e.source.rsplit(":", 1)[1] for e in t] == ["1", "2", "2"]


@pytest.mark.parametrize("cell", [
    "%%mtia_trace --view none --var credited\ny = x + 1\nz = torch.relu(y)\n",
    "%mtia_trace --view none --var credited z = torch.relu(x + 1)",
    "with mtia_lab.trace() as credited:\n    y = x + 1\n    z = torch.relu(y)\n",
], ids=["cell magic", "line magic", "plain cell"])
def test_events_credit_the_cell_that_ran(ip, cell):
    """Stored in the history, as ipykernel runs every cell (JupyterLab, nbval): IPython counts
    the cell before running it, and the events must still name this cell, not the next."""
    from mtia_lab.source import short_source

    with capture_output():
        result = ip.run_cell(cell, store_history=True)
    assert result.success
    sources = {short_source(e.source) for e in ip.user_ns["credited"]}
    assert sources and {s.split(",")[0] for s in sources} == {f"In [{result.execution_count}]"}


def test_default_view_is_the_summary(ip):
    result, out = run(ip, "%mtia_trace --no-times x.sum()")
    (shown,) = out.outputs
    assert shown.data["text/plain"] == \
        trace_summary(ip.user_ns["_mtia_trace"], times="sim").to_text()


def test_graph_view_gives_svg(ip):
    result, out = run(ip, "%mtia_trace --view graph x.t() @ x")
    (shown,) = out.outputs
    assert shown.data["image/svg+xml"].lstrip().startswith(("<?xml", "<svg", "<!DOCTYPE"))
    assert shown.data["text/html"].startswith("<img src=\"data:image/svg+xml;base64,")


def test_explorer_view_is_a_widget_with_a_static_page(ip):
    result, out = run(ip, "%mtia_trace --view explorer x.sum();")  # `;` silences the value
    assert result.success and result.result is None
    (shown,) = out.outputs
    assert "application/vnd.jupyter.widget-view+json" in shown.data
    assert "<table" in shown.data["text/html"] and "sum" in shown.data["text/html"]


def test_save_and_chrome_files(ip, tmp_path):
    saved, chrome = tmp_path / "t.json", tmp_path / "t.chrome.json"
    result, _ = run(ip, f"%mtia_trace --view none --save {saved} --chrome {chrome} x * x")
    assert result.success
    loaded = load_trace(saved)
    assert loaded.events == ip.user_ns["_mtia_trace"].events
    events = json.loads(chrome.read_text())["traceEvents"]
    host = [ev["name"] for ev in events if ev["ph"] == "X" and ev["pid"] == 0]
    assert host == ["aten::mul.Tensor"]


def test_an_error_shows_the_user_traceback_and_what_was_recorded(ip):
    cell = "%%mtia_trace --var failed --view none\ny = x + 1\nw = torch.mm(y, x)\n"
    result, out = run(ip, cell)
    assert isinstance(result.error_in_exec, RuntimeError)
    t = ip.user_ns["failed"]
    assert [e.op for e in t] == ["aten::add.Tensor", "aten::mm"]
    assert t[1].reason.startswith("raised RuntimeError") and "error" in t.metadata
    assert "2 events were recorded up to the failure; the op that raised: #1 aten::mm" in out.stdout
    assert "The trace is in `failed`" in out.stdout
    # the traceback points at the user's line, without the dispatcher's frames
    assert "w = torch.mm(y, x)" in out.stdout and "cannot be multiplied" in out.stdout
    assert "dispatch.py" not in out.stdout and "recorder.py" not in out.stdout
    result, out = run(ip, "%%mtia_trace --view none --full-traceback\nw = torch.mm(x, x)\n")
    assert "dispatch.py" in out.stdout


def test_strict_mode_raises_on_a_fallback(ip, no_cumsum_kernel):
    result, out = run(ip, "%mtia_trace --strict --view none torch.cumsum(x, 0)")
    assert isinstance(result.error_in_exec, mtia_lab.StrictModeError)
    assert ip.user_ns["_mtia_trace"].metadata["error"].startswith("StrictModeError")
    assert not mtia_lab.backend.RUNTIME.strict  # strict mode ends with the magic
    result, _ = run(ip, "%mtia_trace --view none torch.cumsum(x, 0)")
    assert result.success and [e.kind for e in ip.user_ns["_mtia_trace"]] == ["fallback"]


def test_usage_errors_name_the_problem(ip):
    magic = ip.find_cell_magic("mtia_trace")
    with pytest.raises(UsageError, match="not a Python name"):
        magic("--var 1t", "x + 1")
    with pytest.raises(UsageError, match="code from the cell"):
        magic("x + 1", "y = 2")
    with pytest.raises(UsageError, match="nothing to trace"):
        ip.find_line_magic("mtia_trace")("--view none")
    with pytest.raises(UsageError, match="invalid choice"):
        ip.find_line_magic("mtia_trace")("--view pie x + 1")


def test_compile_runs_the_cell_compiled_and_keeps_its_names(ip):
    ip.run_cell(
        "torch.manual_seed(0)\n"
        "model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU())\n"
        "dev_model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU()).to('mtia_sim')\n"
        "dev_model.load_state_dict({k: v.to('mtia_sim') for k, v in model.state_dict().items()})\n"
    )
    cell = "%%mtia_trace --compile --var ct --view none\nh = dev_model(x)\n(h * 2).sum()\n"
    result, out = run(ip, cell)
    assert result.success, result.error_in_exec
    expected = ip.user_ns["model"](ip.user_ns["host"])
    torch.testing.assert_close(ip.user_ns["h"].cpu(), expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(result.result.cpu(), (expected * 2).sum(), rtol=1e-5, atol=1e-5)
    kernels = ip.user_ns["ct"].filter(kind="compiled").events
    assert kernels and all(k.sim_end_us >= k.sim_start_us for k in kernels)
    assert all(k.op.split(".")[-1].startswith("kernel_") for k in kernels)


def test_an_unknown_option_is_a_usage_error_not_a_syntax_error(ip):
    result, _ = run(ip, "%mtia_trace --veiw tree (x * 2).sum()")
    error = result.error_in_exec
    assert isinstance(error, UsageError)
    assert "unknown option --veiw (did you mean --view?)" in str(error)
    assert "--no-times" in str(error)
    result, _ = run(ip, "%mtia_trace --colour=red x.sum()")
    assert isinstance(result.error_in_exec, UsageError) and "--colour" in str(result.error_in_exec)
    result, _ = run(ip, "%mtia_trace -q x.sum()")  # not Python either: an option
    assert isinstance(result.error_in_exec, UsageError)
    result, _ = run(ip, "%mtia_trace --view none -x")  # code that starts with a minus
    assert result.success
    torch.testing.assert_close(result.result.cpu(), -ip.user_ns["host"])


def test_code_that_never_touches_the_device_says_so(ip):
    result, out = run(ip, "%mtia_trace --no-times host + 1")
    assert result.success and len(ip.user_ns["_mtia_trace"]) == 0
    shown = out.outputs[0].data["text/plain"]
    assert shown.startswith("trace '%mtia_trace': no op reached the mtia_sim device")
    assert ".to(\"mtia_sim\")" in shown and "events" not in shown
