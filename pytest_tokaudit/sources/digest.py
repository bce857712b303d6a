"""Fingerprints of a part's bytes (SHA-256), for the cache: a source's own view of "unchanged"."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

CHUNK = 1 << 20


# A write within one tick of a file system's clock can leave a file's stat as it was (the
# same inode, size and time stamps), so a stat taken that soon after the file last changed
# cannot vouch that the bytes stay as they are read ("racy git"). Linux stamps files from a
# clock of 1-10 ms ticks, NTFS in 100 ns; FAT and some network file systems in (2) seconds.
RACY_NS = 100_000_000
RACY_COARSE_NS = 2_000_000_000


def file_state(path: Path | str) -> tuple[int, ...] | None:
    """A local file's state (device, inode, size, modification and change times), which
    any write after it was taken changes; None if the file changed too recently for that
    to hold. OSError if it cannot be stat'ed."""
    st = os.stat(path)
    newest = max(st.st_mtime_ns, st.st_ctime_ns)
    coarse = not (st.st_mtime_ns % 1_000_000_000 or st.st_ctime_ns % 1_000_000_000)
    if time.time_ns() - newest < (RACY_COARSE_NS if coarse else RACY_NS):
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def digest_range(path: Path | str, start: int = 0, end: int | None = None) -> str:
    """SHA-256 of the bytes an item of `path` reads: all of it, or a shard's byte range
    [start, end) with the byte before it and the rest of its last line."""
    h = hashlib.sha256()
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as fh:
        first = max(start - 1, 0)
        fh.seek(first)
        left = None if end is None else max(end - first, 0)
        last = b""
        while left is None or left > 0:
            n = fh.readinto(view if left is None or left >= CHUNK else view[:left])
            if not n:
                return h.hexdigest()
            h.update(view[:n])
            last = bytes(view[n - 1:n])
            if left is not None:
                left -= n
        if last == b"\n":  # the last line ends in the range
            return h.hexdigest()
        while True:  # the line that starts in the range goes on to its newline
            n = fh.readinto(view)
            if not n:
                break
            nl = buf.find(b"\n", 0, n)
            h.update(view[: n if nl < 0 else nl + 1])
            if nl >= 0:
                break
    return h.hexdigest()


def digest_bytes(path: Path | str, start: int, end: int) -> str:
    """SHA-256 of the bytes [start, end) of `path`, as they are."""
    h = hashlib.sha256()
    with open(path, "rb", buffering=0) as fh:
        fh.seek(start)
        left = end - start
        while left > 0:
            data = fh.read(min(left, CHUNK))
            if not data:
                break
            h.update(data)
            left -= len(data)
    return h.hexdigest()


_FILE_DIGESTS: dict[tuple, str] = {}


def digest_file(path: Path | str) -> str:
    """SHA-256 of a whole file, once per process while it is not rewritten (a file that
    changed too recently for its stat to tell is hashed every time)."""
    state = file_state(path)
    if state is None:
        return digest_range(path)
    key = (os.fspath(path), *state)
    if key not in _FILE_DIGESTS:
        _FILE_DIGESTS[key] = digest_range(path)
    return _FILE_DIGESTS[key]
