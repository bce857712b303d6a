"""--tokaudit-baseline: a file that got worse than in an earlier JSON report fails."""

from __future__ import annotations

from ..base.findings import Finding
from ..base.hooks import hookimpl
from ..base.urls import scrub
from ..model.values import ContractError
from ..model.report import ReportError, regressions
from ..model.summary import FileSummary
from ..sources.reports import load


class BaselineCheck:
    """Fails a file that got worse than in an earlier --tokaudit-json report."""

    def __init__(self, path: str):
        """ContractError (a usage error in pytest) if the report cannot be used."""
        try:
            report = load(path, ids=False)  # per-file figures: the ids are never unpacked
        except ReportError as exc:
            raise ContractError(f"--tokaudit-baseline: {scrub(str(exc))}") from None
        self.path = report.name  # a URL without what would be a credential in it
        self.files = report.metrics
        self.summaries = {s.path: s for s in report.files}  # what the HTML report compares

    @hookimpl
    def pytest_tokaudit_check_file(self, summary, contract):
        base = self.files.get(summary.path)
        if base is None:
            return None
        worse = regressions(summary, base, contract.baseline_rel)
        if not worse:
            return None
        return Finding(
            "baseline",
            f"worse than baseline {self.path} by more than {contract.baseline_rel:.0%}: "
            + "; ".join(worse),
        )

    def compare(self, files: list[FileSummary]) -> dict[str, list[str]]:
        now = {s.path for s in files}
        return {
            "new": sorted(now - self.files.keys()),
            "vanished": sorted(self.files.keys() - now),
        }
