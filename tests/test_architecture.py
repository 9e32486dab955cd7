"""The house plan of ARCHITECTURE.md, checked from the package's own imports.

scripts/import_graph.py draws the graph; these tests fail when a change adds an import circle,
an import up the floors, an import between the two compilers, or a private PyTorch/Triton API
outside the compat modules, and say which.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Circles kept on purpose, each with its reason: frozenset of modules -> why. Lazy imports that
# close no circle need no entry (they are commented where they stand). Empty today: every
# circle the lazy imports made is gone. An entry whose circle no longer exists fails the test,
# so the list stays true.
ALLOWED_CIRCLES: dict[frozenset[str], str] = {}


@pytest.fixture(scope="module")
def graph():
    spec = importlib.util.spec_from_file_location("import_graph", ROOT / "scripts/import_graph.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["import_graph"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def package(graph):
    return graph.load()


def test_no_import_circle_but_the_allowed_ones(graph, package):
    modules, edges = package
    found = {frozenset(c) for c in graph.circles(modules, edges)}
    new = [sorted(c) for c in found - ALLOWED_CIRCLES.keys()]
    assert new == [], "import circles (eager or lazy imports) not in ALLOWED_CIRCLES:\n" + \
        "\n".join(" <-> ".join(c) for c in new)
    gone = [f"{sorted(c)}: {why}" for c, why in ALLOWED_CIRCLES.items() if c not in found]
    assert gone == [], "allowed circles that no longer exist (drop them):\n" + "\n".join(gone)


def test_every_import_points_down_the_floors(graph, package):
    _, edges = package
    up = [f"{e.source} -> {e.target} (line {e.line})" for e in graph.upward(edges)]
    assert up == [], "imports up the floors of ARCHITECTURE.md:\n" + "\n".join(up)


def _subpackage(module: str) -> str:
    """'mtia_lab.inductor.entry' -> 'inductor'; the top package -> ''."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_the_two_compilers_do_not_import_each_other(package):
    _, edges = package
    between = [f"{e.source} -> {e.target} (line {e.line})" for e in edges
               if {_subpackage(e.source), _subpackage(e.target)} == {"compiler", "inductor"}]
    assert between == [], "imports between compiler/ and inductor/:\n" + "\n".join(between)


def test_private_apis_only_in_compat(graph):
    uses = [f"{m}:{line}: {text}" for m, line, text in graph.private_uses()]
    assert uses == [], "private PyTorch/Triton APIs outside the compat modules:\n" + "\n".join(uses)


def test_the_graph_sees_a_circle_when_there_is_one(graph):
    """The checker itself can fail: two modules importing each other make one circle."""
    edges = [graph.Edge("a", "b", False, 1), graph.Edge("b", "a", True, 1)]
    assert graph.circles({"a", "b", "c"}, edges) == [["a", "b"]]


def test_the_graph_reads_lazy_and_type_checking_imports(graph, tmp_path, monkeypatch):
    """From source: an import inside a function is a lazy edge (it closes a circle); one under
    `if TYPE_CHECKING:` never runs and is no edge."""
    pkg = tmp_path / graph.PACKAGE
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import c\nfrom .b import f\n")
    (pkg / "b.py").write_text("def f():\n    from . import a\n    return a\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\n\n"
                              "if TYPE_CHECKING:\n    from .a import f\n")
    monkeypatch.setattr(graph, "ROOT", tmp_path)
    modules, edges = graph.load()
    name = graph.PACKAGE
    assert graph.Edge(f"{name}.b", f"{name}.a", True, 2) in edges
    assert not [e for e in edges if e.source == f"{name}.c"]
    assert graph.circles(modules, edges) == [[f"{name}.a", f"{name}.b"]]
