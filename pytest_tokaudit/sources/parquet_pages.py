"""A Parquet column chunk read page by page, below pyarrow's decoder.

pyarrow decodes a row whole: a row of 150M ids that a repeated value packs into a few
hundred bytes takes gigabytes once decoded. The record limit needs each row's size before
that: a row's size is the run of repetition levels between two zeros, and the levels are
a few bytes per run. This module reads them (the page headers' Thrift, the codec, the
RLE / bit-packed hybrid), in windows of at most WINDOW levels, so that memory is bounded
by a page whatever a row holds. For the rows that share a row group with a row over the
limit it also decodes their values (integer lists at the top level, PLAIN or dictionary
values, page versions 1 and 2): the row over the limit is skipped, not decoded. Any other
layout raises Unsupported, and the caller falls back on pyarrow.
"""

from __future__ import annotations

import struct
from typing import Any, BinaryIO, Iterator

WINDOW = 1 << 20  # levels decoded at a time

_CODECS = {"UNCOMPRESSED": None, "SNAPPY": "snappy", "GZIP": "gzip", "ZSTD": "zstd",
           "BROTLI": "brotli", "LZ4_RAW": "lz4_raw"}
_PLAIN, _PLAIN_DICTIONARY, _RLE, _RLE_DICTIONARY = 0, 2, 3, 8
_DATA, _DICTIONARY, _DATA_V2 = 0, 2, 3


class Unsupported(Exception):
    """A layout this module does not read (the caller reads the row group with pyarrow)."""


# -- Thrift compact protocol: just what a PageHeader needs -------------------------------

def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    out = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        out |= (b & 0x7F) << shift
        if not b & 0x80:
            return out, pos
        shift += 7


def _zigzag(n: int) -> int:
    return (n >> 1) ^ -(n & 1)


def _value(buf: bytes, pos: int, kind: int) -> tuple[Any, int]:
    if kind in (1, 2):  # a boolean field holds its value in its type
        return kind == 1, pos
    if kind == 3:
        return struct.unpack_from("b", buf, pos)[0], pos + 1
    if kind in (4, 5, 6):
        n, pos = _varint(buf, pos)
        return _zigzag(n), pos
    if kind == 7:
        return struct.unpack_from("<d", buf, pos)[0], pos + 8
    if kind == 8:
        n, pos = _varint(buf, pos)
        return buf[pos:pos + n], pos + n
    if kind in (9, 10):
        head = buf[pos]
        pos += 1
        size, elem = head >> 4, head & 0x0F
        if size == 15:
            size, pos = _varint(buf, pos)
        items = []
        for _ in range(size):
            if elem in (1, 2):  # a boolean element is a byte
                items.append(buf[pos] == 1)
                pos += 1
            else:
                item, pos = _value(buf, pos, elem)
                items.append(item)
        return items, pos
    if kind == 11:
        size, pos = _varint(buf, pos)
        if not size:
            return {}, pos
        types = buf[pos]
        pos += 1
        for _ in range(size):
            _, pos = _value(buf, pos, types >> 4)
            _, pos = _value(buf, pos, types & 0x0F)
        return {}, pos
    if kind == 12:
        return _struct(buf, pos)
    raise Unsupported(f"Thrift type {kind}")


def _struct(buf: bytes, pos: int) -> tuple[dict[int, Any], int]:
    out: dict[int, Any] = {}
    last = 0
    while True:
        head = buf[pos]
        pos += 1
        if head == 0:
            return out, pos
        kind, delta = head & 0x0F, head >> 4
        if delta:
            last += delta
        else:
            n, pos = _varint(buf, pos)
            last = _zigzag(n)
        out[last], pos = _value(buf, pos, kind)


# -- pages -------------------------------------------------------------------------------

class Page:
    """One page: its kind, level and value counts, and its bytes, read and uncompressed on
    demand (`body`), or only their start (`prefix`: a page's levels come first)."""

    def __init__(self, kind: int, num_values: int, encoding: int, f: BinaryIO, at: int,
                 raw_len: int, size: int, codec: str | None, rep_bytes: int | None = None,
                 def_bytes: int | None = None) -> None:
        self.kind, self.num_values, self.encoding = kind, num_values, encoding
        self.f, self.at, self.raw_len, self.size, self.codec = f, at, raw_len, size, codec
        self.rep_bytes, self.def_bytes = rep_bytes, def_bytes  # v2: the levels' lengths
        self._body: bytes | None = None

    def _read(self, n: int) -> bytes:
        self.f.seek(self.at)
        return self.f.read(min(n, self.raw_len))

    @property
    def body(self) -> bytes:
        if self._body is None:
            raw = self._read(self.raw_len)
            if self.kind == _DATA_V2:
                assert self.rep_bytes is not None and self.def_bytes is not None
                levels = self.rep_bytes + self.def_bytes
                rest = raw[levels:]
                if self.codec is not None:
                    rest = _decompress(rest, self.size - levels, self.codec)
                self._body = raw[:levels] + rest
            else:
                self._body = _decompress(raw, self.size, self.codec)
        return self._body

    def prefix(self, n: int) -> bytes:
        """At least the first `n` bytes of the body (all of it when shorter), reading and
        inflating no more of the page than it takes where the codec allows."""
        if self._body is not None:
            return self._body
        if self.kind == _DATA_V2 or self.codec is None:  # v2 levels are never compressed
            return self._read(n)
        want = max(n, 1 << 16)
        while True:
            raw = self._read(want)
            got = _decompress_prefix(raw, self.size, self.codec, n)
            if got is not None and len(got) >= min(n, self.size):
                return got
            if len(raw) >= self.raw_len or got is None:
                return self.body
            want *= 8


def pages(f: BinaryIO, chunk: Any) -> Iterator[Page]:
    """The pages of a column chunk (pyarrow's ColumnChunkMetaData), in order."""
    codec = chunk.compression
    if codec not in _CODECS:
        raise Unsupported(f"codec {codec}")
    codec = _CODECS[codec]
    start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
    if start is None:
        start = chunk.data_page_offset
    end = start + chunk.total_compressed_size
    pos, values = start, 0
    while pos < end and values < chunk.num_values:
        want = 256
        while True:
            f.seek(pos)
            head = f.read(min(want, end - pos))
            try:
                header, used = _struct(head, 0)
                break
            except IndexError:
                if want >= end - pos:
                    raise Unsupported("a page header past its column chunk") from None
                want *= 4
        kind, raw_size, size = header.get(1), header.get(2), header.get(3)
        if not isinstance(raw_size, int) or not isinstance(size, int):
            raise Unsupported("a page header without sizes")
        at = pos + used
        pos = at + size
        if kind == _DICTIONARY:
            dp = header.get(7, {})
            yield Page(kind, dp.get(1, 0), dp.get(2, _PLAIN), f, at, size, raw_size, codec)
        elif kind == _DATA:
            dp = header.get(5, {})
            values += dp.get(1, 0)
            yield Page(kind, dp.get(1, 0), dp.get(2, _PLAIN), f, at, size, raw_size, codec)
        elif kind == _DATA_V2:
            dp = header.get(8, {})
            values += dp.get(1, 0)
            yield Page(kind, dp.get(1, 0), dp.get(4, _PLAIN), f, at, size, raw_size,
                       codec if dp.get(7, True) else None, rep_bytes=dp.get(6, 0), def_bytes=dp.get(5, 0))
        # an index page, or a kind of page to come: nothing to read in it


def _decompress(body: bytes, size: int, codec: str | None) -> bytes:
    if codec is None:
        return body
    import pyarrow as pa

    return bytes(pa.decompress(body, decompressed_size=size, codec=codec, asbytes=True))


def _decompress_prefix(raw: bytes, size: int, codec: str, n: int) -> bytes | None:
    """The first `n` bytes of a compressed page, without the rest when the codec allows
    (Snappy, gzip, zstd, Brotli); None when it does not."""
    n = min(n, size)
    if codec == "snappy":
        return _snappy_prefix(raw, n)
    if codec == "gzip":
        import zlib

        return zlib.decompressobj(31).decompress(raw, n)
    if codec in ("zstd", "brotli"):
        import pyarrow as pa

        try:
            with pa.CompressedInputStream(pa.BufferReader(raw), codec) as stream:
                return bytes(stream.read(n))
        except (pa.ArrowException, OSError):  # cut short: read more of the page
            return b""
    return None


def _snappy_prefix(src: bytes, n: int) -> bytes:
    """The first `n` bytes of a raw Snappy block (its format: a length, then literals and
    copies of earlier output)."""
    try:
        return _snappy_decode(src, n)
    except IndexError:  # the compressed bytes were cut short: what came out of them
        return b""


def _snappy_decode(src: bytes, n: int) -> bytes:
    _, pos = _varint(src, 0)
    out = bytearray()
    while len(out) < n and pos < len(src):
        tag = src[pos]
        pos += 1
        kind = tag & 3
        extra = (tag >> 2) - 59 if kind == 0 and tag >> 2 >= 60 else (0, 1, 2, 4)[kind]
        if pos + extra > len(src):
            raise IndexError("cut short")
        if kind == 0:  # a literal
            k = tag >> 2
            if k >= 60:
                k = int.from_bytes(src[pos:pos + extra], "little")
                pos += extra
            out += src[pos:pos + k + 1]
            pos += k + 1
            continue
        if kind == 1:
            k, off = 4 + ((tag >> 2) & 7), ((tag >> 5) << 8) | src[pos]
            pos += 1
        elif kind == 2:
            k, off = 1 + (tag >> 2), int.from_bytes(src[pos:pos + 2], "little")
            pos += 2
        else:
            k, off = 1 + (tag >> 2), int.from_bytes(src[pos:pos + 4], "little")
            pos += 4
        if not 0 < off <= len(out):
            raise Unsupported("a corrupt Snappy block")
        piece = out[len(out) - off:]
        out += (piece * (k // off + 1))[:k] if off < k else piece[:k]
    return bytes(out)


# -- the RLE / bit-packed hybrid ---------------------------------------------------------

class Hybrid:
    """The RLE / bit-packed hybrid of `width` bits a value, read or skipped `n` at a time;
    a bit-packed run is unpacked only where values are taken, a skip is arithmetic."""

    def __init__(self, buf: bytes, pos: int, end: int, width: int) -> None:
        self.buf, self.pos, self.end, self.width = buf, pos, end, width
        self.run_left = 0  # values left in the current run
        self.run_value = 0  # an RLE run's value
        self.packed_at = -1  # a bit-packed run: the byte it starts at (-1: an RLE run)
        self.packed_done = 0  # values of the bit-packed run read or skipped

    def _next_run(self) -> None:
        if self.pos >= self.end:
            raise Unsupported("levels or indices end early")
        head, self.pos = _varint(self.buf, self.pos)
        if head & 1:  # bit-packed: groups of 8 values
            self.packed_at, self.packed_done = self.pos, 0
            self.run_left = (head >> 1) * 8
            self.pos += (head >> 1) * self.width
        else:
            nbytes = (self.width + 7) // 8
            self.run_value = int.from_bytes(self.buf[self.pos:self.pos + nbytes], "little")
            self.pos += nbytes
            self.run_left, self.packed_at = head >> 1, -1

    def _unpack(self, k: int) -> Any:
        import numpy as np

        first, last = self.packed_done // 8, (self.packed_done + k + 7) // 8
        w = self.width
        if not w:
            return np.zeros(k, np.int64)
        raw = np.frombuffer(self.buf, np.uint8, (last - first) * w, self.packed_at + first * w)
        bits = np.unpackbits(raw, bitorder="little").reshape(-1, w).astype(np.int64)
        values = bits @ (1 << np.arange(w, dtype=np.int64))
        at = self.packed_done - first * 8
        return values[at:at + k]

    def take(self, n: int) -> Any:
        import numpy as np

        parts = []
        while n:
            if not self.run_left:
                self._next_run()
            k = min(n, self.run_left)
            if self.packed_at < 0:
                parts.append(np.full(k, self.run_value, np.int64))
            else:
                parts.append(self._unpack(k))
                self.packed_done += k
            self.run_left -= k
            n -= k
        if not parts:
            return np.zeros(0, np.int64)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def skip(self, n: int) -> None:
        while n:
            if not self.run_left:
                self._next_run()
            k = min(n, self.run_left)
            self.packed_done += k
            self.run_left -= k
            n -= k


def _bit_width(n: int) -> int:
    return int(n).bit_length()


class _Zeros:
    """The levels of a column without them (a max level of 0)."""

    def take(self, n: int) -> Any:
        import numpy as np

        return np.zeros(n, np.int64)


def _levels(page: Page, max_rep: int, max_def: int) -> tuple[Any, Any, int]:
    """The repetition and definition level readers of a data page, and where its values start."""
    body = page.body
    if page.kind == _DATA_V2:
        assert page.rep_bytes is not None and page.def_bytes is not None
        rep: Any = Hybrid(body, 0, page.rep_bytes, _bit_width(max_rep)) if max_rep else _Zeros()
        end = page.rep_bytes + page.def_bytes
        dfn: Any = Hybrid(body, page.rep_bytes, end, _bit_width(max_def)) if max_def else _Zeros()
        return rep, dfn, end
    pos = 0
    readers: list[Any] = []
    for level in (max_rep, max_def):
        if not level:
            readers.append(_Zeros())
            continue
        (n,) = struct.unpack_from("<i", body, pos)
        readers.append(Hybrid(body, pos + 4, pos + 4 + n, _bit_width(level)))
        pos += 4 + n
    return readers[0], readers[1], pos


def _rep_levels(page: Page, max_rep: int) -> Hybrid:
    """A data page's repetition levels, reading no more of the page than they take."""
    if page.kind == _DATA_V2:
        assert page.rep_bytes is not None
        return Hybrid(page.prefix(page.rep_bytes), 0, page.rep_bytes, _bit_width(max_rep))
    head = page.prefix(4)
    (n,) = struct.unpack_from("<i", head, 0)
    body = page.prefix(4 + n)
    if len(body) < 4 + n:
        raise Unsupported("repetition levels past their page")
    return Hybrid(body, 4, 4 + n, _bit_width(max_rep))


def _runs(rep: Hybrid, total: int) -> Iterator[tuple[int, Any]]:
    """The first `total` levels as runs: (count, value) for a repeated value, (count, array)
    for bit-packed values, in pieces of at most WINDOW."""
    while total:
        rep._next_run()
        k = min(rep.run_left, total)
        total -= k
        if rep.packed_at < 0:
            yield k, rep.run_value
            continue
        while k:
            m = min(k, WINDOW)
            yield m, rep._unpack(m)
            rep.packed_done += m
            k -= m


def row_bound(f: BinaryIO, chunk: Any, max_rep: int) -> int:
    """At most how many levels a row of the column chunk holds, from where each page's
    first row starts: the levels from it to the page's end, and on through pages where no
    row starts, to the first row start after. Only the first runs of each page's levels
    are read: a page of small rows starts a row within its first few."""
    import numpy as np

    best = running = 0
    for page in pages(f, chunk):
        if page.kind == _DICTIONARY:
            continue
        first, seen = page.num_values, 0
        for k, value in _runs(_rep_levels(page, max_rep), page.num_values):
            if isinstance(value, int):
                if value == 0:
                    first = seen
                    break
            else:
                zeros = np.flatnonzero(value == 0)
                if len(zeros):
                    first = seen + int(zeros[0])
                    break
            seen += k
        if first == page.num_values:  # no row starts here: the open row runs on
            running += page.num_values
        else:
            best = max(best, running + first)
            running = page.num_values - first
    return max(best, running)


def long_rows(f: BinaryIO, chunk: Any, max_rep: int, over: int) -> dict[int, int]:
    """The rows of the column chunk (0-based) holding more than `over` levels, with their
    levels: every page's repetition levels walked run by run (a run of 150M levels is one
    step)."""
    import numpy as np

    out: dict[int, int] = {}
    row, count = -1, 0
    for page in pages(f, chunk):
        if page.kind == _DICTIONARY:
            continue
        for k, value in _runs(_rep_levels(page, max_rep), page.num_values):
            if isinstance(value, int):
                if value:
                    count += k
                    continue
                if count > over:
                    out[row] = count
                if k > 1 and 1 > over:
                    out.update((r, 1) for r in range(row + 1, row + k))
                row, count = row + k, 1
                continue
            zeros = np.flatnonzero(value == 0)
            if not len(zeros):
                count += k
                continue
            if count + int(zeros[0]) > over:
                out[row] = count + int(zeros[0])
            gaps = np.diff(zeros)
            for g in np.flatnonzero(gaps > over):
                out[row + 1 + int(g)] = int(gaps[g])
            row, count = row + len(zeros), k - int(zeros[-1])
    if count > over:
        out[row] = count
    out.pop(-1, None)
    return out


# -- values of integer lists -------------------------------------------------------------

class IntListReader:
    """The rows of a top-level list of integers in one row group, in order; the rows in
    `skip` are passed over, their values never decoded. `rows(end)` gives the kept rows
    below `end` (0-based within the group) as (row numbers, list lengths or -1 for a null
    list, values, element is null)."""

    def __init__(self, f: BinaryIO, chunk: Any, physical: str, max_rep: int, max_def: int,
                 empty_def: int, skip: set[int]) -> None:
        import numpy as np

        if max_rep != 1 or physical not in ("INT32", "INT64"):
            raise Unsupported(f"a {physical} column {max_rep} lists deep")
        self.dtype = np.dtype("<i4" if physical == "INT32" else "<i8")
        self.max_rep, self.max_def, self.empty_def = max_rep, max_def, empty_def
        self.skip = skip
        self.pages = pages(f, chunk)
        self.dictionary: Any = None
        self.row = -1
        self.buffer: list[tuple[Any, Any, Any]] = []  # (row, def, value) per kept level
        self.page: Any = None

    def _open_page(self) -> bool:
        import numpy as np

        for page in self.pages:
            if page.kind == _DICTIONARY:
                if page.encoding not in (_PLAIN, _PLAIN_DICTIONARY):
                    raise Unsupported("a dictionary not PLAIN")
                self.dictionary = np.frombuffer(page.body, self.dtype, page.num_values)
                continue
            rep, dfn, at = _levels(page, self.max_rep, self.max_def)
            if page.encoding == _PLAIN:
                values: Any = _Plain(page.body, at, self.dtype)
            elif page.encoding in (_PLAIN_DICTIONARY, _RLE_DICTIONARY) and self.dictionary is not None:
                values = _Indexed(page.body, at, self.dictionary)
            else:
                raise Unsupported(f"value encoding {page.encoding}")
            self.page = [rep, dfn, values, page.num_values]
            return True
        return False

    def _window(self) -> bool:
        """Decode the next window of levels into the buffer; False at the end."""
        import numpy as np

        while self.page is None or not self.page[3]:
            if not self._open_page():
                return False
        rep, dfn, values, left = self.page
        k = min(left, WINDOW)
        self.page[3] = left - k
        reps, defs = rep.take(k), dfn.take(k)
        rows = self.row + np.cumsum(reps == 0)
        if len(rows):
            self.row = int(rows[-1])
        has_value = defs == self.max_def
        keep = ~np.isin(rows, list(self.skip)) if self.skip else np.ones(k, bool)
        kept_values = keep[has_value]
        out = np.zeros(int(keep.sum()), self.dtype)
        got = []
        # values in runs of kept / skipped positions: a skipped row is passed over whole
        if len(kept_values):
            cuts = np.flatnonzero(np.diff(kept_values.astype(np.int8))) + 1
            for a, b in zip(np.concatenate(([0], cuts)), np.concatenate((cuts, [len(kept_values)]))):
                if kept_values[a]:
                    got.append(values.take(int(b - a)))
                else:
                    values.skip(int(b - a))
        taken = np.concatenate(got) if got else np.zeros(0, self.dtype)
        out[has_value[keep]] = taken
        self.buffer.append((rows[keep], defs[keep], out))
        return True

    def rows(self, end: int) -> tuple[Any, Any, Any, Any]:
        """The kept rows below `end`: row numbers, lengths (-1: null), values, value nulls."""
        import numpy as np

        while self.row < end and self._window():
            pass
        rows = np.concatenate([b[0] for b in self.buffer]) if self.buffer else np.zeros(0, np.int64)
        defs = np.concatenate([b[1] for b in self.buffer]) if self.buffer else np.zeros(0, np.int64)
        vals = np.concatenate([b[2] for b in self.buffer]) if self.buffer else np.zeros(0, self.dtype)
        now = rows < end
        self.buffer = [(rows[~now], defs[~now], vals[~now])] if not now.all() else []
        rows, defs, vals = rows[now], defs[now], vals[now]
        numbers, first = np.unique(rows, return_index=True)
        elements = defs > self.empty_def  # a level below or at empty_def: an empty or null list
        lengths = np.add.reduceat(elements.astype(np.int64), first) if len(rows) else np.zeros(0, np.int64)
        null_list = defs[first] < self.empty_def
        lengths[null_list] = -1
        return numbers, lengths, vals[elements], defs[elements] < self.max_def


class _Plain:
    def __init__(self, body: bytes, at: int, dtype: Any) -> None:
        self.body, self.at, self.dtype = body, at, dtype

    def take(self, n: int) -> Any:
        import numpy as np

        out = np.frombuffer(self.body, self.dtype, n, self.at)
        self.at += n * self.dtype.itemsize
        return out

    def skip(self, n: int) -> None:
        self.at += n * self.dtype.itemsize


class _Indexed:
    def __init__(self, body: bytes, at: int, dictionary: Any) -> None:
        self.dictionary = dictionary
        self.indices = Hybrid(body, at + 1, len(body), body[at]) if at < len(body) else None

    def take(self, n: int) -> Any:
        if self.indices is None:
            raise Unsupported("dictionary indices end early")
        return self.dictionary[self.indices.take(n)]

    def skip(self, n: int) -> None:
        if self.indices is not None:
            self.indices.skip(n)
