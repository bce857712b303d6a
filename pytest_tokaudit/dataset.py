"""Controller side: gathers every item's summary from the reports and speaks for the run.

Registered only where ``config.workerinput`` is absent: in a plain run, or on the xdist
controller, which sees every report the workers send. After all items have run (the
``yield`` of ``pytest_runtestloop``) it merges shards, judges whole sharded files, runs the
dataset checks, and reports each as an ordinary test outcome (``tokaudit::budget``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from .contract import Contract
from .ids import IdIndex, read_manifest, ranges
from .summary import PROPERTY, FileSummary

MISSING_SHOWN = 10  # ranges of missing ids shown
DUPLICATES_SHOWN = 20


@dataclass
class Outcome:
    """The verdict of one dataset-wide check."""

    name: str
    outcome: str  # "passed", "failed" or "skipped"
    message: str
    lines: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "\n".join([self.message, *self.lines])

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "outcome": self.outcome, "message": self.message,
                "lines": self.lines}


# -- the checks ------------------------------------------------------------------------------

def plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def money(tokens: int, contract: Contract) -> str:
    if contract.price_per_mtok is None:
        return ""
    value = tokens * contract.price_per_mtok / 1e6
    return f"${value:,.2f}" if value >= 1 or value == 0 else f"${value:.4f}"


def evaluate(
    files: list[FileSummary], index: IdIndex | None, contract: Contract, complete: str | None
) -> list[Outcome]:
    """The dataset checks that are configured. `complete` is None, or why the run is partial."""
    out = []
    if contract.budget is not None:
        spent = sum(s.billed for s in files)
        cap = contract.budget
        share = f" ({spent / cap:.1%})" if cap else ""
        cost = f"; {money(spent, contract)} of {money(cap, contract)}" if money(1, contract) else ""
        message = f"billed {spent:,} of {cap:,} tokens{share}{cost}"
        if spent > cap:
            out.append(Outcome("budget", "failed", f"over budget: {message}",
                               [f"contract: {contract.describe(('budget',))}"]))
        else:
            out.append(Outcome("budget", "passed", message))
    if contract.unique_ids and index is not None:
        count = index.duplicate_count()
        if count:
            lines = [f"{'.'.join(contract.id_field)}={value!r}: {len(places)} records: "
                     f"{', '.join(places)}" for value, places in index.duplicates(DUPLICATES_SHOWN)]
            if count > DUPLICATES_SHOWN:
                lines.append(f"... and {count - DUPLICATES_SHOWN:,} more duplicated ids")
            out.append(Outcome(
                "unique_ids", "failed",
                f"{plural(count, 'id')} with more than one record "
                f"({plural(index.extra_records(), 'record')} counted twice)",
                lines,
            ))
        else:
            out.append(Outcome("unique_ids", "passed", f"{len(index):,} ids, each once"))
    if contract.expected_ids:
        out.append(_expected(index, contract, complete))
    return out


def _expected(index: IdIndex | None, contract: Contract, partial: str | None) -> Outcome:
    if partial:
        return Outcome("expected_ids", "skipped", f"needs every file: {partial}")
    path = Path(contract.expected_ids)
    try:
        expected = read_manifest(path, contract.id_field)
    except OSError as exc:
        return Outcome("expected_ids", "failed", f"cannot read manifest {path}: {exc.strerror}")
    except ValueError as exc:  # a line without a usable id, or no ids at all
        return Outcome("expected_ids", "failed", f"cannot use the manifest: {exc}")
    missing = [v for v in expected if index is None or v not in index]
    if not missing:
        return Outcome("expected_ids", "passed", f"all {len(expected):,} expected ids have a record")
    return Outcome(
        "expected_ids", "failed",
        f"{len(missing):,} of {len(expected):,} expected ids have no record",
        ["missing: " + ", ".join(ranges(missing, MISSING_SHOWN))
         + (" ..." if len(missing) > MISSING_SHOWN else "")],
    )


# -- the controller plugin ------------------------------------------------------------------

class Controller:
    def __init__(self, config: pytest.Config, contract: Contract):
        self.config = config
        self.contract = contract
        self.summaries: dict[str, FileSummary] = {}  # nodeid -> summary
        self.collected = 0  # audit items in the full collection, as items report it
        self.index = IdIndex() if contract.unique_ids or contract.expected_ids else None
        self.outcomes: list[Outcome] = []
        self.wholes: dict[str, FileSummary] = {}  # sharded files, merged and judged
        self.last_failed_only = False
        self.collect_errors = 0

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        # Without xdist a collection error stops the session; with it, the run goes on.
        if report.failed:
            self.collect_errors += 1

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        # --lf with failures on record skips whole files, on workers too: say so up front,
        # while the cache still holds the previous run's failures.
        lf = self.config.pluginmanager.get_plugin("lfplugin")
        self.last_failed_only = bool(
            self.config.getoption("lf", False) and lf is not None and getattr(lf, "lastfailed", None)
        )

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        kept = []
        for name, value in report.user_properties:
            if name == PROPERTY and report.when != "call":
                continue  # the teardown report carries a copy; junitxml reads that one
            if name == PROPERTY:
                summary = FileSummary.from_json(value)
                self.collected = max(self.collected, summary.collected)
                if self.index is not None:
                    self.index.add(summary)
                    if not self.config.getoption("tokaudit_json"):
                        # Folded in; drop them unless the JSON report (for merge) needs them.
                        summary.ids, summary.id_lines = [], []
                self.summaries[report.nodeid] = summary
            else:
                kept.append((name, value))
        # The summary has been read; keep it out of junitxml's <properties>.
        report.user_properties[:] = kept

    def partial(self) -> str | None:
        """Why not every collected data file was audited, or None."""
        ran = len(self.summaries)
        if self.last_failed_only:
            return "--lf runs only the files that failed last time"
        if self.collect_errors:
            return f"{plural(self.collect_errors, 'collection error')}"
        if ran >= self.collected:
            return None
        return f"{ran} of {self.collected} audit items ran (deselected, stopped early or crashed)"

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session):
        result = yield
        if not self.config.option.collectonly:
            self.finish(session)
        return result

    def finish(self, session: pytest.Session) -> None:
        from .audit import check_file
        from .report import failure_text

        prefixes = {s.path: nodeid.split("::")[0] for nodeid, s in self.summaries.items()}
        for path, parts in self.sharded().items():
            n = parts[0].shards
            if len(parts) < n:
                verdict = Outcome("file", "skipped", f"{len(parts)} of {n} shards of {path} ran")
            else:
                # Judged as the file's own item would be: its contract, its conftest hooks.
                fspath = Path(self.config.rootpath, path)
                hook = hooks_for(session, fspath)
                contract = hook.pytest_tokaudit_contract(path=fspath, contract=self.contract)
                contract = contract or self.contract
                whole = merge_parts(parts)
                check_file(fspath, contract, hook, whole)
                self.wholes[path] = whole
                if whole.file_findings:
                    verdict = Outcome("file", "failed", failure_text(whole, contract))
                else:
                    verdict = Outcome("file", "passed", "")
            emit(session, f"{prefixes[path]}::tokaudit[file]", verdict)
        if self.index is not None:
            self.index.offsets = self.shard_offsets()
        self.outcomes = evaluate(self.files(), self.index, self.contract, self.partial())
        for outcome in self.outcomes:
            emit(session, f"tokaudit::{outcome.name}", outcome)

    def sharded(self) -> dict[str, list[FileSummary]]:
        out: dict[str, list[FileSummary]] = {}
        for s in self.summaries.values():
            if s.shard is not None:
                out.setdefault(s.path, []).append(s)
        return out

    def shard_offsets(self) -> dict[tuple[str, int | None], int]:
        out = {}
        for path, parts in self.sharded().items():
            offset = 0
            for part in sorted(parts, key=lambda s: s.shard):
                out[(path, part.shard)] = offset
                offset += part.lines
        return out

    def files(self) -> list[FileSummary]:
        """One summary per file, shards merged, in path order."""
        by_path: dict[str, list[FileSummary]] = {}
        for summary in self.summaries.values():
            by_path.setdefault(summary.path, []).append(summary)
        return [self.wholes.get(p) or merge_parts(by_path[p]) for p in sorted(by_path)]

    def baseline_changes(self) -> dict[str, list[str]] | None:
        baseline = self.config.pluginmanager.get_plugin("tokaudit.baseline")
        return None if baseline is None else baseline.compare(self.files())

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        path = self.config.getoption("tokaudit_json")
        if not path:
            return
        from . import jsonreport

        data = jsonreport.build(
            self.files(), self.outcomes, self.contract, self.partial(), self.baseline_changes()
        )
        jsonreport.write(Path(self.config.invocation_params.dir, path), data)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        from .report import summary_lines

        files = self.files()
        if not files and not self.outcomes:
            return
        tr = terminalreporter
        tr.write_sep("=", "tokaudit summary")
        for line in summary_lines(files, self.contract):
            tr.write_line(line)
        if self.contract.price_per_mtok is not None and self.contract.budget is None:
            spent = sum(s.billed for s in files)
            tr.write_line(f"\nbilled {spent:,} tokens = {money(spent, self.contract)}")
        for outcome in self.outcomes:
            tr.write_line(f"tokaudit::{outcome.name}: {outcome.outcome}: {outcome.message}")
        changes = self.baseline_changes()
        for kind, paths in (changes or {}).items():
            if paths:
                tr.write_line(f"{kind} since the baseline: {', '.join(paths)}")
        path = self.config.getoption("tokaudit_json")
        if path:
            tr.write_line(f"tokaudit JSON report: {path}")


def hooks_for(session: pytest.Session, path: Path) -> Any:
    """The hooks of `path`'s conftest.py files, as its items saw them on a worker.

    The xdist controller collects nothing, so it has not imported the conftest.py files
    below the root; load them first. pytest has no public call for that: if its private one
    changes, fall back to the root's hooks.
    """
    config = session.config
    load = getattr(config.pluginmanager, "_loadconftestmodules", None)
    if load is not None:
        try:
            load(
                path,
                config.getoption("importmode"),
                config.rootpath,
                consider_namespace_packages=config.getini("consider_namespace_packages"),
            )
        except (TypeError, ValueError):
            return config.hook
    return session.gethookproxy(path)


def merge_parts(parts: list[FileSummary]) -> FileSummary:
    """Shards of one file, in order, made into a summary of the whole file."""
    parts = sorted(parts, key=lambda s: s.shard or 0)
    whole = FileSummary.from_json(parts[0].to_json())
    for part in parts[1:]:
        part = FileSummary.from_json(part.to_json())
        part.rebase(whole.lines)
        whole.merge(part)
    whole.shard, whole.shards = None, 1
    return whole


def emit(session: pytest.Session, nodeid: str, outcome: Outcome) -> None:
    """Report an outcome as an ordinary test: terminal, -rA, junitxml, exit status."""
    hook = session.config.hook
    # Count it as collected, so the terminal's progress stays within 100%.
    session.testscollected += 1
    location = (nodeid.split("::")[0], None, nodeid)
    longrepr: Any = None
    if outcome.outcome == "failed":
        longrepr = outcome.text
    elif outcome.outcome == "skipped":
        longrepr = (str(session.config.rootpath / location[0]), None, f"Skipped: {outcome.message}")
    hook.pytest_runtest_logstart(nodeid=nodeid, location=location)
    report = pytest.TestReport(
        nodeid, location, {}, outcome.outcome, longrepr, "call", user_properties=[]
    )
    if outcome.outcome == "passed" and outcome.message:
        report.sections.append(("tokaudit", outcome.message))
    hook.pytest_runtest_logreport(report=report)
    hook.pytest_runtest_logfinish(nodeid=nodeid, location=location)
