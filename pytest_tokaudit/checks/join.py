"""tokaudit_requests: requests joined to their responses (OpenAI's Batch API and the like).

The request files (`tokaudit_requests = GLOB`, JSONL lines with `custom_id` and `body`,
plain or .gz / .zst: a compressed one is inflated once per process into a temporary plain
copy, read by offset) are indexed once per process: per request a 64-bit hash of its join id (`tokaudit_join_field`),
its place (file and line) and its byte offset, 24 bytes in three numpy arrays sorted by
hash; nothing else of a request is held. The prompt audit (checks/prompt.py) reads a
response's request by that offset.

Each audited part fills one entry of the `join` channel, whatever its batches (so both
engines write the same report): the hashes and lines of its responses (packed as base64
arrays: a few bytes per response in the report), the responses whose id has no request,
and the error lines (`error` set, a non-200 `response.status_code`). The dataset
check `pytest.ini::tokaudit::requests` folds them: every request answered exactly once. In
a partial run requests without a response are not judged (their answer may be in a file
not audited); a response with no request, or a request answered twice, fails all the same.
"""

from __future__ import annotations

import atexit
import base64
import functools
import glob
import hashlib
import os
import shutil
import tempfile
import weakref
import zlib
from array import array
from pathlib import Path
from typing import Any

import orjson

from ..base.fields import MISSING, get_path
from ..base.formats import location
from ..base.hooks import hookimpl
from ..base.text import plural
from ..model.outcome import Outcome
from ..model.records import error_of, field_value
from ..model.summary import writable
from ..sources.base import ReadError, is_compressed
from ..sources.codecs import inflate

# per part: [shard, hashes, lines, orphans, errors]; hashes and lines are array("Q"), base64
# once the summary travels (summary.to_json), read back by _unpack.
CHANNEL = "join"
NAME = "requests"  # the dataset check
SHOWN = 20  # places listed per kind of finding
_LINE_BITS = 40  # a place: file index << 40 | line


class JoinError(ValueError):
    """The request files cannot be indexed; the message says why."""


def id_hash(value: Any) -> int | None:
    """A join id's 63-bit hash (a str and an int never share one); None for no id."""
    if type(value) is str:
        key = b"s" + value.encode("utf-8", "surrogatepass")
    elif type(value) is int:
        key = b"i" + str(value).encode()
    else:
        return None
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little") >> 1


def _numpy() -> Any:
    try:
        import numpy
    except ModuleNotFoundError:
        raise JoinError("tokaudit_requests needs numpy (the request index): "
                        "pip install 'pytest-tokaudit[columnar]'") from None
    except ImportError as exc:  # installed, but it cannot be imported here
        raise JoinError(f"tokaudit_requests: cannot import numpy: {exc}") from None
    return numpy


class RequestIndex:
    """Every request's join id hash, place and byte offset, sorted by hash (24 bytes each)."""

    def __init__(self, files: list[str], hashes: Any, places: Any, offsets: Any,
                 bad: list[tuple[int, int, str]], n_bad: int, base: str = "",
                 plain: list[str] | None = None):
        self.files = files
        self.plain = plain or files  # what is read by offset: a compressed file's plain copy
        # As shown: relative to the ini file's folder when written so (the same text in every
        # process, a Ray worker's too, whatever its working directory), else as they are.
        self.shown = [os.path.relpath(f, base) if base else f for f in files]
        self.hashes, self.places, self.offsets = hashes, places, offsets
        self.bad, self.n_bad = bad, n_bad  # lines without a usable join id (the first SHOWN)
        self._handles: dict[int, Any] = {}
        # Open for the index's life: closed when it is dropped or, at the latest, at exit.
        weakref.finalize(self, _close_all, self._handles)

    def __len__(self) -> int:
        return len(self.hashes)

    @property
    def nbytes(self) -> int:
        return int(self.hashes.nbytes + self.places.nbytes + self.offsets.nbytes)

    def find(self, hashes: list[int]) -> list[int]:
        """Each hash's position in the index (the first of equal ones), or -1."""
        np = _numpy()
        want = np.array(hashes, dtype=np.uint64)
        pos = np.searchsorted(self.hashes, want)
        ok = pos < len(self.hashes)
        ok[ok] = self.hashes[pos[ok]] == want[ok]
        return [int(p) if k else -1 for p, k in zip(pos, ok)]

    def place(self, pos: int) -> str:
        """`file:LINE` of the request at position `pos`."""
        p = int(self.places[pos])
        return f"{self.shown[p >> _LINE_BITS]}:{p & ((1 << _LINE_BITS) - 1)}"

    def read(self, pos: int) -> Any:
        """The request record at position `pos` (read by its offset)."""
        p = int(self.places[pos])
        k = p >> _LINE_BITS
        fh = self._handles.get(k)
        if fh is None:
            fh = self._handles[k] = open(self.plain[k], "rb")  # noqa: SIM115 - kept for the run
        fh.seek(int(self.offsets[pos]))
        return orjson.loads(fh.readline())

    def request_id(self, pos: int, field: tuple[str, ...]) -> Any:
        try:
            return get_path(self.read(pos), field)
        except (OSError, orjson.JSONDecodeError):
            return "?"


def _close_all(handles: dict[int, Any]) -> None:
    for fh in handles.values():
        fh.close()


def request_files(pattern: str) -> list[str]:
    return sorted(p for p in glob.glob(pattern, recursive=True) if os.path.isfile(p))


def index_for(contract: Any) -> RequestIndex:
    """The index of the request files of `contract.requests`, built once per process while
    they stay as they are (their sizes and times)."""
    pattern = contract.requests
    files = request_files(pattern)
    if not files:
        raise JoinError(f"tokaudit_requests: no file matches {pattern}")
    stats = tuple((f, os.stat(f).st_size, os.stat(f).st_mtime_ns) for f in files)
    written = contract.sources.get("tokaudit_requests", ("", ""))[0]
    base = (pattern[:-len(written)] if written and not os.path.isabs(written)
            and pattern.endswith(written) else "")
    return _index(stats, contract.join_field, base)


@functools.lru_cache(maxsize=2)
def _index(stats: tuple[tuple[str, int, int], ...], field: tuple[str, ...], base: str) -> RequestIndex:
    np = _numpy()
    hashes, places, offsets = array("Q"), array("Q"), array("Q")
    bad: list[tuple[int, int, str]] = []
    n_bad = 0
    files = [f for f, _, _ in stats]
    plain = [_plain_copy(f) for f in files]
    for k, path in enumerate(plain):
        offset = 0
        with open(path, "rb") as fh:
            for line, raw in enumerate(fh, 1):
                at, offset = offset, offset + len(raw)
                if not raw.strip():
                    continue
                try:
                    value = get_path(orjson.loads(raw), field)
                except orjson.JSONDecodeError:
                    value, why = MISSING, "invalid JSON"
                else:
                    why = f"no {'.'.join(field)}" if value is MISSING or value is None else \
                        f"{'.'.join(field)} is neither a string nor an integer"
                h = id_hash(value)
                if h is None:
                    n_bad += 1
                    if len(bad) < SHOWN:
                        bad.append((k, line, why))
                    continue
                hashes.append(h)
                places.append(k << _LINE_BITS | line)
                offsets.append(at)
    h = np.frombuffer(hashes, dtype=np.uint64)
    order = np.argsort(h, kind="stable")  # equal ids keep their file order
    return RequestIndex(files, h[order], np.frombuffer(places, dtype=np.uint64)[order],
                        np.frombuffer(offsets, dtype=np.uint64)[order], bad, n_bad, base, plain)


_COPIES: list[str] = []  # this process's folder of plain copies, made once


def _plain_copy(path: str) -> str:
    """A request file as plain lines that can be read by offset: a .gz or .zst file is
    inflated once per process (the package's codecs, in bounded chunks) into a temporary
    copy, removed when the process ends; a plain file is itself."""
    if not is_compressed(Path(path)):
        return path
    if not _COPIES:
        _COPIES.append(tempfile.mkdtemp(prefix="tokaudit-requests-"))
        atexit.register(shutil.rmtree, _COPIES[0], True)
    fd, copy = tempfile.mkstemp(suffix=".jsonl", dir=_COPIES[0])
    try:
        with open(path, "rb") as fh, os.fdopen(fd, "wb") as out:
            for chunk in inflate(fh, path, 1 << 20):
                out.write(chunk)
    except (ReadError, EOFError, OSError, ValueError, zlib.error) as exc:
        raise JoinError(f"cannot read {path}: {exc}") from None
    return copy


def _unpack(values: Any) -> Any:
    """A part's hashes or lines: an array("Q") as the check grew it, or its base64 text."""
    np = _numpy()
    return np.frombuffer(base64.b64decode(values) if type(values) is str else values,
                         dtype=np.uint64)


def record_data(record: Any) -> Any:
    """A record's fields (a JSONL record's object as parsed, a Parquet row's)."""
    return record._data if hasattr(record, "_data") else record.data


class JoinCheck:
    """Every request of tokaudit_requests answered exactly once by the audited responses."""

    @staticmethod
    def reads(contract: Any) -> frozenset[Any]:
        """A record's line and join id (its value): every engine hands an error line on as
        unusable, with its data, never as a record."""
        return frozenset({"line", contract.join_field} if contract.requests else ())

    @hookimpl
    def pytest_tokaudit_dataset_checks(self, contract):
        return [NAME] if contract.requests else None

    @hookimpl
    def pytest_tokaudit_check_batch(self, records, unusable, contract, summary):
        if not contract.requests:
            return None
        index = index_for(contract)
        field = contract.join_field
        rows = [(r.line, field_value(r, field), None) for r in records]
        if unusable:  # in line order, as the records came
            rows += [(u.line, MISSING if u.data is None else get_path(u.data, field), u.data)
                     for u in unusable]
            rows.sort(key=lambda row: row[0])
        channel = writable(summary).channel(CHANNEL)
        if not channel:  # one entry per part, grown batch by batch (in line order)
            channel.append([summary.shard if summary.shards > 1 else None,
                            array("Q"), array("Q"), [], []])
        _, hashes, lines, orphans, errors = channel[-1]
        keep, values, orphaned = [], [], []
        for line, value, data in rows:
            h = id_hash(value)
            if h is None:
                orphaned.append([line, None])
                continue
            why = error_of(data)
            if why:
                errors.append([line, value, why])
            keep.append((h, line))
            values.append(value)
        found = index.find([h for h, _ in keep]) if keep else []
        for (h, line), value, pos in zip(keep, values, found):
            if pos < 0:  # no request for it: kept apart, with its id
                orphaned.append([line, value])
            else:
                hashes.append(h)
                lines.append(line)
        orphans += sorted(orphaned, key=lambda o: o[0])
        return None

    @hookimpl
    def pytest_tokaudit_check_dataset(self, name, dataset, contract):
        if name != NAME:
            return None
        try:
            index = index_for(contract)
        except (JoinError, OSError) as exc:
            return Outcome.failed(f"cannot index the requests: {exc}")
        return judge(index, dataset, contract)


def _where(path: str, shard: Any, line: int) -> str:
    return location(path, line) if shard is None else f"{path} (shard {shard}, line {line} of it)"


def judge(index: RequestIndex, dataset: Any, contract: Any) -> Outcome:
    """Every request answered once: the index against every part's `join` channel."""
    np = _numpy()
    field = ".".join(contract.join_field)
    parts: list[tuple[str, Any]] = []  # (path, shard) of each channel entry
    hashes, lines, owner = [], [], []
    orphans: list[str] = []
    errors: list[str] = []
    n_orphans = n_errors = 0
    for path, values in dataset.channel(CHANNEL):
        for shard, packed, packed_lines, lost, failed in values:
            parts.append((path, shard))
            h, ln = _unpack(packed), _unpack(packed_lines)
            hashes.append(h)
            lines.append(ln)
            owner.append(np.full(len(h), len(parts) - 1, dtype=np.uint32))
            n_orphans += len(lost)
            n_errors += len(failed)
            for line, value in lost[:SHOWN - len(orphans)] if len(orphans) < SHOWN else ():
                what = f"{field} {value!r}" if value is not None else f"no {field}"
                orphans.append(f"{_where(path, shard, line)}: {what}: no request")
            for line, value, why in failed[:SHOWN - len(errors)] if len(errors) < SHOWN else ():
                errors.append(f"{_where(path, shard, line)}: {field} {value!r}: {why}")
    all_h = np.concatenate(hashes) if hashes else np.zeros(0, dtype=np.uint64)
    all_lines = np.concatenate(lines) if lines else np.zeros(0, dtype=np.uint64)
    all_owner = np.concatenate(owner) if owner else np.zeros(0, dtype=np.uint32)
    pos = np.searchsorted(index.hashes, all_h)
    hit = pos < len(index)
    hit[hit] = index.hashes[pos[hit]] == all_h[hit]
    # Requests of one id: the first position holds their answers; the rest are repeats.
    first = np.ones(len(index), dtype=bool)
    first[1:] = index.hashes[1:] != index.hashes[:-1]
    counts = np.bincount(pos[hit], minlength=len(index)) if len(index) else np.zeros(0, dtype=np.int64)
    lines_out: list[str] = []
    bad = 0
    repeated = np.flatnonzero(~first)
    if len(repeated):
        bad += len(repeated)
        lines_out.append(f"{plural(len(repeated), 'request')} repeating an earlier {field}:")
        for p in repeated[:SHOWN]:
            lines_out.append(f"  {index.place(int(p))}: {field} {index.request_id(int(p), contract.join_field)!r}"
                             f" (first at {index.place(int(np.searchsorted(index.hashes, index.hashes[p])))})")
    if index.n_bad:
        bad += index.n_bad
        lines_out.append(f"{plural(index.n_bad, 'request line')} without a usable {field}:")
        lines_out += [f"  {index.shown[k]}:{line}: {why}" for k, line, why in index.bad]
    twice = np.flatnonzero(first & (counts > 1))
    if len(twice):
        bad += len(twice)
        lines_out.append(f"{plural(len(twice), 'request')} answered more than once:")
        answered = np.flatnonzero(hit)
        by_pos = pos[answered]
        for p in twice[:SHOWN]:
            where = [_where(*parts[int(all_owner[a])], int(all_lines[a]))
                     for a in answered[by_pos == p]]
            lines_out.append(f"  {field} {index.request_id(int(p), contract.join_field)!r} "
                             f"(request {index.place(int(p))}): {len(where)} answers: {', '.join(where)}")
    if n_orphans:
        bad += n_orphans
        lines_out.append(f"{plural(n_orphans, 'response')} with no request:")
        lines_out += [f"  {o}" for o in orphans]
        if n_orphans > len(orphans):
            lines_out.append(f"  ... and {n_orphans - len(orphans):,} more")
    n_requests = int(first.sum())
    missing = np.flatnonzero(first & (counts == 0))
    if len(missing) and not dataset.partial:
        bad += len(missing)
        lines_out.append(f"{plural(len(missing), 'request')} with no response:")
        for p in missing[:SHOWN]:
            lines_out.append(f"  {index.place(int(p))}: {field} "
                             f"{index.request_id(int(p), contract.join_field)!r}")
        if len(missing) > SHOWN:
            lines_out.append(f"  ... and {len(missing) - SHOWN:,} more")
    if n_errors:
        lines_out.append(f"{plural(n_errors, 'error line')} (answered, not billed as responses):")
        lines_out += [f"  {e}" for e in errors]
        if n_errors > len(errors):
            lines_out.append(f"  ... and {n_errors - len(errors):,} more")
    errs = f", {plural(n_errors, 'error line')}" if n_errors else ""
    if bad:
        kinds = []
        if len(missing) and not dataset.partial:
            kinds.append(f"{len(missing):,} unanswered")
        if len(twice):
            kinds.append(f"{len(twice):,} answered twice")
        if n_orphans:
            kinds.append(f"{plural(n_orphans, 'response')} without a request")
        if len(repeated) or index.n_bad:
            kinds.append(plural(len(repeated) + index.n_bad, "bad request line"))
        return Outcome.failed(f"{plural(n_requests, 'request')}, {plural(len(all_h) + n_orphans, 'response')}: "
                              f"{', '.join(kinds)}{errs}", lines_out)
    answered_once = int((first & (counts == 1)).sum())
    return Outcome("", "passed", f"{plural(n_requests, 'request')}, {answered_once:,} answered exactly once{errs}",
                   lines_out)
