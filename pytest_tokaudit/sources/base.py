"""What every source shares: its errors, and how a file is cut into parts."""

from __future__ import annotations

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


def shard_cuts(size: int, shard_size: int) -> list[int]:
    """Where a file of `size` bytes (> shard_size) is cut: [0, ..., size].

    Stable under appends: every cut but the last one or two is a multiple of the shard
    size, which does not depend on the file's size, so appending re-audits only the tail
    (and the cache keeps the rest). Even across two workers (-n 2): an even number of
    whole cells, then what is left (under two cells) as two equal halves, so each worker
    gets the same bytes; none over `shard_size`. Not from -n: node ids and cache keys must
    not change with it (--lf under another -n). Past MAX_SHARDS items the cell doubles (a
    power of two, so the cuts stay where they were, every second one kept).
    """
    cell = shard_size
    while size // cell + 2 > MAX_SHARDS:
        cell *= 2
    whole = size // cell
    whole -= whole % 2
    cuts = [i * cell for i in range(whole + 1)]
    rest = size - cuts[-1]
    if rest > 1:
        cuts.append(cuts[-1] + rest // 2)
    if rest:
        cuts.append(size)
    return cuts


def shard_count(size: int, shard_size: int) -> int:
    """How many items a JSONL file of `size` bytes (> shard_size) is audited as."""
    return len(shard_cuts(size, shard_size)) - 1


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
