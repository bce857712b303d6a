"""Controller side: what the run covered, and the verdicts that need the whole run.

Registered only where ``config.workerinput`` is absent: in a plain run, or on the xdist
controller, which sees every report the workers send. It keeps each audit item's summary
once (the first complete attempt: reruns and ``--dist each`` repeat the same data), works
out whether the run audited the whole dataset, and after every other item has run, runs
the deferred items (``[file]`` verdicts, dataset checks) through pytest's ordinary test
protocol, so every report consumer sees them as tests.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest

from .collect import (
    CONTRACT,
    DataFile,
    DatasetItem,
    DeferredItem,
    Verdict,
    WholeFileItem,
    dataset_anchor,
    dataset_items,
    display_path,
    mark_items,
)
from .contract import Contract
from .dataset import IdIndex, Outcome, evaluate, merge_parts, money, plural
from .summary import IDS, PROPERTY, FileSummary

CONTROLLER = pytest.StashKey["Controller"]()
SHOWN = 5  # file names shown in a coverage message
DATA_SUFFIXES = {
    ".parquet", ".json", ".jsonl", ".ndjson", ".dvc", ".gz", ".zst", ".bz2", ".xz",
    ".arrow", ".feather", ".csv", ".tsv", ".avro", ".orc",
}


@dataclass
class Coverage:
    """Which data files the run audited to the end, against the dataset it is judged on."""

    roots: list[str]  # the dataset's paths (testpaths, or the rootdir)
    dataset: list[str]  # data files under them
    audited: list[str]  # files whose every item finished
    records: int = 0
    missing: dict[str, str] = field(default_factory=dict)  # file -> why not audited
    unmatched: list[str] = field(default_factory=list)  # present, not matching the glob
    errors: int = 0  # collection errors
    stopped: str = ""  # -x / --maxfail / interrupted
    named: list[str] = field(default_factory=list)  # paths on the command line
    empty_roots: list[str] = field(default_factory=list)  # URL roots listing no data file

    @property
    def partial(self) -> str | None:
        """Why the run did not audit the whole dataset, or None."""
        parts = []
        by_reason: dict[str, list[str]] = {}
        for path, why in sorted(self.missing.items()):
            by_reason.setdefault(why, []).append(path)
        for why, paths in by_reason.items():
            shown = ", ".join(paths[:SHOWN]) + (" ..." if len(paths) > SHOWN else "")
            parts.append(f"{plural(len(paths), 'data file')} {why}: {shown}")
        if self.errors:
            parts.append(plural(self.errors, "collection error"))
        if self.stopped:
            parts.append(self.stopped)
        return "; ".join(parts) or None

    @property
    def unjudgeable(self) -> str | None:
        """Why the dataset checks cannot pass: a partial run, or no record at all."""
        return self.partial or (None if self.records else "no record was audited")

    def to_json(self) -> dict[str, Any]:
        return {"roots": self.roots, "dataset": self.dataset, "audited": self.audited,
                "records": self.records, "missing": self.missing, "unmatched": self.unmatched,
                "errors": self.errors, "stopped": self.stopped, "partial": self.partial,
                "empty_roots": self.empty_roots}

    @classmethod
    def union(cls, parts: list[dict[str, Any]]) -> Coverage:
        """What several runs' reports covered together (the merge command's view): a file
        one job did not select is covered when another job audited it to the end."""
        audited = sorted({p for c in parts for p in c["audited"]})
        done = set(audited)
        missing: dict[str, str] = {}
        for c in parts:
            for path, why in c["missing"].items():
                if path not in done:
                    missing.setdefault(path, why)
            for path in c["dataset"]:
                if path not in done:
                    missing.setdefault(path, "audited by no report")
        return cls(
            roots=sorted({r for c in parts for r in c["roots"]}),
            dataset=sorted({p for c in parts for p in c["dataset"]}),
            audited=audited,
            records=sum(c["records"] for c in parts),
            missing=missing,
            unmatched=sorted({p for c in parts for p in c["unmatched"]}),
            errors=sum(c["errors"] for c in parts),
            stopped="; ".join(c["stopped"] for c in parts if c["stopped"]),
            empty_roots=sorted({r for c in parts for r in c.get("empty_roots", [])}),
        )


class Controller:
    def __init__(self, config: pytest.Config, contract: Contract):
        self.config = config
        self.contract = contract
        self.summaries: dict[str, FileSummary] = {}  # nodeid -> the attempt kept
        self.index = IdIndex() if contract.unique_ids or contract.expected_ids else None
        self.selected: set[str] = set()  # audit item node ids that were selected to run
        self.deferred_ids: list[str] = []  # under xdist: the deferred items to run here
        self.outcomes: dict[str, Outcome] = {}
        self.wholes: dict[str, FileSummary] = {}  # sharded files, merged
        self.collect_errors = 0
        self.stopped = ""
        self.lastfailed: dict[str, Any] = {}
        self.unjudged: set[str] = set()  # deferred node ids skipped as partial
        self._coverage: Coverage | None = None
        self.write_error: str | None = None
        self.keep_ids = bool(config and config.getoption("tokaudit_json"))

    # -- what was collected and selected ------------------------------------------------
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        cache = getattr(self.config, "cache", None)
        if cache is not None:
            self.lastfailed = dict(cache.get("cache/lastfailed", {}) or {})

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.collect_errors += 1

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        for item in session.items:  # in process; the xdist controller collects nothing
            self.selected.add(item.nodeid)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        if self.selected:
            return  # every worker collects the same items
        self.selected.update(ids)
        anchor = dataset_anchor(self.config) + "::"
        self.deferred_ids = [
            i for i in ids if i.startswith(anchor) or i.endswith("::tokaudit[file]")
        ]

    # -- summaries ----------------------------------------------------------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        kept = []
        for name, value in report.user_properties:
            if name != PROPERTY:
                kept.append((name, value))
            elif report.when == "call":  # teardown reports carry a copy
                # an `object` to pytest; what the audit item stored, FileSummary.to_json()
                self.keep(report.nodeid, FileSummary.from_json(cast(str, value)))
        # The summary has been read; keep it out of junitxml's <properties>.
        report.user_properties[:] = kept

    def keep(self, nodeid: str, summary: FileSummary) -> None:
        """Fold one attempt's summary: the first complete one per item, once."""
        old = self.summaries.get(nodeid)
        if old is not None and old.complete:
            return  # a rerun or another worker (--dist each) read the same bytes again
        self.summaries[nodeid] = summary
        if summary.complete and self.index is not None:
            self.index.add(summary)
            if not self.keep_ids:
                summary.channels.pop(IDS, None)  # folded; only merge needs them
        if self.keep_ids and IDS in summary.channels:
            # Only the JSON report still needs them: packed as they arrive (a few objects per
            # file for counter ids, not one per record); pack_runs leaves packed runs as they are.
            from .jsonreport import pack_runs

            summary.channels[IDS] = [[shard, pack_runs(ids), pack_runs(lines)]
                                     for shard, ids, lines in summary.channels[IDS]]

    # -- the run loop ---------------------------------------------------------------------
    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session):
        if self.config.option.collectonly:
            return (yield)
        try:
            result = yield
        except (session.Interrupted, session.Failed) as exc:  # not a real KeyboardInterrupt
            self.stopped = f"the run stopped early: {exc}"
            from .compat import teardown_all

            teardown_all(session)
            self.run_deferred(session)
            raise
        if session.shouldfail or session.shouldstop:
            self.stopped = f"the run stopped early: {session.shouldfail or session.shouldstop}"
        self.run_deferred(session)
        return result

    def run_deferred(self, session: pytest.Session) -> None:
        if self.deferred_ids:  # xdist: the workers skipped them; make them here
            items = self.make_deferred(session)
            mark_items(self.config, items)  # as collection marked them on the workers
        else:
            items = [i for i in session.items if isinstance(i, DeferredItem)]
        # Whole files first: the dataset checks' table uses their merged summaries.
        items.sort(key=lambda i: not isinstance(i, WholeFileItem))
        for k, item in enumerate(items):
            item.released = True
            why = self.skip_reason(item)
            if why:
                # As a marker, so the skip is reported at the item (the ini file or the
                # data file), in setup, as pytest reports any skip marker.
                self.unjudged.add(item.nodeid)
                item.add_marker(pytest.mark.skip(reason=why))
            nextitem = items[k + 1] if k + 1 < len(items) else None
            item.ihook.pytest_runtest_protocol(item=item, nextitem=nextitem)

    def make_deferred(self, session: pytest.Session) -> list[DeferredItem]:
        wanted = set(self.deferred_ids)
        out: list[DeferredItem] = [i for i in dataset_items(session) if i.nodeid in wanted]
        for nodeid in self.deferred_ids:
            if not nodeid.endswith("::tokaudit[file]"):
                continue
            out.append(self.make_whole_file(session, nodeid))
        return out

    def make_whole_file(self, session: pytest.Session, nodeid: str) -> DeferredItem:
        from .compat import PrivateApiError, load_conftests
        from .remote import PLUGIN, is_url

        if is_url(nodeid):  # a file at a URL: rebuilt from the controller's listing
            remote = self.config.pluginmanager.get_plugin(PLUGIN)
            item = remote.make_whole_file(session, nodeid) if remote is not None else None
            return item or BrokenItem.from_parent(session, name=nodeid, nodeid=nodeid,
                                                  why=f"{nodeid.split('::')[0]} is no longer listed")
        path = Path(self.config.rootpath, nodeid.split("::")[0])
        try:
            # Judged as the file's own item: its conftest.py hooks and contract.
            load_conftests(self.config, path)
        except PrivateApiError as exc:
            return BrokenItem.from_parent(session, name=nodeid, nodeid=nodeid, why=str(exc))
        datafile = DataFile.from_parent(session, path=path)
        try:
            for item in datafile.collect():
                if isinstance(item, WholeFileItem):
                    return item
            why = f"{path} is no longer large enough to be sharded"
        except OSError as exc:
            why = f"cannot read {path}: {exc.strerror or exc}"
        except Exception as exc:  # a CollectError from the contract hook
            why = str(exc)
        return BrokenItem.from_parent(session, name=nodeid, nodeid=nodeid, why=why)

    # -- verdicts -----------------------------------------------------------------------
    def nothing_selected(self) -> str | None:
        """Why the run judges nothing, when it selected no data item and no other test
        (`pytest --tokaudit empty/`, `-k` matching only a dataset check): skipping every
        verdict would leave it green (pytest exits 0 on skips), so each one fails instead.
        A partial run that ran other tests (`pytest tests/`) skips them, as designed."""
        anchor = dataset_anchor(self.config) + "::"
        if any(not (n.startswith(anchor) or n.endswith("::tokaudit[file]")) for n in self.selected):
            return None
        if self.collect_errors or self.stopped:
            return None  # already red, and its partial reason says why better
        named = ", ".join(self.coverage().named) or "none"
        return (f"no data audited: the run selected no data file and no other test (paths "
                f"named: {named}); a run that audits nothing is never green")

    def skip_reason(self, item: DeferredItem) -> str | None:
        """Why a deferred item cannot be judged on this run, or None."""
        nothing = self.nothing_selected()
        if nothing:  # one red item says it (judge()): coverage, else each verdict selected
            coverage = dataset_anchor(self.config) + "::coverage"
            return nothing if item.nodeid != coverage and coverage in self.selected else None
        if isinstance(item, WholeFileItem):
            parts = self.shards_of(item.display)
            done = {s.shard for s in parts if s.complete}
            n = parts[0].shards if parts else 0
            if not parts or len(done) < n:
                return (f"needs every shard: {len(done)} of {n or 'its'} shards of "
                        f"{item.display} audited to the end")
            return None
        if isinstance(item, DatasetItem):
            outcome = self.dataset_outcomes()[item.name]
            return outcome.message if outcome.outcome == "skipped" else None
        return None

    def shards_of(self, path: str) -> list[FileSummary]:
        return [s for s in self.summaries.values() if s.path == path and s.shard is not None]

    def judge(self, item: DeferredItem) -> None:
        """Run by a deferred item's runtest: raise Verdict, or return (passed)."""
        nothing = self.nothing_selected()
        own = self.dataset_outcomes().get(item.name) if isinstance(item, DatasetItem) else None
        if nothing and not (own is not None and own.outcome == "failed"):
            # (a verdict's own failure, "no data file under empty/", says it better)
            raise Verdict(nothing, [nothing], item.location[0], 1)
        if isinstance(item, WholeFileItem):
            return self.judge_file(item)
        outcome = self.dataset_outcomes()[item.name]
        if outcome.outcome == "failed":
            path = item.location[0]
            raise Verdict(outcome.message, [outcome.message, *outcome.lines], path, 1)
        item.add_report_section("call", "tokaudit", outcome.message)

    def judge_file(self, item: WholeFileItem) -> None:
        from .audit import check_file
        from .report import failure_lines

        path = item.display
        whole = merge_parts(self.shards_of(path))
        check_file(item.source, item.contract, item.ihook, whole)
        whole.complete = True
        self.wholes[path] = whole
        if whole.file_findings:
            message, lines = failure_lines(whole, item.contract)
            raise Verdict(message, lines, path, 1)
        item.add_report_section("call", "tokaudit", f"{whole.checked:,} records checked")

    def dataset_outcomes(self) -> dict[str, Outcome]:
        if not self.outcomes:
            cov = self.coverage()
            if self.index is not None:
                self.index.offsets = self.shard_offsets()
            outcomes = evaluate(self.config.hook, self.files(), self.index, self.contract,
                                cov.unjudgeable)
            self.outcomes = {"coverage": coverage_outcome(cov, self.contract)}
            self.outcomes.update((o.name, o) for o in outcomes)
        return self.outcomes

    # -- coverage -----------------------------------------------------------------------
    def coverage(self) -> Coverage:
        if self._coverage is None:
            self._coverage = self.compute_coverage()
        return self._coverage

    def compute_coverage(self) -> Coverage:
        config = self.config
        roots, dataset, unmatched = walk_dataset(config, self.contract.glob)
        by_path = self.by_path()
        audited = []
        records = 0
        for path, parts in by_path.items():
            if all(s.complete for s in parts) and len(parts) == parts[0].shards:
                audited.append(path)
            records += sum(s.audited for s in parts)
        selected_files = {nodeid.split("::")[0] for nodeid in self.selected}
        missing = {}
        done = set(audited)
        for path in dataset:
            if path in done:
                continue
            if path.replace(os.sep, "/") in selected_files:
                missing[path] = "did not finish (failed to run, skipped, timed out, crashed or stopped)"
            else:
                missing[path] = "not selected (-k, -m, --lf, --deselect, or not under the paths named)"
        for path, parts in by_path.items():  # audited files outside the dataset's paths
            if path not in done and path not in missing:
                missing[path] = "did not finish (failed to run, skipped, timed out, crashed or stopped)"
        cov = Coverage(
            roots=roots, dataset=dataset, audited=sorted(audited), records=records,
            missing=missing, unmatched=unmatched, errors=self.collect_errors,
            stopped=self.stopped,
            named=[display_path(Path(a.split("::")[0]).absolute(), config.rootpath)
                   for a in config.args],
        )
        from .remote import PLUGIN

        remote = config.pluginmanager.get_plugin(PLUGIN)
        if remote is not None:  # URL roots: their files are part of the dataset
            remote.extend_coverage(cov, selected_files)
        return cov

    def by_path(self) -> dict[str, list[FileSummary]]:
        out: dict[str, list[FileSummary]] = {}
        for summary in self.summaries.values():
            out.setdefault(summary.path, []).append(summary)
        return out

    def line_offsets(self, path: str, parts: list[FileSummary]) -> dict[int | None, int]:
        """Lines before each shard of `path`: added up when every shard from the first is
        in and read to its end, counted in the file otherwise, so no line depends on another
        shard running."""
        from .collect import rows_before
        from .remote import source_of

        parts = sorted((s for s in parts if s.shard is not None), key=lambda s: s.shard or 0)
        # A shard stopped by damage (a corrupt frame) did not count its lines to its end.
        if [s.shard for s in parts] == list(range(len(parts))) and not any(
                s.read_error for s in parts[:-1]):
            out, total = {}, 0
            for s in parts:
                out[s.shard] = total
                total += s.lines
            return out
        try:
            return {s.shard: rows_before(source_of(self.config, s.path), s.start)
                    for s in parts}
        except OSError:  # the file went away: lines stay relative to their shard
            return {s.shard: 0 for s in parts}

    def shard_offsets(self) -> dict[tuple[str, int | None], int]:
        out: dict[tuple[str, int | None], int] = {}
        for path, parts in self.by_path().items():
            for shard, offset in self.line_offsets(path, parts).items():
                out[(path, shard)] = offset
        return out

    def files(self) -> list[FileSummary]:
        """One summary per file, shards merged, in path order."""
        out = []
        for path, parts in sorted(self.by_path().items()):
            whole = self.wholes.get(path)
            if whole is None:
                sharded = parts[0].shard is not None
                whole = merge_parts(parts, self.line_offsets(path, parts) if sharded else None)
            out.append(whole)
        return out

    def baseline_changes(self) -> dict[str, list[str]] | None:
        baseline = self.config.pluginmanager.get_plugin("tokaudit.baseline")
        return None if baseline is None else baseline.compare(self.files())

    # -- the end --------------------------------------------------------------------------
    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.keep_lastfailed()
        path = self.config.getoption("tokaudit_json")
        if not path or self.config.option.collectonly:
            return
        from . import jsonreport

        cov = self.coverage()
        data = jsonreport.build(
            self.files(), list(self.outcomes.values()), self.contract, cov.partial,
            self.baseline_changes(),
        )
        data["coverage"] = cov.to_json()
        from .cache import report as cache_report

        data["cache"] = cache_report(self.config, self.summaries)  # which items were reused
        self.write_error = jsonreport.write(Path(self.config.invocation_params.dir, path), data)
        if self.write_error and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED  # the report CI expects is missing

    def keep_lastfailed(self) -> None:
        """A check judged on part of the data never clears the failure it had."""
        cache = getattr(self.config, "cache", None)
        if cache is None or not self.unjudged:
            return
        keep = {n for n in self.unjudged if n in self.lastfailed}
        if keep:
            now = dict(cache.get("cache/lastfailed", {}) or {})
            now.update((n, self.lastfailed[n]) for n in keep)
            cache.set("cache/lastfailed", now)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        from .report import ROWS, OUTCOME_MARKUP, styled_summary, terminal_width

        files = self.files()
        if not files and not self.outcomes:
            return
        tr = terminalreporter
        tr.write_sep("=", "tokaudit summary")
        # A long table: failing files first, the rest counted; paths fitted to the terminal.
        limit = None if self.config.option.verbose > 0 else ROWS
        for line, markup in styled_summary(files, self.contract, limit, terminal_width(self.config)):
            tr.write_line(line, **markup)
        from .cache import summary_line

        cached = summary_line(self.config, self.summaries)
        if cached:
            tr.write_line("")
            tr.write_line(cached)
        if self.contract.price_per_mtok is not None and self.contract.budget is None:
            spent = sum(s.billed_total for s in files)
            tr.write_line(f"\nbilled {spent:,} tokens = {money(spent, self.contract)}")
        anchor = dataset_anchor(self.config)
        if self.outcomes:
            tr.write_line("")
        for name, outcome in self.outcomes.items():
            tr.write_line(f"{anchor}::{name}: {outcome.outcome}: {outcome.message}",
                          **OUTCOME_MARKUP.get(outcome.outcome, {}))
        changes = self.baseline_changes()
        for kind, paths in (changes or {}).items():
            if paths:
                tr.write_line(f"{kind} since the baseline: {', '.join(paths)}")
        path = self.config.getoption("tokaudit_json")
        if path and self.write_error:
            tr.write_line(f"tokaudit JSON report NOT written: {self.write_error}", red=True)
        elif path:
            tr.write_line(f"tokaudit JSON report: {path}")


class BrokenItem(DeferredItem):
    """A deferred item the controller could not rebuild: fails, saying why."""

    def __init__(self, *, why: str, **kwargs: Any):
        super().__init__(**kwargs)
        self.why = why

    def runtest(self) -> None:
        raise Verdict(self.why, [self.why], self.nodeid.split("::")[0], 1)


def coverage_outcome(cov: Coverage, contract: Contract) -> Outcome:
    where = ", ".join("the rootdir" if r == "." else r for r in cov.roots)
    if cov.partial:
        return Outcome("coverage", "skipped", f"partial run: {cov.partial}")
    if cov.empty_roots:  # a URL prefix with nothing under it may as well be mistyped
        glob = " ".join(contract.glob)
        message = (f"no data file under {', '.join(cov.empty_roots)}: tokaudit_glob ({glob}) "
                   "matched nothing there")
        there = [u for u in cov.unmatched if any(u.startswith(r) for r in cov.empty_roots)]
        lines = [f"present but not matched by tokaudit_glob: {', '.join(there[:10])}"] if there else []
        return Outcome("coverage", "failed", message, lines)
    if not cov.records and not (cov.audited and contract.allow_empty):
        glob = " ".join(contract.glob)
        if cov.audited:
            n = len(cov.audited)
            message = (f"no record audited: {plural(n, 'file')} under {where} matched by "
                       f"tokaudit_glob ({glob}) {'holds' if n == 1 else 'hold'} none")
        else:
            message = f"no data audited: tokaudit_glob ({glob}) matched no file under {where}"
            if cov.named and cov.named != cov.roots:
                message += f" (paths named: {', '.join(cov.named)})"
        lines = []
        if cov.unmatched:
            shown = ", ".join(cov.unmatched[:10]) + (" ..." if len(cov.unmatched) > 10 else "")
            lines.append(f"present but not matched by tokaudit_glob: {shown}")
        return Outcome("coverage", "failed", message, lines)
    return Outcome(
        "coverage", "passed",
        f"{plural(len(cov.audited), 'data file')} ({plural(cov.records, 'record')}) "
        f"audited to the end under {where}",
    )


def walk_dataset(config: pytest.Config, patterns: tuple[str, ...]) -> tuple[list[str], list[str], list[str]]:
    """(roots, data files, other files) of the dataset: what a bare `pytest --tokaudit`
    collects: `testpaths` when set, else the rootdir. Stats only; never reads a file."""
    import glob

    root = config.rootpath
    testpaths = config.getini("testpaths")
    paths: list[Path] = []
    for entry in testpaths or []:
        if "://" in entry:  # a URL: listed by remote.py
            continue
        matches = sorted(glob.glob(str(root / entry), recursive=True)) or [str(root / entry)]
        paths += [Path(m) for m in matches]
    if not paths and not testpaths:
        paths = [root]
    norecurse = config.getini("norecursedirs")
    ignore = {Path(p).resolve() for p in (config.getoption("ignore", None) or [])}
    ignore_glob = config.getoption("ignore_glob", None) or []
    seen_dirs: set[str] = set()
    seen_files: set[str] = set()
    data, other = [], []

    def skip(path: Path) -> bool:
        return path.resolve() in ignore or any(fnmatch.fnmatch(str(path), g) for g in ignore_glob)

    def consider(path: Path) -> None:
        real = os.path.realpath(path)
        if real in seen_files or skip(path):
            return
        seen_files.add(real)
        rel = display_path(path, root)
        if any(fnmatch.fnmatch(path.name, p) for p in patterns):
            data.append(rel)
        elif DATA_SUFFIXES & {s.lower() for s in path.suffixes}:
            other.append(rel)  # data not collected: worth naming when nothing was audited

    for top in paths:
        if top.is_file():
            consider(top)
            continue
        for dirpath, dirnames, filenames in os.walk(top, followlinks=True):
            real = os.path.realpath(dirpath)
            if real in seen_dirs:  # a symlink loop, or a directory reached twice
                dirnames[:] = []
                continue
            seen_dirs.add(real)
            dirnames[:] = sorted(
                d for d in dirnames
                if not any(fnmatch.fnmatch(d, p) for p in norecurse)
                and not skip(Path(dirpath, d))
                and not Path(dirpath, d, "pyvenv.cfg").exists()
            )
            for name in sorted(filenames):
                if not name.endswith((".py", ".pyc")) and name != "conftest.py":
                    consider(Path(dirpath, name))
    roots = [display_path(p, root) for p in paths]
    return roots, sorted(data), sorted(other)
