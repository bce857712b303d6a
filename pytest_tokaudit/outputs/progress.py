"""Signs of life: an audit item that runs long says how far it got, every so often.

CI systems kill a job that prints nothing for minutes; a 1 GB `.gz` file is one item that
takes most of a minute. Every `tokaudit_progress_interval` seconds (default 10; 0: off) of
an item's run, a line such as

    tokaudit: data/big.jsonl.gz: 1,234,567 records, 512.0 MB in 50 s (10.2 MB/s), 48% of 1,067.1 MB, ETA 55 s

is printed: by the terminal reporter in a plain run, on stderr by an xdist worker (prefixed
`[gw0]`), in both cases with pytest's capture suspended as its live logging does. MB are
bytes of the file as stored (compressed for .gz and .zst), so the share and the ETA hold for
them too. The audit loop calls `tick` after each batch of records, so a line comes at the
first batch boundary past the interval.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any, Callable

import pytest

from ..base.formats import source_of
from ..engine.observers import METER
from ..sources.base import Part

INI = "tokaudit_progress_interval"


INI_KEYS = (INI,)  # declared here, known to the check of key names (plugin.py)


DEFAULT = "10"




def add_ini(parser: pytest.Parser) -> None:
    parser.addini(INI, "tokaudit: seconds between progress lines of a long audit item "
                       f"(0: none; default: {DEFAULT})", default=DEFAULT)


def interval(config: pytest.Config) -> float:
    text = str(config.getini(INI)).strip()
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise pytest.UsageError(f"{INI}: expected a number of seconds (0: off), got {text!r}")
    return value


def _size(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


def _duration(seconds: float) -> str:
    if seconds < 10:
        return f"{seconds:.1f} s"
    s = int(seconds + 0.5)
    if s < 120:
        return f"{s} s"
    if s < 7200:
        return f"{s // 60} min {s % 60:02} s"
    return f"{s // 3600} h {s % 3600 // 60:02} min"


class Meter:
    """Times one item's audit and formats where it got."""

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
        parts = [f"{records:,} records"]
        if offset is not None:
            done = max(offset - self.start, 0)
            rate = done / elapsed if elapsed > 0 else 0.0
            parts.append(f"{_size(done)} in {_duration(elapsed)} ({_size(rate)}/s)")
            if self.total:
                share = min(done / self.total, 1.0)
                eta = f", ETA {_duration((self.total - done) / rate)}" if rate > 0 else ""
                parts.append(f"{share:.0%} of {_size(self.total)}{eta}")
        else:
            parts.append(f"in {_duration(elapsed)}")
        return f"tokaudit: {self.label}: " + ", ".join(parts)


class Progress:
    """Registered in every process that audits: a meter around each audit item's call."""

    def __init__(self, config: pytest.Config, every: float):
        self.config = config
        self.every = every
        worker = getattr(config, "workerinput", None)
        self.worker = worker["workerid"] if worker else None

    def emit(self, text: str) -> None:
        pm = self.config.pluginmanager
        capman = pm.get_plugin("capturemanager")
        off = capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext()
        with off:
            if self.worker is not None:
                # The worker's stderr is the controller's: one write of whole lines, on a
                # line of its own, so it never splits a line the controller is writing.
                os.write(2, f"\n[{self.worker}] {text}\n".encode("utf-8", "backslashreplace"))
                return
            tr = pm.get_plugin("terminalreporter")
            if tr is None:
                return
            tr.write_line(text)
            tr.flush()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: Any):  # an audit item: one that reads a part
        if isinstance(getattr(item, "part", None), Part):  # handed to the item's pass (engine.observers)
            item.stash[METER] = Meter(self.label(item), item.byte_range[0], self.total(item),
                                      self.every, self.emit)
        return (yield)

    @staticmethod
    def label(item: Any) -> str:
        return item.display + (f" [shard {item.shard[0] + 1} of {item.shard[1]}]" if item.shard else "")

    @staticmethod
    def total(item: Any) -> int | None:
        """What the item's part reads, in the source's unit (bytes of the file as stored)."""
        try:
            size = item.parent.source_size()
        except (OSError, AttributeError):
            size = None
        return source_of(item.source).progress_total(item.part, size)


def add_options(parser: pytest.Parser, group: pytest.OptionGroup) -> None:
    add_ini(parser)  # not part of the contract: how often a long item says how far it got


def configure(config: pytest.Config) -> None:
    every = interval(config)
    if every > 0:
        config.pluginmanager.register(Progress(config, every), "tokaudit.progress")
