"""Records already in memory (the public API's dicts, or JSON lines) through the kernel.

A batch of items is turned into the kernel's columns (kernel.py): a dict whose fields are
plain (its billed count an int, its id a str or int, its ids a list of exact ints) is a
parsed row; anything else (a JSON line, a field the per-line path would word a finding
for, an id past the int32 range) goes to the per-line path (parse_object / PlainPass.take)
in its place, exactly as the columnar JSONL path hands on an odd line. A check that reads
whole records (a user's) gets each parsed row whole, its `data` the dict itself (full mode).

The ids are read through `marshal.dumps(ids, 2)`: one pass in C that writes each exact
int of the int32 range as the 5 bytes `i` + its value (little-endian), and anything
else (a bool, a float, an int subclass, a nested list, a larger int) as another type code
of another size, or refuses it (a numpy integer). So a list of n exact int32s is
exactly 5 + 5n bytes with `i` at every fifth byte, and the values are an int32 view of
those bytes, never Python ints. This is the cheapest exact conversion measured (about
2 us for 220 ids where `array("q", ids)` takes 4 and accepts bools, and the type test
`set(map(type, ids))` 3.4 more); the format is checked once at import, and where it
differs every record takes the per-line path (sources/parse.py's MARSHAL_INT32).
"""

from __future__ import annotations

import marshal
import os
from typing import Any, Callable

from ..model.contract import Contract
from ..model.records import error_of
from ..model.summary import FileSummary
from ..sources.parse import MARSHAL_INT32, parse_object
from .kernel import Kernel

# Billed counts below this keep the kernel's sums and float comparisons exact (as columnar.EXACT).
EXACT = 1 << 40


I64_MIN = -(2**63)


# Batches of fewer items take the per-line path (the kernel's numpy calls cost more).
SMALL = 16


U64_MAX = 2**64 - 1


def plan(contract: Contract, hook: Any) -> Any:
    """How the kernel would run a stream of dicts under this contract and these hooks
    (columnar.Plan), or None where every record must take the per-line path: the
    contract's conditions and the hooks' of columnar.plan, without its file's size (the
    records are in memory, numpy is the one import). TOKAUDIT_COLUMNAR=0 forces None."""
    from .columnar import ENV, LIGHT, Plan, declarations

    if os.environ.get(ENV, "") == "0" or not MARSHAL_INT32:
        return None
    if (contract.text_template is not None or contract.finish_reason
            or type(contract.count_field) is not tuple):
        return None
    fields = [f for f in (contract.ids_field, contract.count_field, contract.id_field,
                          contract.where) if f]
    if any(len(f) != 1 for f in fields) or len({f[0] for f in fields}) != len(fields):
        return None
    declared = declarations(contract, hook)
    full = declared[3] or bool(declared[1]) or not declared[2] <= LIGHT - {"ids"}
    try:
        import numpy  # noqa: F401
    except ImportError:
        return None
    names = {getattr(i.plugin, "native_key", None) for i in declared[0]}
    # A check that reads more than a light row holds (the whole record, a field's value,
    # the ids) gets every record whole: its data is the dict given.
    return Plan("count" in names, "structure" in names, full=full)


class DictPass:
    """Batches of in-memory items of one stream into the kernel, the rest per line."""

    def __init__(self, contract: Contract, how: Any, plain: Any, summary: FileSummary,
                 hook: Any, take_odd: Callable[[int, Any], None]):
        self.kernel = Kernel(contract, how, plain, summary, hook)
        self.full = how.full  # a check of the user's: every record whole, its dict as data
        self.np = self.kernel.np
        self.summary = summary
        self.take_odd = take_odd
        self.ids_name = contract.ids_field[0]
        self.count_name = contract.count_field[0]  # type: ignore[index] # plan(): a tuple
        self.id_name = contract.id_field[0] if contract.id_field else None
        self.where_name = contract.where[0] if contract.where else None
        self.errors = bool(contract.requests)  # an error line is the per-line path's

    def fold(self, items: list[Any]) -> None:
        """One batch of items, numbered from the summary's lines + 1."""
        n = len(items)
        line0 = self.summary.lines
        self.summary.lines += n
        if n < SMALL:  # numpy's cost per call is more than the per-line path's per record
            for row, item in enumerate(items):
                self.take_odd(line0 + row + 1, item)
            return
        cols = self.clean(items)
        if cols is None:
            cols = self.each(items)
        odd, rows, flat, starts, n_ids, counts, record_ids, skipped = cols

        def take(row: int) -> None:
            self.take_odd(line0 + row + 1, items[row])

        data = items.__getitem__ if self.full else None
        if data is not None and len(rows) < n:
            data = [items[row] for row in rows].__getitem__  # by the index of a parsed row
        self.kernel.fold(n, line0, odd, rows, flat, n_ids, counts, record_ids, skipped, take,
                         starts, data=data)

    def clean(self, items: list[Any]) -> Any:
        """each()'s columns of a batch of plain dicts (the common case), a step per column
        in C rather than a step per record; None where any item is not (each() decides)."""
        if set(map(type, items)) != {dict}:
            return None
        where_name, id_name = self.where_name, self.id_name
        if where_name is not None and not all([d.get(where_name) for d in items]):
            return None  # some skipped: each()
        if self.errors and any(map(error_of, items)):
            return None
        count_name, ids_name = self.count_name, self.ids_name
        counts = [d.get(count_name) for d in items]
        ids = [d.get(ids_name) for d in items]
        if set(map(type, counts)) != {int} or set(map(type, ids)) != {list}:
            return None
        if min(counts) < 0 or max(counts) >= EXACT:
            return None
        if id_name is None:
            record_ids: list[Any] = [None] * len(items)
        else:
            record_ids = [d.get(id_name) for d in items]
            kinds = set(map(type, record_ids))
            if kinds != {str} and (kinds != {int} or min(record_ids) < I64_MIN
                                   or max(record_ids) > U64_MAX):
                return None
        try:
            blobs = [marshal.dumps(x, 2) for x in ids]
        except ValueError:  # an object marshal cannot write (a numpy integer)
            return None
        n_ids = list(map(len, ids))
        np = self.np
        if not np.array_equal(np.fromiter(map(len, blobs), np.int64, len(blobs)),
                              np.array(n_ids, dtype=np.int64) * 5 + 5):
            return None
        flat, starts, wrong = self.columns(blobs, n_ids)
        if wrong:
            return None
        return [], list(range(len(items))), flat, starts, n_ids, counts, record_ids, 0

    def each(self, items: list[Any]) -> Any:
        """(odd rows, parsed rows, flat ids, their starts, n_ids, counts, record ids,
        skipped) of a batch, item by item."""
        odd: list[int] = []
        rows: list[int] = []
        blobs: list[bytes] = []
        counts: list[int] = []
        record_ids: list[Any] = []
        n_ids: list[int] = []
        skipped = 0
        ids_name, count_name, id_name, where_name = (
            self.ids_name, self.count_name, self.id_name, self.where_name)
        dumps = marshal.dumps
        for row, item in enumerate(items):
            if type(item) is not dict:
                odd.append(row)
                continue
            if where_name is not None and not item.get(where_name):  # missing, or false
                skipped += 1
                continue
            if self.errors and error_of(item) is not None:
                odd.append(row)
                continue
            count = item.get(count_name)
            ids = item.get(ids_name)
            rid = item.get(id_name) if id_name is not None else None
            if (type(count) is not int or not 0 <= count < EXACT or type(ids) is not list
                    or id_name is not None and type(rid) is not str
                    and not (type(rid) is int and I64_MIN <= rid <= U64_MAX)):
                odd.append(row)
                continue
            try:
                blob = dumps(ids, 2)
            except ValueError:  # an object marshal cannot write (a numpy integer)
                odd.append(row)
                continue
            k = len(ids)
            if len(blob) != 5 * k + 5:  # not one 5-byte int32 per id
                odd.append(row)
                continue
            rows.append(row)
            blobs.append(blob)
            counts.append(count)
            record_ids.append(rid)
            n_ids.append(k)
        flat = starts = None
        if rows:
            flat, starts, wrong = self.columns(blobs, n_ids)
            if wrong:  # some id of another type, of the same size: those rows per line
                keep = [i for i in range(len(rows)) if i not in wrong]
                odd = sorted(odd + [rows[i] for i in wrong])
                rows, counts, n_ids = ([col[i] for i in keep] for col in (rows, counts, n_ids))
                blobs = [blobs[i] for i in keep]
                record_ids = [record_ids[i] for i in keep]
                if rows:
                    flat, starts, wrong = self.columns(blobs, n_ids)
                    assert not wrong
        return odd, rows, flat, starts, n_ids, counts, record_ids, skipped

    def columns(self, blobs: list[bytes], n_ids: list[int]) -> tuple[Any, Any, set[int]]:
        """The ids of the rows' marshal bytes as one int64 array read in 5-byte cells (each
        row's header cell, `[` and its length, then one cell per id), where each row's ids
        start, and the rows one of whose ids is not an exact int (its cell does not start
        with `i`: a bool, a float, a nested list of the same size)."""
        np = self.np
        joined = b"".join(blobs)
        cells = len(joined) // 5
        heads = np.zeros(len(n_ids), dtype=np.int64)
        np.cumsum(np.array(n_ids[:-1], dtype=np.int64) + 1, out=heads[1:])
        kinds = np.frombuffer(joined, dtype=np.uint8)[::5] != 0x69  # "i"
        bad: set[int] = set()
        if np.count_nonzero(kinds) != len(heads):  # more than the headers ("[")
            kinds[heads] = False
            wrong = np.flatnonzero(kinds)
            bad = set(np.unique(np.searchsorted(heads, wrong, side="right") - 1).tolist())
        flat = np.ndarray((cells,), dtype="<i4", buffer=joined, offset=1, strides=(5,)).astype(np.int64)
        flat[heads] = self.kernel.filler  # never negative nor a token
        return flat, heads + 1, bad
