"""Parquet files (pyarrow): runs of row groups as parts, record batches as records.

The footer alone gives the parts (the same on every xdist worker, and small) and the
rows before each; the engine's Arrow pass (engine/arrow.py) reads the batches.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator, NamedTuple

from .base import MAX_SHARDS, Part, SourceError
from .digest import digest_file

EXTRA = "pip install 'pytest-tokaudit[parquet]'"


class ParquetUnavailable(Exception):
    """pyarrow is not installed."""

    def __init__(self) -> None:
        super().__init__(f"reading Parquet needs pyarrow: {EXTRA}")


def _open(path: Any) -> Any:
    """What pyarrow reads: a local path, or a remote.RemoteFile's file object."""
    opener = getattr(path, "open_stream", None)
    return opener() if opener is not None else path


def _close(source: Any) -> None:
    if hasattr(source, "close"):
        source.close()


class ArrowSource:
    """What the columnar formats share: parts are runs of record groups (row groups,
    IPC record batches), rows are numbered from 1 within the file, `path:row N`."""

    kind = "arrow"
    what = "Arrow"

    def library(self) -> Any:
        try:
            import pyarrow
        except ImportError:
            raise ParquetUnavailable() from None
        return pyarrow

    def open_table(self, location: Any) -> Any:
        """An open table (see ParquetTable); SourceError when a remote file cannot be opened."""
        raise NotImplementedError

    def group_sizes(self, location: Any) -> list[tuple[int, int]] | None:
        """(bytes, rows) of each group, from the file's metadata; None if unreadable."""
        raise NotImplementedError

    def parts(self, location: Any, size: int | None, shard_size: int) -> list[Part] | None:
        """Consecutive groups, about `shard_size` bytes each; None when not split."""
        if not shard_size:
            return None
        sizes = self.group_sizes(location)
        if sizes is None:
            return None
        # Every closed part holds `shard_size` bytes or more: at most MAX_SHARDS parts.
        shard_size = max(shard_size, -(-sum(b for b, _ in sizes) // (MAX_SHARDS - 1)))
        out: list[Part] = []
        first, nbytes, rows, before = 0, 0, 0, 0
        for g, (group_bytes, group_rows) in enumerate(sizes):
            nbytes += group_bytes
            rows += group_rows
            if nbytes >= shard_size:
                out.append(Part((before, None), (first, g + 1)))
                first, nbytes, before, rows = g + 1, 0, before + rows, 0
        if first < len(sizes):
            out.append(Part((before, None), (first, len(sizes))))
        return out if len(out) > 1 else None

    def rows_before(self, location: Any, start: int) -> int:
        return start  # known from the metadata at collection

    def fingerprint(self, location: Path, part: Part, whole: bool) -> list[Any]:
        # A part reads the footer too: the whole file is its fingerprint.
        import os

        return ["sha256", digest_file(location), os.stat(location).st_size]

    def progress_total(self, part: Part, size: int | None) -> int | None:
        return None  # progress in rows: no byte position through pyarrow


class Oversized(NamedTuple):
    """In place of a batch: a row group of one row whose values alone take more bytes than
    the record limit, by the footer's counts; it is not read (a few KB of a repeated value
    can stand for gigabytes)."""

    rows: int
    nbytes: int


# Bytes per value of the Parquet physical types, decoded (byte arrays: their data plus an offset).
_WIDTH = {"BOOLEAN": 1, "INT32": 4, "FLOAT": 4, "INT64": 8, "DOUBLE": 8, "INT96": 12}


class ParquetTable:
    def __init__(self, pq: Any, source: Any):
        self.source = source
        try:
            # A buffered stream: column chunks are read as the batches need them, not whole.
            self.file = pq.ParquetFile(source, buffer_size=1 << 20, pre_buffer=False)
        except BaseException:
            _close(source)
            raise
        self.schema = self.file.schema_arrow

    def rows(self, groups: tuple[int, int] | None) -> int:
        meta = self.file.metadata
        return sum(meta.row_group(g).num_rows for g in range(*(groups or (0, meta.num_row_groups))))

    def batches(self, groups: tuple[int, int] | None, columns: list[str] | None, rows: int,
                limit: int | None = None) -> Iterator[Any]:
        """Batches of at most `rows` rows of `columns` (None: every column), group by group;
        an Oversized in place of a one-row group over `limit` bytes."""
        meta = self.file.metadata
        for g in range(*(groups or (0, meta.num_row_groups))):
            group = meta.row_group(g)
            if limit is not None and group.num_rows == 1:
                nbytes = self.decoded_bytes(group, columns)
                if nbytes > limit:
                    yield Oversized(1, nbytes)
                    continue
            yield from self.file.iter_batches(batch_size=rows, row_groups=[g], columns=columns,
                                              use_threads=False)

    @staticmethod
    def decoded_bytes(group: Any, columns: list[str] | None) -> int:
        """About how many bytes the values of `columns` of a row group take decoded, from
        the footer's value counts (never less: a byte array counts at least its offsets)."""
        total = 0
        for c in range(group.num_columns):
            chunk = group.column(c)
            if columns is not None and chunk.path_in_schema.split(".")[0] not in columns:
                continue
            width = _WIDTH.get(chunk.physical_type)
            total += (chunk.num_values * width if width is not None
                      else chunk.num_values * 4 + chunk.total_uncompressed_size)
        return total

    def close(self) -> None:
        _close(self.source)


class ParquetSource(ArrowSource):
    what = "Parquet"

    def open_table(self, location: Any) -> ParquetTable:
        self.library()
        import pyarrow.parquet as pq

        return ParquetTable(pq, _open(location))

    def group_sizes(self, location: Any) -> list[tuple[int, int]] | None:
        source = None
        try:
            self.library()
            import pyarrow.parquet as pq

            source = _open(location)
            meta = pq.read_metadata(source)
        except Exception:  # noqa: BLE001 - the audit item reports what is wrong with the file
            return None
        finally:
            if source is not None:
                _close(source)
        out = []
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            out.append((sum(group.column(c).total_compressed_size for c in range(group.num_columns)),
                        group.num_rows))
        return out


SOURCE = ParquetSource()
__all__ = ["SOURCE", "ArrowSource", "Oversized", "ParquetUnavailable", "SourceError"]
