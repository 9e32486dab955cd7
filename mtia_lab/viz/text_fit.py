"""Text that fits the width it is given: the rules every text view follows.

A notebook column shows about 100 monospace characters, a terminal 80 or 160, and JupyterLab
breaks a longer line wherever it reaches the edge, mid-word ("'Pyth on'"). So a text view is
laid out for its width: a table drops or narrows columns, a long name is abbreviated with a
visible `...`, and prose lines wrap between words. Nothing is cut silently.
"""

from __future__ import annotations

import re

ELLIPSIS = "..."
NOTEBOOK_WIDTH = 100  # monospace characters of a JupyterLab output column at 1280 px


def abbreviate(text: str, width: int) -> str:
    """`text` if it fits in `width` characters, else its start and a visible `...`."""
    if len(text) <= width:
        return text
    if width <= len(ELLIPSIS):
        return ELLIPSIS[:width]
    return text[:width - len(ELLIPSIS)] + ELLIPSIS


# A break goes after a space or a comma, before the next word, but never between a number and
# its unit ("128.00 KiB", "4.66 us").
_BREAK = re.compile(r"(?<=[ ,])(?<!\d )(?=\S)")


def wrap_line(line: str, width: int, indent: int = 2) -> list[str]:
    """One line as several of at most `width` characters, broken only between words (after a
    space or a comma). Continuation lines start `indent` columns deeper than the line itself.
    A single word wider than the room is abbreviated with `...`, never split."""
    if len(line) <= width:
        return [line]
    lead = len(line) - len(line.lstrip(" "))
    pad = " " * min(lead + indent, width // 2)
    words = _BREAK.split(line[lead:])
    lines: list[str] = []
    current = line[:lead]
    for word in words:
        if len(current) + len(word.rstrip()) <= width or not current.strip():
            current += word
            continue
        lines.append(current.rstrip())
        current = pad + word
    lines.append(current.rstrip())
    return [abbreviate(part, width) for part in lines]


def wrap_text(text: str, width: int, indent: int = 2) -> str:
    """Every line of `text` wrapped by `wrap_line`."""
    return "\n".join(part for line in text.splitlines() for part in wrap_line(line, width, indent))
