"""Record ids across a run: where each id was seen, which ids repeat, which a manifest expects.

The index keeps about 16 bytes per distinct id (20 for ids that have to be hashed), in
sorted arrays rather than a set, so that 100M ids fit in about 2 GB.

Keys. Every id becomes one float64 key (floats, because CPython sorts them several times
faster than 64-bit ints), in one of three disjoint ranges:

- an int in [0, 2**53): the int itself, exactly;
- a string that is a prefix and a decimal number, like "sample-000123": an exact code of
  (prefix, number of digits, number) in the floats from 2**53 up, ordered like the numbers
  within one prefix. Prefixes are numbered as they are first seen, up to MAX_PREFIXES;
- anything else (other strings, negative or huge ints): a 60-bit hash of the value under a
  tag for its type, as a negative float, with an independent 32-bit check (CRC-32) kept
  beside it.

Exact keys cannot collide and give the value back for the report. Hashed keys are compared
as (key, check), 92 bits, and values decide before anything is reported: the index keeps
the value of every repeat, and writes each summary's hashed ids to a temporary file (not
memory), from which the first place's value is read back for the few ids that repeat.

Ids are folded summary by summary, in chunks of CHUNK ids: a chunk's keys are sorted (cheap
when they arrive in order, as counters do), repeats within it are found next to each other,
and the sorted run is merged into partitions of the index, which reports each key it already
held as a repeat. Chunks bound what the fold builds per id (~200 bytes for a string) to one
chunk's worth, so the peak is what the index keeps plus a few MB. Ids out of order
(shuffled, uuids) go in as one sorted run instead: every merge of such a run touches every
partition, so one per summary.
"""

from __future__ import annotations

import heapq
import io
import json
import sys
import tempfile
import zlib
from array import array
from bisect import bisect_left, bisect_right
from itertools import compress, islice, repeat
from operator import and_, eq, is_not, itemgetter, lt, methodcaller, sub
from pathlib import Path
from typing import Any, Callable, Iterable, cast

import orjson

from ..base.fields import MISSING, get_path
from ..base.formats import location
from .report import is_packed, unpacked_chunks
from .summary import IDS

EXACT_INTS = 1 << 53  # ints in [0, EXACT_INTS) are their own key


MAX_PREFIXES = (1 << 12) - 1  # string prefixes given an exact code; later ones are hashed


PART = 1 << 14  # entries per partition of the index (a partition splits at twice this)


CHUNK = 1 << 16  # ids of a summary folded at a time (bounds the fold's own memory)


_DIGITS = "0123456789"


_CODE_BASE = 0x4340000000000000  # the bit pattern of the float 2**53


_NUM_BITS, _WIDTH_BITS = 44, 5  # an exact string code: prefix << 49 | width << 44 | number


_LOW60 = (1 << 60) - 1


_ALL64 = (1 << 64) - 1


# Hashed keys: sign and top exponent bit set (so never zero, NaN or infinite), then a tag.
_TAG_STR, _TAG_INT, _TAG_OTHER = 0xC000000000000000, 0xD000000000000000, 0xE000000000000000


_ORDER = sys.byteorder


_utf8 = methodcaller("encode", "utf-8", "surrogatepass")


def _take(seq: Any, order: list[int]) -> Any:
    """seq[i] for i in order, at C speed."""
    if len(order) > 1:
        return itemgetter(*order)(seq)
    return [seq[i] for i in order]


def _lanes(values: array, mask: int = _ALL64, bits: int = 0, plus: int = 0,
           typecode: str = "d") -> array:
    """Each 64-bit item's ((item & mask) | bits) + plus, one big-int operation for them all.

    `plus` must not carry out of an item. The result's bytes read as `typecode`: "d" turns
    bit patterns into float keys.
    """
    n = len(values)
    x = int.from_bytes(values.tobytes(), _ORDER)
    if mask != _ALL64:
        x &= int.from_bytes(mask.to_bytes(8, _ORDER) * n, _ORDER)
    if bits:
        x |= int.from_bytes(bits.to_bytes(8, _ORDER) * n, _ORDER)
    if plus:
        x += int.from_bytes(plus.to_bytes(8, _ORDER) * n, _ORDER)
    return array(typecode, x.to_bytes(8 * n, _ORDER))


_LO, _HI = (0, 1) if _ORDER == "little" else (1, 0)  # the halves of a 64-bit item


def _pair(low: array, high: array | int) -> array:
    """64-bit items high << 32 | low, from two arrays of 32-bit items (or a constant high)."""
    out = array("I", bytes(8 * len(low)))
    out[_LO::2] = low
    out[_HI::2] = high if isinstance(high, array) else array("I", [high]) * len(low)
    return array("Q", out.tobytes())


def _unpair(items: array) -> tuple[array, array]:
    """The low and high 32 bits of 64-bit items."""
    halves = array("I", items.tobytes())
    return halves[_LO::2], halves[_HI::2]


class _Values:
    """The id at a place of one summary, found by its line (lines are distinct in a file)."""

    def __init__(self, source: tuple[list[Any], list[int]] | None) -> None:
        self.source = source
        self.at: dict[int, int] | None = None

    def __call__(self, place: int) -> Any:
        if self.source is None:
            return None
        ids, lines = self.source
        if self.at is None:
            self.at = {line: i for i, line in enumerate(lines)}
        return ids[self.at[place & 0xFFFFFFFF]]


def _as_float(pattern: int) -> float:
    return array("d", array("Q", [pattern]).tobytes())[0]


def _as_pattern(key: float) -> int:
    return array("Q", array("d", [key]).tobytes())[0]


def _text(value: Any) -> str:
    """A hashed id as text: strings as they are, anything else as JSON."""
    if type(value) is str:
        return value
    if type(value) is int:
        return str(value)
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def _tag(value: Any) -> int:
    return _TAG_STR if type(value) is str else _TAG_INT if type(value) is int else _TAG_OTHER


def _check(text: str) -> int:
    return zlib.crc32(_utf8(text))


class _Spill:
    """Each source's hashed ids, in a temporary file: line -> (tag, text), read back on demand.

    A section per chunk folded; memory is four ints per section. A section is read only when
    one of its ids needs its value confirmed (a repeat whose first place came in an earlier
    chunk or summary, a manifest lookup).
    """

    def __init__(self) -> None:
        self.file: Any = None
        self.at: dict[int, list[tuple[int, int, int, int]]] = {}  # source -> [(offset, size, min line, max line)]
        self._cache: tuple[int, int, dict[int, tuple[int, str]]] | None = None

    def write(self, source: int, lines: array, values: list[Any], all_str: bool) -> None:
        texts = values if all_str else list(map(_text, values))
        tags = None if all_str else list(map(_tag, values))
        try:
            blob = orjson.dumps([lines.tolist(), tags, texts])
        except orjson.JSONEncodeError:  # lone surrogates from the stdlib reader's fallback
            blob = json.dumps([lines.tolist(), tags, texts]).encode()
        if self.file is None:
            self.file = tempfile.TemporaryFile(prefix="tokaudit-ids-")
        self.file.seek(0, 2)
        self.at.setdefault(source, []).append((self.file.tell(), len(blob), min(lines), max(lines)))
        self.file.write(blob)

    def get(self, source: int, line: int) -> tuple[int, str]:
        """(tag, text) of the hashed id at `line` of `source`."""
        for k, (offset, size, lo, hi) in enumerate(self.at[source]):
            if lo <= line <= hi:
                found = self._section(source, k, offset, size).get(line)
                if found is not None:
                    return found
        raise KeyError((source, line))

    def _section(self, source: int, k: int, offset: int, size: int) -> dict[int, tuple[int, str]]:
        if self._cache is not None and self._cache[:2] == (source, k):
            return self._cache[2]
        self.file.seek(offset)
        blob = self.file.read(size)
        try:
            lines, tags, texts = orjson.loads(blob)
        except orjson.JSONDecodeError:
            lines, tags, texts = json.loads(blob)
        section = dict(zip(lines, zip(tags or repeat(_TAG_STR), texts)))
        self._cache = (source, k, section)
        return section


def _ident(value: Any) -> tuple[int, str]:
    """What tells distinct ids apart: their type's tag and their text."""
    return _tag(value), _text(value)


def _value(ident: tuple[int, str]) -> Any:
    tag, text = ident
    if tag == _TAG_STR:
        return text
    if tag == _TAG_INT:
        return int(text)
    return orjson.loads(text)


class Table:
    """Distinct keys, sorted, in partitions, each with the place it was first seen at.

    Partition p holds the keys in [lows[p], lows[p+1]). `checks` (hashed keys only) tells
    apart distinct ids whose keys collide: those sit next to each other, in any order.
    """

    def __init__(self, checked: bool) -> None:
        self.lows: list[float] = [float("-inf")]
        self.keys = [array("d")]
        self.places = [array("Q")]
        self.checks: list[array] | None = [array("I")] if checked else None
        self.size = 0

    def find(self, key: float, check: int) -> int | None:
        """The place of (key, check), or None."""
        p = bisect_right(self.lows, key) - 1
        keys = self.keys[p]
        j = bisect_left(keys, key)
        while j < len(keys) and keys[j] == key:
            if self.checks is None or self.checks[p][j] == check:
                return self.places[p][j]
            j += 1
        return None

    def held(self, key: float, check: int) -> int:
        """The place of (key, check), which the table holds (the first place of a repeat)."""
        place = self.find(key, check)
        if place is None:
            raise KeyError((key, check))
        return place

    def merge(self, ks: array, cs: array | None, ps: array) -> list[int]:
        """Fold in a sorted run of keys distinct among themselves; the indices already held."""
        hits: list[int] = []
        lows, m, a, touched = self.lows, len(ks), 0, []
        while a < m:
            p = bisect_right(lows, ks[a]) - 1
            b = bisect_left(ks, lows[p + 1], a) if p + 1 < len(lows) else m
            self._merge_part(p, ks[a:b], cs[a:b] if cs is not None else None, ps[a:b], a, hits)
            touched.append(p)
            a = b
        for p in reversed(touched):
            self._split(p)
        return hits

    def _merge_part(self, p: int, sk: array, sc: array | None, sp: array, base: int,
                    hits: list[int]) -> None:
        K, P = self.keys[p], self.places[p]
        checks = self.checks  # None for the exact table, which is given no checks (sc) either
        s, n = len(sk), len(K)
        if not n or sk[0] > K[-1]:  # past the end: the common case for ids that count up
            K.extend(sk)
            P.extend(sp)
            if checks is not None and sc is not None:
                checks[p].extend(sc)
        elif sk[-1] < K[0]:
            self.keys[p], self.places[p] = sk + K, sp + P
            if checks is not None and sc is not None:
                checks[p] = sc + checks[p]
        elif s * 2 >= n:  # measured: below this, finding each key is cheaper
            self._sort_merge(p, sk, sc, sp, base, hits)
            return
        else:
            self._insert(p, sk, sc, sp, base, hits)
            return
        self.size += s

    def _sort_merge(self, p: int, sk: array, sc: array | None, sp: array, base: int,
                    hits: list[int]) -> None:
        """Many new keys for the partition: one stable sort of old + new (two sorted runs)."""
        K, n = self.keys[p], len(self.keys[p])
        allk = K + sk
        allp = self.places[p] + sp
        checks = self.checks  # None for the exact table, which is given no checks (sc) either
        allc = checks[p] + sc if checks is not None and sc is not None else None
        order = sorted(range(len(allk)), key=allk.__getitem__)  # stable: old keys first
        mk = array("d", _take(allk, order))
        same = list(compress(range(1, len(mk)), map(eq, islice(mk, 1, None), mk)))
        if same:
            drop = set()
            for start, end in _runs(same):
                seen: set[int] = set()
                for q in range(start, end + 1):
                    c = allc[order[q]] if allc is not None else 0
                    if c in seen:  # only a new key can repeat: old and new are distinct
                        hits.append(base + order[q] - n)
                        drop.add(q)
                    else:
                        seen.add(c)
            keep = [q not in drop for q in range(len(order))]
            order = list(compress(order, keep))
            mk = array("d", compress(mk, keep))
        self.keys[p] = mk
        self.places[p] = array("Q", _take(allp, order))
        if checks is not None and allc is not None:
            checks[p] = array("I", _take(allc, order))
        self.size += len(mk) - n

    def _insert(self, p: int, sk: array, sc: array | None, sp: array, base: int,
                hits: list[int]) -> None:
        """Few new keys for a big partition: find each, then copy the partition once."""
        K, P = self.keys[p], self.places[p]
        checks = self.checks  # None for the exact table, which is given no checks (sc) either
        C = checks[p] if checks is not None else array("I")
        nk, np_, nc = array("d"), array("Q"), array("I")
        prev, n = 0, len(K)
        for i, (x, j) in enumerate(zip(sk, map(bisect_left, repeat(K), sk))):
            q, held = j, False
            while q < n and K[q] == x:
                if sc is None or C[q] == sc[i]:
                    held = True
                    break
                q += 1
            if held:
                hits.append(base + i)
                continue
            nk += K[prev:j]
            nk.append(x)
            np_ += P[prev:j]
            np_.append(sp[i])
            if sc is not None:
                nc += C[prev:j]
                nc.append(sc[i])
            prev = j
        nk += K[prev:]
        np_ += P[prev:]
        self.size += len(nk) - len(K)
        self.keys[p], self.places[p] = nk, np_
        if checks is not None:
            nc += C[prev:]
            checks[p] = nc

    def _split(self, p: int) -> None:
        K = self.keys[p]
        if len(K) <= 2 * PART:
            return
        cuts: list[int] = []
        for cut in range(PART, len(K) - PART // 2, PART):
            while cut < len(K) and K[cut] == K[cut - 1]:  # keep equal keys together
                cut += 1
            if cut < len(K) and (not cuts or cut > cuts[-1]):
                cuts.append(cut)
        bounds = [0, *cuts, len(K)]
        pieces = list(zip(bounds, bounds[1:]))
        for name in ("keys", "places", "checks"):
            parts = getattr(self, name)
            if parts is not None:
                whole = parts[p]
                parts[p:p + 1] = [whole[a:b] for a, b in pieces]
        self.lows[p + 1:p + 1] = [K[c] for c in cuts]


def _runs(positions: list[int]) -> Iterable[tuple[int, int]]:
    """Positions q where item q equals item q-1 -> (first, last) of each run of equal items."""
    start = prev = positions[0]
    for q in positions[1:]:
        if q != prev + 1:
            yield start - 1, prev
            start = q
        prev = q
    yield start - 1, prev


class IdIndex:
    """Where each record id was seen; which ids have more than one record.

    add(summary) folds in a summary's record ids (its IDS channel); `offsets` (set by the
    caller once every shard has reported) turns shard lines into file lines. Then
    duplicates(), duplicate_count(), extra_records(), `value in index` and len(index).

    `hash_str` and `check_str` hash the text of ids that have no exact key; tests pass tiny
    ones to force collisions.
    """

    def __init__(self, hash_str: Callable[[str], int] = hash,
                 check_str: Callable[[str], int] = _check) -> None:
        self.sources: list[tuple[str, int | None]] = []  # (path, shard); a place's high bits
        self.offsets: dict[tuple[str, int | None], int] = {}
        self._hash, self._check = hash_str, check_str
        self._exact = Table(checked=False)
        self._hashed = Table(checked=True)
        self._prefixes: dict[str, int] = {}
        self._prefix_names: list[str] = [""]  # code -> prefix; code 0 is never given
        # The places of each repeat (every place of an id after the one the table holds).
        self._dup_exact = (array("d"), array("Q"))
        self._dup_hashed = (array("d"), array("I"), array("Q"))
        self._dup_values: list[Any] = []  # the value of each hashed repeat
        # The value at the first place of a hashed id whose repeat came in the same summary;
        # the others are read back from the spill.
        self._first_value: dict[int, Any] = {}
        self._spill = _Spill()
        self._groups: list[tuple[Any, list[int]]] | None = None
        self._told_apart = 0  # distinct ids that shared a (key, check) with another
        self.overflow: str | None = None  # why the ids could not all be kept (memory)

    # -- keys ----------------------------------------------------------------------------
    def key(self, value: Any) -> tuple[bool, float, int]:
        """(exact, key, check) of one id, as add() made it (add gives new prefixes codes)."""
        if type(value) is int and 0 <= value < EXACT_INTS:
            return True, float(value), 0
        if type(value) is str:
            code = self._code(value)
            if code is not None:
                return True, _as_float(_CODE_BASE + code), 0
        text = _text(value)
        pattern = (self._hash(text) & _LOW60) | _tag(value)
        return False, _as_float(pattern), self._check(text)

    def _code(self, value: str) -> int | None:
        prefix = value.rstrip(_DIGITS)
        digits = value[len(prefix):]
        code = self._prefixes.get(prefix)
        if code is None or not 0 < len(digits) < 1 << _WIDTH_BITS:
            return None
        number = int(digits)
        if number >> _NUM_BITS:
            return None
        return (code << _WIDTH_BITS | len(digits)) << _NUM_BITS | number

    def _name(self, key: float) -> Any:
        """The id an exact key stands for."""
        if key < EXACT_INTS:
            return int(key)
        code = _as_pattern(key) - _CODE_BASE
        number = code & ((1 << _NUM_BITS) - 1)
        width = (code >> _NUM_BITS) & ((1 << _WIDTH_BITS) - 1)
        return self._prefix_names[code >> (_NUM_BITS + _WIDTH_BITS)] + str(number).zfill(width)

    def _keys(self, ids: list[Any]) -> tuple[tuple[array, list[int] | None],
                                             tuple[array, array, list[int] | None]]:
        """((exact keys, their positions), (hashed keys, checks, positions)) of `ids`.

        A position list of None means all of `ids`, in order. The same keys as key(v),
        once add() has given new prefixes their codes.
        """
        types = set(map(type, ids))
        if types == {int} and min(ids) >= 0 and max(ids) < EXACT_INTS:
            return (array("d", ids), None), (array("d"), array("I"), [])
        if types == {str}:
            exact_at, exact_keys, hashed_at = self._codes(ids)
        else:  # mixed types: rare
            at = [i for i, v in enumerate(ids) if type(v) is str]
            coded, _, rest = self._codes([ids[i] for i in at]) if at else ([], None, [])
            exact_at = [at[i] for i in coded]
            hashed_at = [at[i] for i in rest]
            for i, v in enumerate(ids):
                if type(v) is not str:
                    (exact_at if type(v) is int and 0 <= v < EXACT_INTS else hashed_at).append(i)
            exact_at.sort()
            hashed_at.sort()
            exact_keys = array("d", [self.key(ids[i])[1] for i in exact_at])
        exact = (exact_keys, None if len(exact_at) == len(ids) else exact_at)
        if not hashed_at:
            return exact, (array("d"), array("I"), [])
        values = ids if len(hashed_at) == len(ids) else [ids[i] for i in hashed_at]
        texts = values if types == {str} else list(map(_text, values))
        hashes = array("q", map(self._hash, texts))
        if types == {str}:
            keys = _lanes(hashes, _LOW60, _TAG_STR)
        else:
            keys = array("d", array("Q", [(h & _LOW60) | _tag(v)
                                          for h, v in zip(hashes, values)]).tobytes())
        if self._check is _check:  # the default, without a Python call per id
            checks = array("I", map(zlib.crc32, map(_utf8, texts)))
        else:
            checks = array("I", map(self._check, texts))
        return exact, (keys, checks, None if len(hashed_at) == len(ids) else hashed_at)

    def _codes(self, strs: list[str]) -> tuple[list[int], array, list[int]]:
        """(positions of the strings with an exact code, their keys, the other positions).

        A prefix gets its code when first seen with digits after it, while codes last; a
        value keeps its key for the whole run, as its prefix had a code or never will.
        """
        n = len(strs)
        prefixes = list(map(str.rstrip, strs, repeat(_DIGITS)))
        widths = list(map(sub, map(len, strs), map(len, prefixes)))
        fits = min(widths) > 0 and max(widths) < 1 << _WIDTH_BITS
        fit = None if fits else list(map(and_, map(lt, repeat(0), widths),
                                         map(lt, widths, repeat(1 << _WIDTH_BITS))))
        table, names = self._prefixes, self._prefix_names
        if len(names) <= MAX_PREFIXES:
            for prefix in dict.fromkeys(prefixes if fit is None else compress(prefixes, fit)):
                if prefix not in table and len(names) <= MAX_PREFIXES:
                    table[prefix] = len(names)
                    names.append(prefix)
        codes = list(map(table.get, prefixes))
        if fits and None not in codes:
            at = list(range(n))
        else:
            known = map(is_not, codes, repeat(None))
            at = list(compress(range(n), map(and_, known, fit) if fit else known))
        if not at:
            return [], array("d"), list(range(n))
        if len(at) < n:
            strs, prefixes, widths, codes = (_take(x, at) for x in (strs, prefixes, widths, codes))
        numbers = list(map(int, map(str.removeprefix, strs, prefixes)))
        if max(numbers) >> _NUM_BITS:  # too long for a code: hashed
            keep = list(map(lt, numbers, repeat(1 << _NUM_BITS)))
            at, widths, codes, numbers = (list(compress(x, keep))
                                          for x in (at, widths, codes, numbers))
            if not at:
                return [], array("d"), list(range(n))
        x = int.from_bytes(array("Q", numbers).tobytes(), _ORDER)
        x |= int.from_bytes(array("Q", widths).tobytes(), _ORDER) << _NUM_BITS
        code_ints = cast("list[int]", codes)  # no None left: the positions in `at` have one
        x |= int.from_bytes(array("Q", code_ints).tobytes(), _ORDER) << (_NUM_BITS + _WIDTH_BITS)
        keys = _lanes(array("Q", x.to_bytes(8 * len(at), _ORDER)), plus=_CODE_BASE)
        if len(at) == n:
            return at, keys, []
        coded = set(at)
        return at, keys, [i for i in range(n) if i not in coded]

    # -- folding -------------------------------------------------------------------------
    def add(self, summary: Any) -> None:
        """Fold in the ids of a summary's IDS channel: entries [shard, ids, lines]."""
        if self.overflow:
            return
        try:
            for shard, ids, lines in summary.channels.get(IDS, ()):
                if is_packed(ids) or is_packed(lines):  # a report's runs: a chunk at a time
                    for some, at in unpacked_chunks(ids, lines, CHUNK << 4):
                        self.add_ids(summary.path, shard, some, at)
                else:
                    self.add_ids(summary.path, shard, ids, lines)
        except MemoryError:
            # Where the allocator says no (ulimit -v, a 32-bit process), the checks fail
            # naming it rather than the run crashing; under the kernel's OOM killer (Linux
            # overcommit, a cgroup limit) the process is killed before Python hears of it.
            kept = self._exact.size + self._hashed.size
            self._exact, self._hashed = Table(checked=False), Table(checked=True)
            self._dup_exact = (array("d"), array("Q"))
            self._dup_hashed = (array("d"), array("I"), array("Q"))
            self._dup_values, self._first_value, self._groups = [], {}, None
            self.overflow = (f"out of memory folding the record ids of {summary.path} "
                             f"({kept:,} distinct ids were kept)")

    def add_ids(self, path: str, shard: int | None, ids: list[Any], lines: list[int]) -> None:
        """Fold in `ids`, seen at `lines` of (`path`, `shard`)."""
        if len(ids) != len(lines):
            raise ValueError(f"{path}: {len(ids)} ids but {len(lines)} id lines")
        fi = len(self.sources)
        if fi >> 32:
            raise ValueError("more than 2**32 sources")
        self.sources.append((path, shard))
        if not ids:
            return
        self._groups = None
        # A chunk at a time: what folding builds per id (keys, prefixes, numbers: ~200 bytes
        # for a string id) then lives for one chunk, not for the whole summary, so the peak
        # stays near what the index keeps. A repeat across chunks is found by the table, as
        # one across summaries is. But each merge of ids out of order (shuffled, uuids)
        # touches every partition of the table: those go in as one sorted run, one pass, as
        # soon as a chunk shows them (the first is looked at before anything is folded).
        a, n = 0, len(ids)
        if n > CHUNK and self._in_order(ids[:CHUNK]):
            while a < n and self._add_chunk(path, fi, ids[a:a + CHUNK], lines[a:a + CHUNK]):
                a += CHUNK
            a += CHUNK  # past the end, or past a chunk out of order: the rest in one run
        if a < n:
            self._add_chunk(path, fi, ids[a:], lines[a:])

    def _in_order(self, ids: list[Any]) -> bool:
        """Whether the keys of `ids` are strictly increasing (in each table)."""
        (ek, _), (hk, _, _) = self._keys(ids)
        return all(map(lt, ek, islice(ek, 1, None))) and all(map(lt, hk, islice(hk, 1, None)))

    def _add_chunk(self, path: str, fi: int, ids: list[Any], lines: list[int]) -> bool:
        """Fold in one chunk; whether its keys came in order (no sort was needed)."""
        try:
            line_at = array("I", lines)
        except OverflowError:
            raise ValueError(f"{path}: a line number out of range") from None
        (ek, e_at), (hk, hc, h_at) = self._keys(ids)
        in_order = True
        if len(ek):
            ls = line_at if e_at is None else array("I", _take(line_at, e_at))
            in_order = self._fold(self._exact, ek, None, ls, fi, None)
        if len(hk):
            ls = line_at if h_at is None else array("I", _take(line_at, h_at))
            values = ids if h_at is None else list(_take(ids, h_at))
            self._spill.write(fi, ls, values, all(map(str.__instancecheck__, values)))
            in_order = self._fold(self._hashed, hk, hc, ls, fi, (ids, lines)) and in_order
        return in_order

    def _fold(self, table: Table, ks: array, cs: array | None, ls: array, fi: int,
              source: tuple[list[Any], list[int]] | None) -> bool:
        """Fold keys into `table`; `ls` their lines; `source` for the values. Whether the
        keys came in order."""
        in_order = all(map(lt, ks, islice(ks, 1, None)))
        if not in_order:  # not strictly increasing: sort
            order = sorted(range(len(ks)), key=ks.__getitem__)
            ks = array("d", _take(ks, order))
            if cs is None:
                ls = array("I", _take(ls, order))
            else:  # line and check travel as one 64-bit item: one permutation, not two
                ls, cs = _unpair(array("Q", _take(_pair(ls, cs), order)))
            ps = _pair(ls, fi)
            same = list(compress(range(1, len(ks)), map(eq, islice(ks, 1, None), ks)))
            if same:
                ks, cs, ps = self._repeats(table, ks, cs, ps, source, same)
        else:
            ps = _pair(ls, fi)
        value = _Values(source)
        for i in table.merge(ks, cs, ps):
            self._repeat(table, ks[i], cs[i] if cs is not None else 0, ps[i], value(ps[i]))
        return in_order

    def _repeats(self, table: Table, ks: array, cs: array | None, ps: array,
                 source: tuple[list[Any], list[int]] | None, same: list[int]) -> tuple:
        """Repeats within one sorted run: keep each id's first, record the others."""
        value = _Values(source)
        drop = set()
        for start, end in _runs(same):
            firsts: dict[int, int] = {}  # check -> where the first with it is
            for q in range(start, end + 1):  # in line order within equal keys (stable sort)
                c = cs[q] if cs is not None else 0
                first = firsts.setdefault(c, q)
                if first == q:
                    continue
                if source is not None:
                    self._first_value.setdefault(ps[first], value(ps[first]))
                drop.add(q)
                self._repeat(table, ks[q], c, ps[q], value(ps[q]))
        keep = [q not in drop for q in range(len(ks))]
        return (array("d", compress(ks, keep)),
                array("I", compress(cs, keep)) if cs is not None else None,
                array("Q", compress(ps, keep)))

    def _repeat(self, table: Table, key: float, check: int, place: int, value: Any) -> None:
        if table is self._exact:
            keys, places = self._dup_exact
            keys.append(key)
            places.append(place)
            return
        keys, checks, places = self._dup_hashed
        keys.append(key)
        checks.append(check)
        places.append(place)
        self._dup_values.append(value)

    # -- questions -----------------------------------------------------------------------
    def __len__(self) -> int:
        """Distinct ids."""
        self._all_groups()
        return self._exact.size + self._hashed.size + self._told_apart

    def __contains__(self, value: Any) -> bool:
        return not self.missing([value])

    def missing(self, values: Iterable[Any]) -> list[Any]:
        """The values that no record has as its id, in the order given."""
        out: list[tuple[int, Any]] = []
        confirm: dict[int, list[tuple[int, Any, int]]] = {}  # source -> (n, value, line)
        repeats: dict[tuple[float, int], set[tuple[int, str]]] | None = None
        for n, value in enumerate(values):
            exact, key, check = self.key(value)
            if exact:
                if self._exact.find(key, 0) is None:
                    out.append((n, value))
                continue
            place = self._hashed.find(key, check)
            if place is None:
                out.append((n, value))
                continue
            if repeats is None:
                repeats = {}
                for pair in zip(*self._dup_hashed[:2], map(_ident, self._dup_values)):
                    repeats.setdefault(pair[:2], set()).add(pair[2])
            if _ident(value) in repeats.get((key, check), ()):
                continue
            if place in self._first_value:
                if _ident(self._first_value[place]) != _ident(value):
                    out.append((n, value))
                continue
            confirm.setdefault(place >> 32, []).append((n, value, place & 0xFFFFFFFF))
        for source in sorted(confirm):
            out += [(n, v) for n, v, line in sorted(confirm[source], key=itemgetter(2))
                    if self._spill.get(source, line) != _ident(v)]
        return [value for _, value in sorted(out, key=itemgetter(0))]

    def where(self, place: int) -> str:
        """'path:LINE' of a place, LINE counted in the whole file."""
        source = self.sources[place >> 32]
        return location(source[0], (place & 0xFFFFFFFF) + self.offsets.get(source, 0))

    def _sort_key(self, place: int) -> tuple[str, int]:
        source = self.sources[place >> 32]
        return source[0], (place & 0xFFFFFFFF) + self.offsets.get(source, 0)

    def _all_groups(self) -> list[tuple[Any, list[int]]]:
        """(id, its places) for every id seen more than once; places in no set order."""
        if self._groups is not None:
            return self._groups
        groups: list[tuple[Any, list[int]]] = []
        by_key: dict[float, list[int]] = {}
        for key, place in zip(*self._dup_exact):
            by_key.setdefault(key, []).append(place)
        for key, extra in by_key.items():
            groups.append((self._name(key), [self._exact.held(key, 0), *extra]))
        by_pair: dict[tuple[float, int], list[tuple[int, Any]]] = {}
        keys, checks, places = self._dup_hashed
        for key, check, place, value in zip(keys, checks, places, self._dup_values):
            by_pair.setdefault((key, check), []).append((place, value))
        firsts = {pair: self._hashed.held(*pair) for pair in by_pair}
        unknown: dict[int, list[int]] = {}  # source -> first places whose value is on disk
        for first in firsts.values():
            if first not in self._first_value:
                unknown.setdefault(first >> 32, []).append(first)
        known = dict(self._first_value)
        for source in sorted(unknown):
            for first in sorted(unknown[source]):
                known[first] = _value(self._spill.get(source, first & 0xFFFFFFFF))
        told_apart = 0
        for pair, others in by_pair.items():  # values decide: equal keys and checks are not enough
            first = firsts[pair]
            split: dict[tuple[int, str], tuple[Any, list[int]]] = {}
            for place, value in ((first, known[first]), *others):
                split.setdefault(_ident(value), (value, []))[1].append(place)
            told_apart += len(split) - 1
            groups += [g for g in split.values() if len(g[1]) > 1]
        self._groups, self._told_apart = groups, told_apart
        return groups

    def duplicate_count(self) -> int:
        """Ids seen more than once."""
        return len(self._all_groups())

    def extra_records(self) -> int:
        """Records beyond the first of each id."""
        return sum(len(places) - 1 for _, places in self._all_groups())

    def _ordered(self, limit: int | None = None) -> list[tuple[Any, list[int]]]:
        """The groups in report order: places by (path, line), ids by their first place."""
        ordered = []
        for value, places in self._all_groups():
            places = sorted(places, key=self._sort_key)
            ordered.append((self._sort_key(places[0]), value, places))
        if limit is None:
            ordered.sort(key=itemgetter(0))
        else:
            ordered = heapq.nsmallest(limit, ordered, key=itemgetter(0))
        return [(value, places) for _, value, places in ordered]

    def duplicates(self, limit: int | None = None) -> list[tuple[Any, list[str]]]:
        """(id, ['path:LINE', ...]) for ids seen more than once, up to `limit` of them.

        A function of the data alone, whatever order the summaries came in: places in
        (path, line) order, ids in the order of their first place. Lines count from the
        start of the file (see `offsets`).
        """
        return [(value, [self.where(p) for p in places]) for value, places in self._ordered(limit)]

    def duplicate_paths(self, limit: int | None = None) -> list[list[str]]:
        """The file of each place of `duplicates(limit)`, in the same order (whose own id
        field names the id)."""
        return [[self.sources[p >> 32][0] for p in places] for _, places in self._ordered(limit)]



def read_manifest(path: Path | str, id_field: tuple[str, ...]) -> list[Any]:
    """The ids of a manifest: JSON objects with the id field, or one id per line.

    A line is JSON (an object, a string or an int), or else bare text taken as a string id.
    ValueError names the line of anything else: an object without the id field, an id that
    is neither a string nor an int, broken JSON; and a manifest without ids.
    """
    name = ".".join(id_field)
    out: list[Any] = []
    opener = getattr(path, "open_stream", None)  # a manifest at a URL (remote.ManifestUrl)
    with (io.BufferedReader(opener(), 1 << 20) if opener is not None else open(path, "rb")) as fh:
        for n, raw in enumerate(fh, 1):
            raw = raw.strip()
            if not raw:
                continue
            try:
                value = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                if raw[:1] in (b"{", b"[", b'"'):
                    raise ValueError(f"{path}:{n}: not valid JSON: {exc}") from None
                try:
                    out.append(raw.decode("utf-8"))
                except UnicodeDecodeError:
                    raise ValueError(f"{path}:{n}: not UTF-8") from None
                continue
            if type(value) is dict:
                if not id_field:
                    raise ValueError(f"{path}:{n}: an object, but no id field is configured")
                value = get_path(value, id_field)
                if value is MISSING:
                    raise ValueError(f"{path}:{n}: no field {name!r}")
            if type(value) not in (str, int):
                what = "null" if value is None else type(value).__name__
                raise ValueError(f"{path}:{n}: {name or 'an id'} must be a string or integer, "
                                 f"found {what}: {raw.decode('utf-8', 'replace')[:80]}")
            out.append(value)
    if not out:
        raise ValueError(f"{path}: no ids")
    return out


def ranges(values: list[Any], limit: int) -> list[str]:
    """'1000-1099', '2000', ... for ints; the values themselves otherwise."""
    ints = sorted(v for v in values if type(v) is int)
    out: list[str] = []
    i = 0
    while i < len(ints) and len(out) < limit:
        j = i
        while j + 1 < len(ints) and ints[j + 1] == ints[j] + 1:
            j += 1
        out.append(str(ints[i]) if i == j else f"{ints[i]}-{ints[j]}")
        i = j + 1
    others = [repr(v) for v in values if type(v) is not int]
    return out + others[: max(0, limit - len(out))]
