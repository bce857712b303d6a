"""Signs of life: a run that takes more than a few seconds says how far it got.

CI systems kill a job that prints nothing for minutes; a 1 GB file is ten shards of a
second each, a 1 GB `.gz` one item of most of a minute. Every `tokaudit_progress_interval`
seconds (default 5; 0: off) the run as a whole says where it is, across files and shards:

    tokaudit: 1,234,567 records, 512.0 MB of 1,067.1 MB (48%) in 50 s (10.2 MB/s), ETA 55 s; 6 of 12 items done, now data/big.jsonl [shard 7 of 10]

MB are bytes of the files as stored (compressed for .gz and .zst; a shard is its share of
its file), so the share and the ETA hold for them too. In a plain run the line comes from
the audit loop after each batch of records and when an item ends; on the xdist controller
when a worker's item ends (the workers run the items, the controller counts them). A
single item that runs longer than the interval on an xdist worker also says how far it
got, on the worker's stderr (which is the controller's), as `[gw0] tokaudit: PATH: ...`.
A line written by pytest's terminal reporter puts back the line of dots it interrupts, so
pytest's `[ NN%]` column stays where it was.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
import warnings
from pathlib import Path
from typing import Any, Callable

import pytest

from ..base.formats import source_of
from ..base.text import plural
from ..model.contract import ini_type
from ..model.summary import PROPERTY, records_of
from ..run.compat import PrivateApiError, write_above
from ..run.keys import METER
from ..sources.base import Part, shard_cuts

INI = "tokaudit_progress_interval"


INI_KEYS = (INI,)  # declared here, known to the check of key names (plugin.py)


DEFAULT = "5"


def interval(config: pytest.Config) -> float:
    try:
        with warnings.catch_warnings():  # a TOML list in [tool.pytest.ini_options]: below
            warnings.filterwarnings("ignore", message="Passing a value that is not a string",
                                    category=pytest.PytestDeprecationWarning)
            raw = config.getini(INI)
    except (TypeError, ValueError, pytest.UsageError) as exc:  # pytest's own type check
        raise pytest.UsageError(f"{INI}: expected a number of seconds (0: off): "
                                f"{str(exc).removeprefix(f'{config.inipath}: ')}") from None
    text = str(raw).strip()
    try:
        value = float(text) if not isinstance(raw, bool) else -1.0
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise pytest.UsageError(f"{INI}: expected a number of seconds (0: off), got {text!r}")
    return value


def _size(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


def _duration(seconds: float) -> str:
    seconds = max(seconds, 0.0)
    if seconds < 10:
        return f"{seconds:.1f} s"
    s = int(seconds + 0.5)
    if s < 120:
        return f"{s} s"
    if s < 7200:
        return f"{s // 60} min {s % 60:02} s"
    return f"{s // 3600} h {s % 3600 // 60:02} min"


_AUDIT_ITEM = re.compile(r"::tokaudit(?:\[shard (\d+)\])?$")


def item_bytes(rootpath: Path, nodeid: str, shard_size: int) -> int | None:
    """The bytes an audit item reads, from its node id alone (the xdist controller has no
    items): its file's size as stored, a shard its byte range by the ini's shard size (an
    estimate where a hook sets another, or a compressed file cuts at frames); None for a
    URL (or a file gone); not an audit item ([file], a dataset check): -1."""
    m = _AUDIT_ITEM.search(nodeid)
    if m is None:
        return -1
    path = nodeid[:m.start()]
    if "://" in path:
        return None
    try:
        size = Path(rootpath, path).stat().st_size
    except OSError:
        return None
    if not m.group(1):
        return size
    cuts = shard_cuts(size, shard_size) if shard_size and size > shard_size else [0, size]
    i = min(int(m.group(1)), len(cuts) - 1)
    return cuts[i] - cuts[i - 1]


class Meter:
    """Times one item's audit and formats where it got (an xdist worker's long item)."""

    def __init__(self, label: str, start: int, total: int | None, every: float,
                 emit: Callable[[str], None], clock: Callable[[], float] = time.monotonic):
        self.label, self.start, self.total = label, start, total
        self.every, self.emit, self.clock = every, emit, clock
        self.began = clock()
        self.due = self.began + every

    def tick(self, records: int, offset: int | None) -> None:
        now = self.clock()
        if now < self.due:
            return
        self.due = now + self.every
        self.emit(self.line(records, offset, now - self.began))

    def line(self, records: int, offset: int | None, elapsed: float) -> str:
        parts = [plural(records, 'record')]
        if offset is not None:
            done = max(offset - self.start, 0)
            if self.total:  # the reader reads past a shard's end to finish its last line
                done = min(done, self.total)
            rate = done / elapsed if elapsed > 0 else 0.0
            parts.append(f"{_size(done)} in {_duration(elapsed)} ({_size(rate)}/s)")
            if self.total:
                eta = f", ETA {_duration((self.total - done) / rate)}" if rate > 0 else ""
                parts.append(f"{done / self.total:.0%} of {_size(self.total)}{eta}")
        else:
            parts.append(f"in {_duration(elapsed)}")
        return f"tokaudit: {self.label}: " + ", ".join(parts)


class RunMeter:
    """The whole run's progress: items, records and bytes done of all the selected audit
    items, and the item under way (a plain run's)."""

    def __init__(self, every: float, emit: Callable[[str], None],
                 clock: Callable[[], float] = time.monotonic):
        self.every, self.emit, self.clock = every, emit, clock
        self.begin()
        self.sizes: dict[str, int | None] = {}  # audit item node id -> bytes (None: unknown)
        self.done: set[str] = set()
        self.records = 0
        self.bytes = 0
        self.current: tuple[str, str, int, int, int] | None = None  # nodeid, label, start, records, bytes

    def plan(self, sizes: dict[str, int | None]) -> None:
        """The audit items selected, once collected: the clock starts (not at start-up,
        which xdist's workers make long, so the rate is the audit's)."""
        self.sizes = sizes
        self.begin()

    def begin(self) -> None:
        """The audit starts now: what came before (an engine's start, a Ray cluster's
        seconds) is no part of the rate nor of the ETA."""
        self.began = self.clock()
        self.due = self.began + self.every

    def start(self, nodeid: str, label: str, start: int) -> None:
        self.current = (nodeid, label, start, 0, 0)

    def tick_item(self, records: int, offset: int | None) -> None:
        """After a batch of the item under way: its records, and its bytes read so far."""
        if self.current is None:
            return
        nodeid, label, start, _, _ = self.current
        size = self.sizes.get(nodeid) or 0
        read = min(max((offset or start) - start, 0), size)
        self.current = (nodeid, label, start, records, read)
        self.maybe_emit()

    def finish(self, nodeid: str, records: int) -> None:
        """An audit item's report: its records and bytes count as done (once: reruns and
        --dist each report an item again)."""
        if self.current is not None and self.current[0] == nodeid:
            self.current = None
        if nodeid in self.done or nodeid not in self.sizes:
            return
        self.done.add(nodeid)
        self.records += records
        self.bytes += self.sizes[nodeid] or 0
        self.maybe_emit()

    def maybe_emit(self) -> None:
        now = self.clock()
        if now < self.due:
            return
        self.due = now + self.every
        self.emit(self.line(now - self.began))

    def line(self, elapsed: float) -> str:
        records, done = self.records, self.bytes
        now = ""
        if self.current is not None:
            records += self.current[3]
            done += self.current[4]
            now = f", now {self.current[1]}"
        items = len(self.sizes)
        parts = [plural(records, 'record')]
        known = all(s is not None for s in self.sizes.values())
        total = sum(s or 0 for s in self.sizes.values())
        rate = done / elapsed if elapsed > 0 else 0.0
        if known and total:
            eta = f", ETA {_duration((total - done) / rate)}" if rate > 0 else ""
            parts.append(f"{_size(done)} of {_size(total)} ({min(done / total, 1.0):.0%}) in "
                         f"{_duration(elapsed)} ({_size(rate)}/s){eta}")
        else:
            parts.append(f"{_size(done)} in {_duration(elapsed)}")
        return (f"tokaudit: {', '.join(parts)}; {len(self.done):,} of "
                f"{plural(items, 'item')} done{now}")


class ItemTicks:
    """What a plain run's audit item ticks (engine.observers.Meter): the run's meter."""

    def __init__(self, run: RunMeter):
        self.run = run

    def tick(self, records: int, offset: int | None) -> None:
        self.run.tick_item(records, offset)


def _label(item: Any) -> str:
    return item.display + (f" [shard {item.shard[0] + 1} of {item.shard[1]}]" if item.shard else "")


def _is_audit_item(item: Any) -> bool:
    return isinstance(getattr(item, "part", None), Part)  # an item that reads a part


class RunProgress:
    """Registered where the run is reported (a plain run, the xdist controller): the run's
    meter, fed by the audit items run here and by every audit item's report."""

    def __init__(self, config: pytest.Config, every: float):
        self.config = config
        self.meter = RunMeter(every, self.emit)

    def emit(self, text: str) -> None:
        pm = self.config.pluginmanager
        tr = pm.get_plugin("terminalreporter")
        if tr is None:
            return
        capman = pm.get_plugin("capturemanager")
        off = capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext()
        with off:
            try:
                write_above(tr, text)
            except PrivateApiError:  # a line of its own all the same
                tr.write_line(text)
                tr.flush()

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.plan(item.nodeid for item in session.items)  # none on the xdist controller

    def pytest_runtestloop(self, session: pytest.Session) -> None:
        """After the engine's start (a tryfirst runtestloop: --tokaudit-engine=ray starts
        its cluster there), before the items run: the clock starts again."""
        self.meter.begin()

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        if not self.meter.sizes:  # every worker collects the same items
            self.plan(ids)

    def plan(self, nodeids: Any) -> None:
        from ..run.config import CONTRACT  # not at option time: it imports the whole audit

        shard_size = self.config.stash[CONTRACT].shard_size
        sizes = {n: item_bytes(self.config.rootpath, n, shard_size) for n in nodeids}
        self.meter.plan({n: s for n, s in sizes.items() if s != -1})

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: Any):
        if _is_audit_item(item):  # in a plain run: the item's batches move the run's meter
            self.meter.start(item.nodeid, _label(item), item.byte_range[0])
            item.stash[METER] = ItemTicks(self.meter)
        return (yield)

    @pytest.hookimpl(wrapper=True)  # before the controller takes the summary out of the report
    def pytest_runtest_logreport(self, report: pytest.TestReport):
        if report.when == "call":
            for name, value in report.user_properties:
                if name == PROPERTY and isinstance(value, str):
                    self.meter.finish(report.nodeid, records_of(value))
        return (yield)


class WorkerProgress:
    """On an xdist worker: an item that runs longer than the interval says how far it got,
    on stderr (the controller counts the run as the items' reports come in)."""

    def __init__(self, config: pytest.Config, every: float):
        self.config = config
        self.every = every
        self.worker = config.workerinput["workerid"]  # type: ignore[attr-defined]

    def emit(self, text: str) -> None:
        capman = self.config.pluginmanager.get_plugin("capturemanager")
        off = capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext()
        with off:
            # The worker's stderr is the controller's: one write of whole lines, on a line
            # of its own, so it never splits a line the controller is writing.
            os.write(2, f"\n[{self.worker}] {text}\n".encode("utf-8", "backslashreplace"))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: Any):
        if _is_audit_item(item):  # handed to the item's pass (engine.observers)
            item.stash[METER] = Meter(_label(item), item.byte_range[0], self.total(item),
                                      self.every, self.emit)
        return (yield)

    @staticmethod
    def total(item: Any) -> int | None:
        """What the item's part reads, in the source's unit (bytes of the file as stored)."""
        try:
            size = item.parent.source_size()
        except (OSError, AttributeError):
            size = None
        return source_of(item.source).progress_total(item.part, size)


def add_options(parser: pytest.Parser, group: pytest.OptionGroup) -> None:
    # Not part of the contract: how often a long run says how far it got. A number or a
    # text, as the contract's keys: a native TOML table may hold 5 or "5".
    parser.addini(INI, "tokaudit: seconds between progress lines of a long run "
                       f"(0: none; default: {DEFAULT})", type=ini_type("float"), default=DEFAULT)


def configure(config: pytest.Config) -> None:
    every = interval(config)
    if every <= 0:
        return
    if hasattr(config, "workerinput"):
        config.pluginmanager.register(WorkerProgress(config, every), "tokaudit.progress")
    else:
        config.pluginmanager.register(RunProgress(config, every), "tokaudit.progress")
