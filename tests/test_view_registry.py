"""Records stay apart from pictures: the record layers import no renderer, and a record finds
its view through mtia_lab.records.display (so a new view never touches trace/)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch
from rich.console import Console

import mtia_lab
from mtia_lab.records import display as registry
from mtia_lab.trace import Trace
from mtia_lab.viz.display import View
from mtia_lab.viz.trace_summary import TraceSummary

PACKAGE = Path(mtia_lab.__file__).parent
RECORD_LAYERS = ("records", "trace", "inspect", "compiler", "backend")


def _viz_imports(path: Path) -> list[str]:
    """Modules of mtia_lab.viz that `path` imports (at any depth), as written."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and "viz" in node.module.split("."):
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if "mtia_lab.viz" in a.name]
    return found


@pytest.mark.parametrize("layer", RECORD_LAYERS)
def test_record_layers_import_no_renderer(layer):
    wrong = {str(p.relative_to(PACKAGE)): m for p in (PACKAGE / layer).glob("*.py")
             for m in _viz_imports(p)}
    assert not wrong, f"records importing views: {wrong}"


def test_a_trace_shows_the_view_registered_for_it():
    x = torch.randn(3, 3, device="mtia_sim")
    with mtia_lab.trace("t") as t:
        (x @ x).relu()
    expected = TraceSummary(t, times="sim")._repr_mimebundle_()
    assert t._repr_mimebundle_() == expected and t._repr_html_() == expected["text/html"]
    console = Console(width=100, file=None, record=True, color_system=None)
    with console.capture() as captured:
        console.print(t)
    assert captured.get().splitlines()[0].startswith("trace 't': 2 events (native 2), 2 ops")

    class Headline(View):  # a new view, registered from outside trace/
        def __init__(self, trace):
            self.trace = trace

        def to_text(self):
            return f"{len(self.trace)} events"

    saved = registry._VIEWS[Trace, "notebook"]
    try:
        registry.register_view(Trace, "notebook")(Headline)
        assert t._repr_mimebundle_()["text/plain"] == "2 events"
    finally:
        registry._VIEWS[Trace, "notebook"] = saved


def test_registry_errors_name_the_fix():
    with pytest.raises(ValueError, match="purpose 'slides'"):
        registry.register_view(Trace, "slides")
    with pytest.raises(LookupError, match="no terminal view registered for int"):
        registry.view_for(3, "terminal")


def test_export_chrome_trace_as_torch_profiler_spells_it(tmp_path):
    x = torch.randn(3, 3, device="mtia_sim")
    with mtia_lab.trace() as t:
        x.sin()
    t.export_chrome_trace(tmp_path / "a.json")
    mtia_lab.trace.io.save_chrome_trace(t, tmp_path / "b.json")
    assert (tmp_path / "a.json").read_text() == (tmp_path / "b.json").read_text()
    assert callable(getattr(torch.profiler.profile, "export_chrome_trace", None))
