"""Bytes -> records: streaming lines of .jsonl / .jsonl.gz / .jsonl.zst, parsed with orjson.

Everything that can be wrong with a line becomes a Finding; nothing here raises for bad
data. A compressed stream that ends early or is corrupt raises ReadError, which the audit
turns into a file-level finding after auditing every line read before it.

Files are read in chunks of at most BUFFER bytes (a zstd frame inflates in steps of at
most ZSTD_FEED compressed bytes), so memory stays bounded whatever is in the file: a line
over the contract's `max_line_bytes` is counted and skipped, never held, and runs of blank
lines are counted with bytes.count, not a Python step per line.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import zlib
from pathlib import Path
from typing import (
    Any,
    BinaryIO,
    Callable,
    Iterator,
    cast,
)

from . import lines
from .base import (
    COMPRESSED,
    LfsPointer,
    Part,
    ReadError,
    SourceError,
    is_compressed,
    shard_cuts,
)
from .codecs import BUFFER, inflate
from .digest import digest_bytes, digest_file, digest_range
from .frames import part_chunks, span
from .frames import parts as frame_parts

MAX_LINE_BYTES = 64 << 20  # default for a contract without max_line_bytes


# A git-lfs pointer file (the data was never pulled) starts with this line.
LFS_POINTER = b"version https://git-lfs.github.com/spec/v1"


JSON_WS = b" \t\r\n"  # the only white space JSON has; \x0b, \x0c & co. are invalid JSON


def line_range(path: Any, start: int, end: int | None) -> tuple[int, int | None]:
    """The byte range a line cutter applies to `read_chunks(path, start, ..., end)`: a
    compressed file's part comes out as exactly its own lines, a whole stream."""
    return (0, None) if is_compressed(path) else (start, end)


def _check_lfs(fh: BinaryIO) -> None:
    """Raise LfsPointer if the raw file is a git-lfs pointer; leaves fh at offset 0."""
    head = fh.read(len(LFS_POINTER) + 2)
    fh.seek(0)
    if head.split(b"\n", 1)[0].removesuffix(b"\r") == LFS_POINTER:
        raise LfsPointer()


def read_chunks(path: Path, start: int = 0, size: int = BUFFER, meter: Any = None,
                end: int | None = None) -> Iterator[bytes | bytearray]:
    """The file's (decompressed) bytes in chunks of about `size`; from `start` - 1 if given.
    `meter.offset` follows the bytes read from the file (compressed ones for .gz, .zst).
    A compressed file's part (`start`, `end`: frame boundaries) gives exactly the bytes of
    the lines it owns (see `_part_chunks`): cut them with `line_range`'s (0, None).

    Raises ReadError for a file that cannot be opened or read, LfsPointer for a git-lfs
    pointer (checked on the raw bytes, so a pointer named .gz is one too).
    """
    try:
        # A remote.RemoteFile opens itself (fsspec); its errors are SourceErrors.
        opener = getattr(path, "open_stream", None)
        fh = opener() if opener is not None else open(path, "rb", buffering=0)
    except OSError as exc:
        raise ReadError(f"cannot open: {exc.strerror or exc}") from None
    with fh:
        try:
            if not start:
                _check_lfs(fh)
            name = path.name
            if name.endswith(COMPRESSED) and (start or end is not None):
                yield from _told(part_chunks(path, fh, start, end, size), fh, meter)
            elif name.endswith(COMPRESSED):
                yield from _told(inflate(fh, name, size), fh, meter)
            else:
                if start:
                    fh.seek(start - 1)
                # One buffer, refilled: a fresh 1 MiB object per read costs page faults
                # (~10% of a fast audit). The reader copies out what it keeps.
                buf = bytearray(size)
                while n := fh.readinto(buf):
                    if meter is not None:
                        meter.offset += n
                    yield buf if n == size else buf[:n]
        except EOFError as exc:
            raise ReadError(f"truncated compressed file: {exc}") from None
        except SourceError as exc:  # the storage failed, not the data
            raise ReadError(f"cannot open: {exc}" if exc.at_open else str(exc)) from None
        except (OSError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
            raise ReadError(f"corrupt or unreadable file: {exc}") from None


def _told(chunks: Iterator[bytes], fh: Any, meter: Any) -> Iterator[bytes]:
    """`chunks`, setting `meter.offset` to the file's position (for progress lines)."""
    if meter is None:
        yield from chunks
        return
    for chunk in chunks:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            meter.offset = fh.tell()
        yield chunk


# `*`: it always matches (maybe nothing), so the match is never None.
_WS_RUN = cast("Callable[[bytes | bytearray, int], re.Match[bytes]]",
               re.compile(rb"[ \t\r\n]*").match)


class Lines:
    """The non-blank lines of a file, or of those starting in the byte range [start, end).

    Iterating gives (line number, body) with the body stripped of JSON white space, or
    (line number, size in bytes) for a line longer than `max_line`, which is read past
    without being kept. `lines` and `blank` count physical and blank lines as it goes
    (exact when a ReadError stops it: a line cut short by the error is not counted).
    A line belongs to the range its first byte is in; a compressed file's range is one of
    whole frames (or members) and means the bytes they inflate to (`_part_chunks`). Line
    numbers are relative to the range (1 = its first line).
    """

    def __init__(self, path: Path, start: int = 0, end: int | None = None,
                 max_line: int = MAX_LINE_BYTES, chunk: int = BUFFER):
        self.path, self.start, self.end = path, start, end
        self.max_line, self.chunk = max_line, chunk
        self.lines = 0
        self.blank = 0
        self.offset = max(start - 1, 0)  # bytes read from the file so far (progress lines)

    def __iter__(self) -> Iterator[tuple[int, bytes | int]]:
        max_line, ws_run = self.max_line, _WS_RUN
        chunks = read_chunks(self.path, self.start, self.chunk, self, self.end)
        start, end = line_range(self.path, self.start, self.end)
        base = 0  # file offset of chunk[0]
        skip = 0  # where the first line starts in the first chunk
        if start:
            base = start - 1
            for first in chunks:  # the line straddling `start` belongs to the range before
                skip = first.find(b"\n") + 1
                if skip:
                    break
                base += len(first)
            else:
                return
            chunks = itertools.chain((first,), chunks)
        line = 0
        # The current line: `lead` bytes of white space (counted, not kept), then `held`
        # bytes kept in `parts` from its first other byte on (`started`); `over` once it
        # is past max_line (nothing more is kept).
        lead = held = 0
        parts: list[bytes | bytearray | memoryview] = []
        started = over = False
        for chunk in chunks:
            n = len(chunk)
            # bytes(view[a:b]): one copy whether the chunk is bytes or a reused bytearray
            view = memoryview(chunk) if type(chunk) is bytearray else chunk
            pos, skip = skip, 0
            while pos < n:
                if not started:
                    if not lead and end is not None and base + pos >= end:
                        return  # the next line starts in the next range
                    if chunk[pos] in JSON_WS:
                        white = ws_run(chunk, pos).end()
                        last = chunk.rfind(b"\n", pos, white)
                        if last >= 0:  # blank lines: counted in bulk, however many
                            if end is not None and base + last >= end:
                                # only those starting before `end` (the first one does)
                                k = 1 + chunk.count(b"\n", pos, max(pos, end - base - 1))
                                line += k
                                self.lines, self.blank = line, self.blank + k
                                return
                            k = chunk.count(b"\n", pos, last + 1)
                            line += k
                            self.lines, self.blank = line, self.blank + k
                            lead, pos = 0, last + 1
                            continue
                        lead += white - pos
                        pos = white
                        if pos == n:
                            break
                    started = True
                nl = chunk.find(b"\n", pos)
                if nl < 0:  # the line goes on in the next chunk
                    if not over:
                        if lead + held + n - pos > max_line:
                            over, parts = True, []
                        else:
                            parts.append(bytes(view[pos:]))  # a chunk may be reused
                    held += n - pos
                    break
                line += 1
                self.lines = line
                size = lead + held + nl - pos
                if over or size > max_line:
                    yield line, size
                else:
                    if parts:
                        parts.append(view[pos:nl])
                        body = b"".join(parts)
                    else:
                        body = bytes(view[pos:nl])
                    yield line, body.rstrip(JSON_WS)
                lead = held = 0
                parts = []
                started = over = False
                pos = nl + 1
            base += n
        if started:  # the last line has no newline
            line += 1
            self.lines = line
            size = lead + held
            yield (line, size) if over or size > max_line else (line, b"".join(parts).rstrip(JSON_WS))
        elif lead:
            line += 1
            self.lines, self.blank = line, self.blank + 1


class JsonlSource:
    """JSON lines (.jsonl, .gz, .zst): byte ranges (or runs of whole frames) as parts,
    lines as records, `path:LINE` as the location."""

    kind = "lines"

    def parts(self, location: Any, size: int | None, shard_size: int) -> list[Part] | None:
        """Byte ranges cut by shard_cuts (stable under appends, even across -n 2; stat
        only: every xdist worker collects every file and must agree); a compressed file
        splits at the frame boundaries nearest those cuts (its headers only; a remote one,
        where each header would be a request, stays whole)."""
        if size is None or size <= shard_size or shard_size == 0:
            return None
        if is_compressed(location):
            if not isinstance(location, Path):
                return None
            try:
                ranges = frame_parts(location, shard_size)
            except OSError:  # unreadable: its one item says why
                return None
            return None if ranges is None else [Part(r) for r in ranges]
        cuts = shard_cuts(size, shard_size)
        return [Part((a, b)) for a, b in zip(cuts, cuts[1:])]

    def rows_before(self, location: Any, start: int) -> int:
        return lines.lines_before(location, start)

    def fingerprint(self, location: Path, part: Part, whole: bool) -> list[Any]:
        """What the cache compares: the bytes the part's lines come from."""
        if whole:
            return ["sha256", digest_file(location), os.stat(location).st_size]
        if is_compressed(location):  # a run of frames: the frames its lines come from
            lo, hi = span(location, *part.byte_range)
            return ["sha256", digest_bytes(location, lo, hi), hi - lo]
        # Not the file's size: a shard before an append is the same shard after it.
        return ["sha256", digest_range(location, *part.byte_range)]

    def progress_total(self, part: Part, size: int | None) -> int | None:
        """Bytes of the file the part reads (compressed bytes of .gz and .zst)."""
        start, end = part.byte_range
        stop = end if end is not None else size
        return None if stop is None else stop - start


SOURCE = JsonlSource()
