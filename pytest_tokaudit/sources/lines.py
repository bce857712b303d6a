"""Line numbers of shards: lines before a byte offset, counted once per file per process."""

from __future__ import annotations

import os
import sys
from typing import Any

from ..base.formats import format_of
from .base import is_compressed
from .frames import lines_before as frame_lines_before


def rows_before(path: Any, start: int) -> int:
    """Records before a shard that starts at `start`: a byte offset in JSONL (lines are
    counted; in .gz/.zst a frame boundary, and the frames before are inflated), the rows
    before it in Parquet (known from the footer at collection)."""
    if format_of(path).unit == "row":
        return start
    return lines_before(path, start)


def _file_key(path: Any) -> tuple:
    """What identifies a file's bytes in this process: a rewritten file is another file."""
    if getattr(path, "open_stream", None) is not None:
        return path.cache_key
    st = os.stat(path)
    return (os.fspath(path), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def shard_lines(path: Any, start: int, end: int | None, lines: int) -> None:
    """Note that the shard [start, end) of `path` holds `lines` lines: if the lines before
    it are known, so are the lines before the next shard, which then need no counting
    (an in-order run of a file's shards, cache hits included, reads no prefix)."""
    if end is None:
        return
    try:
        known = _LINES_AT.setdefault(_file_key(path), {0: 0})
    except OSError:
        return
    if start in known:
        known[end] = known[start] + lines


def lines_before(path: Any, offset: int) -> int:
    """Lines that start before byte `offset` (a shard's first line is this + 1).

    Known without reading when the shards before it ran in this process; otherwise
    counted once per file per process from the nearest point already counted, so a
    failing shard never reads the whole prefix again. `path` is a local Path, or a
    remote.RemoteFile (read by range requests, its key from the listing).
    """
    remote = getattr(path, "open_stream", None)
    key = _file_key(path)
    known = _LINES_AT.setdefault(key, {0: 0})
    if offset in known:
        return known[offset]

    if is_compressed(path):  # `offset` is a frame boundary: the lines the frames inflate to

        return frame_lines_before(path, offset)
    marks = _LINE_MARKS.setdefault(key, {0: 0})
    start = max(o for o in marks if o <= offset)
    with (remote() if remote is not None else open(path, "rb")) as fh:
        # A shard that ran here ended nearer: start from its end (xdist hands a worker
        # every other shard, so the gap is one shard, not the prefix since the last count).
        nearer = max((o for o in known if start < o <= offset), default=None)
        if nearer is not None:
            marks[nearer] = known[nearer] - _straddles(fh, nearer)
            start = nearer
        n = marks[offset] = marks[start] + count_newlines(fh, start, offset)
        known[offset] = n + _straddles(fh, offset)  # so this shard's end is known once it ran
        return known[offset]


def _straddles(fh: Any, offset: int) -> int:
    """1 if a line runs across `offset` (it belongs to the range before), else 0."""
    if not offset:
        return 0
    fh.seek(offset - 1)
    return int(fh.read(1) != b"\n")


def count_newlines(fh: Any, start: int, stop: int) -> int:
    """Newlines in bytes [start, stop) of a binary file: into one reused buffer, counted
    by numpy where the columnar path has imported it (4x bytes.count)."""
    np = sys.modules.get("numpy")
    fh.seek(start)
    raw = bytearray(min(max(stop - start, 0), 1 << 20))
    buf = memoryview(raw)
    n, left = 0, stop - start
    while left > 0:
        got = fh.readinto(buf[:min(left, len(raw))])
        if not got:
            break
        if np is not None:
            n += int(np.count_nonzero(np.frombuffer(buf[:got], np.uint8) == 10))
        else:
            n += (raw if got == len(raw) else bytes(buf[:got])).count(b"\n")
        left -= got
    return n


# Per file (_file_key): byte offset -> lines that start before it, from shards that ran here.
_LINES_AT: dict[tuple, dict[int, int]] = {}


_LINE_MARKS: dict[tuple, dict[int, int]] = {}
