"""mtia_lab's version (as pyproject.toml states it), on the bottom floor: a trace file records
it (trace/recorder.py), and nothing below the top package may import the top package."""

__version__ = "0.1.0"
