"""The end-of-session writer the file outputs share (JSON report, failures file, Markdown
summary, HTML page): its own module, so the entry's import of the outputs package stays light
(pytest imports it on every run)."""

from __future__ import annotations

from typing import Any

import pytest

from ..model.result import RunResult
from ..run.keys import RESULT


class SessionFile:
    """A file written on the controller at the end of the session, from the run result.

    `write` builds and writes it: None, or why not (an exception: it cannot be built, said,
    never raised). A file the job expects and does not get fails a run that passed (unless
    `fails_run` is off); the terminal summary names the file, or says why it is not there.
    """

    what = "file"  # the terminal's name for it: "tokaudit {what}: PATH"
    fails_run = True
    colour = "red"

    def __init__(self, config: pytest.Config, path: Any):
        self.config = config
        self.path = path
        self.error: str | None = None  # why it is not (all) there
        self.state = "NOT written"  # what the terminal says of it when there is an error
        self.written = False

    def write(self, result: RunResult, exitstatus: int) -> str | None:
        raise NotImplementedError

    def shown(self) -> str:
        """What the terminal names the written file by."""
        return str(self.path)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        result = self.config.stash.get(RESULT, None)
        if result is None:  # --collect-only
            return
        try:
            self.error = self.write(result, int(session.exitstatus))
        except Exception as exc:  # noqa: BLE001 - a file must never hide the verdict
            self.error = f"cannot build it: {type(exc).__name__}: {exc}"
        self.written = self.error is None
        if self.error and self.fails_run and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED  # the file CI expects is missing

    @pytest.hookimpl(trylast=True)  # after the controller's tokaudit summary
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.error:
            terminalreporter.write_line(f"tokaudit {self.what} {self.state}: {self.error}",
                                        **{self.colour: True})
        elif self.written:
            terminalreporter.write_line(f"tokaudit {self.what}: {self.shown()}")
