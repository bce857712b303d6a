"""The Arrow pass: the records of a columnar source (Parquet, Arrow IPC), checked vectorised.

Each record batch is read with pyarrow (only the columns the contract reads, unless a
check of the user's may read any field: then every column, see reads_all) and the
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
from typing import TYPE_CHECKING, Any, Iterator

from ..base.fields import LIST_INDEX, MISSING, CountSum, count_paths, get_path
from ..base.findings import Finding, foreign
from ..model.contract import Contract
from ..model.spend import table_fields
from ..model.records import ReadOnlyRecord, Rejected, TextRecord, Unusable
from ..model.summary import FileSummary
from ..sources.base import SourceError
from ..base.text import size_text
from ..sources.parquet import Oversized, ParquetUnavailable
from ..sources.parse import (
    I64_MIN,
    U64_MAX,
    check_ids,
    count_problem,
    id_problem,
    judge_fields,
    rejected,
    sum_terms,
    template_texts,
)
from .observers import NONE, Observers
from .plain import BATCH, BATCH_RECORDS, RECORD, check_batch

_set = object.__setattr__  # as model/records.py sets its frozen fields

BATCH_ROWS = 256  # about 0.7M ids of a typical response each: memory stays small


class ArrowRecord(ReadOnlyRecord):
    """A row as the checks see it, from column-wise facts; its values are read on demand."""

    __slots__ = ("line", "id", "count", "n_ids", "last_id", "_hits", "_ids_col", "_row",
                 "_batch", "_ids")
    if TYPE_CHECKING:
        @property
        def last_id(self) -> int | None: ...
    _ids: list[int] | None
    _hits: dict[int, Counter[int]]
    _ids_col: Any
    _batch: Any
    _row: int

    def __init__(self, line: int, record_id: Any, count: int, n_ids: int, last_id: int | None,
                 hits: dict[int, Counter[int]], ids_col: Any, batch: Any, row: int) -> None:
        # token -> Counter(row -> occurrences), for the contract's tokens, shared by the batch
        _set(self, "line", line)
        _set(self, "id", record_id)
        _set(self, "count", count)
        _set(self, "n_ids", n_ids)
        _set(self, "last_id", last_id)
        _set(self, "_hits", hits)
        _set(self, "_ids_col", ids_col)
        _set(self, "_batch", batch)
        _set(self, "_row", row)
        _set(self, "_ids", None)

    @property
    def ids(self) -> list[int]:
        if self._ids is None:
            ids = self._ids_col[self._row].as_py()
            _set(self, "_ids", ids)
            return ids
        return self._ids

    @property
    def data(self) -> dict[str, Any]:
        """The whole row, as Python values: every column when a check outside this package
        is registered (see reads_all), as its JSONL twin's object holds every field."""
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
    """The values at a dotted path (struct fields, list indices below the first name), or
    MISSING; null where a row's value is null or its list too short."""
    names = batch.schema.names
    if field[0] not in names:
        return MISSING
    col = _decoded(batch.column(names.index(field[0])))
    for part in field[1:]:
        col = _step(col, part)
        if col is MISSING:
            return MISSING
        col = _decoded(col)
    return col


def _decoded(col: Any) -> Any:
    """A dictionary-encoded column (pandas' `category`) as the plain values it stands for."""
    import pyarrow as pa

    if pa.types.is_dictionary(col.type):
        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        return col.dictionary_decode()
    return col


def _is_list(t: Any) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_list(t) or pa.types.is_large_list(t))


def _step(col: Any, part: str) -> Any:
    """One part of a dotted path: a struct's field, or a list's element (`choices.0`)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    t = col.type
    if pa.types.is_struct(t):
        return pc.struct_field(col, part) if t.get_field_index(part) >= 0 else MISSING
    if _is_list(t) and LIST_INDEX(part):
        k = int(part)
        long_enough = pc.fill_null(pc.greater(pc.list_value_length(col), k), False)
        # `offsets` index the unsliced `values`; rows without element k take null.
        at = pc.if_else(long_enough, pc.add(col.offsets[:-1], k), None)
        return pc.take(col.values, at)
    return MISSING


def _field_type(schema: Any, field: tuple[str, ...]) -> Any:
    """The type at a dotted path of the schema, or a string saying where it breaks."""
    t: Any = schema
    for k, part in enumerate(field):
        if k and _is_list(t) and LIST_INDEX(part):
            t = t.value_type
            continue
        index = t.get_field_index(part) if hasattr(t, "get_field_index") else -1
        if index < 0:
            where = ".".join(field[:k]) or "the file"
            return f"no column {'.'.join(field)!r} in {where} (columns: {', '.join(schema.names)})"
        t = _value_type(t.field(index).type)
    return t


def _value_type(t: Any) -> Any:
    """A dictionary type's values' type: the values a row holds."""
    import pyarrow as pa

    return t.value_type if pa.types.is_dictionary(t) else t


def _is_int_type(t: Any) -> bool:
    import pyarrow as pa

    return pa.types.is_integer(t)


def _schema_problem(schema: Any, contract: Contract) -> str | None:
    """A column the contract reads that is missing or of a type no row could pass with.

    With a text template the ids column may be absent (the ids are rebuilt from the text);
    an optional addend of a sum may be absent (it counts 0). Text columns are judged per
    row, as in JSONL: a value that is not a string is a finding at its row."""
    import pyarrow as pa

    template = contract.text_template is not None
    fields: list[tuple[str, tuple[str, ...], bool]] = [("id", contract.id_field, False)]
    if isinstance(contract.count_field, CountSum):
        fields += [("count", t.path, t.optional) for t in contract.count_field.terms]
    else:
        fields.append(("count", contract.count_field, False))
    fields.append(("ids", contract.ids_field, template))
    if contract.where:
        fields.append(("where", contract.where, False))
    if template:
        assert contract.text_template is not None
        fields += [("text", ph.path, ph.optional) for ph in contract.text_template.placeholders]
    for role, field, optional in fields:
        if not field:
            continue
        t = _field_type(schema, field)
        if isinstance(t, str):
            if optional:
                continue
            return t
        name = ".".join(field)
        if role == "ids" and not (_is_list(t) and _is_int_type(t.value_type)):
            return f"column {name!r} must be a list of integer token ids, found {t}"
        if role == "count" and not _is_int_type(t):
            return f"column {name!r} must be an integer column, found {t}"
        if role == "id" and not (_is_int_type(t) or pa.types.is_string(t) or pa.types.is_large_string(t)
                                 or getattr(pa.types, "is_string_view", bool)(t)):
            return f"column {name!r} must hold strings or integers, found {t}"
    return None


def reads_all(hook: Any) -> bool:
    """Whether a per-record or batch check outside this package is registered for the file:
    it may read any field of `record.data`, so every column is read (as a JSONL record's
    object holds every field); the built-in checks read only the contract's columns."""
    try:
        return any(foreign(getattr(hook, name)) for name in (RECORD, BATCH))
    except AttributeError:  # not a pluggy hook relay: who calls cannot be told, read all
        return True


def _top_columns(contract: Contract, schema: Any) -> list[str]:
    """The top-level columns the contract reads that the file has (a missing one that
    matters is a schema problem already)."""
    fields = [contract.id_field, *count_paths(contract.count_field), contract.ids_field, contract.where]
    if contract.text_template is not None:
        fields += contract.text_template.paths
    if contract.finish_reason:
        fields.append(contract.finish_reason_field)
    fields += [tuple(f.split(".")) for f in contract.group_by]
    # The whole bill's fields (checks/prompt.py, join.py, money.py): read when configured.
    if contract.audits_prompts or contract.requests or contract.prices or contract.budget_money is not None \
            or contract.price_input_per_mtok is not None or contract.price_output_per_mtok is not None:
        fields += [*count_paths(contract.prompt_count_field), contract.cached_tokens_field,
                   contract.join_field, ("error",), ("response",), *contract.prompt_fields]
        if contract.prices:
            fields += [tuple(f.split(".")) for f in table_fields(contract)]
    names = set(schema.names)
    return [name for name in dict.fromkeys(f[0] for f in fields if f) if name in names]


def audit_arrow(source: Any, path: Any, contract: Contract, hook: Any, summary: FileSummary,
                groups: tuple[int, int] | None = None, observers: Observers = NONE) -> None:
    """Read the rows of `path` (or of its groups [first, end)) through `source` (an
    ArrowSource: Parquet, Arrow IPC), check them, fill `summary`.

    `path` is a local Path, or a remote.RemoteFile (read through its file object)."""
    try:
        source.library()
    except ParquetUnavailable as exc:
        summary.read_error = str(exc)
        summary.add_finding(Finding("read", summary.read_error))
        return
    try:
        table = source.open_table(path)
    except SourceError as exc:
        summary.read_error = f"cannot open: {exc}" if exc.at_open else f"cannot read {source.what}: {exc}"
        summary.add_finding(Finding("read", summary.read_error))
        return
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several kinds for a bad footer
        summary.read_error = f"cannot read {source.what}: {_short(exc)}"
        summary.add_finding(Finding("read", summary.read_error))
        return
    try:
        _audit_table(source, table, contract, hook, summary, groups, observers)
    finally:
        table.close()


def _audit_table(source: Any, table: Any, contract: Contract, hook: Any, summary: FileSummary,
                 groups: tuple[int, int] | None, observers: Observers) -> None:
    problem = _schema_problem(table.schema, contract)
    if problem:
        summary.records = summary.lines = table.rows(groups)
        summary.read_error = problem
        summary.add_finding(Finding("schema", problem))
        return
    tokens = tuple(dict.fromkeys(contract.require_once_ids + contract.forbid_ids))
    limit = contract.max_line_bytes
    line = 0
    try:
        rows_of = _text_rows_of if contract.text_template is not None else _rows_of
        columns = None if reads_all(hook) else _top_columns(contract, table.schema)
        for batch in table.batches(groups, columns, BATCH_ROWS, limit):
            records: list[Any] = []
            pending: list[Finding] = []
            unusable: list[Unusable] = []
            # The record limit, as a JSONL line's: a row over it is a finding, never checked.
            lines = None  # the rows' numbers, when some are taken out
            if isinstance(batch, Oversized):  # known from the footer: not even read
                n_rows, over, batch = batch.rows, [(0, batch.nbytes)], None
            else:
                n_rows, sizes = batch.num_rows, _row_bytes(batch)
                over = [(r, n) for r, n in enumerate(sizes) if n > limit]
                if over:
                    kept = [r for r, n in enumerate(sizes) if n <= limit]
                    lines = [line + r + 1 for r in kept]
                    batch = batch.take(kept)
            for r, nbytes in over:
                summary.records += 1
                summary.unreadable += 1
                pending.append(Finding("line_length", too_big(nbytes, limit), line + r + 1))
                unusable.append(Unusable(line + r + 1, None, None))
            for item in rows_of(batch, line, contract, tokens, lines) if batch is not None else ():
                summary.records += 1
                if item is None:
                    summary.skipped += 1
                    continue
                summary.audited += 1
                if type(item) is Rejected:
                    pending += item.findings
                    summary.add_unchecked(item.missing, item.data)  # a row is an object
                    if item.count is not None:
                        summary.billed_unusable += item.count
                        summary.unusable_billed += 1
                    at = item.findings[0].line
                    assert at is not None  # _rows_of gives each finding its row
                    unusable.append(Unusable(at, item.record_id, item.count, item.data))
                else:
                    records.append(item)
                if len(records) + len(unusable) >= BATCH_RECORDS:
                    check_batch(records, pending, unusable, contract, hook, summary, observers.sink)
                    records, pending, unusable = [], [], []
            line += n_rows
            summary.lines = line
            check_batch(records, pending, unusable, contract, hook, summary, observers.sink)
            if observers.meter is not None:  # rows only: no byte position through pyarrow
                observers.meter.tick(summary.records, None)
    except SourceError as exc:  # the storage failed mid-file: keep what was read, say where
        summary.read_error = f"{exc} (after row {line})"
        summary.add_finding(Finding("read", summary.read_error))
    except Exception as exc:  # noqa: BLE001 - a corrupt page: keep what was read, say where
        summary.read_error = f"cannot read {source.what}: {_short(exc)} (after row {line})"
        summary.add_finding(Finding("read", summary.read_error))


def too_big(nbytes: int, limit: int) -> str:
    """A row over the record limit, worded as a JSONL line over it (no row number of its
    own: the finding's location gives the file's)."""
    return (f"the row holds {nbytes:,} bytes, over the limit of {size_text(limit)} "
            "(tokaudit_max_line_bytes)")


def _row_bytes(batch: Any) -> list[int]:
    """The bytes each row's values take in the batch (Arrow's buffers: 8 per int64, a
    string's bytes), from list offsets and lengths: no value is read or copied."""
    total: Any = 0
    for col in batch.columns:
        total = _add(total, _sizes(col))
    return [total] * batch.num_rows if isinstance(total, int) else total.to_pylist()


def _add(a: Any, b: Any) -> Any:
    import pyarrow.compute as pc

    return a + b if isinstance(a, int) and isinstance(b, int) else pc.add(a, b)


def _sizes(arr: Any) -> Any:
    """Bytes per element of `arr`: an int when every element takes the same, else an int64
    array."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    t = arr.type
    if pa.types.is_dictionary(t):
        return t.index_type.bit_width // 8  # the values are the dictionary's, shared
    if pa.types.is_struct(t):
        total: Any = 0
        for child in arr.flatten():
            total = _add(total, _sizes(child))
        return total
    if _is_list(t) or pa.types.is_fixed_size_list(t):
        lengths = pc.fill_null(pc.list_value_length(arr), 0).cast(pa.int64())
        width = _fixed(t.value_type)
        if width is not None:  # ids: length x 8, without touching the values
            return pc.multiply(lengths, width)
        child = _sizes(pc.list_flatten(arr))
        if isinstance(child, int):
            return pc.multiply(lengths, child)
        ends = pc.cumulative_sum(lengths)
        sums = pa.concat_arrays([pa.array([0], pa.int64()), pc.cumulative_sum(child.cast(pa.int64()))])
        return pc.subtract(pc.take(sums, ends), pc.take(sums, pc.subtract(ends, lengths)))
    if (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
            or pa.types.is_large_binary(t)):
        return pc.fill_null(pc.binary_length(arr), 0).cast(pa.int64())
    width = _fixed(t)
    return width if width is not None else 0


def _fixed(t: Any) -> int | None:
    """Bytes per value of a fixed-width type (int64: 8), or None."""
    try:
        bits = t.bit_width
    except ValueError:  # not fixed width
        return None
    return max(bits // 8, 1)


def _short(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def _rows_of(batch: Any, before: int, contract: Contract, tokens: tuple[int, ...],
             lines: list[int] | None = None) -> Iterator[ArrowRecord | Rejected | None]:
    """Each row of a batch: an ArrowRecord, a Rejected with its findings, or None (skipped).
    Rows are numbered from `before` + 1, or by `lines` (rows taken out of a batch)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = batch.num_rows
    ids_col = _column(batch, contract.ids_field)
    if isinstance(ids_col, pa.ChunkedArray):
        ids_col = ids_col.combine_chunks()
    lengths = pc.list_value_length(ids_col)
    flat = pc.list_flatten(ids_col)
    parents = pc.list_parent_indices(ids_col)
    # Rows with an element no token id can be: null or negative. Scalars take the type of
    # the column (a plain 0 would be int64, and pyarrow would cast uint64 ids past 2**63 to
    # it). No comment line may start "type:": mypy 1.13 (our oldest) reads it as a type comment.
    bad_elem = pc.is_null(flat)
    if pa.types.is_signed_integer(flat.type):
        zero = pa.scalar(0, flat.type)
        bad_elem = pc.or_(bad_elem, pc.less(pc.fill_null(flat, zero), zero))
    bad_rows = set(pc.take(parents, pc.indices_nonzero(bad_elem)).to_pylist())
    bad_rows.update(pc.indices_nonzero(pc.is_null(lengths)).to_pylist())
    # The last element of each non-empty list: at the end of its run in the flat values.
    filled = pc.fill_null(lengths, 0)
    ends = pc.cumulative_sum(filled)
    nonempty = pc.greater(filled, 0)
    last_at = pc.if_else(nonempty, pc.subtract(ends, 1), None)
    lasts = pc.take(flat, last_at).to_pylist()
    hits = {t: _hits(flat, parents, t) for t in tokens}
    id_vals = _values(batch, contract.id_field) if contract.id_field else [None] * n
    count_field = contract.count_field
    if isinstance(count_field, CountSum):
        terms = [(t, _values(batch, t.path, n)) for t in count_field.terms]
    else:
        count_vals = _values(batch, count_field)
        count_name = ".".join(count_field)
    flags = _values(batch, contract.where) if contract.where else None
    n_ids = filled.to_pylist()
    id_name = ".".join(contract.id_field)
    ids_name = ".".join(contract.ids_field)
    for row in range(n):
        line = before + row + 1 if lines is None else lines[row]
        if flags is not None and not flags[row]:
            yield None
            continue
        problems = []
        rid = id_vals[row]
        if contract.id_field and not (type(rid) is str or type(rid) is int and I64_MIN <= rid <= U64_MAX):
            problems.append(id_problem(rid, id_name))
            rid = None
        if isinstance(count_field, CountSum):
            count = _sum(terms, row, problems, count_field)
        else:
            count = count_vals[row]
            if not (type(count) is int and 0 <= count <= U64_MAX):
                problems.append(count_problem(count, count_name))
                count = None
        if row in bad_rows:
            why = check_ids(ids_col[row].as_py(), ids_name)
            assert why is not None  # a null list or element, or a negative id: never valid
            problems.append(why)
        if problems or count is None:
            yield Rejected([Finding("schema", p, line, rid) for p in problems], rid, count)
            continue
        yield ArrowRecord(line, rid, count, n_ids[row], lasts[row], hits, ids_col, batch, row)


def _hits(flat: Any, parents: Any, token: int) -> Counter[int]:
    """row -> how often `token` occurs in its ids; none when the ids' type cannot hold it."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        scalar = pa.scalar(token, flat.type)
    except (pa.ArrowInvalid, OverflowError):  # past a uint32 column, say: no row holds it
        return Counter()
    return Counter(pc.take(parents, pc.indices_nonzero(pc.equal(flat, scalar))).to_pylist())


def _sum(terms: list[tuple[Any, list[Any]]], row: int, problems: list[str],
         formula: CountSum) -> int | None:
    """A billing sum for one row, as the JSONL reader's (an optional addend that is null, or
    whose column is absent, counts 0)."""
    return sum_terms(((term, values[row]) for term, values in terms), formula, problems)


def _text_rows_of(batch: Any, before: int, contract: Contract, tokens: tuple[int, ...],
                  lines: list[int] | None = None) -> Iterator[TextRecord | Rejected | None]:
    """Rows read with a text template: each row as the Python object its JSONL twin holds
    (the columns read), judged by the JSONL reader's own functions, so the findings are
    the same. The text is needed as Python strings anyway, to be encoded.

    Parquet has no absent field, only null: a null ids list counts as absent (the ids
    are rebuilt from the text), and a null where a path breaks is named as null."""
    ids_field = contract.ids_field
    for row, obj in enumerate(batch.to_pylist()):
        line = before + row + 1 if lines is None else lines[row]
        if contract.where:
            flag = get_path(obj, contract.where)
            if flag is MISSING or not flag:
                yield None
                continue
        parent = get_path(obj, ids_field[:-1]) if len(ids_field) > 1 else obj
        if type(parent) is dict and ids_field[-1] in parent and parent[ids_field[-1]] is None:
            del parent[ids_field[-1]]
        problems, record_id, count, ids = judge_fields(obj, contract, True)
        texts = template_texts(obj, contract, problems)
        if problems or texts is None:
            yield rejected(obj, contract, problems, line, record_id, count)
            continue
        yield TextRecord(line, obj, record_id, count, ids, texts=texts)


def _values(batch: Any, field: tuple[str, ...], n: int = 0) -> list[Any]:
    """The Python values at a dotted path; [None] * n where the file has no such column."""
    col = _column(batch, field)
    return [None] * n if col is MISSING else col.to_pylist()
