"""What the tape (tape.py), its simplifier (simplify.py) and its code writer (codegen.py) share:
the marker of a slot reference and the miss a guard raises. A module of its own so the three
import it, not each other."""

from __future__ import annotations

SLOT = object()  # marks an argument read from a slot: (SLOT, slot number)


class TapeMiss(Exception):
    """A guard of the tape saw another value: record the launch afresh."""


def is_slot(value) -> bool:
    """Whether `value` is a slot reference, as the Recorder writes one."""
    return type(value) is tuple and len(value) == 2 and value[0] is SLOT
