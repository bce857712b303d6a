"""Bytes -> records: streaming lines of .jsonl / .jsonl.gz / .jsonl.zst, parsed with orjson.

Everything that can be wrong with a line becomes a Finding; nothing here raises for bad
data. A compressed stream that ends early or is corrupt raises ReadError, which the audit
turns into a file-level finding after auditing every line read before it.

Files are read in chunks of at most BUFFER bytes (a zstd frame inflates in steps of at
most ZSTD_FEED compressed bytes), so memory stays bounded whatever is in the file: a line
over the contract's `max_line_bytes` is counted and skipped, never held, and runs of blank
lines are counted with bytes.count, not a Python step per line.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import gzip
import json
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import (
    TYPE_CHECKING, Any, BinaryIO, Callable, Final, Iterable, Iterator, NamedTuple, NoReturn,
    Protocol, cast, final,
)

import orjson

from . import fastids
from .contract import MISSING, Contract
from .fastids import IdsText
from .fields import CountSum, count_paths, why_missing
from .findings import Finding

BUFFER = 1 << 20
COMPRESSED = (".gz", ".zst")
MAX_LINE_BYTES = 64 << 20  # default for a contract without max_line_bytes
# Compressed bytes handed to zstd per call. A zstd block can inflate ~32,000 times (a run
# of one byte), so this bounds one call's output to ~32 MiB; ordinary JSONL is not slower.
ZSTD_FEED = 1 << 10
# A git-lfs pointer file (the data was never pulled) starts with this line.
LFS_POINTER = b"version https://git-lfs.github.com/spec/v1"
JSON_WS = b" \t\r\n"  # the only white space JSON has; \x0b, \x0c & co. are invalid JSON


class ReadError(Exception):
    """The file cannot be read further (corrupt or truncated compressed data)."""


class SourceError(OSError):
    """A remote source failed (remote.py): no such key, access denied, a connection lost.

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


def is_compressed(path: Path) -> bool:
    return path.name.endswith(COMPRESSED)


def line_range(path: Any, start: int, end: int | None) -> tuple[int, int | None]:
    """The byte range a line cutter applies to `_chunks(path, start, ..., end)`: a
    compressed file's part comes out as exactly its own lines, a whole stream."""
    return (0, None) if is_compressed(path) else (start, end)


def max_line_bytes(contract: Contract) -> int:
    """The contract's line length limit (a contract key may provide it later)."""
    return contract.max_line_bytes


def _check_lfs(fh: BinaryIO) -> None:
    """Raise LfsPointer if the raw file is a git-lfs pointer; leaves fh at offset 0."""
    head = fh.read(len(LFS_POINTER) + 2)
    fh.seek(0)
    if head.split(b"\n", 1)[0].removesuffix(b"\r") == LFS_POINTER:
        raise LfsPointer()


def _zstd_chunks(fh: BinaryIO, size: int) -> Iterator[bytes]:
    """Decompressed data of back-to-back zstd frames; notices truncation and corruption.

    Whatever inflated before an error is yielded first, so the lines of a good frame
    followed by garbage or a corrupt frame are still audited.
    """
    try:
        import zstandard
    except ImportError:
        raise ReadError(
            "reading .zst files needs the zstandard package: pip install 'pytest-tokaudit[zstd]'"
        ) from None
    new = zstandard.ZstdDecompressor().decompressobj
    obj = None  # None between frames
    out: list[bytes] = []
    held = 0
    while block := fh.read(BUFFER):
        for at in range(0, len(block), ZSTD_FEED):
            data = block[at : at + ZSTD_FEED]
            while data:
                if obj is None:
                    obj = new()
                try:
                    piece = obj.decompress(data)
                except zstandard.ZstdError as exc:
                    if out:
                        yield b"".join(out)
                    raise ReadError(f"corrupt zstd data: {exc}") from None
                data = b""
                if obj.eof:  # a file may hold several frames back to back
                    data, obj = obj.unused_data, None
                if piece:
                    out.append(piece)
                    held += len(piece)
            if held >= size:
                yield b"".join(out)
                out, held = [], 0
    if out:
        yield b"".join(out)
    if obj is not None:
        raise EOFError("compressed data ends before the end of the zstd frame")


def _gzip_chunks(gz: gzip.GzipFile, size: int) -> Iterator[bytes]:
    """Inflated data in chunks of about `size`, gathered from read1 steps (~8 KiB of input
    each, so the data before an error is kept: it is yielded before the error is raised)."""
    out: list[bytes] = []
    held = 0
    while True:
        try:
            piece = gz.read1(size)
        except (EOFError, OSError, zlib.error):
            if out:
                yield b"".join(out)
            raise
        if not piece:
            break
        out.append(piece)
        held += len(piece)
        if held >= size:
            yield b"".join(out)
            out, held = [], 0
    if out:
        yield b"".join(out)


def _chunks(path: Path, start: int = 0, size: int = BUFFER, meter: Any = None,
            end: int | None = None) -> Iterator[bytes | bytearray]:
    """The file's (decompressed) bytes in chunks of about `size`; from `start` - 1 if given.
    `meter.offset` follows the bytes read from the file (compressed ones for .gz, .zst).
    A compressed file's part (`start`, `end`: frame boundaries) gives exactly the bytes of
    the lines it owns (see `_part_chunks`): cut them with `line_range`'s (0, None).

    Raises ReadError for a file that cannot be opened or read, LfsPointer for a git-lfs
    pointer (checked on the raw bytes, so a pointer named .gz is one too).
    """
    try:
        # A remote.RemoteFile opens itself (fsspec); its errors are SourceErrors.
        opener = getattr(path, "open_stream", None)
        fh = opener() if opener is not None else open(path, "rb", buffering=0)
    except OSError as exc:
        raise ReadError(f"cannot open: {exc.strerror or exc}") from None
    with fh:
        try:
            if not start:
                _check_lfs(fh)
            name = path.name
            if name.endswith(COMPRESSED) and (start or end is not None):
                from .frames import part_chunks

                yield from _told(part_chunks(path, fh, start, end, size), fh, meter)
            elif name.endswith(".gz"):
                with gzip.GzipFile(fileobj=fh) as gz:
                    yield from _told(_gzip_chunks(gz, size), fh, meter)
            elif name.endswith(".zst"):
                yield from _told(_zstd_chunks(fh, size), fh, meter)
            else:
                if start:
                    fh.seek(start - 1)
                # One buffer, refilled: a fresh 1 MiB object per read costs page faults
                # (~10% of a fast audit). The reader copies out what it keeps.
                buf = bytearray(size)
                while n := fh.readinto(buf):
                    if meter is not None:
                        meter.offset += n
                    yield buf if n == size else buf[:n]
        except EOFError as exc:
            raise ReadError(f"truncated compressed file: {exc}") from None
        except SourceError as exc:  # the storage failed, not the data
            raise ReadError(f"cannot open: {exc}" if exc.at_open else str(exc)) from None
        except (OSError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
            raise ReadError(f"corrupt or unreadable file: {exc}") from None


def _told(chunks: Iterator[bytes], fh: Any, meter: Any) -> Iterator[bytes]:
    """`chunks`, setting `meter.offset` to the file's position (for progress lines)."""
    if meter is None:
        yield from chunks
        return
    for chunk in chunks:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            meter.offset = fh.tell()
        yield chunk


# `*`: it always matches (maybe nothing), so the match is never None.
_WS_RUN = cast("Callable[[bytes | bytearray, int], re.Match[bytes]]",
               re.compile(rb"[ \t\r\n]*").match)


class Lines:
    """The non-blank lines of a file, or of those starting in the byte range [start, end).

    Iterating gives (line number, body) with the body stripped of JSON white space, or
    (line number, size in bytes) for a line longer than `max_line`, which is read past
    without being kept. `lines` and `blank` count physical and blank lines as it goes
    (exact when a ReadError stops it: a line cut short by the error is not counted).
    A line belongs to the range its first byte is in; a compressed file's range is one of
    whole frames (or members) and means the bytes they inflate to (`_part_chunks`). Line
    numbers are relative to the range (1 = its first line).
    """

    def __init__(self, path: Path, start: int = 0, end: int | None = None,
                 max_line: int = MAX_LINE_BYTES, chunk: int = BUFFER):
        self.path, self.start, self.end = path, start, end
        self.max_line, self.chunk = max_line, chunk
        self.lines = 0
        self.blank = 0
        self.offset = max(start - 1, 0)  # bytes read from the file so far (progress lines)

    def __iter__(self) -> Iterator[tuple[int, bytes | int]]:
        max_line, ws_run = self.max_line, _WS_RUN
        chunks = _chunks(self.path, self.start, self.chunk, self, self.end)
        start, end = line_range(self.path, self.start, self.end)
        base = 0  # file offset of chunk[0]
        skip = 0  # where the first line starts in the first chunk
        if start:
            base = start - 1
            for first in chunks:  # the line straddling `start` belongs to the range before
                skip = first.find(b"\n") + 1
                if skip:
                    break
                base += len(first)
            else:
                return
            chunks = _chain(first, chunks)
        line = 0
        # The current line: `lead` bytes of white space (counted, not kept), then `held`
        # bytes kept in `parts` from its first other byte on (`started`); `over` once it
        # is past max_line (nothing more is kept).
        lead = held = 0
        parts: list[bytes | bytearray | memoryview] = []
        started = over = False
        for chunk in chunks:
            n = len(chunk)
            # bytes(view[a:b]): one copy whether the chunk is bytes or a reused bytearray
            view = memoryview(chunk) if type(chunk) is bytearray else chunk
            pos, skip = skip, 0
            while pos < n:
                if not started:
                    if not lead and end is not None and base + pos >= end:
                        return  # the next line starts in the next range
                    if chunk[pos] in JSON_WS:
                        white = ws_run(chunk, pos).end()
                        last = chunk.rfind(b"\n", pos, white)
                        if last >= 0:  # blank lines: counted in bulk, however many
                            if end is not None and base + last >= end:
                                # only those starting before `end` (the first one does)
                                k = 1 + chunk.count(b"\n", pos, max(pos, end - base - 1))
                                line += k
                                self.lines, self.blank = line, self.blank + k
                                return
                            k = chunk.count(b"\n", pos, last + 1)
                            line += k
                            self.lines, self.blank = line, self.blank + k
                            lead, pos = 0, last + 1
                            continue
                        lead += white - pos
                        pos = white
                        if pos == n:
                            break
                    started = True
                nl = chunk.find(b"\n", pos)
                if nl < 0:  # the line goes on in the next chunk
                    if not over:
                        if lead + held + n - pos > max_line:
                            over, parts = True, []
                        else:
                            parts.append(bytes(view[pos:]))  # a chunk may be reused
                    held += n - pos
                    break
                line += 1
                self.lines = line
                size = lead + held + nl - pos
                if over or size > max_line:
                    yield line, size
                else:
                    if parts:
                        parts.append(view[pos:nl])
                        body = b"".join(parts)
                    else:
                        body = bytes(view[pos:nl])
                    yield line, body.rstrip(JSON_WS)
                lead = held = 0
                parts = []
                started = over = False
                pos = nl + 1
            base += n
        if started:  # the last line has no newline
            line += 1
            self.lines = line
            size = lead + held
            yield (line, size) if over or size > max_line else (line, b"".join(parts).rstrip(JSON_WS))
        elif lead:
            line += 1
            self.lines, self.blank = line, self.blank + 1


def _chain(
    first: bytes | bytearray, rest: Iterator[bytes | bytearray]
) -> Iterator[bytes | bytearray]:
    yield first
    yield from rest


def iter_lines(path: Path, start: int = 0, end: int | None = None) -> Iterator[bytes]:
    """Raw lines (with their endings) of the whole file, or of those starting in [start, end).

    A plain reference for tests and tools: it keeps each line whole, blank or not. The
    audit reads with Lines.
    """
    pending = bytearray()
    chunks = _chunks(path, start, BUFFER, None, end)
    start, end = line_range(path, start, end)
    offset = start - 1 if start else 0  # file offset of pending[0]
    skipping = bool(start)  # the line straddling `start` belongs to the range before
    for chunk in chunks:
        pending += chunk
        at = 0
        if skipping:
            at = pending.find(b"\n") + 1
            if not at:
                offset += len(pending)
                pending.clear()
                continue
            skipping = False
        while end is None or offset + at < end:
            nl = pending.find(b"\n", at)
            if nl < 0:
                break
            yield bytes(pending[at : nl + 1])
            at = nl + 1
        else:
            return
        offset += at
        del pending[:at]
    if pending and not skipping and (end is None or offset < end):
        yield bytes(pending)


def get_path(obj: Any, path: tuple[str, ...]) -> Any:
    """The value at a dotted path, or MISSING; a part of digits indexes a list
    (`choices.0.message.content`), a dict's keys are always names ("0" is a key there)."""
    for part in path:
        kind = type(obj)
        if kind is dict:
            obj = obj.get(part, MISSING)
            if obj is MISSING:
                return MISSING
        elif kind is list and _INDEX(part):
            index = int(part)
            if index >= len(obj):
                return MISSING
            obj = obj[index]
        else:
            return MISSING
    return obj


_INDEX = re.compile(r"0|[1-9][0-9]{0,17}").fullmatch  # a list index as JSON paths write it


class AuditedRecord(Protocol):
    """A well-formed record as the check hooks see it (read-only): the JSONL reader's
    Record and the Parquet reader's ArrowRecord both are one.

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
        """The whole JSON object (JSONL); the columns the contract reads (Parquet)."""

    def occurrences(self, token: int) -> int:
        """How often `token` occurs in its ids."""

    def count_each(self, tokens: tuple[int, ...]) -> list[int]:
        """How often each of `tokens` occurs in its ids."""

    def finding(self, check: str, message: str, allowable: bool = False) -> Finding:
        """A Finding that names this record's line and id."""


_set = object.__setattr__


def read_only(name: str) -> NoReturn:
    """What setting a record's attribute does (Record, TextRecord, parquet's ArrowRecord)."""
    raise AttributeError(f"a record is read-only (cannot set {name!r}); a check returns "
                         "findings, e.g. record.finding(check, message)")


class ReadOnlyRecord:
    """The base of the records hooks get (Record, parquet's ArrowRecord): read-only to a
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

    def __setattr__(self, name: str, value: Any) -> None:
        read_only(name)

    def __delattr__(self, name: str) -> None:
        read_only(name)


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

    def occurrences(self, token: int) -> int:
        return self.count_each((token,))[0]

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

    def finding(self, check: str, message: str, allowable: bool = False) -> Finding:
        return Finding(check, message, self.line, self.id, allowable)


class TextRecord(Record):
    """A record read with a text template: `texts` holds each placeholder's text; the ids
    are rebuilt from them in batches (template.py) before any check sees the record, into
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


class _Skipped(enum.Enum):
    """SKIPPED's type: an enum member, so a type checker tells it from a Record."""

    SKIPPED = "skipped"


SKIPPED: Final = _Skipped.SKIPPED
"""parse_line's answer for a record the `tokaudit_where` filter leaves out."""


class Unusable(NamedTuple):
    """A record of a batch that could not be checked, for batch hooks that need every
    record (the id checks, the budget): its line, and its id and billed count when they
    could be read (else None)."""

    line: int
    id: str | int | None
    billed: int | None


@final  # so that `type(parsed) is Rejected` tells Rejected and Record apart, to mypy too
@dataclass(frozen=True, slots=True)
class Rejected:
    """parse_line's answer for a record that cannot be checked: why, and what of it could
    still be read (its id, a str or int; its billed count, an int >= 0), so that its
    spend and its id are not lost."""

    findings: list[Finding] = field(default_factory=list)
    record_id: Any = None
    count: int | None = None


# orjson's integer range; a value outside it cannot be kept as an int in a report either.
U64_MAX = 2**64 - 1
I64_MIN = -(2**63)
PREVIEW = 80  # characters of a value shown in a finding


@final  # so that `type(value) is _BigInt` tells int and _BigInt apart, to mypy too
class _BigInt:
    """An integer literal too long for int() (Python caps it at 4,300 digits)."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text

    def __eq__(self, other: Any) -> bool:
        return type(other) is _BigInt and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)


class _Invalid(Exception):
    """A line that is not valid JSON after all; the message is the finding's."""


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    return "int" if type(value) is _BigInt else type(value).__name__


def _is_int(value: Any) -> bool:
    return type(value) is int or type(value) is _BigInt


def _cut(text: str, total: int, unit: str) -> str:
    if len(text) <= PREVIEW:
        return text
    return f"{text[:PREVIEW]}... ({total:,} {unit})"


def _number(value: int | _BigInt) -> str:
    """An integer's digits as in the line, cut to a preview."""
    if type(value) is _BigInt:
        text = value.text
    else:
        try:
            text = str(value)
        except ValueError:  # over sys.get_int_max_str_digits()
            return f"<an integer of {value.bit_length():,} bits>"
    return _cut(text, len(text.lstrip("-")), "digits")


def preview(value: Any) -> str:
    """repr(value) cut to PREVIEW characters, with the full length: a finding must not
    carry a 5 MB string."""
    if _is_int(value):
        return _number(value)
    text = repr(value)
    return _cut(text, len(value) if type(value) is str else len(text), "chars")


def _found(value: Any) -> str:
    """A value as the data spells it, and its type: 'null', 'true (bool)', "'7' (str)"."""
    if value is None:
        return "null"
    if type(value) is bool:
        return f"{str(value).lower()} (bool)"
    return f"{preview(value)} ({_type_name(value)})"


def _out_of_range(value: int | _BigInt) -> str | None:
    """' is out of range (...)' for an integer orjson cannot hold, else None."""
    if type(value) is _BigInt:
        side = "under -2**63" if value.text.startswith("-") else "over 2**64-1"
    elif value > U64_MAX:
        side = "over 2**64-1"
    elif value < I64_MIN:
        side = "under -2**63"
    else:
        return None
    return f" is out of range ({side})"


def _invalid_json(raw: bytes, exc: orjson.JSONDecodeError) -> str:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as err:
        return _invalid_utf8(raw, err)
    if raw.startswith(b"\xef\xbb\xbf"):  # orjson words this differently by version
        return "invalid JSON: line starts with a UTF-8 byte order mark"
    return f"invalid JSON: {exc.msg} at column {exc.colno}"


def _invalid_utf8(raw: bytes, err: UnicodeDecodeError) -> str:
    return f"invalid UTF-8 at byte {err.start + 1}: {raw[err.start:err.start + 4]!r}"


# -- numbers past orjson's range: the stdlib json module reads them exactly -------------------

def _exact_int(text: str) -> int | _BigInt:
    try:
        return int(text)
    except ValueError:  # over sys.get_int_max_str_digits()
        return _BigInt(text)


def _no_constant(name: str) -> Any:
    raise _Invalid(f"invalid JSON: {name} is not a JSON value")


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]").search


def _lone_surrogate(obj: Any) -> bool:
    """Whether a string (key or value) holds a lone UTF-16 surrogate."""
    stack = [obj]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str:
            if not item.isascii():
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError:
                    return True
        elif kind is dict:
            stack.extend(item.keys())
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
    return False


def _load_exact(raw: bytes) -> Any:
    """The line as JSON with integers exact and out-of-range floats as +-inf (orjson turns
    integers past 64 bits into floats and rejects 1e400, both valid JSON). Only what orjson
    rejects besides is rejected: NaN/Infinity, lone surrogates. Raises _Invalid."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise _Invalid(_invalid_utf8(raw, err)) from None
    try:
        obj = json.loads(text, parse_int=_exact_int, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise _Invalid(f"invalid JSON: {exc.msg} at column {exc.colno}") from None
    except RecursionError:
        raise _Invalid("invalid JSON: nested too deeply") from None
    if _SURROGATE_ESCAPE(raw) and _lone_surrogate(obj):
        raise _Invalid("invalid JSON: a string holds a lone surrogate (\\ud800-\\udfff)")
    return obj


def _load(raw: bytes) -> Any:
    """orjson's reading of the line; the stdlib's where orjson rejects a valid number."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if exc.msg.startswith("number is infinity"):  # 1e400: valid JSON, past a double
            return _load_exact(raw)
        raise _Invalid(_invalid_json(raw, exc)) from None


def check_ids(ids: Any, name: str) -> str | None:
    """Why `ids` is not a list of token ids (ints from 0 to 2**64-1), or None."""
    if type(ids) is not list:
        return f"{name} must be a list of token ids, found {_type_name(ids)}"
    if not ids:
        return None
    types = set(map(type, ids))
    if types == {int} and min(ids) >= 0 and max(ids) <= U64_MAX:
        return None
    for i, value in enumerate(ids):
        if not _is_int(value):
            return (f"{name}[{i}] must be an integer token id, "
                    f"found {_found(value)}")
        if type(value) is int and value < 0 or type(value) is _BigInt and value.text[0] == "-":
            return f"{name}[{i}] must be a non-negative token id, found {_number(value)}"
        if _out_of_range(value):
            return f"{name}[{i}] {_number(value)}{_out_of_range(value)}"
    return None  # unreachable: one of the branches above matched


def parse_line(
    raw: bytes, line: int, contract: Contract, fast: bool = True
) -> Record | Rejected | _Skipped:
    """One non-blank line -> Record, SKIPPED, or Rejected (the findings that make it
    unusable, with the id and billed count if they could be read)."""
    key = fast and fastids.key_for(contract.ids_field, contract.where, contract.id_field,
                                   *_read_paths(contract))
    cut = fastids.cut(raw, key) if key else None
    obj: Any = None
    if cut is not None:
        try:
            obj = orjson.loads(cut[0])
        except orjson.JSONDecodeError:
            cut = None
        else:
            if type(obj) is not dict or obj.get(contract.ids_field[0]) != fastids.SENTINEL:
                cut = None  # not a top-level key after all: the plain path decides
    if cut is None:
        try:
            obj = _load(raw)
        except _Invalid as exc:
            return Rejected([Finding("json", str(exc), line)])
        if type(obj) is not dict:
            return Rejected([Finding("json", f"expected a JSON object, found {_type_name(obj)}", line)])
    if contract.where:
        flag = get_path(obj, contract.where)
        if flag is MISSING or not flag:
            return SKIPPED
    problems, record_id, count, ids = _schema(obj, contract, cut is None)
    if problems and _big_floats(obj, contract):
        # Maybe an integer past 64 bits, which orjson reads as a float: read it exactly.
        try:
            obj = _load_exact(raw)
        except _Invalid as exc:  # only nesting orjson allows and the stdlib does not
            return Rejected([Finding("json", str(exc), line)])
        cut = None
        problems, record_id, count, ids = _schema(obj, contract, True)
    texts = None
    if contract.text_template is not None:
        texts = _template_texts(obj, contract, problems)
    if problems:
        return Rejected([Finding("schema", p, line, record_id) for p in problems], record_id, count)
    if texts is not None:
        if cut is None:
            return TextRecord(line, obj, record_id, count, ids, texts=texts)
        return TextRecord(line, obj, record_id, count, None, cut[1], contract.ids_field[0],
                          texts=texts)
    if cut is None:
        return Record(line, obj, record_id, count, ids)
    return Record(line, obj, record_id, count, None, cut[1], contract.ids_field[0])


@functools.lru_cache(maxsize=64)
def _read_paths_of(count_field: Any, template: Any, finish: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    return (*count_paths(count_field), *(template.paths if template is not None else ()), finish)


def _read_paths(contract: Contract) -> tuple[tuple[str, ...], ...]:
    """The fields read besides the ids, id and where (the fast path must not cut them out)."""
    finish = contract.finish_reason_field if contract.finish_reason else ()
    if type(contract.count_field) is tuple and contract.text_template is None and not finish:
        return (contract.count_field,)
    return _read_paths_of(contract.count_field, contract.text_template, finish)


def _template_texts(obj: dict, contract: Contract, problems: list[str]) -> tuple[str, ...] | None:
    """The text of each placeholder of the template (optional missing or null: ''); a
    problem for a required one that is missing or null, and for a value that is not text."""
    template = contract.text_template
    assert template is not None
    texts = []
    for ph in template.placeholders:
        value = get_path(obj, ph.path)
        if type(value) is str:
            texts.append(value)
        elif value is MISSING or value is None:
            if not ph.optional and value is None:
                problems.append(f"text_template: {ph.name} is null; write {{{ph.name}?}} if it "
                                "may be null")
            elif not ph.optional:
                problems.append(f"text_template: missing field {ph.name!r} "
                                f"({why_missing(obj, ph.path)}); write {{{ph.name}?}} if it may be absent")
            texts.append("")
        else:
            problems.append(f"text_template: {ph.name} must be a string, found {_found(value)}")
    return None if len(texts) != len(template.placeholders) else tuple(texts)


def _big_floats(obj: dict, contract: Contract) -> bool:
    """Whether a field the contract reads (or an element of the ids) holds a float that may
    be an integer literal orjson could not hold: those are the ones of magnitude 2**63 or
    more (it turns an integer under -2**63 or over 2**64-1 into a float)."""
    values = [get_path(obj, f) for f in (contract.id_field, *count_paths(contract.count_field)) if f]
    ids = get_path(obj, contract.ids_field)
    if type(ids) is list:
        values += ids
    return any(type(v) is float and not -_BIG < v < _BIG for v in values)


_BIG = float(2**63)


def _schema(obj: dict, contract: Contract, with_ids: bool) -> tuple[list[str], Any, Any, Any]:
    """(problems, the id if valid, the billed count if valid, the ids) of a parsed record."""
    problems = []
    record_id = None
    if contract.id_field:
        record_id = get_path(obj, contract.id_field)
        kind = type(record_id)
        if kind is not str and not (kind is int and I64_MIN <= record_id <= U64_MAX):
            problems.append(_id_problem(record_id, ".".join(contract.id_field)))
            record_id = None
    count_field = contract.count_field
    if isinstance(count_field, CountSum):
        count = _count_sum(obj, count_field, problems)
    else:
        count = get_path(obj, count_field)
        if not (type(count) is int and 0 <= count <= U64_MAX):
            problems.append(_count_problem(count, ".".join(count_field)))
            count = None
    ids = None
    if with_ids:
        ids = get_path(obj, contract.ids_field)
        ids_name = ".".join(contract.ids_field)
        if ids is MISSING and contract.text_template is not None:
            ids = None  # rebuilt from the text (template.py)
        elif ids is MISSING:
            problems.append(f"missing field {ids_name!r}")
        else:
            why = check_ids(ids, ids_name)
            if why:
                problems.append(why)
    return problems, record_id, count, ids


def _count_sum(obj: dict, formula: CountSum, problems: list[str]) -> int | None:
    """The billed count as a sum of fields; an optional addend missing or null counts 0."""
    return sum_terms(((t, get_path(obj, t.path)) for t in formula.terms), formula, problems)


def sum_terms(values: Iterable[tuple[Any, Any]], formula: Any, problems: list[str]) -> int | None:
    """A billing sum from (term, value) pairs; a problem for each addend that is not a count
    (an optional one missing or null counts 0). Parquet rows are summed by it too."""
    total, bad = 0, False
    for term, value in values:
        if term.optional and (value is MISSING or value is None):
            continue
        if type(value) is int and 0 <= value <= U64_MAX:
            total += value
        else:
            problems.append(_count_problem(value, ".".join(term.path)))
            bad = True
    if not bad and total > U64_MAX:
        problems.append(f"{formula} = {total} is out of range (over 2**64-1)")
    return None if bad or total > U64_MAX else total


def _id_problem(record_id: Any, name: str) -> str:
    if record_id is MISSING:
        return f"missing field {name!r}"
    if not _is_int(record_id):
        return f"{name} must be a string or integer, found {_type_name(record_id)}"
    return f"{name} {_number(record_id)}{_out_of_range(record_id)}"


def _count_problem(count: Any, name: str) -> str:
    if count is MISSING:
        return f"missing field {name!r}"
    if not _is_int(count):
        return f"{name} must be an integer, found {_found(count)}"
    if type(count) is int and count < 0 or type(count) is _BigInt and count.text[0] == "-":
        return f"{name} must be non-negative, found {_number(count)}"
    return f"{name} {_number(count)}{_out_of_range(count)}"
