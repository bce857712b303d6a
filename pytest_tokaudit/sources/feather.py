"""Arrow IPC / Feather v2 files (.arrow, .feather; pyarrow): runs of record batches as
parts, rows as records. Local files are memory-mapped, so reading the batch sizes for the
parts reads no data."""

from __future__ import annotations

from typing import Any, Iterator

from .parquet import ArrowSource, close_arrow, open_arrow


class FeatherTable:
    def __init__(self, pa: Any, location: Any):
        self.source = open_arrow(location)
        if self.source is location:  # a local path: mapped, not read
            self.source = pa.memory_map(str(location))
        try:
            self.reader = pa.ipc.open_file(self.source)
        except BaseException:
            close_arrow(self.source)
            raise
        self.schema = self.reader.schema

    def sizes(self) -> list[tuple[int, int]]:
        out = []
        for i in range(self.reader.num_record_batches):
            batch = self.reader.get_batch(i)
            out.append((batch.nbytes, batch.num_rows))
        return out

    def rows(self, groups: tuple[int, int] | None) -> int:
        first, end = groups or (0, self.reader.num_record_batches)
        return sum(self.reader.get_batch(i).num_rows for i in range(first, end))

    def batches(self, groups: tuple[int, int] | None, columns: list[str] | None, rows: int,
                limit: int | None = None) -> Iterator[Any]:
        """Batches of at most `rows` rows of `columns` (None: every column). Mapped, not
        read: a row over `limit` costs nothing until the engine measures it."""
        first, end = groups or (0, self.reader.num_record_batches)
        for i in range(first, end):
            batch = self.reader.get_batch(i)
            if columns is not None:
                batch = batch.select(columns)
            for at in range(0, batch.num_rows, rows):  # bounded batches, as Parquet's
                yield batch.slice(at, rows)

    def close(self) -> None:
        close_arrow(self.source)


class FeatherSource(ArrowSource):
    what = "Arrow IPC"

    def open_table(self, location: Any) -> FeatherTable:
        return FeatherTable(self.library(), location)

    def group_sizes(self, location: Any) -> list[tuple[int, int]] | None:
        try:
            table = self.open_table(location)
        except Exception:  # noqa: BLE001 - the audit item reports what is wrong with the file
            return None
        try:
            return table.sizes()
        finally:
            table.close()


SOURCE = FeatherSource()
