"""JSONL in chunks: one simdjson parse per chunk, the contract's fields read into columns
(the ids as one int64 buffer, never Python ints), the built-in checks run over the chunk by
the kernel (kernel.py), and every other line left to the per-line path (plain.PlainPass),
which words every finding.

`pieces` cuts a part into chunks at newlines exactly as reader.Lines cuts lines and byte
ranges; `_Paths` reads nested fields and count formulas step by step as
base.fields.get_path does. What goes to the per-line path, what the batch hooks get, text
templates and the full mode (a check of the user's): docs/how-it-works.md, "Large JSONL
parts take a columnar path". Parts under MIN_BYTES (TEXT_MIN_BYTES with a text template)
stay on the per-line path: importing numpy costs ~50-110 ms (docs/performance.md).
TOKAUDIT_COLUMNAR=0 forces the per-line path (the tests' oracle); =1 uses this one whenever
it is valid, whatever the part's size.
"""

from __future__ import annotations

import functools
import itertools
import os
import sys
from array import array
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, NamedTuple

from ..base.fields import LIST_INDEX, MISSING, CountSum
from ..base.findings import Finding
from ..model.contract import Contract
from ..model.records import ERROR_PATHS, error_in
from ..model.summary import FileSummary
from ..sources.base import LfsPointer, ReadError
from ..sources.jsonl import JSON_WS, line_range, read_chunks
from ..sources.parse import load_object
from .observers import NONE, Observers
from .plain import PlainPass, read_error_text

if TYPE_CHECKING:  # the kernel loads with numpy, when a part takes this path
    from .kernel import Kernel

ENV = "TOKAUDIT_COLUMNAR"


CHUNK = 1 << 20  # bytes of lines checked at once


# A text template's chunks are TEXT_CHUNKS times larger: encode_batch spreads a bigger
# batch better over the cores (docs/performance.md).
TEXT_CHUNKS = 2


MIN_BYTES = 4 << 20  # smaller parts stay on the per-line path: importing numpy costs more


# ... unless this process has imported numpy and simdjson already (an earlier, larger
# part): then only parts of a few dozen records stay, where numpy's cost per call is more
# (measured: 1-12 records 0.2-0.3 ms slower on the kernel, even at ~35, faster beyond).
LOADED_MIN_BYTES = 64 << 10


# With a text template the tokenizer is ~90% of the time on either path: importing numpy
# is paid back only on larger parts (docs/performance.md).
TEXT_MIN_BYTES = 32 << 20


# What a light row (model.records.LightRow) holds: a batch hook whose `reads(contract)` is
# within this (or names fields, as paths: `field_values`) gets one per clean record; any
# other batch hook (a user's, by default) gets every record whole (Plan.full). `rebuilt`
# is never on one: a record storing ids beside a text template goes per line.
LIGHT = frozenset({"line", "id", "count", "n_ids", "ids", "rebuilt"})


class Plan(NamedTuple):
    """Which built-in per-record checks are registered (-p no:tokaudit.count drops one),
    and the fields of each clean record the batch hooks read (their `reads`)."""

    count_check: bool
    structure_check: bool
    finish_check: bool = False  # a record whose finish reason it judges goes per line
    fields: tuple[tuple[str, ...], ...] = ()
    ids: bool = False  # the light rows carry their ids (the round trip, unique_text)
    full: bool = False  # a check of the user's: every parsed record to every hook, whole


def plan(path: Any, contract: Contract, hook: Any, start: int = 0, end: int | None = None
         ) -> Plan | None:
    """How the columnar path would run this part, or None where the per-line path must."""
    mode = os.environ.get(ENV, "")
    if mode == "0":
        return None
    record, fields, light, full = declarations(contract, hook)
    if contract.text_template is not None:
        floor = TEXT_MIN_BYTES
    elif "numpy" in sys.modules and "simdjson" in sys.modules:
        floor = LOADED_MIN_BYTES
    else:
        floor = MIN_BYTES
    if mode != "1" and _size(path, start, end) < floor:
        return None
    try:
        import numpy  # noqa: F401
        import simdjson  # noqa: F401
    except ImportError:
        return None
    names = {getattr(i.plugin, "native_key", None) for i in record}
    return Plan("count" in names, "structure" in names, "finish_reason" in names, fields,
                "ids" in light, full)


def declarations(contract: Contract, hook: Any
                 ) -> tuple[list[Any], tuple[tuple[str, ...], ...], set[str], bool]:
    """What the checks declare (checks/), for both plans: the per-record hooks, the fields
    the batch hooks `reads` (paths), their other names, and whether some check needs whole
    records (a per-record check without `native(contract)`, a batch hook without `reads`
    or reading more than LIGHT, any hook where `hook` is no pluggy hook relay: who is
    called cannot be told)."""
    try:
        record = hook.pytest_tokaudit_check_record.get_hookimpls()
        batch = hook.pytest_tokaudit_check_batch.get_hookimpls()
    except AttributeError:  # not a pluggy hook relay: every hook gets every record whole
        return [], (), set(), True
    full = False
    for impl in record:
        native = getattr(impl.plugin, "native", None)
        full = full or native is None or not native(contract)
    fields: dict[tuple[str, ...], None] = {}
    light: set[str] = set()
    for impl in batch:
        reads = getattr(impl.plugin, "reads", None)
        if reads is None:
            full = True
            continue
        for what in sorted(reads(contract), key=str):
            if type(what) is tuple:  # a field's value (a scalar, or MISSING)
                fields[what] = None
            else:
                light.add(what)
    return record, tuple(fields), light, full or not light <= LIGHT


def _size(path: Any, start: int, end: int | None) -> int:
    if end is not None:
        return end - start
    size = getattr(path, "size", None)  # a remote.RemoteFile knows its size, or None
    if size is None and isinstance(path, Path):
        try:
            size = path.stat().st_size
        except OSError:
            return 0
    return (size or 0) - start


def pieces(path: Any, start: int = 0, end: int | None = None, limit: int = 64 << 20,
           chunk: int | None = None) -> Iterator[bytes | int]:
    """The lines of the part, as reader.Lines cuts them, in runs of whole lines.

    Each bytes item is one or more lines, each ending in a newline but maybe the file's
    last; an int is the size of one line longer than `limit`, read past without being held
    (a longer line of white space only is a blank line, b"\\n"). Raises ReadError/LfsPointer
    as reader.read_chunks does, after yielding the whole lines read before.
    """
    chunks = read_chunks(path, start, chunk or CHUNK, None, end)
    start, end = line_range(path, start, end)  # a compressed part: its own lines exactly
    buf = bytearray()
    base = 0  # file offset of buf[0], always the start of a line
    if start:
        base = start - 1
        for first in chunks:  # the line straddling `start` belongs to the range before
            at = first.find(b"\n")
            if at >= 0:
                buf += first[at + 1:]
                base += at + 1
                break
            base += len(first)
        else:
            return
    while True:
        if end is not None:
            if base >= end:
                return
            nl = buf.find(b"\n", max(0, end - 1 - base))
            if nl >= 0:  # the last line starting before `end` ends here
                yield bytes(buf[:nl + 1])
                return
        cut = buf.rfind(b"\n") + 1
        if cut:
            with memoryview(buf) as view:  # one copy, not a bytearray slice and its bytes
                piece = bytes(view[:cut])
            yield piece
            del buf[:cut]
            base += cut
        if len(buf) > limit:  # one line over the limit: count its bytes, keep none
            size, text = len(buf), bool(buf.strip(JSON_WS))
            buf.clear()
            for block in chunks:
                nl = block.find(b"\n")
                if nl < 0:
                    size += len(block)
                    text = text or bool(bytes(block).strip(JSON_WS))
                    continue
                size += nl
                text = text or bool(bytes(block[:nl]).strip(JSON_WS))
                buf += block[nl + 1:]
                break
            else:
                yield size if text else b" "  # the file's last line, no newline
                return
            yield size if text else b"\n"
            base += size + 1
            continue
        more = next(chunks, None)
        if more is None:
            if buf:
                yield bytes(buf)  # the last line has no newline
            return
        buf += more


def audit_columnar(path: Any, contract: Contract, hook: Any, summary: FileSummary,
                   start: int, end: int | None, how: Plan, observers: Observers = NONE) -> None:
    """plain.audit_lines' work, chunk by chunk: the same summary, findings and lines."""
    plain = PlainPass(contract, hook, summary, observers)
    cols = _Columns(contract, how, plain, summary, hook)
    line = 0
    try:
        chunk = CHUNK * TEXT_CHUNKS if contract.text_template is not None else None
        for piece in pieces(path, start, end, plain.limit, chunk):
            if type(piece) is int:
                line += 1
                plain.take(line, piece)
            else:
                assert isinstance(piece, bytes)
                line = cols.chunk(piece, line)
                if observers.meter is not None:  # records and time; bytes are not tracked here
                    observers.meter.tick(summary.records, None)
    except LfsPointer as exc:
        summary.read_error = str(exc)
    except ReadError as exc:
        summary.read_error = read_error_text(exc, path, start, end, line)
    finally:
        summary.lines = line
        summary.blank += cols.blank
    plain.flush()
    if summary.read_error:
        summary.add_finding(Finding("read", summary.read_error))


class _Columns:
    """Parses the lines of a chunk with simdjson into columns, checks them with numpy and
    folds the records that pass into the summary; the rest go line by line."""

    def __init__(self, contract: Contract, how: Plan, plain: Any, summary: FileSummary,
                 hook: Any):
        import numpy
        import simdjson

        self.np = numpy
        self.parser: Any = simdjson.Parser()  # its stubs type a document as any JSON value
        self.array_type: Any = simdjson.Array
        self.contract, self.how, self.plain, self.summary = contract, how, plain, summary
        self.hook = hook
        self.limit = plain.limit
        self.blank = 0
        self.ids_name = contract.ids_field[0]
        count = contract.count_field
        self.count_name = count[0] if type(count) is tuple else ""
        self.id_name = contract.id_field[0] if contract.id_field else None
        self.where_name = contract.where[0] if contract.where else None
        # Nested paths, a count formula or fields the batch hooks read (`Plan.fields`):
        # each record's fields are read by `_Paths`.
        paths = [p for p in (contract.ids_field, contract.id_field, contract.where) if p]
        finish = contract.finish_reason if how.finish_check and contract.finish_reason_field else ()
        self.paths = (None if type(count) is tuple and all(len(p) == 1 for p in [*paths, count])
                      and not how.fields and not finish and contract.text_template is None
                      and not contract.requests else
                      _Paths(contract, simdjson.Object, simdjson.Array, how.fields, finish))
        # A text template: each row's ids are encoded from its texts, a chunk at a time.
        self.texts: Any = None
        if contract.text_template is not None:
            from .template import plan_for

            self.tok = contract.tokenizer_object()
            self.texts = plan_for(contract.text_template, self.tok)
        self.row_fields: list[dict[tuple[str, ...], Any]] = []  # of the rows of the last chunk
        self.row_ids: list[Any] | None = None  # their ids' buffers, when a batch hook reads ids
        self.tokens = tuple(dict.fromkeys(contract.require_once_ids + contract.forbid_ids))
        self.spare: Any = None  # a second parser, for the rare line looked at again
        self.others: list[int] = []  # of the last chunk: apart()
        self.blanks = 0

    def chunk(self, data: bytes, line0: int) -> int:
        """Audit a run of whole lines numbered from line0 + 1; the number of the last.

        The lines that look like one JSON object each (`{...}`, within the limit) are
        joined into one JSON array and parsed by simdjson in one call; the lines are found
        and tested with numpy over the chunk's bytes, never cut into bytes objects. Where
        simdjson refuses the array (a line of invalid JSON or UTF-8, nesting too deep),
        each line of the chunk is parsed on its own (`by_line`) to find which.
        """
        np = self.np
        u = np.frombuffer(data, dtype=np.uint8)
        ends = np.flatnonzero(u == 10)
        if not data.endswith(b"\n"):
            ends = np.append(ends, len(data))
        n = len(ends)
        starts = np.empty(n, dtype=np.int64)
        starts[:1] = 0
        starts[1:] = ends[:-1] + 1
        last = len(data) - 1
        lengths = ends - starts
        good = ((lengths > 0) & (lengths <= self.limit)
                & (u[np.minimum(starts, last)] == 123) & (u[ends - 1] == 125))  # { and }
        good_rows = np.flatnonzero(good)
        cut = _Cut(data, starts, ends)
        self.apart(u, cut, good, n - len(good_rows))
        if not len(good_rows):
            return self.fold(cut, n, line0, self.others, [], [], [], [], [], 0)
        # One JSON array of the good lines with a sentinel between each two: a line that
        # is no JSON value alone but joins its neighbour into one (or splits into two)
        # cannot keep every record between its sentinels, so misalignment is seen.
        sep = b",%d,\n" % SENTINEL
        if len(good_rows) == n:
            body = b"[" + data[:int(ends[-1])].replace(b"\n", sep) + b"]"
        else:  # the runs of consecutive good lines, each one slice of the chunk
            breaks = np.flatnonzero(np.diff(good_rows) != 1)
            firsts = good_rows[np.concatenate(([0], breaks + 1))].tolist()
            lasts = good_rows[np.concatenate((breaks, [len(good_rows) - 1]))].tolist()
            body = b"[" + b"\n".join(
                [data[starts[a]:ends[b]] for a, b in zip(firsts, lasts)]).replace(b"\n", sep) + b"]"
        # The "[" of the good lines, and the array's own (numpy: bytes.count is slower).
        brackets = int(np.count_nonzero(u == 91)) + 1
        if len(good_rows) < n:  # (a blank line holds none)
            brackets -= sum(cut.line(row).count(b"[") for row in self.others)
        rows = good_rows.tolist()
        docs: Any = None
        try:
            docs = self.parser.parse(body)
        except Exception:  # noqa: BLE001 - some line simdjson refuses: find it line by line
            pass
        if docs is not None:
            try:
                if len(docs) == 2 * len(rows) - 1:
                    return self.columns(cut, n, line0, rows, brackets, _framed(docs, rows), [])
            except _Misaligned:
                pass
            finally:
                docs = None  # the parser is reused: no view of its document may live on
        return self.by_line(cut, n, line0, rows, brackets)

    def apart(self, u: Any, cut: _Cut, good: Any, many: int) -> None:
        """The chunk's lines that are not `{...}` within the limit (`many` of them), in
        `self.others` for the per-line path, less the blank ones (white space only), whose
        number goes to `self.blanks`: where they are many they are counted at once, so a run
        of millions of blank lines costs what its bytes cost, not a Python step each."""
        np = self.np
        self.blanks = 0
        if many <= BLANKS_AT_ONCE:  # each to take_odd, which counts a blank one
            self.others = np.flatnonzero(~good).tolist() if many else []
            return
        solid = np.zeros(len(u) + 1, dtype=np.int64)  # bytes other than JSON_WS before each
        np.cumsum(~np.isin(u, np.frombuffer(JSON_WS, dtype=np.uint8)), out=solid[1:])
        empty = solid[cut.ends] == solid[cut.starts]
        self.blanks = int(np.count_nonzero(empty))
        self.others = np.flatnonzero(~good & ~empty).tolist()

    def by_line(self, cut: _Cut, n: int, line0: int, good_rows: list[int],
                brackets: int) -> int:
        """chunk()'s work where the joined array did not parse: each good line on its own."""
        parse = self.parser.parse
        failed: list[int] = []

        def each() -> Iterator[tuple[int, Any]]:
            for row in good_rows:
                try:
                    doc = parse(cut.line(row))
                except Exception:  # noqa: BLE001 - invalid JSON or UTF-8, too deep...: per line
                    failed.append(row)
                    continue
                yield row, doc
                doc = None

        return self.columns(cut, n, line0, good_rows, brackets, each(), failed)

    def columns(self, cut: _Cut, n: int, line0: int, good_rows: list[int], brackets: int,
                pairs: Iterator[tuple[int, Any]], failed: list[int]) -> int:
        """Read the contract's fields of each parsed record into columns (ids as int64)."""
        odd: list[int] = []  # rows for the per-line path
        rows: list[int] = []  # rows parsed into the columns below
        bufs: list[Any] = []
        counts: list[int] = []
        record_ids: list[Any] = []
        n_ids: list[int] = []
        skipped = 0
        arrays = 0  # records whose ids are an array: each holds a "[" at least
        array_type = self.array_type
        ids_name, count_name, id_name, where_name = (
            self.ids_name, self.count_name, self.id_name, self.where_name)
        paths = self.paths
        known_arrays: list[int] = []  # with `paths`: the "[" each row is known to hold
        fields = paths is not None and paths.fields
        field_values: list[dict[tuple[str, ...], Any]] = []
        doc: Any = None
        ids: Any = None
        for row, doc in pairs:
            try:
                if len(doc) != len(set(doc.keys())):  # simdjson reads the first, orjson the last
                    odd.append(row)
                    continue
                if paths is not None:  # nested paths or a count formula
                    got = paths.read(doc)
                    if got is None or got is SKIP:
                        skipped += got is SKIP
                        if got is None:
                            odd.append(row)
                        continue
                    ids, count, rid, known, values = got
                else:
                    ids = doc.get(ids_name)
                    is_array = type(ids) is array_type
                    arrays += is_array  # skipped or not: its "[" is accounted for
                    if where_name is not None:
                        flag = doc.get(where_name)
                        if type(flag) not in _SCALARS:  # a list or object: the per-line path decides
                            odd.append(row)
                            continue
                        if not flag:
                            skipped += 1
                            continue
                    if not is_array:
                        odd.append(row)
                        continue
                    count = doc.get(count_name)
                    rid = doc.get(id_name) if id_name is not None else None
                    if (type(count) is not int or not 0 <= count < EXACT
                            or id_name is not None and type(rid) is not str and type(rid) is not int):
                        odd.append(row)
                        continue
                if self.texts is not None:  # the placeholders' texts: encoded below
                    buf, size = ids, 0
                else:
                    buf = ids.as_buffer(of_type="i")  # raises for a float, null, bool, past int64...
                    size = len(ids)
            except Exception:  # noqa: BLE001 - any id that is not an int64: the per-line path
                odd.append(row)
                continue
            finally:
                doc = ids = None  # the parser is reused: no view of its document may live on
            rows.append(row)
            bufs.append(buf)
            counts.append(count)
            record_ids.append(rid)
            n_ids.append(size)
            if paths is not None:
                known_arrays.append(known)
                if fields:
                    field_values.append(values)
        nested: set[int] = set()
        if self.texts is not None:  # a text holding a special token's string: special_in_text
            nested = self.specials(bufs, rows)
        elif (brackets - 1 > arrays or paths is not None) and rows:
            # More "[" than ids arrays: a line may nest a list among its ids, which
            # as_buffer flattens and the per-line path refuses. Those lines are looked at.
            nested = self.nested(cut, n, rows, known_arrays or None)
        if nested:
            keep = [i for i, row in enumerate(rows) if row not in nested]
            rows, bufs, counts, record_ids, n_ids = (
                [col[i] for i in keep] for col in (rows, bufs, counts, record_ids, n_ids))
            if fields:
                field_values = [field_values[i] for i in keep]
            odd = sorted(odd + list(nested))
        flat = None
        if self.texts is not None:  # the rows' texts encoded in one batch
            from .template import encode_texts

            encoded = encode_texts(self.tok, self.texts, bufs)
            n_ids = [len(ids) for ids in encoded]
            flat = self.np.fromiter(itertools.chain.from_iterable(encoded), self.np.int64, sum(n_ids))
            bufs = [array("q", ids).tobytes() for ids in encoded] if self.how.ids else []
        if len(good_rows) < n or failed:
            odd = sorted(self.others + odd + failed)
        self.row_fields = field_values
        self.row_ids = bufs if self.how.ids else None
        return self.fold(cut, n, line0, odd, rows, bufs, counts, record_ids, n_ids, skipped, flat)

    def specials(self, texts: list[tuple[str, ...]], rows: list[int]) -> set[int]:
        """The rows a text of which holds an added token's string (template.rebuild's
        special_in_text finding): their lines are the per-line path's to word."""
        added = self.texts.added
        if added is None or not added.search("\0".join(t for row in texts for t in row)):
            return set()  # no added token's string holds a NUL: no match spans two texts
        return {row for row, mine in zip(rows, texts) if any(added.search(t) for t in mine)}

    def nested(self, cut: _Cut, n: int, rows: list[int], known: list[int] | None = None
               ) -> set[int]:
        """The rows whose ids nest a list, of those holding more "[" than the one of their
        ids (and, with nested paths, those of the lists on the way: `known`, per row)."""
        np = self.np
        u = np.frombuffer(cut.data, dtype=np.uint8)
        per_line = np.bincount(np.searchsorted(cut.ends, np.flatnonzero(u == 91)), minlength=n)
        if self.spare is None:  # the main parser's document is still alive
            import simdjson

            self.spare = simdjson.Parser()
        out = set()
        for k, row in enumerate(rows):
            if per_line[row] > (1 if known is None else known[k]):
                doc: Any = self.spare.parse(cut.line(row))
                ids = (doc.get(self.ids_name) if self.paths is None
                       else self.paths.get(doc, self.contract.ids_field))
                if b"[" in ids.mini[1:]:
                    out.add(row)
                doc = ids = None
        return out

    @functools.cached_property
    def kernel(self) -> Kernel:
        from .kernel import Kernel

        return Kernel(self.contract, self.how, self.plain, self.summary, self.hook)

    def fold(self, cut: _Cut, n: int, line0: int, odd: list[int], rows: list[int],
             bufs: list[Any], counts: list[int], record_ids: list[Any], n_ids: list[int],
             skipped: int, flat: Any = None) -> int:
        """The chunk's parsed rows through the kernel (kernel.py: checked column-wise, the
        clean ones folded); the odd lines to the per-line path in their place."""
        if flat is None:
            flat = self.np.frombuffer(b"".join(bufs), dtype=self.np.int64)
        take, limit = self.plain.take, self.limit

        def take_odd(row: int) -> None:
            raw = cut.line(row)
            body = raw.strip(JSON_WS)
            if not body:
                self.blank += 1
            else:
                take(line0 + row + 1, len(raw) if len(raw) > limit else body)

        data = None
        if self.how.full:  # every record whole: its object as the per-line path reads it
            objects: dict[int, Any] = {}  # one object per record, as a Record holds one

            def data(k: int) -> Any:
                if k not in objects:
                    objects[k] = load_object(cut.line(rows[k]))
                return objects[k]

        self.kernel.fold(n, line0, odd, rows, flat, n_ids, counts, record_ids, skipped, take_odd,
                         fields=self.row_fields, ids=self.row_ids, data=data, blank=self.blanks)
        self.blank += self.blanks
        return line0 + n


# A chunk with more lines than this that are no `{...}` has its blank ones counted at once.
BLANKS_AT_ONCE = 64


SENTINEL = 10**17 + int.from_bytes(os.urandom(7), "little")  # no data can hold it by chance


SKIP = object()  # _Paths.read: a record tokaudit_where skips


class _Paths:
    """The contract's fields read from a parsed record as base.fields.get_path reads them
    from the per-line path's object: a name in an object, a digit index in a list, every
    other step MISSING. A record whose fields the per-line path must word (missing, of
    another type, out of range, a key given twice on the way) reads as None."""

    def __init__(self, contract: Contract, object_type: Any, array_type: Any,
                 fields: tuple[tuple[str, ...], ...] = (), finish: tuple[str, ...] = ()):
        self.object_type, self.array_type = object_type, array_type
        # The values handed to the batch hooks (light rows' `field_values`), and the finish
        # reasons allowed: a record with another one is the per-line path's to word.
        self.finish_field = contract.finish_reason_field if finish else ()
        self.fields = tuple(dict.fromkeys([*fields, *([self.finish_field] if finish else [])]))
        self.finish = finish
        # Joined to requests: an error line (model.records.error_in) is the per-line path's.
        self.errors = bool(contract.requests)
        self.ids_field, self.id_field, self.where = (
            contract.ids_field, contract.id_field, contract.where)
        template = contract.text_template  # its placeholders' texts are read, not the ids
        self.placeholders = (None if template is None else
                             [(ph.path, ph.optional) for ph in template.placeholders])
        count = contract.count_field
        if isinstance(count, CountSum):
            self.terms = [(t.path, t.optional, t.negative) for t in count.terms]
            self.constant = count.constant
        else:
            self.terms, self.constant = [(count, False, False)], 0

    def get(self, doc: Any, path: tuple[str, ...], lists: set[tuple[str, ...]] | None = None
            ) -> Any:
        """The value at `path`, or MISSING; raises _KeyTwice for a key given twice in an
        object on the way (simdjson reads the first, orjson the last). `lists` gets the
        path of each list stepped through (its "[" is in the line)."""
        for k, part in enumerate(path):
            kind = type(doc)
            if kind is self.object_type:
                if k and len(doc) != len(set(doc.keys())):  # the record's own: checked before
                    raise _KeyTwice
                doc = doc.get(part, MISSING)
                if doc is MISSING:
                    return MISSING
            elif kind is self.array_type and LIST_INDEX(part):
                index = int(part)
                if index >= len(doc):
                    return MISSING
                if lists is not None:
                    lists.add(path[:k])
                doc = doc[index]
            else:
                return MISSING
        return doc

    def read(self, doc: Any) -> Any:
        """(ids, count, id, the "[" known in the line, the field values) of a clean record,
        SKIP, or None. With a text template, the placeholders' texts in place of the ids
        (a record that stores ids too is the per-line path's: ids_match_text)."""
        lists: set[tuple[str, ...]] = set()
        get = self.get
        try:
            if self.where:
                flag = get(doc, self.where, lists)
                if flag is MISSING:
                    return SKIP
                if type(flag) not in _SCALARS:  # a list or object: the per-line path decides
                    return None
                if not flag:
                    return SKIP
            ids = get(doc, self.ids_field, lists)
            if self.placeholders is not None:
                if ids is not MISSING:
                    return None
                texts = []
                for path, optional in self.placeholders:
                    text = get(doc, path, lists)
                    if type(text) is not str:
                        if not optional or text is not MISSING and text is not None:
                            return None  # a schema finding: the per-line path words it
                        text = ""
                    texts.append(text)
                ids = tuple(texts)
            elif type(ids) is not self.array_type:
                return None
            total = self.constant
            for path, optional, negative in self.terms:
                value = get(doc, path, lists)
                if optional and (value is MISSING or value is None):
                    continue
                if type(value) is not int or not 0 <= value < EXACT:
                    return None
                total += -value if negative else value
            if not 0 <= total < EXACT:
                return None
            rid = None
            if self.id_field:
                rid = get(doc, self.id_field, lists)
                if type(rid) is not str and type(rid) is not int:
                    return None
            values = {}
            for path in self.fields:  # the join field is often the id's: read once
                value = rid if path == self.id_field else get(doc, path, lists)
                if value is not MISSING and type(value) not in _SCALARS:  # a list or object
                    return None
                values[path] = value
            if self.finish:
                value = values[self.finish_field]
                if value is not MISSING and value is not None and value not in self.finish:
                    return None  # tokaudit.finish_reason's finding: worded per line
            if self.errors and error_in(*(get(doc, path) for path in ERROR_PATHS)):
                return None
        except _KeyTwice:
            return None
        return ids, total, rid, 1 + len(lists), values


class _KeyTwice(Exception):
    """A key given twice in an object on a field's path."""


class _Misaligned(Exception):
    """The joined array's values are not one record per good line."""


def _framed(docs: Any, rows: list[int]) -> Iterator[tuple[int, Any]]:
    """(row, record) of each good line from the joined array, each sentinel checked."""
    it = iter(docs)
    for k, row in enumerate(rows):
        if k and next(it) != SENTINEL:
            raise _Misaligned
        yield row, next(it)


class _Cut:
    """The lines of a chunk by their offsets: a line's bytes are cut only when asked for."""

    __slots__ = ("data", "starts", "ends")

    def __init__(self, data: bytes, starts: Any, ends: Any):
        self.data, self.starts, self.ends = data, starts, ends

    def line(self, row: int) -> bytes:
        return self.data[int(self.starts[row]):int(self.ends[row])]


_SCALARS = (str, int, float, bool, type(None))


EXACT = 1 << 40  # billed counts below this: chunk sums and float comparisons stay exact
