"""Driving one notebook in JupyterLab the way a person does: open it, Run > Run All Cells, wait.

Traps this module handles so the tests need not:
- JupyterLab restores the tabs of the last session: the URL carries `?reset`, and every
  selector is scoped to the notebook panel that is showing (`self.panel`), never the page;
- the toolbar's execution indicator says "idle" before the notebook even has a kernel (Run
  All then opens a "Select Kernel" dialog): the kernel is ready when the status bar's item
  for this notebook reads "<kernel> | Idle" (it says "No Kernel | Initializing", then
  "Connecting", before);
- a cell has finished only when its prompt shows a number (`[*]:` while queued or running);
  outputs saved in the file are cleared first, or their numbers would pass for a finished run;
- a dialog (kernel choice, kernel died) would wait for a click forever: fail at once instead;
- widget views render after their output arrives, so checks use Playwright's `expect`, which
  retries until the timeout.
"""

from __future__ import annotations

import re

from playwright.sync_api import Locator, Page, expect

RUN_TIMEOUT_MS = 120_000  # a cold kernel imports torch: seconds when idle, far more when busy

PANEL = "#jp-main-dock-panel .jp-NotebookPanel:not(.lm-mod-hidden)"
KERNEL_STATUS = '#jp-main-statusbar [title="Change kernel for {name}"]'

# Polled after Run All: "done" when every code cell of the panel shows [N]:; the reason to stop
# when a dialog opened or the run ended early (no cell queued, a traceback shown); else false.
_RUN_STATE = r"""panel => {
  const dialog = document.querySelector('.jp-Dialog');
  if (dialog) return 'a dialog is open: ' + dialog.innerText.replace(/\s+/g, ' ');
  const prompts = [...panel.querySelectorAll('.jp-CodeCell .jp-InputPrompt')]
    .map(p => p.textContent.trim());
  if (prompts.length && prompts.every(t => /^\[\d+\]:$/.test(t))) return 'done';
  const stderr = panel.querySelector('[data-mime-type="application/vnd.jupyter.stderr"]');
  if (stderr && !prompts.includes('[*]:')) return 'a cell failed:\n' + stderr.innerText;
  return false;
}"""


class NotebookPage:
    """A notebook opened in its own browser page."""

    def __init__(self, page: Page, name: str) -> None:
        self.page = page
        self.name = name
        self.panel: Locator = page.locator(PANEL)
        self.console_errors: list[str] = []  # printed when a test fails
        page.on("console", lambda m: m.type == "error" and self.console_errors.append(m.text))
        page.on("pageerror", lambda exc: self.console_errors.append(str(exc)))

    def open(self, url: str) -> NotebookPage:
        self.page.goto(url)
        tab = self.page.locator("#jp-main-dock-panel .lm-TabBar-tab.lm-mod-current")
        expect(tab).to_have_text(re.compile(re.escape(self.name)), timeout=RUN_TIMEOUT_MS)
        expect(self.panel).to_have_count(1)
        self.wait_for_kernel_idle()
        return self

    def wait_for_kernel_idle(self) -> None:
        status = self.page.locator(KERNEL_STATUS.format(name=self.name))
        expect(status).to_have_text(re.compile(r"\| Idle$"), timeout=RUN_TIMEOUT_MS)

    def run_all(self) -> None:
        """Edit > Clear Outputs of All Cells (so saved outputs cannot pass for new ones), then
        Run > Run All Cells; wait until every code cell has run."""
        self._menu("Edit", "Clear Outputs of All Cells")
        self._menu("Run", "Run All Cells")
        panel = self.panel.element_handle()
        result = self.page.wait_for_function(_RUN_STATE, arg=panel, timeout=RUN_TIMEOUT_MS)
        state = result.json_value()
        assert state == "done", f"Run All Cells in {self.name}: {state}"
        self.wait_for_kernel_idle()

    def _menu(self, menu: str, item: str) -> None:
        self.page.get_by_role("menuitem", name=menu, exact=True).click()
        self.page.get_by_role("menuitem", name=item, exact=True).click()

    def stderr_texts(self) -> list[str]:
        """Tracebacks and warnings shown under cells (both are stderr-like outputs)."""
        return self.panel.locator(
            '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'
        ).all_inner_texts()

    def output_of(self, cell_text: str) -> Locator:
        """The output area of the code cell whose source contains `cell_text`."""
        cell = self.panel.locator(".jp-CodeCell").filter(
            has=self.page.locator(".jp-InputArea-editor", has_text=cell_text)
        )
        expect(cell).to_have_count(1)
        return cell.locator(".jp-OutputArea")
