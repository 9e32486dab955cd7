"""The colours of every picture and legend, each with the word a tutorial's prose uses for it.

A sentence such as "collectives in brown" must point at the brown the timeline draws. So each
colour is chosen here once, with its name; the renderers take their fills from here, and
tests/test_notebook_prose.py reads the notebooks' markdown for these words and checks each one
against the colours of the picture it sits next to (`word_of(hex)`).

Several shades share a word (a kernel's light-blue fill and its blue border are both "blue"):
the word is what a reader would call the colour, not a unique key.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Colour:
    hex: str  # 6-digit hex: Graphviz 2.42 draws 3-digit colours black (graphviz_render.py)
    word: str  # what prose calls it


# -- the timeline: what the work was for (Tableau 10: told apart by most readers) -------------
FORWARD = Colour("#4e79a7", "blue")
BACKWARD = Colour("#b07aa1", "lilac")
OPTIMIZER = Colour("#59a14f", "green")
COPY = Colour("#edc948", "yellow")
FALLBACK = Colour("#e15759", "red")
COLLECTIVE = Colour("#9c755f", "brown")
WAIT = Colour("#d9d9d9", "grey")
HOST = Colour("#76b7b2", "teal")  # the host issuing ops (a timeline's host lane)
OVERLAP = Colour("#f28e2b", "orange")
MIXED = Colour("#8d99ae", "grey")  # a merged bar of several purposes

# -- fusion plans: a kernel's kind (fill, border) ---------------------------------------------
TEMPLATE_FILL, TEMPLATE_BORDER = Colour("#dbe9f6", "blue"), Colour("#4c78a8", "blue")
REDUCTION_FILL, REDUCTION_BORDER = Colour("#fde2c4", "orange"), Colour("#e07b00", "orange")
POINTWISE_FILL, POINTWISE_BORDER = Colour("#dff2d8", "green"), Colour("#3c8c3c", "green")
EXTERN_FILL, EXTERN_BORDER = Colour("#e6e6e6", "grey"), Colour("#777777", "grey")
REFUSED = Colour("#cc2222", "red")  # a fusion a guardrail refused
RULE_REFUSED = Colour("#999999", "grey")  # a fusion a rule refused
MODULE_FILL, MODULE_BORDER = Colour("#fff7e0", "beige"), Colour("#b08a2e", "brown")
SAME_IN_BOTH = Colour("#fff4cc", "yellow")  # plan comparison: the same kernel in both plans

# -- the dataflow of a trace ------------------------------------------------------------------
NATIVE_OP = Colour("#d8e8f8", "blue")
FALLBACK_OP, FALLBACK_LINE = Colour("#f9c0b0", "red"), Colour("#c0392b", "red")
BACKWARD_OP = Colour("#e6dcf2", "lilac")
FAILED_OP = Colour("#ffe08a", "yellow")
TENSOR = Colour("#f4f4f4", "grey")
OUTSIDE_TENSOR = Colour("#ffffff", "white")  # came from outside the trace

# -- memory -----------------------------------------------------------------------------------
ALLOCATED = Colour("#f4a261", "orange")
FREE = Colour("#e9ecef", "grey")
SEGMENT_HEADER = Colour("#dee2e6", "grey")
PRIVATE_POOL_HEADER = Colour("#cfe2ff", "blue")  # segments of a graph's private pool

# -- the clock calibration: predicted against measured ---------------------------------------
EAGER_POINT, INDUCTOR_POINT = Colour("#4e79a7", "blue"), Colour("#f28e2b", "orange")
WITHIN_BAND = Colour("#e8f1e4", "green")  # within 1.5x of the measured time
AGREEMENT_LINE = Colour("#777777", "grey")

# -- tables -----------------------------------------------------------------------------------
VIEW_ROW = Colour("#777777", "grey")
SELECTED_ROW = Colour("#fff3b0", "yellow")

COLOURS: tuple[Colour, ...] = tuple(v for v in dict(globals()).values() if isinstance(v, Colour))
WORDS: frozenset[str] = frozenset(c.word for c in COLOURS)


def word_of(hex_colour: str) -> str | None:
    """The word prose uses for a colour of this palette (None for one it does not name)."""
    wanted = hex_colour.lower()
    return next((c.word for c in COLOURS if c.hex == wanted), None)
