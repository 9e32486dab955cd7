"""The package's import graph, drawn from the code: circles, arrows up the floors, private APIs.

    python scripts/import_graph.py            # summary: circles, upward arrows, private-API count
    python scripts/import_graph.py --edges    # every edge, eager and lazy
    python scripts/import_graph.py --json     # the same figures as JSON (tests read this)

An edge is "eager" when the import runs at module level (it is executed by importing the file)
and "lazy" when it sits inside a function (a hook that runs later). A circle is a strongly
connected set of modules; eager circles fail at import time in some orders, lazy ones hide a
dependency that the file's header does not show. Floors are the layers of ARCHITECTURE.md:
a module may import from its own floor or below; an import from a higher floor is an arrow up.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "mtia_lab"

# Floor of each module, by the longest matching prefix (bottom = 0). Kept in step with
# ARCHITECTURE.md's "Floors" section.
FLOORS: dict[str, int] = {
    # 0 base: private-API shims, progress bars, where a line of user code is
    "mtia_lab._compat": 0,
    "mtia_lab._after_import": 0,  # a generic import hook: imports nothing of mtia_lab
    "mtia_lab._version": 0,
    "mtia_lab.progress": 0,
    "mtia_lab.source": 0,
    # 1 the device
    "mtia_lab.backend": 1,
    # 2 records everyone writes and every view reads
    "mtia_lab.records": 2,
    "mtia_lab.trace": 2,
    # 3 the two compilers (siblings), the ranks, the clock's calibration
    "mtia_lab.compiler": 3,
    "mtia_lab.inductor": 3,
    "mtia_lab.distributed": 3,
    "mtia_lab.calibration": 3,
    # 4 what stands on both compilers: the engine switch and the comparison; instruments
    "mtia_lab.compare": 4,
    "mtia_lab.instruments": 4,
    "mtia_lab.inspect": 4,
    # 5 views and entry points
    "mtia_lab.testing": 5,
    "mtia_lab.viz": 5,
    "mtia_lab.magics": 5,
    "mtia_lab.tour": 5,
    "mtia_lab.static_outputs": 5,
    "mtia_lab.distributed._worker": 5,  # a rank process's entry point (`python -m`), as __main__
    "mtia_lab.__main__": 5,
    "mtia_lab": 5,
}

# Files allowed to name private PyTorch / Triton APIs.
COMPAT_MODULES = {"mtia_lab._compat", "mtia_lab.inductor._compat", "mtia_lab.instruments._compat"}
# A private name: one leading underscore (dunders such as `__version__` are public) anywhere in a
# dotted path from `torch` or `triton` (`torch._C`, `torch.utils._pytree`, `torch.distributed._x`,
# `torch.Tensor._make_wrapper_subclass`), or one of Triton's internal packages. Operator names
# (`torch.ops.aten._to_copy`) are the dispatcher's public registry, not Python APIs.
_ROOTS = ("torch", "triton")
_TRITON_INTERNAL = {"runtime", "backends", "compiler"}


def _private_path(parts: list[str]) -> bool:
    if not parts or parts[0] not in _ROOTS or parts[:2] == ["torch", "ops"]:
        return False
    if parts[0] == "triton" and len(parts) > 1 and parts[1] in _TRITON_INTERNAL:
        return True
    return any(p.startswith("_") and not p.startswith("__") for p in parts[1:])


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    lazy: bool
    line: int


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def floor_of(module: str) -> int:
    best = max((p for p in FLOORS if module == p or module.startswith(p + ".")), key=len)
    return FLOORS[best]


def _resolve(module: str, is_package: bool, level: int, name: str | None) -> str:
    if level == 0:
        return name or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def _lazy_lines(tree: ast.AST) -> set[int]:
    """Line numbers of imports inside functions (run later, not on import)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(node):
                if isinstance(inner, (ast.Import, ast.ImportFrom)):
                    lines.add(inner.lineno)
    return lines


def edges_of(path: Path, modules: set[str]) -> list[Edge]:
    module = module_name(path)
    tree = ast.parse(path.read_text(), filename=str(path))
    lazy = _lazy_lines(tree)
    found: list[Edge] = []

    def add(target: str, line: int) -> None:
        while target and target not in modules:  # `from .x import name`: name is no module
            target = target.rpartition(".")[0]
        if target and target != module:
            found.append(Edge(module, target, line in lazy, line))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PACKAGE):
                    add(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, path.name == "__init__.py", node.level, node.module)
            if not base.startswith(PACKAGE):
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                add(sub if sub in modules else base, node.lineno)
    return found


def load() -> tuple[set[str], list[Edge]]:
    paths = sorted((ROOT / PACKAGE).rglob("*.py"))
    modules = {module_name(p) for p in paths}
    edges = list(dict.fromkeys(e for p in paths for e in edges_of(p, modules)))
    return modules, edges


def circles(modules: set[str], edges: list[Edge]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for e in edges:
        graph[e.source].add(e.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found, key=len, reverse=True)


def upward(edges: list[Edge]) -> list[Edge]:
    return [e for e in edges if floor_of(e.target) > floor_of(e.source)]


def _dotted(node: ast.AST) -> list[str]:
    """`torch._C.DispatchKey` -> ["torch", "_C", "DispatchKey"]; [] for anything but a name path."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return [node.id, *reversed(parts)] if isinstance(node, ast.Name) else []


def _docstring_lines(tree: ast.AST) -> set[int]:
    """Lines of string statements (docstrings, notes): prose, not code."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str):
            lines.update(range(node.lineno, node.end_lineno + 1))
    return lines


def _private_lines(tree: ast.AST) -> set[int]:
    """Lines of code naming a private torch/Triton API: an import, an attribute path from
    `torch`/`triton`, or a string that is a private module's dotted name (`"torch._dynamo"`,
    as passed to an import hook). Prose (docstrings, messages) is not counted."""
    prose = _docstring_lines(tree)
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            hit = any(_private_path(a.name.split(".")) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = (node.module or "").split(".") if node.level == 0 else []
            hit = _private_path(base) or any(_private_path([*base, a.name]) for a in node.names)
        elif isinstance(node, ast.Attribute) and not isinstance(getattr(node, "parent", None),
                                                                  ast.Attribute):
            hit = _private_path(_dotted(node))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            hit = (node.lineno not in prose and re.fullmatch(r"[A-Za-z_][\w.]*", node.value)
                   is not None and _private_path(node.value.split(".")))
        else:
            continue
        if hit:
            lines.add(node.lineno)
    return lines


def private_uses() -> list[tuple[str, int, str]]:
    """(module, line, text) of each line naming a private API outside the compat modules."""
    uses = []
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        module = module_name(path)
        if module in COMPAT_MODULES:
            continue
        text = path.read_text()
        tree = ast.parse(text, filename=str(path))
        for node in ast.walk(tree):  # parents, so a path is counted once, at its full length
            for child in ast.iter_child_nodes(node):
                child.parent = node
        source = text.splitlines()
        uses += [(module, n, source[n - 1].strip()) for n in sorted(_private_lines(tree))]
    return uses


def summary() -> dict:
    modules, edges = load()
    eager = [e for e in edges if not e.lazy]
    uses = private_uses()
    return {
        "modules": len(modules),
        "edges": {"eager": len(eager), "lazy": len(edges) - len(eager)},
        "circles_eager": circles(modules, eager),
        "circles_all": circles(modules, edges),
        "upward": [[e.source, e.target, "lazy" if e.lazy else "eager", e.line]
                   for e in upward(edges)],
        "private_api": {"lines": len(uses),
                        "import_lines": sum(t.startswith(("import ", "from ")) for _, _, t in uses),
                        "modules": sorted({m for m, _, _ in uses})},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edges", action="store_true", help="list every edge")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--private", action="store_true", help="list private-API lines")
    args = parser.parse_args(argv)
    if args.json:
        print(json.dumps(summary(), indent=1))
        return 0
    modules, edges = load()
    if args.edges:
        for e in sorted(edges, key=lambda e: (e.source, e.target)):
            print(f"{e.source} -> {e.target} ({'lazy' if e.lazy else 'eager'}, line {e.line})")
    if args.private:
        for module, line, text in private_uses():
            print(f"{module}:{line}: {text}")
    s = summary()
    counts = s["edges"]
    print(f"{s['modules']} modules, {counts['eager']} eager and {counts['lazy']} lazy edges")
    for kind in ("circles_eager", "circles_all"):
        label = "eager imports only" if kind == "circles_eager" else "eager and lazy imports"
        print(f"circles ({label}): {len(s[kind])}")
        for circle in s[kind]:
            print(f"  {len(circle)} modules: {', '.join(circle)}")
    print(f"arrows up the floors: {len(s['upward'])}")
    for source, target, kind, line in s["upward"]:
        print(f"  {source} -> {target} ({kind}, line {line})")
    p = s["private_api"]
    print(f"private-API lines outside compat: {p['lines']} ({p['import_lines']} import lines) "
          f"in {len(p['modules'])} modules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
