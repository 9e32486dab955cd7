"""Fixtures of the real-browser tests: JupyterLab in headless Debian Chromium, driven by Playwright.

One JupyterLab server (lab_server.py) per session and one browser per test module;
`run_notebook(path)` opens a notebook and runs all its cells once per module, so several tests can
read the same run (a cold kernel importing torch is most of the cost). The kernels a module
started are shut down when it ends (each holds torch: hundreds of MB), and Chromium with the
module: the rest of the suite runs after these tests on a small machine.

When a test fails, every open page is saved as a screenshot (and its HTML) in pytest's
temporary folder and the path is printed, with the browser's console errors and the end of the
server's log.

Playwright's own browser download does not work here, so the tests use Debian's chromium
(`make test` installs it when run as root) and skip, saying why, when it is missing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from lab_page import NotebookPage
from lab_server import LabServer
from playwright.sync_api import Browser, sync_playwright

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
ACTION_TIMEOUT_MS = 30_000

# The notebooks here are test data, run by the browser tests (not collected by nbval).
collect_ignore_glob = ["notebooks/*"]

_open_pages: list[NotebookPage] = []


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Keep each phase's report on the test, so a fixture can tell that the test failed."""
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


@pytest.fixture(scope="session")
def chromium() -> Path:
    if not CHROMIUM.is_file():
        pytest.skip(f"{CHROMIUM} is missing: the browser tests drive Debian's chromium "
                    "(install it with `apt-get install chromium`, as `make test` does as root)")
    return CHROMIUM


@pytest.fixture(scope="session")
def lab_server(chromium: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    server = LabServer(tmp_path_factory.mktemp("jupyterlab"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def browser(chromium: Path) -> Iterator[Browser]:
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(chromium), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def run_notebook(
    lab_server: LabServer, browser: Browser
) -> Iterator[Callable[[Path], NotebookPage]]:
    """`run_notebook(path)`: a copy of the notebook opened in its own page, all cells run."""
    done: dict[str, NotebookPage] = {}
    failed: dict[str, str] = {}

    def run(path: Path) -> NotebookPage:
        if path.name in failed:
            pytest.fail(f"an earlier test could not run {path.name}: {failed[path.name]}")
        if path.name not in done:
            context = browser.new_context(viewport={"width": 1280, "height": 1000})
            context.set_default_timeout(ACTION_TIMEOUT_MS)
            notebook = NotebookPage(context.new_page(), path.name)
            _open_pages.append(notebook)
            try:
                notebook.open(lab_server.notebook_url(lab_server.add(path)))
                notebook.run_all()
            except Exception as exc:
                failed[path.name] = f"{type(exc).__name__}: {exc}".splitlines()[0]
                raise
            done[path.name] = notebook
        return done[path.name]

    yield run
    for notebook in _open_pages:
        notebook.page.context.close()
    _open_pages.clear()
    lab_server.shutdown_kernels()


@pytest.fixture(autouse=True)
def screenshot_on_failure(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    yield
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        server = request.getfixturevalue("lab_server")
        print(_failure_notes(request.node.name, tmp_path_factory, server))


def _failure_notes(label: str, tmp_path_factory: pytest.TempPathFactory,
                   server: LabServer) -> str:
    """Screenshots of the open pages, their console errors, the server log's end."""
    folder = tmp_path_factory.getbasetemp() / "browser-screenshots"
    folder.mkdir(exist_ok=True)
    notes = []
    for notebook in _open_pages:
        path = folder / f"{label}-{notebook.name}.png".replace("/", "_")
        try:
            # JupyterLab scrolls inside the notebook panel, so the picture shows one window
            # of the notebook; the saved HTML holds all of it.
            notebook.page.screenshot(path=path)
            path.with_suffix(".html").write_text(notebook.page.content())
            notes.append(f"screenshot of {notebook.name}: {path} (page HTML beside it)")
        except Exception as exc:  # a crashed page must not hide the test's own error
            notes.append(f"no screenshot of {notebook.name}: {exc}")
        if notebook.console_errors:
            notes.append("browser console errors:\n  " + "\n  ".join(notebook.console_errors))
    notes.append(f"end of the jupyter lab log ({server.log_path}):\n{server.log_tail()}")
    return "\n".join(notes)
