"""A throwaway JupyterLab server for the browser tests: its own port, token, folders, settings.

Everything the server reads or writes lives in one temporary folder, so a developer's own
Jupyter settings, kernels and saved workspaces cannot change what the tests see, and the tests
leave nothing behind. Two settings matter for a headless browser:

- the news/update toast is off (`overrides.json` for the notification plugin): it would cover
  the page and steal clicks;
- notebooks attach every cell (`windowingMode: none`): by default cells off screen may not be
  rendered, and a test should not depend on the window size.

The settings `make lab` ships (jupyter/lab/settings/overrides.d/, widget state saved with the
notebook) are installed the same way, so the tests see the JupyterLab a learner gets.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHIPPED_SETTINGS = REPO / "jupyter" / "lab" / "settings" / "overrides.d"
START_TIMEOUT_S = 90  # about 6 s on an idle 2-core machine; much more when it is busy

OVERRIDES = {
    "@jupyterlab/apputils-extension:notification": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
    "@jupyterlab/notebook-extension:tracker": {"windowingMode": "none"},
}


def free_port() -> int:
    """A loopback port nobody listens on now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LabServer:
    """`jupyter lab` from this Python's environment, serving `root` on 127.0.0.1."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.root = workdir / "root"
        self.port = 0  # chosen at start()
        self.token = secrets.token_hex(16)
        self.log_path = workdir / "jupyter-lab.log"
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def notebook_url(self, name: str) -> str:
        """`?reset` makes JupyterLab forget the tabs an earlier page left open."""
        return f"{self.url}/lab/tree/{name}?reset&token={self.token}"

    def add(self, notebook: Path) -> str:
        """Copy a notebook into the server's root (tests never run the original); its name."""
        shutil.copyfile(notebook, self.root / notebook.name)
        return notebook.name

    def start(self) -> None:
        dirs = {name: self.workdir / name for name in
                ("root", "config", "data", "runtime", "ipython", "app-settings",
                 "user-settings", "workspaces")}
        for path in dirs.values():
            path.mkdir(parents=True, exist_ok=True)
        (dirs["app-settings"] / "overrides.json").write_text(json.dumps(OVERRIDES, indent=2))
        shutil.copytree(SHIPPED_SETTINGS, dirs["app-settings"] / "overrides.d")
        env = {
            **os.environ,
            "JUPYTER_PLATFORM_DIRS": "1",
            "JUPYTER_CONFIG_DIR": str(dirs["config"]),
            "JUPYTER_DATA_DIR": str(dirs["data"]),
            "JUPYTER_RUNTIME_DIR": str(dirs["runtime"]),
            "IPYTHONDIR": str(dirs["ipython"]),
            "PYTHONUNBUFFERED": "1",
            # Kernels import the mtia_lab of this checkout (the one under test), not whichever
            # checkout the venv's editable install points at.
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        }
        for _ in range(3):  # another program may take the free port before the server does
            self.port = free_port()
            self._launch(dirs, env)
            if self._wait_until_up():
                return
        raise RuntimeError(f"jupyter lab found no free port three times:\n{self.log_tail()}")

    def _launch(self, dirs: dict[str, Path], env: dict[str, str]) -> None:
        command = [
            sys.executable, "-m", "jupyterlab", "--no-browser",
            "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0", f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={dirs['root']}",
            f"--LabApp.app_settings_dir={dirs['app-settings']}",
            f"--LabApp.user_settings_dir={dirs['user-settings']}",
            f"--LabApp.workspaces_dir={dirs['workspaces']}",
        ]
        if os.geteuid() == 0:  # Jupyter refuses to run as root unless told it may
            command.append("--allow-root")
        with open(self.log_path, "wb") as log:
            # A new session: the server and the kernels it starts form one process group
            # that stop() can end without touching anything else.
            self.proc = subprocess.Popen(command, cwd=dirs["root"], env=env, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)

    def _wait_until_up(self) -> bool:
        """True once the server answers; False if it exited because the port was taken."""
        deadline = time.monotonic() + START_TIMEOUT_S
        status = f"{self.url}/api/status?token={self.token}"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                if "is already in use" in self.log_tail():
                    return False
                raise RuntimeError(f"jupyter lab exited with {self.proc.returncode}:\n"
                                   f"{self.log_tail()}")
            try:
                with urllib.request.urlopen(status, timeout=2) as response:
                    if response.status == 200:
                        return True
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.25)
        self.stop()
        raise RuntimeError(f"jupyter lab did not answer within {START_TIMEOUT_S} s:\n"
                           f"{self.log_tail()}")

    def shutdown_kernels(self) -> None:
        """End every kernel the server runs (a finished notebook's kernel holds torch: hundreds
        of MB), through the REST API, as the browser's "Shut Down All Kernels" does."""
        headers = {"Authorization": f"token {self.token}"}
        with urllib.request.urlopen(urllib.request.Request(
                f"{self.url}/api/kernels", headers=headers), timeout=10) as response:
            kernels = json.load(response)
        for kernel in kernels:
            request = urllib.request.Request(f"{self.url}/api/kernels/{kernel['id']}",
                                             headers=headers, method="DELETE")
            with urllib.request.urlopen(request, timeout=30):
                pass

    def log_tail(self, lines: int = 40) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """SIGTERM lets the server shut its kernels down; then whatever is left of its process
        group (a kernel that hung) is killed. The server is reaped last: until then its
        process id, which names the group, cannot be reused by an unrelated process."""
        if self.proc is None or self.proc.returncode is not None:
            return
        self.proc.terminate()
        deadline = time.monotonic() + 10
        while not _exited(self.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=10)


def _exited(pid: int) -> bool:
    """Has the child exited? Asked without reaping it (WNOWAIT)."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
