"""Writing a trace file so that a reader never sees half of it (both formats use it)."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile


def write_atomically(path, obj) -> None:
    """JSON to a temporary file beside `path`, then renamed over it: a reader never sees half a
    file, and a failed write leaves the old file as it was."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".mtia_lab-", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as f:
            json.dump(obj, f, separators=(",", ":"))
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise

