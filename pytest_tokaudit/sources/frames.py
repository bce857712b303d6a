"""Compressed files in parts: runs of whole zstd frames or BGZF members.

A zstd frame and a gzip member inflate on their own, so a run of whole frames is a part
that xdist can audit apart from the rest. Where they start is read from their headers
(zstd: frame and block headers, RFC 8878; BGZF: each member's size in its `BC` extra
field), seeking over the payloads: collection inflates nothing. Anything odd in the walk
(truncation, a reserved block type, a bad magic, a gzip member that is not BGZF) leaves
the file whole: its one item reads it and reports the damage as it always has.

A part owns the lines whose first byte it inflates, the rule of a plain file's byte
ranges: it inflates the data frame before it to learn whether its first line is its own,
and the frames after it until its last line ends (`part_chunks`).
"""

from __future__ import annotations

import bisect
import os
import zlib
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator

from .base import ReadError, shard_cuts
from .codecs import inflate

ZSTD_MAGIC = 0xFD2FB528


SKIPPABLE = 0x184D2A50  # 0x184D2A50-0x184D2A5F: frames a decoder skips (pzstd's, seek tables)


MAX_BLOCK = 1 << 17  # RFC 8878 Block_Maximum_Size


BGZF_HEAD = b"\x1f\x8b\x08"  # gzip magic, deflate; FLG must have FEXTRA


Reader = Callable[[int, int], bytes]


# A walk reads a header or two per frame, in every process that collects the file. Past
# MAX_FRAMES it goes on only while the frames average MIN_FRAME_BYTES or more: a file of
# millions of empty frames (a few bytes each) is not split, after a bounded walk, and its
# one item reads it; pzstd's frames (MiB) and BGZF members (tens of KB) are far larger.
MAX_FRAMES = 4096
MIN_FRAME_BYTES = 4096


def _too_many(frames: int, size: int) -> bool:
    return frames > MAX_FRAMES + size // MIN_FRAME_BYTES


def _zstd_bounds(read_at: Reader, size: int) -> list[int] | None:
    """Where each frame starts, then `size`; None if the headers do not add up."""
    bounds, pos = [], 0
    while pos < size:
        bounds.append(pos)
        if _too_many(len(bounds), size):
            return None
        head = read_at(pos, 18)  # magic, descriptor, window, dictionary id, content size
        if len(head) < 5:
            return None
        magic = int.from_bytes(head[:4], "little")
        if magic & 0xFFFFFFF0 == SKIPPABLE:
            if len(head) < 8:
                return None
            pos += 8 + int.from_bytes(head[4:8], "little")
            continue
        fhd = head[4]
        if magic != ZSTD_MAGIC or fhd & 0x08:  # the reserved bit must be 0
            return None
        single = fhd >> 5 & 1
        pos += 5 + (1 - single) + (0, 1, 2, 4)[fhd & 3] + ((single, 2, 4, 8)[fhd >> 6])
        while True:
            block = read_at(pos, 3)
            if len(block) < 3:
                return None
            h = int.from_bytes(block, "little")
            kind, length = h >> 1 & 3, h >> 3
            if kind == 3 or length > MAX_BLOCK:
                return None
            pos += 3 + (1 if kind == 1 else length)  # an RLE block's payload is one byte
            if h & 1:  # the last block
                break
        if fhd & 0x04:  # content checksum
            pos += 4
    if pos != size:
        return None
    bounds.append(size)
    return bounds


def _bgzf_bounds(read_at: Reader, size: int) -> list[int] | None:
    """Where each BGZF member starts, then `size`; None for any other gzip file."""
    bounds, pos = [], 0
    while pos < size:
        bounds.append(pos)
        if _too_many(len(bounds), size):
            return None
        head = read_at(pos, 12)
        if len(head) < 12 or head[:3] != BGZF_HEAD or not head[3] & 0x04:
            return None
        xlen = int.from_bytes(head[10:12], "little")
        extra = read_at(pos + 12, xlen)
        member = None
        at = 0
        while at + 4 <= len(extra):  # subfields: SI1 SI2 LEN(2) data
            n = int.from_bytes(extra[at + 2:at + 4], "little")
            if extra[at:at + 2] == b"BC" and n == 2 and at + 6 <= len(extra):
                member = int.from_bytes(extra[at + 4:at + 6], "little") + 1
            at += 4 + n
        if member is None or member < 12 + xlen:
            return None
        pos += member
    if pos != size:
        return None
    bounds.append(size)
    return bounds


_BOUNDS: dict[tuple, list[int] | None] = {}


def _key(path: Path) -> tuple:
    st = os.stat(path)  # a rewritten file is another file
    return (os.fspath(path), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def boundaries(path: Path) -> list[int] | None:
    """Frame (or member) starts of a local .zst or .gz file, then its size; None where it
    cannot be split. Walked once per process while the file is unchanged."""
    key = _key(path)
    if key not in _BOUNDS:
        walk = _bgzf_bounds if path.name.endswith(".gz") else _zstd_bounds
        with open(path, "rb", buffering=0) as fh:
            def read_at(pos: int, n: int) -> bytes:
                fh.seek(pos)
                return fh.read(n)

            _BOUNDS[key] = walk(read_at, key[2])
    return _BOUNDS[key]


def parts(path: Path, shard_size: int) -> list[tuple[int, int]] | None:
    """Runs of whole frames of about `shard_size` compressed bytes: a plain file's cuts
    (shard_cuts, stable under appended frames), each moved to the nearest frame boundary;
    None for a file that stays one item (one frame, or not walkable)."""
    bounds = boundaries(path)
    if bounds is None or len(bounds) < 3:
        return None

    size = bounds[-1]
    targets = shard_cuts(size, shard_size)[1:-1] if size > shard_size else []
    cuts = [0]
    for target in targets:
        at = bisect.bisect_left(bounds, target)
        near = min(bounds[max(at - 1, 0):at + 1], key=lambda b: abs(b - target))
        if cuts[-1] < near < size:
            cuts.append(near)
    cuts.append(size)
    return list(zip(cuts, cuts[1:])) if len(cuts) > 2 else None


class _Bounded:
    """The next `left` bytes of a file, as a file: a decoder never reads past its frames."""

    def __init__(self, fh: BinaryIO, left: int):
        self.fh, self.left = fh, left

    def read(self, n: int = -1) -> bytes:
        n = self.left if n < 0 else min(n, self.left)
        data = self.fh.read(n) if n else b""
        self.left -= len(data)
        return data


def _inflate(fh: BinaryIO, name: str, limit: int | None, size: int) -> Iterator[bytes]:
    """What the frames in the next `limit` compressed bytes (None: the rest) inflate to.
    Damage raises as reader.read_chunks expects (EOFError, OSError, zlib.error, ReadError)."""
    src: Any = fh if limit is None else _Bounded(fh, limit)
    yield from inflate(src, name, size)


def _damage() -> tuple[type[BaseException], ...]:
    return (ReadError, EOFError, OSError, zlib.error)


def _bounds_of(path: Path, *offsets: int | None) -> list[int]:
    bounds = boundaries(path)
    if bounds is None or any(o is not None and o not in bounds for o in offsets):
        raise OSError("the file changed after collection: its frames moved")
    return bounds


_EDGES: dict[tuple, tuple[bytes, int]] = {}


def _edge_before(path: Path, fh: BinaryIO, start: int) -> tuple[bytes, int]:
    """(the last byte inflated before `start`, where its frame starts); (b"", 0) at the
    file's start. A damaged frame counts as ending a line: the part that owns it reports
    it, and the line after it is audited here (a piece of a line is invalid JSON: a
    finding, never a record dropped unseen). Once per process: the cache key asks too."""
    key = (_key(path), start)
    if key not in _EDGES:
        _EDGES[key] = _find_edge(path, fh, start)
    return _EDGES[key]


def _find_edge(path: Path, fh: BinaryIO, start: int) -> tuple[bytes, int]:
    bounds = _bounds_of(path, start)
    for j in range(bounds.index(start) - 1, -1, -1):
        a, b = bounds[j], bounds[j + 1]
        fh.seek(a)
        last = b""
        try:
            for chunk in _inflate(fh, path.name, b - a, 1 << 20):
                last = chunk[-1:] or last
        except _damage():
            return b"\n", a
        if last:  # a skippable or empty frame inflates to nothing: look further back
            return last, a
    return b"", 0


def part_chunks(path: Path, fh: BinaryIO, start: int, end: int | None,
                size: int) -> Iterator[bytes]:
    """Exactly the inflated bytes of the lines the part [start, end) owns: those whose
    first byte its frames inflate to, the last one finished from the frames after it."""
    bounds = _bounds_of(path, start, end)
    stop = bounds[-1] if end is None else end
    skipping = _edge_before(path, fh, start)[0] not in (b"", b"\n")
    fh.seek(start)
    last = b""
    for chunk in _inflate(fh, path.name, stop - start, size):
        last = chunk[-1:] or last
        if skipping:  # the line straddling `start` belongs to the part before
            nl = chunk.find(b"\n")
            if nl < 0:
                continue
            chunk, skipping = chunk[nl + 1:], False
        if chunk:
            yield chunk
    if skipping or last in (b"", b"\n"):
        return
    try:  # the last line goes on in the next frames: up to its newline
        for chunk in _inflate(fh, path.name, None, size):
            nl = chunk.find(b"\n")
            if nl >= 0:
                yield chunk[:nl + 1]
                return
            yield chunk
    except _damage():
        return  # the part that owns the damage reports it; this line ends cut (json finding)


def span(path: Path, start: int, end: int | None) -> tuple[int, int]:
    """The compressed bytes a part's audit depends on (its cache key): from the frame
    whose last byte decides its first line to the frame where a line running past its end
    ends (conservatively the first frame after it that holds a newline)."""
    bounds = _bounds_of(path, start, end)
    stop = bounds[-1] if end is None else end
    with open(path, "rb") as fh:
        lo = _edge_before(path, fh, start)[1]
        i = bounds.index(stop)
        while i + 1 < len(bounds):
            a, b = bounds[i], bounds[i + 1]
            fh.seek(a)
            try:
                if any(b"\n" in chunk for chunk in _inflate(fh, path.name, b - a, 1 << 16)):
                    return lo, b
            except _damage():
                return lo, b
            i += 1
    return lo, bounds[-1]


_MARKS: dict[tuple, dict[int, int]] = {}


def lines_before(path: Path, offset: int) -> int:
    """Lines that start before the part at frame boundary `offset`: the newlines its
    frames inflate to, counted once per process from the nearest frame already counted.
    A damaged frame's lines after the damage cannot be counted: they count as none."""
    bounds = _bounds_of(path, offset)
    marks = _MARKS.setdefault(_key(path), {0: 0})
    at = max(o for o in marks if o <= offset)
    n = marks[at]
    with open(path, "rb") as fh:
        for i in range(bounds.index(at), bounds.index(offset)):
            a, b = bounds[i], bounds[i + 1]
            fh.seek(a)
            try:
                for chunk in _inflate(fh, path.name, b - a, 1 << 20):
                    n += chunk.count(b"\n")
            except _damage():
                pass
            marks[b] = n
        last = _edge_before(path, fh, offset)[0]
    return n + (last not in (b"", b"\n"))  # a line straddling `offset` is the part before's
