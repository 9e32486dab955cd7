"""The trace recorder, as launch events need it (one place that reaches into trace/recorder)."""

from __future__ import annotations


def recorder():
    from ..trace.recorder import _RECORDER

    return _RECORDER
