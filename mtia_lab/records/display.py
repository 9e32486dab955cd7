"""How a record finds its picture: a registry from record types to the views that draw them.

The display protocol of the records floor (trace/, records/, inspect/, the compilers' plans):
records know nothing of renderers: a `Trace` does not
import its summary table. When a notebook or rich asks a record to show itself, the record
asks this registry, lazily, for the view registered under a purpose ("notebook", "terminal"),
as rich asks an object for `__rich__` rather than knowing every type. The renderers register
themselves where they are defined, so a new view never touches the record layer:

    @register_view(Trace, "notebook")
    def _summary(trace):
        return TraceSummary(trace, times="sim")

This module imports no renderer. `view_for` imports `mtia_lab.viz` (which registers the
default views) the first time it is asked: a deliberate lazy hook, the one place where the
records floor reaches up to the views, by name, at call time.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

PURPOSES = ("notebook", "terminal")
_VIEWS: dict[tuple[type, str], Callable[[Any], Any]] = {}


def register_view(record_type: type, purpose: str = "notebook"):
    """Decorator: `factory(record) -> view` draws `record_type` records for `purpose`."""
    if purpose not in PURPOSES:
        raise ValueError(f"purpose {purpose!r}: use one of {', '.join(PURPOSES)}")

    def register(factory: Callable[[Any], Any]) -> Callable[[Any], Any]:
        _VIEWS[record_type, purpose] = factory
        return factory

    return register


def view_for(record: Any, purpose: str = "notebook") -> Any:
    """The view registered for the record's type (or a base class) and `purpose`."""
    # The deliberate lazy hook (see the module doc): the views register themselves on import.
    importlib.import_module("mtia_lab.viz")
    for cls in type(record).__mro__:
        factory = _VIEWS.get((cls, purpose))
        if factory is not None:
            return factory(record)
    raise LookupError(f"no {purpose} view registered for {type(record).__name__}; register "
                      "one with mtia_lab.records.display.register_view")
