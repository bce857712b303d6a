"""Collection: data files become audit items; verdicts that need the whole run are items too.

Three kinds of item, all carrying the ``tokaudit`` marker:

- ``AuditItem``: one file, or one byte-range shard of a big file (``path::tokaudit``,
  ``path::tokaudit[shard i]``). Streams its part once, runs every check.
- ``WholeFileItem``: a sharded file's whole-file verdict (``path::tokaudit[file]``).
- ``DatasetItem``: a dataset check (``pytest.ini::tokaudit::budget``), anchored at the
  ini file so it has a real location and can be selected by node id.

The last two are *deferred*: wherever the run loop reaches them (in process or on an
xdist worker) they do nothing; the controller runs them through the ordinary test
protocol once every other item has run, when their inputs are known. So they are
collected, counted, selected and reported like any test.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import pytest

from ..api import audit_part, changed_since_listing, finish_file, new_summary
from ..base.formats import missing_library, source_of
from ..base.text import printable
from ..checks.dataset import check_names
from ..engine.failure import failure_lines, listed
from ..engine.observers import Observers
from ..engine.plain import HookError
from ..model.contract import Contract
from ..model.result import MARKER
from ..model.summary import PROPERTY, FileSummary
from ..sources.base import Part
from ..sources.lines import shard_lines
from .cache import entry_for, reuse
from .compat import failure_repr, teardown_towards, xdist_hands_out_units
from .config import CONTRACT, CollectUsageError, file_contract
from .engines import ENGINE, EngineError, Result, Task
from .keys import FIGURES, METER, SINK

# The controller's judge of a deferred item (registered where config.workerinput is absent).
JUDGE = pytest.StashKey[Callable[["DeferredItem"], None]]()


class TokauditWarning(pytest.PytestWarning):
    """Something about the data files that is not a finding (a symlink loop, say)."""


def display_path(path: Path, root: Path) -> str:
    """`path` relative to the rootdir, printable and JSON-safe whatever its bytes: a name
    that is not UTF-8 or holds a control character (a newline...) is escaped."""
    try:
        text = os.path.relpath(path, root)
    except ValueError:  # another drive on Windows
        text = str(path)
    # A file name that is not valid UTF-8 arrives with surrogates; JSON cannot carry them.
    return printable(os.fsencode(text).decode("utf-8", "backslashreplace"))


def dataset_anchor(config: pytest.Config) -> str:
    """The node id prefix of the dataset checks: `pytest.ini::tokaudit`."""
    inipath = config.inipath
    if inipath is not None:
        try:
            rel = inipath.relative_to(config.rootpath)
        except ValueError:
            rel = None
        if rel is not None:
            return f"{display_path(inipath, config.rootpath)}::{MARKER}".replace(os.sep, "/")
    return MARKER


# The names of a data file's items are ours: its node id is everything before the last of
# them, whatever `::` the file's own name holds (a node id is never cut at its first `::`).
_ITEM = re.compile(rf"::{MARKER}(\[shard \d+\]|\[file\])?$")

WHOLE = f"::{MARKER}[file]"  # a sharded file's whole-file item, after the file's node id

# An audit item's report carries its data file, as [file node id, "path" or "url", where]:
# the controller under xdist collects nothing, and a node id cannot name a file for sure
# (a name that is not UTF-8 is escaped in it).
SOURCE = "tokaudit_source"


def data_file_nodeid(nodeid: str) -> str | None:
    """The node id of the data file an audit or [file] item belongs to; None for another."""
    m = _ITEM.search(nodeid)
    return nodeid[:m.start()] if m else None


def configured_checks(config: pytest.Config) -> list[str]:
    """coverage, then the dataset checks the hooks declare (pytest_tokaudit_dataset_checks)."""
    try:
        return ["coverage", *check_names(config.hook, config.stash[CONTRACT])]
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


class Collector:
    """Registered with --tokaudit in every process: makes items, defers verdict items."""

    def __init__(self, config: pytest.Config, contract: Contract):
        self.config = config
        self.patterns = contract.glob
        self.seen: dict[str, Path] = {}  # real path -> the path collected first
        self.anchor_collected = False

    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector):
        if file_path == self.config.inipath and dataset_anchor(self.config) != MARKER:
            return IniFile.from_parent(parent, path=file_path)
        if not any(fnmatch.fnmatch(file_path.name, p) for p in self.patterns):
            return None
        real = os.path.realpath(file_path)
        first = self.seen.setdefault(real, file_path)
        if first != file_path:
            # A directory symlink (maybe a loop) shows the same file again: audit it once.
            warnings.warn(TokauditWarning(
                f"tokaudit: {display_path(file_path, self.config.rootpath)} is the same file "
                f"as {display_path(first, self.config.rootpath)}; audited once"
            ))
            return None
        # The node id is always the path from the rootdir, which the controller reads back:
        # pytest gives a file named on the command line outside the rootdir the node id ""
        # (so `::tokaudit[file]`, with no file to find). A name that is not valid UTF-8 is
        # escaped: node ids travel between xdist processes, which carry text only.
        name = display_path(file_path, file_path.parent)
        rel = display_path(file_path, self.config.rootpath).replace(os.sep, "/")
        return DataFile.from_parent(parent, path=file_path, name=name, nodeid=rel)

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(
        self, session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        # Before -k, -m and --lf deselect anything: the dataset checks are selectable too.
        if not self.anchor_collected:
            added = dataset_items(session)
            items.extend(added)
            # The terminal counts collected items from collect reports ("collected N
            # items", the progress percentage): report these like any collector would.
            anchor = added[0].parent
            assert anchor is not None  # DatasetChecks, under the ini file or the session
            config.hook.pytest_collectreport(
                report=pytest.CollectReport(anchor.nodeid, "passed", None, list(added))
            )
        mark_items(config, [i for i in items if isinstance(i, TokauditItem)])

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        # Another engine (--tokaudit-engine=ray) audits the selected items elsewhere, from
        # now on; each item's setup then takes its result. Items the cache answers stay here.
        engine = self.config.stash.get(ENGINE, None)
        if engine is None or session.config.option.collectonly:
            return
        engine.start([item.task() for item in session.items
                      if isinstance(item, AuditItem) and item.cached() is None])

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]):
        report = yield
        # A failed file's location is its first bad record, not the line 1 of collection:
        # for what reads report.location (pytest-sugar's "path:line", xunit1's line).
        if call.excinfo is not None and isinstance(call.excinfo.value, Verdict):
            line = call.excinfo.value.line
            if line > 1 and report.location is not None:
                path, _, domain = report.location
                report.location = (path, line - 1, domain)  # 0-based, as reportinfo's
        return report

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: Any):
        if isinstance(item, DeferredItem) and not item.released:
            # The controller runs it when everything else has run. A scheduler may still
            # place it between two items (xdist's loadfile and loadscope keep a sharded
            # file's items together): do the teardown its protocol would have done.
            teardown_towards(item.session, nextitem)
            return True
        return None


def mark_items(config: pytest.Config, items: Sequence[pytest.Item]) -> None:
    """The `tokaudit` marker, and no reruns: the data does not change between attempts,
    so a rerun only repeats the verdict (and would count its records twice)."""
    rerun = config.pluginmanager.hasplugin("rerunfailures")
    for item in items:
        item.add_marker(MARKER)
        if rerun:
            item.add_marker(pytest.mark.flaky(reruns=0))


class DeferLast:
    """Deferred items go last, after any reordering plugin: no item that runs in the loop
    may follow one whose protocol was put off, or pytest's teardown between them breaks.

    On an xdist worker they run nothing (the controller judges them) but are still sent
    like any item, and the order there decides how xdist's scheduler spreads the work:
    interleaved for `load` and `worksteal`; for `loadgroup` (units in turn) the data items
    largest first, then the deferred ones."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        items.sort(key=lambda item: isinstance(item, DeferredItem))
        if hasattr(config, "workerinput"):
            # In turn, [big, small, big, small] gives each of two workers a big and a small
            # one; a deferred item between them (interleaved) would give one worker both big
            # ones and the other the deferred items.
            items[:] = largest_first(items) if xdist_hands_out_units(config) else interleaved(items)


def interleaved(items: list[pytest.Item]) -> list[pytest.Item]:
    """The order on an xdist worker: one deferred item before each data item, the rest of
    either kind at the end; the files with the largest parts first (largest_first).

    xdist's load scheduler hands each worker its first items in consecutive pairs, then
    one more each time the worker finishes one and holds fewer than two. A deferred item
    finishes at once: after a data item (the order before), the worker that finished a
    big shard first took one small shard for the data item and another for the deferred
    one, and the other worker idled (a 300 MB file at 128 MiB: one worker 128 + 15 + 15 MB,
    the other 128 MB). Before each data item, the deferred items are done at the start,
    each worker's first pair is a data item, and the rest goes one by one to whichever
    worker is free. Large files first, so the last items handed out are small."""
    run = largest_first([i for i in items if not isinstance(i, DeferredItem)])
    later: list[pytest.Item] = [i for i in items if isinstance(i, DeferredItem)]
    out: list[pytest.Item] = []
    for k, item in enumerate(run):
        if k < len(later):
            out.append(later[k])
        out.append(item)
    return out + later[len(run):]


def largest_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """The audit items of the files with the largest parts first, in the places audit items
    held (other tests stay where they were). A file's items stay together and in their
    order (a compressed file's frame runs are uneven): --dist loadfile runs them in that
    order, and a failing shard numbers its lines from the one its worker ran before."""
    audits = [i for i in items if isinstance(i, AuditItem)]
    largest: dict[int, int] = {}
    for item in audits:
        largest[id(item.parent)] = max(largest.get(id(item.parent), 0), item.weight)
    ordered = iter(sorted(audits, key=lambda i: -largest[id(i.parent)]))  # stable
    return [next(ordered) if isinstance(i, AuditItem) else i for i in items]


def dataset_items(session: pytest.Session) -> list[DatasetItem]:
    """The dataset check items, with their anchor (the ini file, or the session)."""
    config = session.config
    anchor = dataset_anchor(config)
    if anchor == MARKER:
        group = DatasetChecks.from_parent(session, name=MARKER, nodeid=MARKER)
    else:
        ini = IniFile.from_parent(session, path=config.inipath)
        group = DatasetChecks.from_parent(ini, name=MARKER)
    return list(group.collect())


class TokauditItem(pytest.Item):
    """Base of every item this plugin makes."""

    def reportinfo(self):
        # A line is required by pytest's skip reporting; 0 is "the file". The path must be
        # printable: xdist cannot send a location holding a non-UTF-8 file name.
        path = self.path
        if display_path(path, path.parent) != path.name:
            path = path.parent / display_path(path, path.parent)
        return path, 0, self.label()

    def label(self) -> str:
        return self.nodeid

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, Verdict):
            v = excinfo.value
            lines = v.lines
            tb = self.config.getoption("tbstyle", "auto")
            if tb in ("no", "line"):
                lines = []  # --tb=line prints the location and message alone
            elif tb == "short":
                lines = lines[:6]
            return failure_repr(v.path, v.line, v.message, lines)
        if isinstance(excinfo.value, (HookError, EngineError)):
            return f"{self.nodeid}: {excinfo.value}"
        return super().repr_failure(excinfo, style=style)


class Verdict(Exception):
    """A failed verdict: the one-line message, the location, the body lines."""

    def __init__(self, message: str, lines: list[str], path: str, line: int = 0):
        super().__init__(message)
        self.message, self.lines, self.path, self.line = message, lines, path, line


class FileItems(pytest.Collector):
    """A data file's items: one AuditItem, or shards and a [file] item. The base of DataFile
    (a local file) and remote.RemoteDataFile (a file at a URL), which provide ``source``
    (what the reader opens) and ``source_size()``."""

    audit_item: type[AuditItem]
    whole_item: type[WholeFileItem]

    @property
    def source(self) -> Any:
        raise NotImplementedError

    def source_size(self) -> int | None:
        raise NotImplementedError

    def collect(self) -> Iterator[pytest.Item]:
        base = self.config.stash[CONTRACT]
        try:
            contract = file_contract(self.ihook, self.source, base, self.nodeid)
            missing = missing_library(self.source)
            if missing:
                raise CollectUsageError(f"{self.nodeid}: {missing}")
        except CollectUsageError as exc:  # the run stops with it (UsageInCollection)
            self.tokaudit_usage = str(exc)
            raise self.CollectError(str(exc)) from None
        except ValueError as exc:  # ContractError: a message, not a traceback
            raise self.CollectError(f"pytest_tokaudit_contract: {exc}") from None
        # Stat, never parse: every xdist worker collects every file and must agree.
        source = source_of(self.source)
        size = self.source_size()
        parts = source.parts(self.source, size, contract.shard_size)
        if parts is None:
            yield self.audit_item.from_parent(self, name="tokaudit", contract=contract,
                                              weight=size or 0)
            return
        n = len(parts)
        for i, part in enumerate(parts):
            start, end = part.byte_range
            yield self.audit_item.from_parent(
                self,
                name=f"tokaudit[shard {i + 1}]",
                contract=contract,
                shard=(i, n),
                byte_range=part.byte_range,
                groups=part.groups,
                # A JSONL shard's bytes; a run of row groups: its share of the file.
                weight=end - start if end is not None and part.groups is None else (size or 0) // n,
            )
        yield self.whole_item.from_parent(self, name="tokaudit[file]", contract=contract)


class DataFile(FileItems, pytest.File):
    @property
    def source(self) -> Path:
        return self.path

    def source_size(self) -> int:
        return self.path.stat().st_size


def item_source(item: pytest.Item) -> tuple[Any, str]:
    """(what the reader opens, the path shown) of an item of a data file."""
    source = getattr(item.parent, "source", item.path)
    if isinstance(source, Path):
        return source, display_path(item.path, item.config.rootpath)
    return source, str(source)


class AuditItem(TokauditItem):
    """Streams its file (or byte range) once and runs every check in that pass."""

    def __init__(
        self,
        *,
        contract: Contract,
        shard: tuple[int, int] | None = None,
        byte_range: tuple[int, int | None] = (0, None),
        groups: tuple[int, int] | None = None,
        weight: int = 0,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.contract = contract
        self.shard = shard
        # About how many bytes it reads (from the stat at collection): xdist workers order
        # the items by it (interleaved).
        self.weight = weight
        # A JSONL shard's bytes; a Parquet shard's row groups, byte_range[0] the rows before.
        self.byte_range = byte_range
        self.groups = groups
        self.source, self.display = item_source(self)

    @property
    def part(self) -> Part:
        return Part(self.byte_range, self.groups)

    # Another engine's result for this item (taken in setup); the cache entry found when the
    # items were given to the engine (False: not looked up yet; a local file's fingerprint
    # reads its bytes, once is enough).
    remote: Result | None = None
    entry: Any = False

    def new_summary(self) -> FileSummary:
        """The empty summary its pass fills."""
        summary = new_summary(self.contract, self.display, self.config.stash[CONTRACT],
                              figures=self.config.stash.get(FIGURES, True))
        if self.shard:
            summary.shard, summary.shards = self.shard
            summary.start = self.byte_range[0]
        return summary

    def cached(self) -> FileSummary | None:
        """Its summary from the cache, or None (the cache is off or has no entry). Not under
        --tokaudit-failures when the entry has findings at records: that file lists every
        bad record, which the entry does not hold; nor one without figures when the run
        draws them."""
        if self.entry is False:
            self.entry = entry_for(self)  # None: the cache is off, or cannot key this item
        return reuse(self.entry, records_needed=SINK in self.stash
                     or bool(self.config.getoption("tokaudit_failures", None)),
                     figures_needed=self.config.stash.get(FIGURES, True))

    def task(self) -> Task:
        """This item's audit, for another engine."""
        return Task(self.nodeid, self.source, self.display, self.contract, self.part,
                    self.new_summary(), self.ihook,
                    failures=bool(self.config.getoption("tokaudit_failures", None)))

    def setup(self) -> None:
        super().setup()
        # Another engine's result, waited for here: a task it could not finish makes the
        # item an error (no verdict on the data), and the run partial.
        engine = self.config.stash.get(ENGINE, None)
        try:
            self.remote = engine.result(self.nodeid) if engine is not None else None
            lost = None
        except EngineError as exc:
            lost = str(exc)
        if lost is not None:  # outside the except block: the message alone, no chained error
            pytest.fail(f"{self.label()}: not audited: {lost}", pytrace=False)
        if self.remote is not None and self.remote.retries:
            warnings.warn(TokauditWarning(
                f"{self.label()} was audited again after: " + "; ".join(self.remote.retries)))

    def runtest(self) -> None:
        contract = self.contract
        summary = self.new_summary()
        source = source_of(self.source)
        observers = Observers(self.stash[METER] if METER in self.stash else None,
                              self.stash[SINK] if SINK in self.stash else None)
        try:
            cached = self.cached()
            entry = self.entry
            if cached is not None:  # an unchanged item: its summary before the file checks
                summary = cached
                if self.shard:  # the file may have grown more shards since
                    summary.shard, summary.shards = self.shard
            elif self.remote is not None:  # audited by the engine: as if it ran here
                summary = self.remote.summary
                if observers.sink is not None and self.remote.failures is not None:
                    observers.sink.write_entries(self.remote.failures)
                if self.remote.hook_error is not None:
                    raise HookError(self.remote.hook_error)
                if self.remote.error is not None:
                    raise EngineError(self.remote.error)
            else:  # the public API's pass, as a Ray task runs it
                audit_part(self.source, contract, self.ihook, summary, self.part, observers)
            if cached is None and not isinstance(self.source, Path):
                changed_since_listing(self.source, summary)  # here or on the cluster
            if entry is not None and cached is None:
                entry.save(summary)
            # The per-file checks for a whole file (a shard's are [file]'s), and whether it
            # was read to its end (a file that could not be opened was not audited: its
            # "read" finding fails it, and the run is partial).
            finish_file(self.source, contract, self.ihook, summary, whole=self.shard is None)
        finally:
            # Reports (with user_properties) travel from xdist workers; config.stash does not.
            # An unfinished audit travels too, marked incomplete: it makes the run partial.
            self.user_properties.append((PROPERTY, summary.to_json()))
            self.user_properties.append((SOURCE, source_property(self)))
        offset = 0
        if summary.failed and summary.shard is not None and summary.start:
            try:
                offset = source.rows_before(self.source, summary.start)
            except OSError:  # the file went away: lines stay relative to the shard
                offset = 0
        # Not after damage (a corrupt frame): the shard did not count its lines to its end.
        # After numbering a failing shard: its first line is then known, and so its end.
        if (self.shard and summary.complete and not summary.read_error
                and source.kind == "lines"):
            shard_lines(self.source, self.byte_range[0], self.byte_range[1], summary.lines)
        # A shard's allowable findings are judged with the whole file, by [file].
        if summary.failed:
            message, lines = failure_lines(summary, contract, offset)
            raise Verdict(message, lines, self.display, first_line(summary, offset))

    def label(self) -> str:
        label = f"tokaudit: {self.display}"
        if self.shard:
            label += f" [shard {self.shard[0] + 1} of {self.shard[1]}]"
        return label


def source_property(item: AuditItem) -> str:
    """The SOURCE property of an audit item: JSON, which escapes a file name that is not
    UTF-8 (surrogates) where xdist's channel would refuse it."""
    assert item.parent is not None
    if isinstance(item.source, Path):
        return json.dumps([item.parent.nodeid, "path", os.fspath(item.source)])
    return json.dumps([item.parent.nodeid, "url", str(item.source)])


def first_line(summary: Any, offset: int) -> int:
    """The line a file's failure points editors at: its first bad record, else line 1."""
    errors, allowable, _ = listed(summary)
    lines = [f.line for f in errors + allowable if f.line is not None]
    return min(lines) + offset if lines else 1


class DeferredItem(TokauditItem):
    """Judged by the controller after every other item has run (see module docstring)."""

    released = False

    def runtest(self) -> None:
        self.config.stash[JUDGE](self)


class WholeFileItem(DeferredItem):
    """A sharded file's whole-file checks (count mean, outliers...), on the merged shards."""

    def __init__(self, *, contract: Contract, **kwargs: Any):
        super().__init__(**kwargs)
        self.contract = contract
        self.source, self.display = item_source(self)

    def label(self) -> str:
        return f"tokaudit: {self.display} [whole file]"


DataFile.audit_item, DataFile.whole_item = AuditItem, WholeFileItem


class IniFile(pytest.File):
    """The ini file, as the anchor of the dataset checks (`pytest.ini::tokaudit::budget`)."""

    def collect(self) -> Iterator[pytest.Collector]:
        collector = self.config.pluginmanager.get_plugin("tokaudit.collect")
        if collector is not None:
            collector.anchor_collected = True
        yield DatasetChecks.from_parent(self, name=MARKER)


class DatasetChecks(pytest.Collector):
    def collect(self) -> Iterator[DatasetItem]:
        for name in configured_checks(self.config):
            yield DatasetItem.from_parent(self, name=name)

    def reportinfo(self):
        return self.path, 0, self.nodeid


class DatasetItem(DeferredItem):
    """One dataset check: coverage, budget, unique_ids or expected_ids."""

    def label(self) -> str:
        return f"tokaudit::{self.name}"
