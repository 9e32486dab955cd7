"""`python -m mtia_lab`: notebook 01's story in the terminal, with rich output.

    python -m mtia_lab                 # the tour: a device tensor, a traced training step
                                       # (summary, module tree), a fusion plan, where next
    python -m mtia_lab layout memory   # chosen chapters only
    python -m mtia_lab --help          # every chapter
"""

from __future__ import annotations

import argparse
import sys

from .tour import CHAPTERS, TOUR


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mtia_lab",
        description="A tour of mtia_lab in the terminal: the story of notebooks/01_tour.ipynb.",
        epilog="chapters:\n" + "\n".join(
            f"  {name:<8} {fn.__doc__.splitlines()[0]}" for name, fn in CHAPTERS.items())
        + f"\nWith no chapter, the tour: {' '.join(TOUR)}.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # Checked below rather than with `choices`: argparse would list an empty list among them
    # ("choose from [], 'device', ...") to allow no chapter at all.
    parser.add_argument("chapters", nargs="*", metavar="chapter",
                        help="chapters to show, in order (default: the tour)")
    parser.add_argument("--width", type=int, default=None,
                        help="console width in columns (default: the terminal's)")
    args = parser.parse_args(argv)
    unknown = [name for name in args.chapters if name not in CHAPTERS]
    if unknown:
        parser.error(f"unknown chapter {unknown[0]!r}: choose from {', '.join(CHAPTERS)}")
    from rich.console import Console

    console = Console(width=args.width, highlight=False)
    for name in args.chapters or TOUR:
        CHAPTERS[name](console)
    return 0


if __name__ == "__main__":
    sys.exit(main())
