"""Controller side: what the run covered, and the verdicts that need the whole run.

Registered only where ``config.workerinput`` is absent: in a plain run, or on the xdist
controller, which sees every report the workers send. It keeps each audit item's summary
once (the first complete attempt: reruns and ``--dist each`` repeat the same data), works
out whether the run audited the whole dataset, and after every other item has run, runs
the deferred items (``[file]`` verdicts, dataset checks) through pytest's ordinary test
protocol, so every report consumer sees them as tests.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

from ..base.text import plural
from ..checks.dataset import evaluate
from ..engine.failure import whole_file_lines
from ..engine.plain import check_file
from ..model.contract import Contract
from ..model.outcome import Outcome
from ..model.report import pack_runs
from ..model.result import Coverage, RunResult
from ..model.summary import IDS, PROPERTY, FileSummary, merge_parts
from ..sources.lines import rows_before
from .cache import report as cache_report
from .cache import summary_line
from .compat import PrivateApiError, load_conftests, teardown_all
from .coverage import coverage_outcome, walk_dataset
from .items import (
    JUDGE,
    SOURCE,
    WHOLE,
    DataFile,
    DatasetItem,
    DeferredItem,
    Verdict,
    WholeFileItem,
    data_file_nodeid,
    configured_checks,
    dataset_anchor,
    dataset_items,
    display_path,
    mark_items,
)
from .keys import RESULT
from .remote import PLUGIN, source_of

if TYPE_CHECKING:  # the id index loads only where ids are checked
    from ..model.idindex import IdIndex


# Why a sharded file whose every shard ran is not audited (Coverage.missing): not "not
# selected", which a merge reads as another part's business (Coverage.union).
UNSELECTED_WHOLE = "whose own verdict ([file]) was not selected (-k, -m, --lf, --deselect)"


class Controller:
    def __init__(self, config: pytest.Config, contract: Contract):
        if config is not None:  # the deferred items' judge (run.items.DeferredItem)
            config.stash[JUDGE] = self.judge
        self.config = config
        self.contract = contract
        self.summaries: dict[str, FileSummary] = {}  # nodeid -> the attempt kept
        self.index: IdIndex | None = None
        if contract.unique_ids or contract.expected_ids:
            from ..model.idindex import IdIndex

            self.index = IdIndex()
        self.selected: set[str] = set()  # audit item node ids that were selected to run
        self.deferred_ids: list[str] = []  # under xdist: the deferred items to run here
        # data file node id -> ("path" or "url", where), from its audit items' reports
        self.sources: dict[str, tuple[str, str]] = {}
        self.outcomes: dict[str, Outcome] = {}
        self.wholes: dict[str, FileSummary] = {}  # sharded files, merged
        self.collect_errors = 0
        self.stopped = ""
        self.lastfailed: dict[str, Any] = {}
        self.unjudged: set[str] = set()  # deferred node ids skipped as partial
        self._coverage: Coverage | None = None
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
        self.deferred_ids = [i for i in ids if i.startswith(anchor) or i.endswith(WHOLE)]

    # -- summaries ----------------------------------------------------------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        kept = []
        for name, value in report.user_properties:
            if name == SOURCE:
                nodeid, kind, where = json.loads(cast(str, value))
                self.sources[nodeid] = (kind, where)
            elif name != PROPERTY:
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

            summary.channels[IDS] = [[shard, pack_runs(ids), pack_runs(lines)]
                                     for shard, ids, lines in summary.channels[IDS]]

    # -- the run loop ---------------------------------------------------------------------
    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session):
        if self.config.option.collectonly:
            return (yield)
        try:
            try:
                result = yield
            except (session.Interrupted, session.Failed) as exc:  # not a real KeyboardInterrupt
                self.stopped = f"the run stopped early: {exc}"
                teardown_all(session)
                self.run_deferred(session)
                raise
            if session.shouldfail or session.shouldstop:
                self.stopped = f"the run stopped early: {session.shouldfail or session.shouldstop}"
            self.run_deferred(session)
            return result
        finally:  # every verdict is in (or the run was stopped): what the outputs read
            self.config.stash[RESULT] = self.result()

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
            if nodeid.endswith(WHOLE):
                out.append(self.make_whole_file(session, nodeid, nodeid[:-len(WHOLE)]))
        return out

    def make_whole_file(self, session: pytest.Session, nodeid: str, file_id: str) -> DeferredItem:
        """A [file] item, rebuilt from the file its shards' reports named (a node id cannot
        be turned back into a file for sure). None of them reported: no shard finished, so
        nothing is judged, and the item says so (skipped)."""
        source = self.sources.get(file_id)
        if source is None:
            return UnjudgedItem.from_parent(
                session, name=nodeid, nodeid=nodeid, where=file_id,
                why=f"needs every shard: 0 of its shards of {file_id} audited to the end")
        kind, where = source
        if kind == "url":  # a file at a URL: rebuilt from the controller's listing
            remote = self.config.pluginmanager.get_plugin(PLUGIN)
            item = remote.make_whole_file(session, where) if remote is not None else None
            return item or BrokenItem.from_parent(session, name=nodeid, nodeid=nodeid, where=where,
                                                  why=f"{where} is no longer listed")
        path = Path(where)
        try:
            # Judged as the file's own item: its conftest.py hooks and contract.
            load_conftests(self.config, path)
        except PrivateApiError as exc:
            return BrokenItem.from_parent(session, name=nodeid, nodeid=nodeid, where=file_id,
                                          why=str(exc))
        # Named as collection named it (the node id escapes a name that is not UTF-8).
        datafile = DataFile.from_parent(session, path=path, name=display_path(path, path.parent),
                                        nodeid=file_id)
        try:
            for item in datafile.collect():
                if isinstance(item, WholeFileItem):
                    return item
            why = f"{file_id} is no longer large enough to be sharded"
        except OSError as exc:
            why = f"cannot read {file_id}: {exc.strerror or exc}"
        except Exception as exc:  # a CollectError from the contract hook
            why = str(exc)
        return BrokenItem.from_parent(session, name=nodeid, nodeid=nodeid, where=file_id, why=why)

    # -- verdicts -----------------------------------------------------------------------
    def nothing_selected(self) -> str | None:
        """Why the run judges nothing, when it selected no data item and no other test
        (`pytest --tokaudit empty/`, `-k` matching only a dataset check): skipping every
        verdict would leave it green (pytest exits 0 on skips), so each one fails instead.
        A partial run that ran other tests (`pytest tests/`) skips them, as designed."""
        anchor = dataset_anchor(self.config) + "::"
        if any(not (n.startswith(anchor) or n.endswith(WHOLE)) for n in self.selected):
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
        if isinstance(item, UnjudgedItem):
            return item.why
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
        path = item.display
        whole = merge_parts(self.shards_of(path))
        theirs = len(whole.file_findings)  # the shards' own (a read error): their failures
        check_file(item.source, item.contract, item.ihook, whole)
        whole.complete = True
        self.wholes[path] = whole
        own = whole.file_findings[theirs:]
        if own:
            failing = [f"shard {(s.shard or 0) + 1} of {s.shards}" for s in
                       sorted(self.shards_of(path), key=lambda s: s.shard or 0) if s.failed]
            message, lines = whole_file_lines(whole, own, item.contract, failing)
            raise Verdict(message, lines, path, 1)
        item.add_report_section("call", "tokaudit", f"{plural(whole.checked, 'record')} checked")

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
        missing = {}
        unselected = self.unselected_wholes()
        for path, parts in by_path.items():
            if path in unselected:  # every shard ran, the file's own verdict did not
                missing[path] = UNSELECTED_WHOLE
            elif all(s.complete for s in parts) and len(parts) == parts[0].shards:
                audited.append(path)
            records += sum(s.audited for s in parts)
        selected_files = {f for f in map(data_file_nodeid, self.selected) if f is not None}
        done = set(audited)
        for path in dataset:
            if path in done or path in missing:
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

        remote = config.pluginmanager.get_plugin(PLUGIN)
        if remote is not None:  # URL roots: their files are part of the dataset
            remote.extend_coverage(cov, selected_files)
        return cov

    def unselected_wholes(self) -> set[str]:
        """Sharded files (by path) whose [file] item was not selected (-k, --deselect):
        their own verdict (allowances, the mean, file checks) is never judged, so they are
        never audited to the end, however many of their shards ran."""
        out = set()
        for nodeid, summary in self.summaries.items():
            file_id = data_file_nodeid(nodeid)
            if summary.shard is not None and file_id is not None and (
                    file_id + WHOLE) not in self.selected:
                out.add(summary.path)
        return out

    def by_path(self) -> dict[str, list[FileSummary]]:
        out: dict[str, list[FileSummary]] = {}
        for summary in self.summaries.values():
            out.setdefault(summary.path, []).append(summary)
        return out

    def line_offsets(self, path: str, parts: list[FileSummary]) -> dict[int | None, int]:
        """Lines before each shard of `path`: added up when every shard from the first is
        in and read to its end, counted in the file otherwise, so no line depends on another
        shard running."""
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

    # -- the end --------------------------------------------------------------------------
    @pytest.hookimpl(trylast=True)  # after the cache provider wrote its lastfailed
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.keep_lastfailed()

    def result(self) -> RunResult:
        files = self.files()
        by_path = self.by_path()
        baseline = self.config.pluginmanager.get_plugin("tokaudit.baseline")
        # Only the checks that were selected were judged (or skipped): a check --lf or -k
        # left out is "not selected", never reported as "skipped: partial run".
        anchor = dataset_anchor(self.config) + "::"
        chosen = {n[len(anchor):] for n in self.selected if n.startswith(anchor)}
        unjudged = {name: "not selected" for name in self.check_names() if name not in chosen}
        unjudged.update((o.name, "skipped") for o in self.outcomes.values()
                        if o.name in chosen and o.outcome == "skipped")
        unjudged.update((n.split("::")[0] + " [file]", "skipped") for n in sorted(self.unjudged)
                        if n.endswith("::tokaudit[file]"))
        unjudged.update((f"{path} [file]", "not selected")
                        for path in sorted(self.unselected_wholes()))
        return RunResult(
            contract=self.contract,
            items=dict(self.summaries),
            files=files,
            outcomes=[o for o in self.outcomes.values() if o.name in chosen],
            unjudged=unjudged,
            coverage=self.coverage(),
            anchor=dataset_anchor(self.config),
            offsets={path: self.line_offsets(path, parts) for path, parts in by_path.items()
                     if parts[0].shard is not None},
            baseline=None if baseline is None else baseline.compare(files),
            baseline_files=None if baseline is None else baseline.summaries,
            baseline_name="" if baseline is None else baseline.path,
            cache=cache_report(self.config, self.summaries),
            cache_line=summary_line(self.config, self.summaries),
        )

    def check_names(self) -> list[str]:
        """coverage and the dataset checks configured (as collected), or [] if they cannot
        be named (a hook's error, a collection error already)."""
        try:
            return configured_checks(self.config)
        except pytest.UsageError:
            return []

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


class BrokenItem(DeferredItem):
    """A deferred item the controller could not rebuild: fails, saying why, at `where` (the
    file it is about, as shown)."""

    def __init__(self, *, why: str, where: str, **kwargs: Any):
        super().__init__(**kwargs)
        self.why, self.where = why, where

    def runtest(self) -> None:
        raise Verdict(self.why, [self.why], self.where, 1)


class UnjudgedItem(BrokenItem):
    """A [file] item none of whose shards reported: skipped (skip_reason), saying why."""
