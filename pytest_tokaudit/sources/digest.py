"""Fingerprints of a part's bytes (SHA-256), for the cache: a source's own view of "unchanged"."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

CHUNK = 1 << 20


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
    """SHA-256 of a whole file, once per process while it is not rewritten."""
    st = os.stat(path)
    key = (os.fspath(path), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if key not in _FILE_DIGESTS:
        _FILE_DIGESTS[key] = digest_range(path)
    return _FILE_DIGESTS[key]
