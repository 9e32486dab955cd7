"""The JupyterLab settings `make lab` ships: saved notebooks keep their widgets' state.

The browser test (tests/browser/test_saved_notebook_in_jupyterlab.py) shows the setting at
work; this one checks that `make lab` puts it where the venv's JupyterLab reads its defaults.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "jupyter" / "lab" / "settings" / "overrides.d" / "mtia_lab.json"


def test_shipped_settings_save_widget_state() -> None:
    settings = json.loads(SHIPPED.read_text())
    assert settings["@jupyter-widgets/jupyterlab-manager:plugin"]["saveState"] is True


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_installs_them_where_jupyterlab_reads_defaults(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)  # an existing venv: make builds none
    subprocess.run(["make", "-s", "lab-settings", f"VENV={venv}"], cwd=REPO, check=True)
    installed = venv / "share" / "jupyter" / "lab" / "settings" / "overrides.d" / SHIPPED.name
    assert installed.read_text() == SHIPPED.read_text()

    from jupyterlab.labapp import LabApp  # where this venv's JupyterLab looks for them
    expected = Path(sys.prefix) / "share" / "jupyter" / "lab" / "settings"
    assert Path(LabApp().app_settings_dir) == expected
