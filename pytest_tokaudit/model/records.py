"""The records the check hooks see: read-only, one protocol (AuditedRecord) whatever the format."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Final,
    NamedTuple,
    NoReturn,
    Protocol,
    final,
)

from ..base.fields import MISSING, get_path
from ..base.findings import Finding
from . import fastids
from .fastids import IdsText


class AuditedRecord(Protocol):
    """A well-formed record as the check hooks see it (read-only): the JSONL reader's
    Record and the engine's records over a batch's columns (ColumnRecord, LightRow) are one.

    Prefer `n_ids`, `last_id`, `occurrences` and `count_each` to `ids` and `data`, which
    build Python objects for the whole record.
    """

    @property
    def line(self) -> int:
        """Its line (JSONL) or row (Parquet), from 1; within its shard for a shard."""

    @property
    def id(self) -> str | int | None:
        """Its id; None when the contract has no id field."""

    @property
    def count(self) -> int:
        """The billed token count."""

    @property
    def n_ids(self) -> int:
        """How many token ids it holds."""

    @property
    def last_id(self) -> int | None:
        """Its last token id; None if it has none."""

    @property
    def ids(self) -> list[int]:
        """Its token ids."""

    @property
    def data(self) -> dict[str, Any]:
        """The whole JSON object (JSONL); the whole row (Parquet, Arrow IPC: every column
        is read when a check outside this package is registered for the file)."""

    def occurrences(self, token: int) -> int:
        """How often `token` occurs in its ids."""

    def count_each(self, tokens: tuple[int, ...]) -> list[int]:
        """How often each of `tokens` occurs in its ids."""

    def finding(self, check: str, message: str, allowable: bool = False) -> Finding:
        """A Finding that names this record's line and id."""


_set = object.__setattr__


def read_only(name: str) -> NoReturn:
    """What setting a record's attribute does (Record, TextRecord, the kernel's records)."""
    raise AttributeError(f"a record is read-only (cannot set {name!r}); a check returns "
                         "findings, e.g. record.finding(check, message)")


class ReadOnlyRecord:
    """The base of the records hooks get (Record, the kernel's records): read-only to a
    type checker (properties) and at run time (any set raises). A subclass keeps its values
    in plain slots, set with object.__setattr__, so every read stays as cheap as a slot."""

    __slots__ = ()
    if TYPE_CHECKING:
        @property
        def line(self) -> int: ...
        @property
        def id(self) -> str | int | None: ...
        @property
        def count(self) -> int: ...
        @property
        def n_ids(self) -> int: ...
        def count_each(self, tokens: tuple[int, ...]) -> list[int]: ...

    def __setattr__(self, name: str, value: Any) -> None:
        read_only(name)

    def __delattr__(self, name: str) -> None:
        read_only(name)

    def occurrences(self, token: int) -> int:
        return self.count_each((token,))[0]

    def finding(self, check: str, message: str, allowable: bool = False) -> Finding:
        return Finding(check, message, self.line, self.id, allowable)


class Record(ReadOnlyRecord):
    """One audited record: its line, parsed object, id, billed count and token ids.

    On the fast path the ids stay as the JSON text of the array (fastids.IdsText):
    counting, membership and the last id need no Python int per id. `ids` (and `data`)
    parse them on first use, so a check that wants the list still gets it.
    """

    __slots__ = ("line", "_data", "id", "count", "_ids", "_text", "n_ids", "_key")
    _data: dict[str, Any]
    _ids: list[int] | None
    _text: IdsText | None
    _key: str

    def __init__(self, line: int, data: dict[str, Any], record_id: Any, count: int,
                 ids: list[int] | None, text: IdsText | None = None, key: str = ""):
        _set(self, "line", line)
        _set(self, "_data", data)
        _set(self, "id", record_id)
        _set(self, "count", count)
        _set(self, "_ids", ids)
        _set(self, "_text", text)
        _set(self, "n_ids", len(ids) if ids is not None else text.n if text is not None else 0)
        _set(self, "_key", key)

    @property
    def ids(self) -> list[int]:
        if self._ids is None:
            ids = self._text.to_list() if self._text is not None else []
            _set(self, "_ids", ids)
            return ids
        return self._ids

    @property
    def data(self) -> dict[str, Any]:
        if self._key and self._data.get(self._key) == fastids.SENTINEL:
            self._data[self._key] = self.ids
        return self._data

    @property
    def last_id(self) -> int | None:
        if self._ids is None and self._text is not None:
            return self._text.last()
        return self._ids[-1] if self._ids else None

    def count_each(self, tokens: tuple[int, ...]) -> list[int]:
        if self._ids is None and self._text is not None:
            return self._text.count_each(tokens)
        ids = self._ids or []
        return [ids.count(t) for t in tokens]

    def ids_text(self) -> bytes:
        """The ids as canonical JSON text, ",1,2,3," (a digest's input: no list built)."""
        if self._ids is None and self._text is not None:
            return bytes(self._text.text)
        return fastids.canonical(self._ids or [])


class TextRecord(Record):
    """A record read with a text template: `texts` holds each placeholder's text; the ids
    are rebuilt from them in batches (engine/template.py) before any check sees the record, into
    `ids` when the record has none, else into `rebuilt` (for the ids_match_text check)."""

    __slots__ = ("texts", "rebuilt", "from_text")
    texts: tuple[str, ...]
    rebuilt: list[int] | None
    from_text: bool

    def __init__(self, *args: Any, texts: tuple[str, ...] = (), **kw: Any):
        super().__init__(*args, **kw)
        _set(self, "texts", texts)
        _set(self, "rebuilt", None)
        _set(self, "from_text", self._ids is None and self._text is None)  # no ids field

    def set_ids(self, ids: list[int]) -> None:
        """The ids rebuilt from the text, set once before any check sees the record: its
        ids when it has none, else `rebuilt`."""
        if self.from_text:
            _set(self, "_ids", ids)
            _set(self, "n_ids", len(ids))
        else:
            _set(self, "rebuilt", ids)


class Skipped(enum.Enum):
    """SKIPPED's type: an enum member, so a type checker tells it from a Record."""

    SKIPPED = "skipped"


SKIPPED: Final = Skipped.SKIPPED


class Unusable(NamedTuple):
    """A record of a batch that could not be checked, for batch hooks that need every
    record (the id checks, the budget): its line, and its id and billed count when they
    could be read (else None); `data`, its fields when it was an object at all (a JSONL
    record's whole object, a Parquet row's columns read), else None: what it still says
    (its finish reason, say) can be judged."""

    line: int
    id: str | int | None
    billed: int | None
    data: dict[str, Any] | None = None


@final  # so that `type(parsed) is Rejected` tells Rejected and Record apart, to mypy too
@dataclass(frozen=True, slots=True)
class Rejected:
    """parse_line's answer for a record that cannot be checked: why, and what of it could
    still be read (its id, a str or int; its billed count, an int >= 0), so that its
    spend and its id are not lost."""

    findings: list[Finding] = field(default_factory=list)
    record_id: Any = None
    count: int | None = None
    # For a record that parsed as an object: the required fields it lacks, and the object
    # (whose paths name the closest ones when no record of the file has a field).
    missing: tuple[str, ...] = ()
    data: Any = field(default=None, compare=False)


@final
@dataclass(frozen=True, slots=True)
class ErrorLine:
    """parse_line's answer for an API's error line (with tokaudit_requests: `error` set, or
    a `response.status_code` other than 200): no bad record, the request's failed answer.
    It is counted apart (FileSummary.errors) and handed to batch hooks as Unusable, so that
    the join (checks/join.py) lists it."""

    why: str
    record_id: Any = None
    data: Any = field(default=None, compare=False)


def field_value(record: Any, path: tuple[str, ...]) -> Any:
    """The value at `path` (or MISSING) of a record a batch hook got: a light row's
    `field_values` (the paths its `reads` declared), else the record's own fields (a
    JSONL record's object as parsed, without building its ids unless the path is theirs)."""
    values = getattr(record, "field_values", None)
    if values is not None:
        return values[path]
    plain = type(record) in (Record, TextRecord) and path[0] != record._key
    return get_path(record._data if plain else record.data, path)


ERROR_PATHS = (("error",), ("response", "status_code"))  # what makes an error line


def error_of(data: Any) -> str | None:
    """Why a response line is an error line (`error` set, a non-200 status), or None."""
    if not isinstance(data, dict):
        return None
    response = data.get("response")
    return error_in(data.get("error"),
                    response.get("status_code") if isinstance(response, dict) else None)


def error_in(error: Any, status: Any) -> str | None:
    """The rule of error_of over the values at ERROR_PATHS (None or MISSING where there is
    none), as the batch engines read them from their columns."""
    if error is not None and error is not MISSING:
        message = error.get("message") if isinstance(error, dict) else error
        return f"error: {message}"
    if status is not None and status is not MISSING and status != 200:
        return f"status {status}"
    return None


class Columns(NamedTuple):
    """A batch's light records as columns, one list per field (line, id, billed count),
    beside the records themselves: a built-in batch hook that reads only these sums or
    extends over them instead of a Python step per record (engine/columnar.py)."""

    line: list[int]
    id: list[Any]
    billed: list[int]


def columns_of(records: Any) -> Columns | None:
    """The columns a batch of records comes with, or None (then read the records)."""
    return getattr(records, "columns", None)


class ColumnRecord(ReadOnlyRecord):
    """A record of a batch read into columns (engine/kernel.py) that the count or structure
    rule fails, as its checks read it: the count, the ids' number, last id and token counts,
    from its slice of the batch's flat ids (a numpy array); in full mode any parsed record,
    its `data` too (AuditedRecord)."""

    __slots__ = ("line", "id", "count", "n_ids", "_flat", "_start", "_end", "_hits",
                 "field_values", "_whole")

    def __init__(self, line: int, record_id: Any, count: int, n_ids: int, flat: Any, start: int,
                 end: int, hits: dict[int, int],
                 field_values: dict[tuple[str, ...], Any] | None = None,
                 data: Callable[[], Any] | None = None):
        _set(self, "line", line)  # one call per slot: a loop over them cost twice as much
        _set(self, "id", record_id)
        _set(self, "count", count)
        _set(self, "n_ids", n_ids)
        _set(self, "_flat", flat)
        _set(self, "_start", start)
        _set(self, "_end", end)
        _set(self, "_hits", hits)
        _set(self, "field_values", field_values)
        _set(self, "_whole", data)

    def __getattr__(self, name: str) -> Any:  # never a silent half-record
        raise AttributeError(f"record.{name}: the columnar path hands a per-record check "
                             "line, id, count, n_ids, ids, last_id, count_each and field_values only")

    @property
    def data(self) -> dict[str, Any]:
        """The whole record (full mode only)."""
        if self._whole is None:
            raise AttributeError("record.data: the columnar path hands a per-record check line, "
                                 "id, count, n_ids, ids, last_id, count_each and field_values only")
        return self._whole()

    @property
    def ids(self) -> list[int]:
        return self._flat[self._start:self._end].tolist()

    @property
    def last_id(self) -> int | None:
        return self._flat.item(self._end - 1) if self._end > self._start else None

    def count_each(self, tokens: tuple[int, ...]) -> list[int]:
        hits = self._hits  # the structure check's tokens, counted by the kernel already
        try:
            return [hits[t] for t in tokens]
        except KeyError:
            pass
        ids = self._flat[self._start:self._end]
        return [int((ids == t).sum()) for t in tokens]


class LightRow:
    """A clean record of a batch read into columns, as the batch hooks that declare `reads`
    within engine/columnar.LIGHT see it."""

    __slots__ = ("line", "id", "count", "n_ids", "field_values", "_buf")

    def __getattr__(self, name: str) -> Any:  # never a silent half-record
        raise AttributeError(
            f"record.{name}: this batch hook declared reads() = line, id, count, n_ids and "
            "field paths only (the columnar path hands it those, the fields' values in "
            f"field_values); add {name!r} to what it reads")

    def __init__(self, line: int, record_id: Any, count: int, n_ids: int,
                 field_values: dict[tuple[str, ...], Any] | None = None, buf: Any = None):
        self.line, self.id, self.count, self.n_ids = line, record_id, count, n_ids
        self.field_values, self._buf = field_values, buf

    @property
    def ids(self) -> list[int]:
        """Its ids, from the int64 buffer simdjson wrote (a batch hook declared "ids")."""
        if self._buf is None:
            raise AttributeError("record.ids: this batch hook did not declare reads() = ids")
        return memoryview(self._buf).cast("B").cast("q").tolist()  # bytes, or numpy's int64

    def finding(self, check: str, message: str, allowable: bool = False) -> Finding:
        return Finding(check, message, self.line, self.id, allowable)
