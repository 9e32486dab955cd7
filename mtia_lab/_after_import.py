"""Run a function once a module has been imported, without importing it ourselves.

mtia_lab must teach Dynamo a rule (skip the device internals, see compare/engine.py) but
`import mtia_lab` must not import torch._dynamo (about a second). So a finder waits at the front
of `sys.meta_path` for the first import of that one module, lets the usual finders find it, and
runs the callback when its code has run; then it steps aside. Until then it costs each later
import one string comparison.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable


class _AfterImport:
    """A meta-path finder that finds nothing itself: it wraps the real loader of one module."""

    def __init__(self, name: str, callback: Callable[[], None]) -> None:
        self.name = name
        self.callbacks = [callback]

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)  # before find_spec below, which asks every finder again
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module, callbacks = spec.loader.exec_module, self.callbacks

        def exec_then_call(module) -> None:
            exec_module(module)
            for callback in callbacks:
                callback()

        spec.loader.exec_module = exec_then_call
        return spec


def call_after_import(name: str, callback: Callable[[], None]) -> None:
    """`callback()` now if module `name` is imported already, else right after its import."""
    if name in sys.modules:
        callback()
        return
    for finder in sys.meta_path:
        if isinstance(finder, _AfterImport) and finder.name == name:
            finder.callbacks.append(callback)
            return
    sys.meta_path.insert(0, _AfterImport(name, callback))
