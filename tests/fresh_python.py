"""Run code in a fresh Python process: for what one process cannot undo (which modules were
imported, environment variables read at import, PyTorch limits that abort the process)."""

import os
import subprocess
import sys


def run_python(code: str, unset: tuple[str, ...] = (), **env: str) -> subprocess.CompletedProcess:
    """`python -c code` with this interpreter and environment (plus `env`, less the variables
    named in `unset`), output captured."""
    environ = {k: v for k, v in {**os.environ, **env}.items() if k not in unset}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=environ,
    )
