"""What every source shares: its errors, and how a file is cut into parts."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path


class ReadError(Exception):
    """The file cannot be read further (corrupt or truncated compressed data)."""


class SourceError(OSError):
    """A remote source failed (sources/remote.py): no such key, access denied, a connection lost.

    `at_open`: nothing of the file could be read, so it was not audited at all. The
    message is the finding's, worded without credentials; `strerror` carries it too, for
    callers that word an OSError by its strerror.
    """

    def __init__(self, message: str, at_open: bool = False):
        super().__init__(message)
        self.strerror = message
        self.at_open = at_open


class LfsPointer(ReadError):
    """The file is a git-lfs pointer: the data itself was never pulled."""

    def __init__(self) -> None:
        super().__init__("git-lfs pointer, data not pulled: run git lfs pull")



# Items one file may become, whatever the shard size: past it, shards grow (a 1 TB file at
# 128 MiB would be 8,192 items; it is 1,024 of 1 GiB).
MAX_SHARDS = 1024


def shard_count(size: int, shard_size: int) -> int:
    """How many equal byte ranges a JSONL file of `size` bytes is audited as (size > shard_size).

    None over the size (up to MAX_SHARDS), and an even number: with an odd number two
    workers (-n 2) finish a shard apart, and one idles through the last (a third of the run
    for 3 shards). Not from -n: node ids and cache keys must not change with it (--lf under
    another -n).
    """
    n = min(math.ceil(size / shard_size), MAX_SHARDS)
    return n + n % 2


COMPRESSED = (".gz", ".zst")


def is_compressed(path: Path) -> bool:
    return path.name.endswith(COMPRESSED)


@dataclass(frozen=True)
class Part:
    """A part of a file one audit item reads: a byte range (JSONL), or a run of row groups
    with the rows before it (`byte_range[0]`) in a columnar file."""

    byte_range: tuple[int, int | None] = (0, None)
    groups: tuple[int, int] | None = None


WHOLE = Part()
