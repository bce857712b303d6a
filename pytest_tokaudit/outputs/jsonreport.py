"""--tokaudit-json=PATH: the whole audit as JSON (model/report.py is its format)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ..base.atomic import check_writable, write
from ..model.result import RunResult
from ..model.spend import of_run
from .session import SessionFile


class JsonReport(SessionFile):
    what = "JSON report"

    def write(self, result: RunResult, exitstatus: int) -> str | None:
        from ..model import report  # here, not at option time: pytest imports outputs on every run
        from ..run.cache import contract_files

        data = report.build(result.files, result.outcomes, result.contract,
                            result.coverage.partial, result.baseline)
        data["coverage"] = result.coverage.to_json()
        data["contract_files"] = contract_files(result.contract)  # its paths' bytes (merge)
        data["cache"] = result.cache  # which items were reused
        spent = of_run(result.files, result.contract)  # money by component and by group
        if spent is not None:
            data["spend"] = spent
        return write(Path(self.config.invocation_params.dir, self.path), data)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:  # not trylast: first
        super().pytest_terminal_summary(terminalreporter)


PATH_OPTIONS = (("--tokaudit-json", "tokaudit_json"),)  # files written (run/targets.py)


def add_options(parser: pytest.Parser, group: pytest.OptionGroup) -> None:
    group.addoption(
        "--tokaudit-json", metavar="PATH", default=None,
        help="write the whole audit as JSON to PATH",
    )


def draws(config: pytest.Config) -> bool:
    """The report carries the figures: `merge` draws the HTML page from reports."""
    return bool(config.getoption("tokaudit_json"))


def configure(config: pytest.Config) -> None:
    path = config.getoption("tokaudit_json")
    if path and not hasattr(config, "workerinput"):
        check_writable(config.invocation_params.dir / path, "--tokaudit-json")  # now, not after
        config.pluginmanager.register(JsonReport(config, path), "tokaudit.json")
