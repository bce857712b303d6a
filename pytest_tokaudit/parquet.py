"""Parquet files as a record source: row groups as parts, record batches checked vectorised.

Each record batch is read with pyarrow (only the columns the contract reads) and the
per-record facts the built-in checks need are computed column-wise with pyarrow compute:
the length of each ids list, its last element, how often each contract token occurs, and
which rows hold an unusable value. Python looks at a row's values only when the row is
unusable (to word the same finding as the JSONL reader) or when a check asks for them
(`record.ids`, `record.data`, the tokenizer round trip).

Rows are numbered from 1 within the file and shown as `path:row N`. A large file is split
across xdist workers by row groups; a shard's rows are numbered within it until the
controller rebases them by the rows before it, which the file's footer gives exactly.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Final, Iterator

from .contract import MISSING, Contract
from .findings import Finding
from .reader import (
    I64_MIN,
    U64_MAX,
    Rejected,
    SourceError,
    Unusable,
    _count_problem,
    _id_problem,
    check_ids,
)
from .summary import FileSummary

SUFFIX = ".parquet"
EXTRA = "pip install 'pytest-tokaudit[parquet]'"
BATCH_ROWS = 256  # about 0.7M ids of a typical response each: memory stays small


class ParquetUnavailable(Exception):
    """pyarrow is not installed."""

    def __init__(self) -> None:
        super().__init__(f"reading Parquet needs pyarrow: {EXTRA}")


def is_parquet(path: Path | str) -> bool:
    return str(path).endswith(SUFFIX)


def _pq() -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ParquetUnavailable() from None
    return pq


def _open(path: Any) -> Any:
    """What pyarrow reads: a local path, or a remote.RemoteFile's file object."""
    opener = getattr(path, "open_stream", None)
    return opener() if opener is not None else path


def _close(source: Any) -> None:
    if hasattr(source, "close"):
        source.close()


def parts(path: Any, shard_bytes: int) -> list[tuple[int, int, int]] | None:
    """Consecutive row groups, about `shard_bytes` of compressed data each: (first group,
    end group, rows before). None when the file is not split (small, unreadable, no pyarrow)."""
    source = None
    try:
        pq = _pq()
        source = _open(path)
        meta = pq.read_metadata(source)
    except Exception:  # noqa: BLE001 - the audit item reports what is wrong with the file
        return None
    finally:
        if source is not None:
            _close(source)
    out: list[tuple[int, int, int]] = []
    first, size, rows, before = 0, 0, 0, 0
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        size += sum(group.column(c).total_compressed_size for c in range(group.num_columns))
        rows += group.num_rows
        if size >= shard_bytes:
            out.append((first, g + 1, before))
            first, size, before, rows = g + 1, 0, before + rows, 0
    if first < meta.num_row_groups:
        out.append((first, meta.num_row_groups, before))
    return out if len(out) > 1 else None


class ArrowRecord:
    """A row as the checks see it, from column-wise facts; its values are read on demand."""

    __slots__ = ("line", "id", "count", "n_ids", "last_id", "_hits", "_ids_col", "_row",
                 "_batch", "_ids")
    # Read-only to a type checker; plain slots at run time, as reader.Record's.
    line: Final[int]
    id: Final[str | int | None]
    count: Final[int]
    n_ids: Final[int]
    last_id: Final[int | None]

    def __init__(self, line: int, record_id: Any, count: int, n_ids: int, last_id: int | None,
                 hits: dict[int, Counter[int]], ids_col: Any, batch: Any, row: int) -> None:
        self.line, self.id, self.count, self.n_ids, self.last_id = line, record_id, count, n_ids, last_id
        # token -> Counter(row -> occurrences), for the contract's tokens, shared by the batch
        self._hits, self._ids_col, self._batch, self._row = hits, ids_col, batch, row
        self._ids: list[int] | None = None

    @property
    def ids(self) -> list[int]:
        if self._ids is None:
            self._ids = self._ids_col[self._row].as_py()
        return self._ids

    @property
    def data(self) -> dict[str, Any]:
        """The whole row (the columns the contract reads), as Python values."""
        return self._batch.slice(self._row, 1).to_pylist()[0]

    def occurrences(self, token: int) -> int:
        return self.count_each((token,))[0]

    def count_each(self, tokens: tuple[int, ...]) -> list[int]:
        hits = self._hits
        if all(t in hits for t in tokens):
            return [hits[t][self._row] for t in tokens]
        ids = self.ids
        return [ids.count(t) for t in tokens]

    def finding(self, check: str, message: str, allowable: bool = False) -> Finding:
        return Finding(check, message, self.line, self.id, allowable)


def _column(batch: Any, field: tuple[str, ...]) -> Any:
    """The column at a dotted path (struct fields below the first name), or MISSING."""
    import pyarrow as pa
    import pyarrow.compute as pc

    names = batch.schema.names
    if field[0] not in names:
        return MISSING
    col = batch.column(names.index(field[0]))
    for part in field[1:]:
        if not pa.types.is_struct(col.type) or col.type.get_field_index(part) < 0:
            return MISSING
        col = pc.struct_field(col, part)
    return col


def _is_int_type(t: Any) -> bool:
    import pyarrow as pa

    return pa.types.is_integer(t)


def _schema_problem(schema: Any, contract: Contract) -> str | None:
    """A column the contract reads that is missing or of a type no row could pass with."""
    import pyarrow as pa

    if type(contract.count_field) is not tuple or contract.text_template is not None:
        return ("a sum in tokaudit_count_field and tokaudit_text_template are not supported for "
                "Parquet files yet (JSONL only)")
    fields = [("id", contract.id_field), ("count", contract.count_field), ("ids", contract.ids_field)]
    if contract.where:
        fields.append(("where", contract.where))
    for role, field in fields:
        if not field:
            continue
        t: Any = schema
        for k, part in enumerate(field):
            index = t.get_field_index(part) if hasattr(t, "get_field_index") else -1
            if index < 0:
                where = ".".join(field[:k]) or "the file"
                return f"no column {'.'.join(field)!r} in {where} (columns: {', '.join(schema.names)})"
            t = t.field(index).type
        name = ".".join(field)
        if role == "ids" and not (
            (pa.types.is_list(t) or pa.types.is_large_list(t)) and _is_int_type(t.value_type)
        ):
            return f"column {name!r} must be a list of integer token ids, found {t}"
        if role == "count" and not _is_int_type(t):
            return f"column {name!r} must be an integer column, found {t}"
        if role == "id" and not (_is_int_type(t) or pa.types.is_string(t) or pa.types.is_large_string(t)):
            return f"column {name!r} must hold strings or integers, found {t}"
    return None


def _count_path(contract: Contract) -> tuple[str, ...]:
    """The count field; a sum never gets this far (_schema_problem refuses it)."""
    assert isinstance(contract.count_field, tuple)
    return contract.count_field


def _top_columns(contract: Contract) -> list[str]:
    fields = [contract.id_field, _count_path(contract), contract.ids_field, contract.where]
    return list(dict.fromkeys(f[0] for f in fields if f))


def audit_parquet(path: Any, contract: Contract, hook: Any, summary: FileSummary,
                  groups: tuple[int, int] | None = None) -> None:
    """Read the rows of `path` (or of row groups [first, end)), check them, fill `summary`.

    `path` is a local Path, or a remote.RemoteFile (read through its file object)."""
    try:
        pq = _pq()
    except ParquetUnavailable as exc:
        summary.read_error = str(exc)
        summary.add_finding(Finding("read", summary.read_error))
        return
    try:
        source = _open(path)
    except SourceError as exc:  # a remote file that cannot be opened: not audited
        summary.read_error = f"cannot open: {exc}"
        summary.add_finding(Finding("read", summary.read_error))
        return
    try:
        _audit_parquet(pq, source, contract, hook, summary, groups)
    finally:
        _close(source)


def _audit_parquet(pq: Any, source: Any, contract: Contract, hook: Any, summary: FileSummary,
                   groups: tuple[int, int] | None) -> None:
    from .audit import BATCH_RECORDS, _check_batch

    try:
        # A buffered stream: column chunks are read as the batches need them, not whole.
        pf = pq.ParquetFile(source, buffer_size=1 << 20, pre_buffer=False)
    except SourceError as exc:
        summary.read_error = f"cannot open: {exc}" if exc.at_open else f"cannot read Parquet: {exc}"
        summary.add_finding(Finding("read", summary.read_error))
        return
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several kinds for a bad footer
        summary.read_error = f"cannot read Parquet: {_short(exc)}"
        summary.add_finding(Finding("read", summary.read_error))
        return
    problem = _schema_problem(pf.schema_arrow, contract)
    if problem:
        summary.records = summary.lines = _rows(pf, groups)
        summary.read_error = problem
        summary.add_finding(Finding("schema", problem))
        return
    tokens = tuple(dict.fromkeys(contract.require_once_ids + contract.forbid_ids))
    row_groups = list(range(*groups)) if groups else None
    line = 0
    try:
        for batch in pf.iter_batches(batch_size=BATCH_ROWS, row_groups=row_groups,
                                     columns=_top_columns(contract), use_threads=False):
            records, pending, unusable = [], [], []
            for item in _rows_of(batch, line, contract, tokens):
                summary.records += 1
                if item is None:
                    summary.skipped += 1
                    continue
                summary.audited += 1
                if type(item) is Rejected:
                    pending += item.findings
                    if item.count is not None:
                        summary.billed_unusable += item.count
                        summary.unusable_billed += 1
                    at = item.findings[0].line
                    assert at is not None  # _rows_of gives each finding its row
                    unusable.append(Unusable(at, item.record_id, item.count))
                else:
                    records.append(item)
                if len(records) + len(unusable) >= BATCH_RECORDS:
                    _check_batch(records, pending, unusable, contract, hook, summary)
                    records, pending, unusable = [], [], []
            line += batch.num_rows
            summary.lines = line
            _check_batch(records, pending, unusable, contract, hook, summary)
    except SourceError as exc:  # the storage failed mid-file: keep what was read, say where
        summary.read_error = f"{exc} (after row {line})"
        summary.add_finding(Finding("read", summary.read_error))
    except Exception as exc:  # noqa: BLE001 - a corrupt page: keep what was read, say where
        summary.read_error = f"cannot read Parquet: {_short(exc)} (after row {line})"
        summary.add_finding(Finding("read", summary.read_error))


def _rows(pf: Any, groups: tuple[int, int] | None) -> int:
    meta = pf.metadata
    return sum(meta.row_group(g).num_rows for g in range(*(groups or (0, meta.num_row_groups))))


def _short(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def _rows_of(batch: Any, before: int, contract: Contract,
             tokens: tuple[int, ...]) -> Iterator[ArrowRecord | Rejected | None]:
    """Each row of a batch: an ArrowRecord, a Rejected with its findings, or None (skipped)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = batch.num_rows
    ids_col = _column(batch, contract.ids_field)
    if isinstance(ids_col, pa.ChunkedArray):
        ids_col = ids_col.combine_chunks()
    lengths = pc.list_value_length(ids_col)
    flat = pc.list_flatten(ids_col)
    parents = pc.list_parent_indices(ids_col)
    # Rows with an element no token id can be: null or negative.
    bad_elem = pc.or_(pc.is_null(flat), pc.less(pc.fill_null(flat, 0), 0))
    bad_rows = set(pc.take(parents, pc.indices_nonzero(bad_elem)).to_pylist())
    bad_rows.update(pc.indices_nonzero(pc.is_null(lengths)).to_pylist())
    # The last element of each non-empty list: at the end of its run in the flat values.
    filled = pc.fill_null(lengths, 0)
    ends = pc.cumulative_sum(filled)
    nonempty = pc.greater(filled, 0)
    last_at = pc.if_else(nonempty, pc.subtract(ends, 1), None)
    lasts = pc.take(flat, last_at).to_pylist()
    hits = {t: Counter(pc.take(parents, pc.indices_nonzero(pc.equal(flat, t))).to_pylist())
            for t in tokens}
    id_vals = _values(batch, contract.id_field) if contract.id_field else [None] * n
    count_vals = _values(batch, _count_path(contract))
    flags = _values(batch, contract.where) if contract.where else None
    n_ids = filled.to_pylist()
    id_name = ".".join(contract.id_field)
    count_name = ".".join(_count_path(contract))
    ids_name = ".".join(contract.ids_field)
    for row in range(n):
        line = before + row + 1
        if flags is not None and not flags[row]:
            yield None
            continue
        problems = []
        rid = id_vals[row]
        if contract.id_field and not (type(rid) is str or type(rid) is int and I64_MIN <= rid <= U64_MAX):
            problems.append(_id_problem(rid, id_name))
            rid = None
        count = count_vals[row]
        if not (type(count) is int and 0 <= count <= U64_MAX):
            problems.append(_count_problem(count, count_name))
            count = None
        if row in bad_rows:
            why = check_ids(ids_col[row].as_py(), ids_name)
            assert why is not None  # a null list or element, or a negative id: never valid
            problems.append(why)
        if problems:
            yield Rejected([Finding("schema", p, line, rid) for p in problems], rid, count)
            continue
        yield ArrowRecord(line, rid, count, n_ids[row], lasts[row], hits, ids_col, batch, row)


def _values(batch: Any, field: tuple[str, ...]) -> list[Any]:
    col = _column(batch, field)
    return col.to_pylist()
