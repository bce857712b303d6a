"""Controller side: gathers every item's summary from the reports and speaks for the run.

Registered only where ``config.workerinput`` is absent: in a plain run, or on the xdist
controller, which sees every report the workers send.
"""

from __future__ import annotations

from typing import Any

import pytest

from .collect import PROPERTY
from .contract import Contract
from .report import summary_table, worst_table
from .summary import FileSummary


class Controller:
    def __init__(self, config: pytest.Config, contract: Contract):
        self.config = config
        self.contract = contract
        self.summaries: dict[str, FileSummary] = {}  # nodeid -> summary

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call":
            return
        kept = []
        for name, value in report.user_properties:
            if name == PROPERTY:
                self.summaries[report.nodeid] = FileSummary.from_json(value)
            else:
                kept.append((name, value))
        # The summary has been read; keep it out of junitxml's <properties>.
        report.user_properties[:] = kept

    def files(self) -> list[FileSummary]:
        """One summary per file, shards merged, in path order."""
        by_path: dict[str, list[FileSummary]] = {}
        for summary in self.summaries.values():
            by_path.setdefault(summary.path, []).append(summary)
        out = []
        for path in sorted(by_path):
            parts = sorted(by_path[path], key=lambda s: s.shard or 0)
            whole = parts[0]
            for part in parts[1:]:
                part.rebase(whole.lines)
                whole.merge(part)
            out.append(whole)
        return out

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        files = self.files()
        if not files:
            return
        tr = terminalreporter
        tr.write_sep("=", "tokaudit summary")
        for line in summary_table(files):
            tr.write_line(line)
        worst = worst_table(files, self.contract)
        if worst:
            tr.write_line("")
            tr.write_line("worst records by |billed - counted|:")
            for line in worst:
                tr.write_line(line)
