"""The Arrow pass: the records of a columnar source (Parquet, Arrow IPC), through the kernel.

Each record batch is read with pyarrow (only the columns the contract reads, unless a
check of the user's may read any field: see reads_all) and handed to the kernel (kernel.py)
as a JSONL chunk is: the ids column's values are its flat ids (numpy), its offsets each
row's slice; billed counts, record ids and where flags are read as Python values. A row the
kernel cannot take (a null, a value out of range, a row over the record limit) is worded
one at a time by the JSONL reader's functions (`_Batches.judge`). A check of the user's
gets every row whole (the kernel's full mode: `record.data` read on demand); the fields a
built-in batch hook reads (group_by, the join id) ride on the light rows as columns. With a text template (the ids come from the tokenizer)
or without numpy, each row is a record for the per-line path.

Rows are numbered from 1 within the file and shown as `path:row N`. A large file is split
across xdist workers by row groups; a shard's rows are numbered within it until the
controller rebases them by the rows before it, which the file's footer gives exactly.
"""

from __future__ import annotations

from typing import Any

from ..base.fields import LIST_INDEX, MISSING, CountSum, count_paths, get_path
from ..base.findings import Finding, foreign
from ..base.text import size_text
from ..model.contract import Contract
from ..model.records import (
    ERROR_PATHS,
    SKIPPED,
    ErrorLine,
    Record,
    Rejected,
    TextRecord,
    Unusable,
    error_in,
    error_of,
)
from ..model.spend import table_fields
from ..model.summary import FileSummary
from ..sources.base import SourceError
from ..sources.parquet import Oversized, ParquetUnavailable
from ..sources.parse import (
    I64_MIN,
    U64_MAX,
    check_ids,
    count_problem,
    error_line,
    id_problem,
    judge_fields,
    rejected,
    sum_terms,
    template_texts,
)
from .columnar import EXACT, Plan, declarations
from .kernel import Kernel
from .observers import NONE, Observers
from .plain import BATCH, RECORD, PlainPass

BATCH_ROWS = 256  # about 0.7M ids of a typical response each: memory stays small


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
    """The type at a dotted path of the schema (a dictionary's: its values'), or a string
    saying where it breaks."""
    import pyarrow as pa

    t: Any = schema
    for k, part in enumerate(field):
        if k and _is_list(t) and LIST_INDEX(part):
            t = t.value_type
            continue
        index = t.get_field_index(part) if hasattr(t, "get_field_index") else -1
        if index < 0:
            where = ".".join(field[:k]) or "the file"
            return f"no column {'.'.join(field)!r} in {where} (columns: {', '.join(schema.names)})"
        t = t.field(index).type
        t = t.value_type if pa.types.is_dictionary(t) else t
    return t


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
        if role == "ids" and not (_is_list(t) and pa.types.is_integer(t.value_type)):
            return f"column {name!r} must be a list of integer token ids, found {t}"
        if role == "count" and not pa.types.is_integer(t):
            return f"column {name!r} must be an integer column, found {t}"
        if role == "id" and not (pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t)
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
    plain = PlainPass(contract, hook, summary, observers)
    rows = _Batches(contract, hook, plain, summary)
    line = 0
    try:
        columns = None if reads_all(hook) else _top_columns(contract, table.schema)
        for batch in table.batches(groups, columns, BATCH_ROWS, rows.limit):
            if isinstance(batch, Oversized):  # known from the footer: not even read
                rows.over(line + 1, batch.nbytes)
                line += batch.rows
            else:
                rows.batch(batch, line)
                line += batch.num_rows
            summary.lines = line
            plain.flush()
            if observers.meter is not None:  # rows only: no byte position through pyarrow
                observers.meter.tick(summary.records, None)
    except SourceError as exc:  # the storage failed mid-file: keep what was read, say where
        summary.read_error = f"{exc} (after row {line})"
        summary.add_finding(Finding("read", summary.read_error))
    except Exception as exc:  # noqa: BLE001 - a corrupt page: keep what was read, say where
        summary.read_error = f"cannot read {source.what}: {_short(exc)} (after row {line})"
        summary.add_finding(Finding("read", summary.read_error))


def _plan(contract: Contract, hook: Any) -> tuple[Plan, bool] | None:
    """How the kernel runs the rows: (columnar.Plan, whether every row goes to the hooks
    whole: what columnar.declarations says), or None where each row is a record for the
    per-line path. The fields the batch hooks read (Plan.fields) are read as columns."""
    if contract.text_template is not None:
        return None
    try:
        import numpy  # noqa: F401 - optional to pyarrow
    except ImportError:
        return None
    record, fields, light, full = declarations(contract, hook)
    names = {getattr(i.plugin, "native_key", None) for i in record}
    return Plan("count" in names, "structure" in names, "finish_reason" in names,
                fields=() if full else fields, ids=not full and "ids" in light), full


class _Batches:
    """The rows of each record batch into the kernel, or each to the per-line path."""

    def __init__(self, contract: Contract, hook: Any, plain: Any, summary: FileSummary):
        self.contract, self.plain, self.summary = contract, plain, summary
        self.limit = contract.max_line_bytes
        plan = _plan(contract, hook)
        self.kernel = None if plan is None else Kernel(contract, plan[0], plain, summary, hook)
        self.full, self.ids = plan is not None and plan[1], plan is not None and plan[0].ids
        self.fields = plan[0].fields if plan is not None else ()
        # A row whose finish reason tokaudit_finish_reason refuses: the per-line path words it.
        self.finish = (contract.finish_reason if plan is not None and plan[0].finish_check
                       and contract.finish_reason_field in self.fields else ())
        self.errors: dict[int, str] = {}  # the batch's error lines (tokaudit_requests)

    def over(self, line: int, nbytes: int) -> None:
        """A row over the record limit: a finding, never checked (as a JSONL line over it)."""
        self.summary.records += 1
        self.summary.unreadable += 1
        self.plain.pending.append(Finding(  # no row number of its own: the location gives it
            "line_length", f"the row holds {nbytes:,} bytes, over the limit of "
            f"{size_text(self.limit)} (tokaudit_max_line_bytes)", line))
        self.plain.unusable.append(Unusable(line, None, None))

    def take(self, line: int, item: Record | Rejected | ErrorLine) -> None:
        """A row judged on its own: a record for the per-line path, or its findings."""
        if type(item) is not Rejected:
            self.plain.take_parsed(line, item)
            return
        summary = self.summary  # a row is an object, its fields not kept (no data)
        summary.records += 1
        summary.audited += 1
        self.plain.pending += item.findings
        summary.add_unchecked(item.missing, item.data)
        if item.count is not None:
            summary.billed_unusable += item.count
            summary.unusable_billed += 1
        self.plain.unusable.append(Unusable(line, item.record_id, item.count, item.data))

    def batch(self, batch: Any, line0: int) -> None:
        """One record batch, its rows numbered from line0 + 1: each row parsed (its id and
        billed count plain, its ids a list of non-null ints) for the kernel, skipped, or odd
        (worded by `judge`, one at a time)."""
        contract, n = self.contract, batch.num_rows
        over = {r: size for r, size in enumerate(_row_bytes(batch)) if size > self.limit}
        if contract.text_template is not None:
            for r in over:
                self.over(line0 + r + 1, over[r])
            kept = [r for r in range(n) if r not in over]
            self.text(batch.take(kept) if over else batch, [line0 + r + 1 for r in kept])
            return
        self.rows_of = batch
        ids = _column(batch, contract.ids_field)
        self.ids_col = ids = ids.combine_chunks() if hasattr(ids, "combine_chunks") else ids
        self.id_vals = id_vals = _values(batch, contract.id_field) if contract.id_field else None
        flags = _values(batch, contract.where) if contract.where else None
        field = contract.count_field
        self.terms = [(t, _values(batch, t.path, n)) for t in field.terms] if isinstance(field, CountSum) else None
        self.counts = None if isinstance(field, CountSum) else _values(batch, field)
        # Joined to requests: an error line (model.records.error_in) is counted apart.
        self.errors = self.error_rows(batch, n) if contract.requests else {}
        # The fields the batch hooks read, as their light rows hold them (a scalar or
        # MISSING); a row with any other value is the per-line path's, as a JSONL line is.
        field_cols = [(path, _values(batch, path, n, MISSING)) for path in self.fields]
        unfit_fields = {r for path, values in field_cols for r, v in enumerate(values)
                        if not self.light_value(path, v)}
        columns = self.columns(ids) if self.kernel is not None else None
        unfit = columns[3] if columns is not None else ()
        odd: list[int] = []
        rows: list[int] = []
        counts: list[int] = []
        record_ids: list[Any] = []
        skipped = 0
        for r in range(n):
            if flags is not None and not flags[r] and r not in over:
                skipped += 1
                continue
            rid = id_vals[r] if id_vals is not None else None
            count = self.count(r, [])
            if (columns is None or r in over or r in unfit or r in self.errors or r in unfit_fields
                    or type(count) is not int
                    or not 0 <= count < EXACT or id_vals is not None and type(rid) is not str
                    and not (type(rid) is int and I64_MIN <= rid <= U64_MAX)):
                odd.append(r)
                continue
            rows.append(r)
            counts.append(count)
            record_ids.append(rid)

        def take_odd(r: int) -> None:
            if r in over:
                self.over(line0 + r + 1, over[r])
            else:
                self.take(line0 + r + 1, self.judge(r, line0 + r + 1))

        if columns is None or self.kernel is None:  # no numpy: every row for the per-line path
            self.summary.records += skipped
            self.summary.skipped += skipped
            for r in odd:
                take_odd(r)
            return
        import numpy as np

        flat, starts, lens, _ = columns
        parsed = np.zeros(n, dtype=bool)
        parsed[rows] = True
        if (lens[~parsed] > 0).any():  # between parsed rows, only what is no id nor token
            flat = np.where(np.repeat(~parsed, lens), self.kernel.filler, flat)
        n_ids = lens[rows].tolist()
        starts = starts[rows]
        ids = [flat[s:s + k] for s, k in zip(starts.tolist(), n_ids)] if self.ids else None
        data = (lambda k: batch.slice(rows[k], 1).to_pylist()[0]) if self.full else None
        fields = [{path: values[r] for path, values in field_cols} for r in rows] if field_cols else None
        self.kernel.fold(n, line0, odd, rows, flat, n_ids, counts, record_ids, skipped, take_odd,
                         starts, fields=fields, ids=ids, data=data)

    def columns(self, ids: Any) -> tuple[Any, Any, Any, set[int]]:
        """The ids of a list array as the kernel's flat int64 ids (no copy where the column
        is int64 and has no null), each row's start and length in them, and the rows that
        are null or hold a null."""
        import numpy as np

        offsets = np.asarray(ids.offsets, dtype=np.int64)
        values = ids.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
        offsets = offsets - offsets[0]
        unfit = set(np.flatnonzero(np.asarray(ids.is_null())).tolist()) if ids.null_count else set()
        if values.null_count:
            nulls = np.flatnonzero(np.asarray(values.is_null()))
            unfit.update(np.searchsorted(offsets[1:], nulls, side="right").tolist())
            values = values.fill_null(0)
        flat = values.to_numpy(zero_copy_only=False)
        if flat.dtype == np.uint64:  # past 2**63 negative: the kernel hands those rows back
            flat = flat.view(np.int64)
        return flat.astype(np.int64, copy=False), offsets[:-1], np.diff(offsets), unfit

    def count(self, r: int, problems: list[str]) -> int | None:
        """The billed count of row r, as the JSONL reader reads it (a problem if none)."""
        field = self.contract.count_field
        if self.terms is not None:
            assert isinstance(field, CountSum)
            return sum_terms(((term, values[r]) for term, values in self.terms), field, problems)
        count = self.counts[r]  # type: ignore[index]
        if type(count) is int and 0 <= count <= U64_MAX:
            return count
        problems.append(count_problem(count, ".".join(field)))  # type: ignore[arg-type]
        return None

    def text(self, batch: Any, lines: list[int]) -> None:
        """Rows read with a text template: each row as the Python object its JSONL twin holds
        (the columns read), judged by the JSONL reader's own functions, so the findings are
        the same. The text is needed as Python strings anyway, to be encoded.

        Parquet has no absent field, only null: a null ids list counts as absent (the ids
        are rebuilt from the text), and a null where a path breaks is named as null."""
        contract, ids_field = self.contract, self.contract.ids_field
        for line, obj in zip(lines, batch.to_pylist()):
            if contract.where and ((flag := get_path(obj, contract.where)) is MISSING or not flag):
                self.plain.take_parsed(line, SKIPPED)
                continue
            if contract.requests and (why := error_of(obj)) is not None:  # counted apart
                self.plain.take_parsed(line, error_line(obj, contract, why))
                continue
            parent = get_path(obj, ids_field[:-1]) if len(ids_field) > 1 else obj
            if type(parent) is dict and ids_field[-1] in parent and parent[ids_field[-1]] is None:
                del parent[ids_field[-1]]
            problems, record_id, count, ids = judge_fields(obj, contract, True)
            texts = template_texts(obj, contract, problems)
            self.plain.take_parsed(line, rejected(obj, contract, problems, line, record_id, count)
                                   if problems or texts is None else
                                   TextRecord(line, obj, record_id, count, ids, texts=texts))

    def light_value(self, path: tuple[str, ...], value: Any) -> bool:
        """Whether a light row may hold this value of a field (columnar._Paths' rules): a
        scalar or MISSING, not a null on a nested path (where a JSONL twin may have none),
        and not a finish reason the contract refuses (the per-line path words that)."""
        if value is MISSING:
            return True
        if type(value) not in _SCALARS or value is None and len(path) > 1:
            return False
        return not (self.finish and path == self.contract.finish_reason_field
                    and value is not None and value not in self.finish)

    def error_rows(self, batch: Any, n: int) -> dict[int, str]:
        """The rows that are error lines, with why, read from their columns."""
        error, status = (_values(batch, path, n) for path in ERROR_PATHS)
        return {r: why for r, (e, st) in enumerate(zip(error, status))
                if (why := error_in(e, st)) is not None}

    def judge(self, r: int, line: int) -> Record | Rejected | ErrorLine:
        """One row as the JSONL reader judges its twin: its schema findings, a record, or
        an error line."""
        contract, problems = self.contract, []
        if r in self.errors:
            return error_line(self.rows_of.slice(r, 1).to_pylist()[0], contract, self.errors[r])
        rid = self.id_vals[r] if self.id_vals is not None else None
        if contract.id_field and not (type(rid) is str or type(rid) is int and I64_MIN <= rid <= U64_MAX):
            problems.append(id_problem(rid, ".".join(contract.id_field)))
            rid = None
        count = self.count(r, problems)
        ids = self.ids_col[r].as_py()
        why = check_ids(ids, ".".join(contract.ids_field))
        if why:
            problems.append(why)
        if problems or count is None:
            return Rejected([Finding("schema", p, line, rid) for p in problems], rid, count)
        return Record(line, self.rows_of.slice(r, 1).to_pylist()[0], rid, count, ids)


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


_SCALARS = (str, int, float, bool, type(None))


def _values(batch: Any, field: tuple[str, ...], n: int = 0, absent: Any = None) -> list[Any]:
    """The Python values at a dotted path; [absent] * n where the file has no such column
    (MISSING for a field a batch hook reads, as a JSONL twin's object lacks it; a row's
    null is None there too, and on a nested path the per-line path decides)."""
    col = _column(batch, field)
    return [absent] * n if col is MISSING else col.to_pylist()
