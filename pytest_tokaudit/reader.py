"""Bytes -> records: streaming lines of .jsonl / .jsonl.gz / .jsonl.zst, parsed with orjson.

Everything that can be wrong with a line becomes a Finding; nothing here raises for bad
data. A compressed stream that ends early or is corrupt raises ReadError, which the audit
turns into a file-level finding after auditing every line read before it.
"""

from __future__ import annotations

import gzip
import io
import zlib
from pathlib import Path
from typing import Any, BinaryIO, Iterator

import orjson

from .contract import MISSING, Contract
from .findings import Finding

BUFFER = 1 << 20
COMPRESSED = (".gz", ".zst")


class ReadError(Exception):
    """The file cannot be read further (corrupt or truncated compressed data)."""


def is_compressed(path: Path) -> bool:
    return path.name.endswith(COMPRESSED)


class _ZstdRaw(io.RawIOBase):
    """A zstd stream that, unlike zstandard's stream_reader, notices truncation."""

    def __init__(self, fh: BinaryIO):
        import zstandard

        self._fh = fh
        self._new = zstandard.ZstdDecompressor().decompressobj
        self._obj = self._new()
        self._error = zstandard.ZstdError
        self._pending = b""
        self._started = False

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        while not self._pending:
            chunk = self._fh.read(BUFFER)
            if not chunk:
                if self._started and not self._obj.eof:
                    raise EOFError("compressed data ends before the end of the zstd frame")
                return 0
            self._started = True
            try:
                self._pending = self._obj.decompress(chunk)
                # A file may hold several frames back to back.
                while self._obj.eof and self._obj.unused_data:
                    rest = self._obj.unused_data
                    self._obj = self._new()
                    self._pending += self._obj.decompress(rest)
            except self._error as exc:
                raise ReadError(f"corrupt zstd data: {exc}") from None
        n = min(len(buf), len(self._pending))
        buf[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n


def open_binary(path: Path) -> BinaryIO:
    """Open for line iteration; raises ReadError if a codec is unavailable."""
    name = path.name
    if name.endswith(".gz"):
        return gzip.open(path, "rb")
    if name.endswith(".zst"):
        try:
            import zstandard  # noqa: F401
        except ImportError:
            raise ReadError(
                "reading .zst files needs the zstandard package: "
                "pip install 'pytest-tokaudit[zstd]'"
            ) from None
        return io.BufferedReader(_ZstdRaw(open(path, "rb")), BUFFER)
    return open(path, "rb", buffering=BUFFER)


def iter_lines(path: Path, start: int = 0, end: int | None = None) -> Iterator[bytes]:
    """Raw lines (with their endings) of the whole file, or of those starting in [start, end).

    Byte ranges are for uncompressed files: a line belongs to the range its first byte is in.
    """
    try:
        fh = open_binary(path)
    except OSError as exc:
        raise ReadError(f"cannot open: {exc.strerror or exc}") from None
    with fh:
        try:
            if start:
                fh.seek(start - 1)
                if fh.read(1) != b"\n":
                    fh.readline()  # the line straddling `start` belongs to the range before
            pos = fh.tell() if end is not None else 0
            for raw in fh:
                if end is not None:
                    if pos >= end:
                        return
                    pos += len(raw)
                yield raw
        except EOFError as exc:
            raise ReadError(f"truncated compressed file: {exc}") from None
        except (OSError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
            raise ReadError(f"corrupt or unreadable file: {exc}") from None


def get_path(obj: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        if type(obj) is not dict:
            return MISSING
        obj = obj.get(part, MISSING)
        if obj is MISSING:
            return MISSING
    return obj


class Record:
    """One audited record: its line, parsed object, id, billed count and token ids."""

    __slots__ = ("line", "data", "id", "count", "ids")

    def __init__(self, line: int, data: dict, record_id: Any, count: int, ids: list[int]):
        self.line = line
        self.data = data
        self.id = record_id
        self.count = count
        self.ids = ids

    @property
    def n_ids(self) -> int:
        return len(self.ids)

    @property
    def last_id(self) -> int | None:
        return self.ids[-1] if self.ids else None

    def occurrences(self, token: int) -> int:
        return self.ids.count(token)

    def finding(self, check: str, message: str, allowable: bool = False) -> Finding:
        return Finding(check, message, self.line, self.id, allowable)


SKIPPED = object()
"""parse_line's answer for a record the `tokaudit_where` filter leaves out."""


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _invalid_json(raw: bytes, exc: orjson.JSONDecodeError) -> str:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as err:
        return f"invalid UTF-8 at byte {err.start + 1}: {raw[err.start:err.start + 4]!r}"
    if exc.msg.startswith("UTF-8 byte order mark"):
        return "invalid JSON: line starts with a UTF-8 byte order mark"
    return f"invalid JSON: {exc.msg} at column {exc.colno}"


def check_ids(ids: Any, name: str) -> str | None:
    """Why `ids` is not a list of non-negative ints, or None."""
    if type(ids) is not list:
        return f"{name} must be a list of token ids, found {_type_name(ids)}"
    if not ids:
        return None
    types = set(map(type, ids))
    if types == {int} and min(ids) >= 0:
        return None
    for i, value in enumerate(ids):
        if type(value) is not int:
            return f"{name}[{i}] must be an integer token id, found {value!r} ({_type_name(value)})"
        if value < 0:
            return f"{name}[{i}] must be a non-negative token id, found {value}"
    return None  # unreachable: one of the branches above matched


def parse_line(raw: bytes, line: int, contract: Contract) -> Record | Any | list[Finding]:
    """One non-blank line -> Record, SKIPPED, or the findings that make it unusable."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return [Finding("json", _invalid_json(raw, exc), line)]
    if type(obj) is not dict:
        return [Finding("json", f"expected a JSON object, found {_type_name(obj)}", line)]
    if contract.where:
        flag = get_path(obj, contract.where)
        if flag is MISSING or not flag:
            return SKIPPED
    record_id = None
    problems = []
    if contract.id_field:
        record_id = get_path(obj, contract.id_field)
        if record_id is MISSING:
            record_id = None
            problems.append(f"missing field {'.'.join(contract.id_field)!r}")
        elif type(record_id) not in (str, int):
            problems.append(
                f"{'.'.join(contract.id_field)} must be a string or integer, "
                f"found {_type_name(record_id)}"
            )
            record_id = None
    count = get_path(obj, contract.count_field)
    count_name = ".".join(contract.count_field)
    if count is MISSING:
        problems.append(f"missing field {count_name!r}")
    elif type(count) is not int:
        problems.append(f"{count_name} must be an integer, found {count!r} ({_type_name(count)})")
    elif count < 0:
        problems.append(f"{count_name} must be non-negative, found {count}")
    ids = get_path(obj, contract.ids_field)
    ids_name = ".".join(contract.ids_field)
    if ids is MISSING:
        problems.append(f"missing field {ids_name!r}")
    else:
        why = check_ids(ids, ids_name)
        if why:
            problems.append(why)
    if problems:
        return [Finding("schema", p, line, record_id) for p in problems]
    return Record(line, obj, record_id, count, ids)
