"""--tokaudit-failures=PATH: every bad record, uncapped, one JSON line per finding.

The quarantine list a training job drops. Findings are written as the audit goes, by the
process that audits (each xdist worker, or the one process of `-n 0`), into its own part
file next to PATH (`.NAME.RUN.WORKER.part`); the controller merges the parts into PATH at
the end of the session, with shard lines rebased to the file (from the controller's
summaries) and each item taken once (reruns and `--dist each` audit an item twice).

A part is a sequence of blocks, one per audit item:
`{"begin": nodeid, "path": ..., "shard": i}`, the item's findings, `{"end": nodeid,
"complete": bool}`. The merge reads the markers, keeps one block per item (a complete
one when there is one), and copies each block's findings in file order.

Only findings at a record (a line, or a Parquet row) are listed; file-level verdicts and
the dataset checks are not bad records.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
import uuid
from pathlib import Path
from typing import Any, BinaryIO, Sequence

import orjson
import pytest

from ..base.atomic import check_writable, replacing
from ..base.findings import Finding
from ..base.formats import location
from ..base.text import plural
from ..engine.observers import entries
from ..model.result import RunResult
from ..model.summary import BIG_INT, PROPERTY
from ..run.keys import SINK
from ..sources.base import Part
from .session import SessionFile

PREFIX = pytest.StashKey[str]()


WORKERINPUT = "tokaudit_failures"


def dumps(entry: dict[str, Any]) -> bytes:
    try:
        return orjson.dumps(entry) + b"\n"
    except TypeError:  # an id past 64 bits: Python's json holds it
        return json.dumps(entry, ensure_ascii=False).encode() + b"\n"


class Sink:
    """Where one process writes: its part file, opened at its first audit item.

    A part that cannot be opened or written is given up, never an error of the item: the
    controller finds the findings missing (it counts them against the summaries) and
    fails the run, saying so.
    """

    def __init__(self, prefix: str, worker: str):
        self.path = Path(f"{prefix}.{worker}.part")
        self.fh: BinaryIO | None = None
        self.broken = False
        self.file = ""  # the current item's display path

    def _put(self, data: bytes, flush: bool = False) -> None:
        if self.broken:
            return
        try:
            if self.fh is None:
                self.fh = open(self.path, "ab")
            self.fh.write(data)
            if flush:
                self.fh.flush()
        except OSError:
            self.broken = True
            with contextlib.suppress(OSError):
                if self.fh is not None:
                    self.fh.close()
            self.fh = None

    def begin(self, nodeid: str, path: str, shard: int | None) -> None:
        self.file = path
        self._put(dumps({"begin": nodeid, "path": path, "shard": shard}))

    def end(self, nodeid: str, complete: bool) -> None:
        self._put(dumps({"end": nodeid, "complete": complete}), flush=True)

    def write(self, found: Sequence[Finding], batch: Sequence[Any],
              unusable: Sequence[Any] = ()) -> None:
        """A batch's findings (lines relative to the item's part), with the record's counts."""
        if not self.broken:
            self.write_entries(entries(found, batch, unusable))

    def write_entries(self, found: Sequence[dict[str, Any]]) -> None:
        """Findings as engine.observers.entries made them (here, or in a Ray task)."""
        self._put(b"".join(dumps({"location": location(self.file, e["line"]), "path": self.file, **e})
                           for e in found))

    def close(self) -> None:
        if self.fh is not None:
            with contextlib.suppress(OSError):
                self.fh.close()
            self.fh = None


class Writer:
    """In each process that runs audit items: a block per item in this process's part."""

    def __init__(self, config: pytest.Config, prefix: str):
        worker = getattr(config, "workerinput", {}).get("workerid", "main")
        self.sink = Sink(prefix, worker)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: Any):  # an audit item: one that reads a part
        if not isinstance(getattr(item, "part", None), Part):
            return (yield)
        self.sink.begin(item.nodeid, item.display, item.shard[0] if item.shard else None)
        item.stash[SINK] = self.sink  # handed to the item's pass (engine.observers)
        complete = False
        try:
            return (yield)
        finally:
            for name, value in reversed(item.user_properties):
                if name == PROPERTY and isinstance(value, (str, bytes)):
                    complete = bool(orjson.loads(value).get("complete"))
                    break
            self.sink.end(item.nodeid, complete)

    def pytest_unconfigure(self) -> None:
        self.sink.close()


class Merge(SessionFile):
    """On the controller: hands workers the part prefix, merges the parts at the end."""

    what = "failures file"

    def __init__(self, config: pytest.Config, target: Path, prefix: str, own_dir: Path | None = None):
        super().__init__(config, target)
        self.prefix = prefix
        self.own_dir = own_dir  # the parts' private folder (a FIFO or device target), removed
        self.count = 0  # findings written

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[WORKERINPUT] = self.prefix

    def write(self, result: RunResult, exitstatus: int) -> str | None:
        writer = self.config.pluginmanager.get_plugin("tokaudit.failures")
        if writer is not None:
            writer.sink.close()  # -n 0: this process's own part
        parts = sorted(Path(self.prefix).parent.glob(Path(self.prefix).name + ".*.part"))
        error = None
        try:
            self.count, missing = merge(parts, self.path, result)
            if missing:
                self.state = "INCOMPLETE"
                error = (f"{self.path} lacks {missing:,} of the findings the audit counted "
                         "(a part file next to it could not be written)")
        except OSError as exc:
            error = f"cannot write {self.path}: {exc.strerror or exc}"
        for part in parts:
            with contextlib.suppress(OSError):
                part.unlink()
        if self.own_dir is not None:
            with contextlib.suppress(OSError):
                self.own_dir.rmdir()
        return error

    def shown(self) -> str:
        path = self.config.getoption("tokaudit_failures")
        return f"{path} ({plural(self.count, 'finding')} at records)"


def blocks(part: Path) -> list[dict[str, Any]]:
    """The item blocks of a part: nodeid, path, shard, byte range, complete (None: cut off)."""
    out: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    pos = 0
    with open(part, "rb") as fh:
        for line in fh:
            if line.startswith((b'{"begin"', b'{"end"')):
                marker = orjson.loads(line)
                if current is not None:
                    current["stop"] = pos
                    if "end" in marker and marker["end"] == current["nodeid"]:
                        current["complete"] = marker["complete"]
                    out.append(current)
                    current = None
                if "begin" in marker:
                    current = {"part": part, "nodeid": marker["begin"], "path": marker["path"],
                               "shard": marker["shard"], "start": pos + len(line),
                               "complete": None}
            pos += len(line)
    if current is not None:  # the worker stopped inside the item (a crash, a timeout)
        current["stop"] = pos
        out.append(current)
    return out


def choose(all_blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One block per item: the first complete one, else the first; in file order."""
    chosen: dict[str, dict[str, Any]] = {}
    for b in all_blocks:
        old = chosen.get(b["nodeid"])
        if old is None or (not old["complete"] and b["complete"]):
            chosen[b["nodeid"]] = b
    return sorted(chosen.values(), key=lambda b: (b["path"], b["shard"] or 0))


def merge(parts: list[Path], target: Path, result: RunResult) -> tuple[int, int]:
    """Write `target` from the parts (atomically): (findings written, findings at records
    the items' summaries counted that no part holds)."""
    picked = choose([b for part in parts for b in blocks(part)])
    expected = {nodeid: s.findings - len(s.file_findings) for nodeid, s in result.items.items()}
    n = 0
    with replacing(target) as out:  # whole, or not at all; a FIFO is written in place
        for b in picked:
            offset = 0
            if b["shard"] is not None:
                offset = result.offsets.get(b["path"], {}).get(b["shard"], 0)
            with open(b["part"], "rb") as fh:
                fh.seek(b["start"])
                data = fh.read(b["stop"] - b["start"])
            lines = data.splitlines(keepends=True)
            n += len(lines)
            expected[b["nodeid"]] = expected.get(b["nodeid"], 0) - len(lines)
            if not offset:
                out.write(data)
                continue
            for line in lines:
                entry = json.loads(line) if BIG_INT.search(line) else orjson.loads(line)
                entry["line"] += offset
                entry["location"] = location(entry["path"], entry["line"])
                out.write(dumps(entry))
    return n, sum(v for v in expected.values() if v > 0)


def _special(path: Path) -> bool:
    """A FIFO or a device (a symlink followed), which base.atomic writes in place."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:  # nothing there yet: a regular file will be made
        return False


PATH_OPTIONS = (("--tokaudit-failures", "tokaudit_failures"),)  # files written (run/targets.py)


def add_options(parser: pytest.Parser, group: pytest.OptionGroup) -> None:
    group.addoption(
        "--tokaudit-failures", metavar="PATH", default=None,
        help="write every bad record, uncapped, as JSON lines to PATH",
    )


def configure(config: pytest.Config) -> None:
    """Register the writer (every process that audits) and, on the controller, the merge."""
    option = config.getoption("tokaudit_failures")
    if not option:
        return
    pm = config.pluginmanager
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None:
        target = Path(config.invocation_params.dir, option).absolute()
        check_writable(target, "--tokaudit-failures")
        # The parts go next to the file they make, but never next to a FIFO or a device
        # (written in place: its folder may be /dev): a private folder then.
        own_dir = Path(tempfile.mkdtemp(prefix="tokaudit-failures-")) if _special(target) else None
        folder = own_dir or target.parent
        prefix = str(folder / f".{target.name}.{uuid.uuid4().hex[:12]}")
        config.stash[PREFIX] = prefix
        pm.register(Merge(config, target, prefix, own_dir), "tokaudit.failures.merge")
    else:
        prefix = workerinput.get(WORKERINPUT)
        if prefix is None:
            return  # a controller that did not hand out a prefix: it merges nothing
    pm.register(Writer(config, prefix), "tokaudit.failures")
