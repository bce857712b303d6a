"""The JSONL bytes fast path: a record's ids array kept as its JSON text.

Most of a record is its ids array, and building a Python int per id is most of the cost of
parsing it. `cut` takes the array out of the line as bytes, proves with a few bigint
operations that it is a plain list of non-negative JSON integers, and hands back the line
with a sentinel string in its place for orjson to parse. What the checks ask of the ids
(how many, the last one, how often a few tokens occur, the list itself) `IdsText` answers
from the bytes.

It must read the object exactly as orjson reads the whole line (a duplicate key: the last
one wins), so it is only taken where the cut-out array can only be the value of the one
top-level key: the key's bytes occur once in the line, and no \\u escape of a printable
ASCII character (the only way to spell the key differently) occurs anywhere; the array holds
only digits and commas, so both are looked for in the rest of the line only. Anything
unusual (spaces aside) returns None and the line takes the plain path (sources/parse.py), which
is the reference: both must give identical findings (tests/test_fastpath.py).
"""

from __future__ import annotations

import functools
import os
import re

import orjson

SENTINEL_JSON = b'"\\u0000tokaudit-ids"'


SENTINEL = "\x00tokaudit-ids"  # what orjson makes of SENTINEL_JSON


_WS = b" \t\r\n"


# The ids array is validated as one big integer, a byte per character (SWAR): a shift lines
# each character up with the one before it, so a pattern anywhere in the array costs a shift
# and an AND, run at memory speed by CPython's bigint code. The class bits are chosen so that
# `x & (x << 9)` (each character, and the one before it moved up a byte and a bit) sets
# bit 1 for ",,", bit 2 for ",0", bit 4 for "0" + digit, bits 5-7 for digit + digit; and so
# that a comma has 2 bits set and a digit 4, which turns the popcount into the comma count.
_COMMA, _ZERO, _NONZERO, _OTHER = 0x03, 0x3C, 0xF0, 0xFF


_CLASSES = bytes(
    _COMMA if c == 44 else _ZERO if c == 48 else _NONZERO if 49 <= c <= 57 else _OTHER
    for c in range(256)
)


_masks: dict[int, int] = {}


_MASK_CACHED = 1 << 20  # bytes; a longer array gets a mask of its own, not kept


_MAX_HITS = 16  # prefix hits before count_each switches to bytes.count


def _mask(byte: int, n: int) -> int:
    """`byte` repeated over at least n bytes (grown by doubling, so built a few times)."""
    mask = _masks.get(byte, 0)
    if mask.bit_length() < 8 * n:
        size = 1 << max(16, (n - 1).bit_length())
        mask = int.from_bytes(bytes([byte]) * size, "little")
        if size <= _MASK_CACHED:
            _masks[byte] = mask
    return mask


def count_valid(csv: bytes | bytearray) -> int | None:
    """Elements of ",1,2,3," if each is a JSON integer orjson reads as an int, else None.

    None for a character other than a digit or comma, an empty element, a leading zero, or
    a run of 20+ digits (orjson turns integers past 64 bits into floats; 19 digits always
    fit). Only None sends a line to the plain path, so a false alarm costs time, never
    exactness (ten zero ids in a row raise one).
    """
    classes = csv.translate(_CLASSES)
    if b"\xff" in classes:
        return None
    n = len(csv)
    x = int.from_bytes(classes, "little")  # character k -> bits 8k..8k+7
    pairs = x & (x << 9)  # byte k: characters k-1 and k
    if pairs & _mask(0x02, n):
        return None  # ",,": an empty element
    if pairs & (pairs << 10) & _mask(0x10, n):
        return None  # "," + "0" then "0" + digit: a leading zero
    runs = pairs & (pairs << 16)  # 4 digits in a row (or ",0,0")
    runs &= runs << 32  # 8: token ids rarely have so many, so this is mostly the last step
    if runs:
        runs &= runs << 64  # 16
        if runs & (runs << 32):  # 20
            return None
    commas = 2 * n - x.bit_count() // 2  # bits: 2 per comma + 4 per digit
    return commas - 1


@functools.lru_cache(maxsize=256)
def _scan_plan(tokens: tuple[int, ...]) -> tuple[bytes | None, tuple[bytes, ...]]:
    """(prefix all of ",token," share, those patterns); prefix None if it is too short
    to be rare in an array of ids (a comma and three digits)."""
    patterns = tuple(b",%d," % t for t in tokens)
    prefix = os.path.commonprefix(patterns) or b""  # "" (a str) for no tokens
    return (prefix if len(prefix) >= 4 or len(tokens) == 1 else None), patterns


class IdsText:
    """A validated ids array as its canonical text ",1,2,3," ("," when empty)."""

    __slots__ = ("text", "n")

    def __init__(self, text: bytes | bytearray, n: int):
        self.text = text
        self.n = n

    def __len__(self) -> int:
        return self.n

    def last(self) -> int | None:
        if not self.n:
            return None
        text = self.text
        return int(text[text.rfind(b",", 0, len(text) - 1) + 1 : -1])

    def to_list(self) -> list[int]:
        return orjson.loads(b"[" + self.text[1:-1] + b"]")

    def count_each(self, tokens: tuple[int, ...]) -> list[int]:
        """How often each token occurs: one scan of the array for tokens sharing a prefix
        (special tokens mostly have neighbouring ids, like 151667 and 151668)."""
        prefix, patterns = _scan_plan(tokens)
        if prefix is None:
            return [self.count_each((t,))[0] for t in tokens]
        text = self.text
        counts = [0] * len(tokens)
        at = text.find(prefix)
        hits = 0
        while at >= 0:
            hits += 1
            if hits > _MAX_HITS:  # a frequent prefix: count() is quicker than finding each
                if len(tokens) > 1:
                    return [self.count_each((t,))[0] for t in tokens]
                n = text.count(prefix)
                # count() does not overlap: ",7,7," holds two. Only then count the slow way.
                if b",%d%s" % (tokens[0], prefix) in text:
                    return [self.to_list().count(tokens[0])]
                return [n]
            for k, pattern in enumerate(patterns):
                if text.startswith(pattern, at):
                    counts[k] += 1
            at = text.find(prefix, at + 1)  # + 1, not + len: ",7,7," holds two
        return counts


def canonical(ids: list[int]) -> bytes:
    """The text IdsText holds for `ids`: ",1,2,3,"."""
    return b"," + ",".join(map(str, ids)).encode() + b"," if ids else b","


@functools.lru_cache(maxsize=None)
def key_for(ids_field: tuple[str, ...], *other_fields: tuple[str, ...]) -> bytes | None:
    """The quoted key `cut` searches for, or None where the fast path cannot be used: the ids
    are nested, named with characters JSON might escape, or share a top-level key with
    another field the contract reads."""
    if len(ids_field) != 1 or not re.fullmatch(r"[A-Za-z0-9_\-]+", ids_field[0]):
        return None
    if any(f and f[0] == ids_field[0] for f in other_fields):
        return None
    return b'"' + ids_field[0].encode() + b'"'


def _ascii_escape(raw: bytes, start: int, end: int) -> bool:
    """Whether raw[start:end] holds a \\u escape of a printable ASCII character (\\u0020 to
    \\u007f): a key spelled with one may be the ids key. A false alarm costs time only."""
    at = raw.find(b"\\u00", start, end)
    while at >= 0:
        if raw[at + 4 : at + 5] in (b"2", b"3", b"4", b"5", b"6", b"7"):
            return True
        at = raw.find(b"\\u00", at + 1, end)
    return False


def cut(raw: bytes, key: bytes) -> tuple[bytes, IdsText] | None:
    """(the line with the array replaced by SENTINEL_JSON, its ids) or None: plain path."""
    at = raw.find(key)
    if at < 0:
        return None
    i = at + len(key)
    n = len(raw)
    while i < n and raw[i] in _WS:
        i += 1
    if i >= n or raw[i] != 58:  # ':'
        return None
    i += 1
    while i < n and raw[i] in _WS:
        i += 1
    if i >= n or raw[i] != 91:  # '['
        return None
    end = raw.find(b"]", i)
    if end < 0:
        return None
    text = bytearray(memoryview(raw)[i : end + 1])  # one copy of "[1,2,3]"
    if b" " in text:
        text = text.replace(b", ", b",")  # json.dumps' default separator; other spacing:
        # plain path (deleting all white space would turn "1 2", invalid JSON, into 12)
    if len(text) > 2:
        text[0] = text[-1] = 44  # ",1,2,3,"
        count = count_valid(text)
        if count is None:
            return None  # invalid JSON, or not all ints to orjson: the plain path says which
    else:
        text, count = bytearray(b","), 0
    # Only digits, commas and spaces lie between i and end: the key, or an escape that
    # spells it, can only be before or after them.
    if raw.find(key, end + 1) >= 0 or _ascii_escape(raw, 0, at) or _ascii_escape(raw, end + 1, n):
        return None  # a second spelling of the key (a duplicate, a nested one): plain path
    return raw[:i] + SENTINEL_JSON + raw[end + 1 :], IdsText(text, count)
