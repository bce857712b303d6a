"""Parquet files (pyarrow): runs of row groups as parts, record batches as records.

The footer alone gives the parts (the same on every xdist worker, and small) and the
rows before each; the engine's Arrow pass (engine/arrow.py) reads the batches.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any, Iterator, NamedTuple

from .base import MAX_SHARDS, Part, SourceError
from .digest import digest_file

EXTRA = "pip install 'pytest-tokaudit[parquet]'"


class ParquetUnavailable(Exception):
    """pyarrow is not installed."""

    def __init__(self) -> None:
        super().__init__(f"reading Parquet needs pyarrow: {EXTRA}")


def open_arrow(path: Any) -> Any:
    """What pyarrow reads: a local path, or a remote.RemoteFile's file object."""
    opener = getattr(path, "open_stream", None)
    return opener() if opener is not None else path


def close_arrow(source: Any) -> None:
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
    def __init__(self, pq: Any, source: Any, location: Any = None):
        self.source = source
        self.location = location  # to open again for the pages (see over_limit)
        try:
            # A buffered stream: column chunks are read as the batches need them, not whole.
            self.file = pq.ParquetFile(source, buffer_size=1 << 20, pre_buffer=False)
        except BaseException:
            close_arrow(source)
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
            elif limit is not None:
                # A row over the limit beside others: the rows around it are read, it is not.
                around = self.around_oversized(g, columns, rows, limit)
                if around is not None:
                    yield from around
                    continue
            yield from self.file.iter_batches(batch_size=rows, row_groups=[g], columns=columns,
                                              use_threads=False)

    def over_limit(self, g: int, columns: list[str] | None, limit: int) -> dict[int, int]:
        """The rows of row group `g` (0-based within it) whose values take more than `limit`
        bytes, with those bytes (at least): none when the footer shows that no row can
        (the levels of a list column, less one per other row, times its width), else
        from each list column's repetition levels, read page by page (parquet_pages), so
        that no value is decoded. The bytes are a lower bound: a row found under it is
        still measured once read (the Arrow pass's own check)."""
        meta = self.file.metadata
        group = meta.row_group(g)
        flat, bound, repeated = 0, 0, []
        for c in range(group.num_columns):
            chunk = group.column(c)
            if columns is not None and chunk.path_in_schema.split(".")[0] not in columns:
                continue
            width = _WIDTH.get(chunk.physical_type)
            rep = meta.schema.column(c).max_repetition_level
            if rep:
                repeated.append((chunk, rep, width or 4))
                bound += (chunk.num_values - group.num_rows + 1) * (width or 4)
            if width is None:  # a byte array: no value is longer than the chunk decoded
                bound += chunk.total_uncompressed_size
            elif not rep:
                bound += width
                flat += width
        if bound <= limit or not repeated:
            return {}
        try:
            import numpy  # noqa: F401 - parquet_pages needs it

            from . import parquet_pages as pages
        except ImportError:  # numpy is optional to pyarrow: the rows are measured once read
            return {}
        threshold = max(limit - flat, 0) // len(repeated)  # a row over holds more in one
        sizes: dict[int, int] = {}
        try:
            with self.reopen() as f:
                for chunk, rep, width in repeated:
                    if pages.row_bound(f, chunk, rep) * width <= threshold:
                        continue  # the first row start of each page tells: no row is long
                    for r, levels in pages.long_rows(f, chunk, rep, threshold // width).items():
                        _grow(sizes, r, levels * width)
        except (pages.Unsupported, OSError, ValueError, IndexError, struct.error):
            return {}  # a layout not read here: pyarrow reads it, as before
        return {r: n + flat for r, n in sizes.items() if r >= 0 and n + flat > limit}

    def around_oversized(self, g: int, columns: list[str] | None, rows: int,
                         limit: int) -> Iterator[Any] | None:
        """The batches of row group `g` with an Oversized in place of each row over
        `limit`, in row order; None when no row is over, or the group's list columns are
        of a layout parquet_pages does not decode (pyarrow reads it whole, as before)."""
        over = self.over_limit(g, columns, limit)
        if not over:
            return None
        from . import parquet_pages as pages

        meta = self.file.metadata
        group = meta.row_group(g)
        schema = self.schema
        names = [n for n in schema.names if columns is None or n in columns]
        leaves: dict[str, list[int]] = {}
        for c in range(group.num_columns):
            top = group.column(c).path_in_schema.split(".")[0]
            if top in names and meta.schema.column(c).max_repetition_level:
                leaves.setdefault(top, []).append(c)
        f = self.reopen()
        try:
            readers = {}
            for name, cols in leaves.items():
                field = schema.field(name)
                t = field.type
                import pyarrow as pa

                if len(cols) != 1 or not (pa.types.is_list(t) or pa.types.is_large_list(t)) \
                        or not pa.types.is_integer(t.value_type) \
                        or not set(group.column(cols[0]).encodings) <= _DECODED:
                    raise pages.Unsupported(f"column {name!r}")
                col = meta.schema.column(cols[0])
                empty_def = col.max_definition_level - 1 - int(t.value_field.nullable)
                readers[name] = pages.IntListReader(
                    f, group.column(cols[0]), group.column(cols[0]).physical_type,
                    col.max_repetition_level, col.max_definition_level, empty_def, set(over))
        except (pages.Unsupported, ImportError):
            f.close()
            return None
        return self._around(g, names, readers, over, rows, f)

    def _around(self, g: int, names: list[str], readers: dict[str, Any], over: dict[int, int],
                rows: int, f: Any) -> Iterator[Any]:
        import pyarrow as pa

        from .parquet_pages import Unsupported

        schema = pa.schema([self.schema.field(n) for n in names])
        flat = [n for n in names if n not in readers]
        total = self.file.metadata.row_group(g).num_rows
        try:
            if flat:
                flat_batches = self.file.iter_batches(batch_size=rows, row_groups=[g], columns=flat,
                                                      use_threads=False)
            else:
                flat_batches = iter([_Rows(min(rows, total - s)) for s in range(0, total, rows)])
            start = 0
            for fb in flat_batches:
                end = start + fb.num_rows
                kept = [r for r in range(start, end) if r not in over]
                local = pa.array([r - start for r in kept], pa.int64())
                arrays = []
                for name in names:
                    if name in readers:
                        numbers, lengths, values, nulls = readers[name].rows(end)
                        if numbers.tolist() != kept:
                            raise Unsupported("the rows of a list column and of the others differ")
                        arrays.append(_list_array(schema.field(name).type, lengths, values, nulls))
                    else:
                        arrays.append(fb.column(fb.schema.get_field_index(name)).take(local))
                batch = pa.RecordBatch.from_arrays(arrays, schema=schema)
                at, r = 0, start
                while r < end:  # in row order: runs of rows read, an Oversized for each over
                    if r in over:
                        yield Oversized(1, over[r])
                        r += 1
                        continue
                    stop = r
                    while stop < end and stop not in over:
                        stop += 1
                    yield batch.slice(at, stop - r)
                    at, r = at + stop - r, stop
                start = end
        finally:
            f.close()

    def reopen(self) -> Any:
        """The file again, as a binary file object of its own (for parquet_pages)."""
        source = open_arrow(self.location)
        return open(source, "rb") if isinstance(source, (str, Path)) else source

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
        close_arrow(self.source)


# The encodings of an integer list column that parquet_pages decodes.
_DECODED = {"PLAIN", "RLE", "BIT_PACKED", "PLAIN_DICTIONARY", "RLE_DICTIONARY"}


class _Rows(NamedTuple):
    """A batch of no column: its rows alone."""

    num_rows: int


def _grow(sizes: dict[int, int], row: int, nbytes: int) -> None:
    sizes[row] = sizes.get(row, 0) + nbytes


def _list_array(t: Any, lengths: Any, values: Any, nulls: Any) -> Any:
    """A list array of type `t` from its rows' lengths (-1: a null list), the values and
    which values are null."""
    import numpy as np
    import pyarrow as pa

    target = np.dtype(t.value_type.to_pandas_dtype())
    values = values.view(target) if values.dtype.itemsize == target.itemsize else values.astype(target)
    items = pa.array(values, type=t.value_type, mask=nulls if nulls.any() else None)
    large = pa.types.is_large_list(t)
    offsets = np.concatenate(([0], np.cumsum(np.maximum(lengths, 0)))).astype(np.int64 if large else np.int32)
    kind = pa.LargeListArray if large else pa.ListArray
    mask = pa.array(lengths < 0) if (lengths < 0).any() else None
    return kind.from_arrays(pa.array(offsets), items, type=t, mask=mask)


class ParquetSource(ArrowSource):
    what = "Parquet"

    def open_table(self, location: Any) -> ParquetTable:
        self.library()
        import pyarrow.parquet as pq

        return ParquetTable(pq, open_arrow(location), location)

    def group_sizes(self, location: Any) -> list[tuple[int, int]] | None:
        source = None
        try:
            self.library()
            import pyarrow.parquet as pq

            source = open_arrow(location)
            meta = pq.read_metadata(source)
        except Exception:  # noqa: BLE001 - the audit item reports what is wrong with the file
            return None
        finally:
            if source is not None:
                close_arrow(source)
        out = []
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            out.append((sum(group.column(c).total_compressed_size for c in range(group.num_columns)),
                        group.num_rows))
        return out


SOURCE = ParquetSource()
__all__ = ["SOURCE", "ArrowSource", "Oversized", "ParquetUnavailable", "SourceError"]
