"""The numbers behind the HTML report's plots, kept in each FileSummary.

Bounded whatever the file's size, and mergeable: histograms over fixed bins (their
counts add across shards, xdist workers, reports and `merge`), a sample for the scatter
(the SAMPLE records of least priority, a hash of billed and counted: the union of two samples'
least is the sample of the union, and the same data draws the same sample in any order) and the records of largest |billed - counted| (outliers, always kept).
"""

from __future__ import annotations

import bisect
import math
from typing import Any

SCHEME = 1  # the bins below; a report of another scheme is read without its figures

# |billed - counted|: each value below 16 its own bin, then two bins per octave. Signed histograms put
# -k in bin OFFSET - bin(k).
DIFF_EDGES = (*range(17), *(m << e for e in range(3, 63) for m in (3, 4)))
OFFSET = len(DIFF_EDGES) - 1
# counted tokens (response lengths): two bins per octave from 1 on.
LENGTH_EDGES = (0, 1, 2, 3, *(m << e for e in range(1, 63) for m in (2, 3)))
# round-trip change share: 0, then up to each edge (a share at an edge falls in its bin,
# as the check passes a share equal to tokaudit_roundtrip_rel).
RT_EDGES = (0.0, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)

SAMPLE = 64  # a file's sample for the scatter
GROUP_SAMPLE = 16  # each group's
TAIL = 16  # records of largest |diff| a file keeps (the scatter's outliers, the worst table)
MAX_GROUPS = 16  # groups with figures of their own per file; more go to OTHER
OTHER = ["(other groups)"]
MASK = 0xFFFFFFFF
_right = bisect.bisect_right


def diff_bin(d: int) -> int:
    """The signed histogram's bin of a signed difference (model.rules: billed - counted)."""
    if -16 < d < 16:  # most records: a bin of its own
        return OFFSET + d
    k = _right(DIFF_EDGES, d if d >= 0 else -d) - 1
    return OFFSET + k if d >= 0 else OFFSET - k


def diff_bins(np: Any, d: Any) -> Any:
    """diff_bin over an int64 array of signed differences (the columnar pass's twin)."""
    k = np.searchsorted(edges_array(np, DIFF_EDGES), np.abs(d), side="right") - 1
    return np.where(d >= 0, OFFSET + k, OFFSET - k)


def diff_range(i: int) -> tuple[int, int]:
    """The values [lo, hi] of a signed bin (hi == lo for an exact one)."""
    k = abs(i - OFFSET)
    lo = DIFF_EDGES[k]
    hi = DIFF_EDGES[k + 1] - 1 if k + 1 < len(DIFF_EDGES) else 2**64
    return (lo, hi) if i >= OFFSET else (-hi, -lo)


def length_bin(n: int) -> int:
    return _right(LENGTH_EDGES, n) - 1


def length_bins(np: Any, counted: Any) -> Any:
    """length_bin over an int64 array of counted tokens."""
    return np.searchsorted(edges_array(np, LENGTH_EDGES), counted, side="right") - 1


_EDGES: dict[int, Any] = {}


def edges_array(np: Any, edges: tuple[int, ...]) -> Any:
    """The bin edges an int64 can reach, as an array (made once)."""
    out = _EDGES.get(id(edges))
    if out is None:
        out = _EDGES[id(edges)] = np.array([e for e in edges if e < 2**63], dtype=np.int64)
    return out


def length_range(i: int) -> tuple[int, int]:
    hi = LENGTH_EDGES[i + 1] - 1 if i + 1 < len(LENGTH_EDGES) else 2**64
    return LENGTH_EDGES[i], hi


def rt_bin(ratio: float) -> int:
    return 0 if ratio <= 0 else bisect.bisect_left(RT_EDGES, ratio)


def priority(billed: int, counted: int) -> int:
    """A record's place in the sample: a multiplicative hash of its billed and counted
    tokens, not of its line, so a shard's sample and the whole file's agree (the least of
    the union of the shards' least is the file's least; ties go to the earlier line, an
    order shards keep). `priorities` is its numpy twin (tests/model/test_figures.py holds
    the two folds equal).
    Files share priorities: the page mixes in each file's path when it draws from many."""
    return (billed * 0x9E3779B1 + counted * 0x85EBCA77) & MASK


def priorities(np: Any, billed: Any, counted: Any) -> Any:
    """priority over int64 arrays (as uint64, wrapping as the mask does)."""
    u = np.uint64
    return (billed.astype(u) * u(0x9E3779B1) + counted.astype(u) * u(0x85EBCA77)) & u(MASK)


def _sparse(counts: list[int]) -> list[list[int]]:
    return [[i, n] for i, n in enumerate(counts) if n]


class Figures:
    """Histograms, a sample and the outliers of one file (or one group of one file)."""

    __slots__ = ("diff", "length", "rt", "finish", "sample", "tail", "size", "cut")

    def __init__(self, size: int = SAMPLE):
        self.diff = [0] * (2 * OFFSET + 1)  # billed - counted, signed
        self.length = [0] * len(LENGTH_EDGES)  # counted tokens
        self.rt = [0] * (len(RT_EDGES) + 1)  # round-trip change share
        self.finish: dict[str, int] = {}  # finish reason -> records
        # [priority, billed, counted, line, id], least priority first (then line)
        self.sample: list[list[Any]] = []
        # [|diff|, -line, id, billed, counted], least first, as FileSummary.worst
        self.tail: list[list[Any]] = []
        self.size = size
        self.cut = MASK + 1  # priorities below this enter the sample

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Figures) and self.to_json() == other.to_json()

    def __repr__(self) -> str:
        return f"Figures({sum(self.diff)} records)"

    @property
    def records(self) -> int:
        return sum(self.diff)

    # -- accumulation ------------------------------------------------------------------
    def add(self, line: int, record_id: Any, billed: int, counted: int) -> int:
        """One checked record (FileSummary.add_counts; columnar.py folds in bulk with the
        array twins of the same functions); its |billed - counted|, for the caller's sums."""
        d = billed - counted  # rules.signed_difference, written out: once per record
        self.diff[diff_bin(d)] += 1
        self.length[length_bin(counted)] += 1
        h = priority(billed, counted)
        if h < self.cut:
            self.offer([h, billed, counted, line, record_id])
        if not d:
            return 0
        a = d if d > 0 else -d
        tail = self.tail
        if len(tail) < TAIL or a > tail[0][0] or (a == tail[0][0] and -line > tail[0][1]):
            self.offer_tail([a, -line, record_id, billed, counted])
        return a

    def offer(self, entry: list[Any]) -> None:
        """A sample entry; kept if among the `size` least (priority, line)."""
        sample = self.sample
        bisect.insort(sample, entry, key=_priority_line)
        if len(sample) > self.size:
            sample.pop()
        if len(sample) == self.size:
            self.cut = sample[-1][0] + 1  # a tie on priority may still win on line

    def offer_tail(self, entry: list[Any]) -> None:
        tail = self.tail
        if len(tail) >= TAIL:
            if (entry[0], entry[1]) <= (tail[0][0], tail[0][1]):
                return
            del tail[0]
        bisect.insort(tail, entry, key=_first_two)

    def add_finish(self, reason: str) -> None:
        self.finish[reason] = self.finish.get(reason, 0) + 1

    # -- shards and reports --------------------------------------------------------------
    def rebase(self, offset: int) -> None:
        for e in self.sample:
            e[3] += offset
        for e in self.tail:
            e[1] -= offset

    def merge(self, other: Figures) -> None:
        self.merge_counts(other)
        for e in other.sample:
            if e[0] < self.cut:
                self.offer(list(e))
        for e in other.tail:
            self.offer_tail(list(e))

    def merge_counts(self, other: Figures) -> None:
        """`other`'s histograms and finish reasons added to these (not its sample or tail)."""
        for mine, theirs in ((self.diff, other.diff), (self.length, other.length),
                             (self.rt, other.rt)):
            for i, n in enumerate(theirs):
                if n:
                    mine[i] += n
        for reason, n in other.finish.items():
            self.finish[reason] = self.finish.get(reason, 0) + n

    def to_json(self) -> dict[str, Any]:
        return {"bins": SCHEME, "diff": _sparse(self.diff), "length": _sparse(self.length),
                "rt": _sparse(self.rt), "finish": self.finish, "sample": self.sample,
                "tail": self.tail}

    @classmethod
    def from_json(cls, data: Any, size: int = SAMPLE) -> Figures:
        """Figures as to_json wrote them; ValueError says what is malformed."""
        out = cls(size)
        if data is None or (isinstance(data, dict) and data.get("bins") != SCHEME):
            return out  # none (an older report), or other bins: read without figures
        if not isinstance(data, dict):
            raise ValueError(f"figures must be an object, got {type(data).__name__}")
        for name in ("diff", "length", "rt"):
            counts = getattr(out, name)
            for pair in _list(data, name):
                if (not isinstance(pair, list) or len(pair) != 2 or not all(_count(v) for v in pair)
                        or pair[0] >= len(counts)):
                    raise ValueError(f"figures.{name}: expected [bin, count] pairs, got {pair!r}")
                counts[pair[0]] += pair[1]
        finish = data.get("finish", {})
        if not isinstance(finish, dict) or not all(_count(n) for n in finish.values()):
            raise ValueError("figures.finish: expected an object of counts")
        out.finish = dict(finish)
        for e in _list(data, "sample"):
            if (not isinstance(e, list) or len(e) != 5 or not all(_count(v) for v in e[:4])
                    or not _record_id(e[4])):
                raise ValueError(f"figures.sample: expected [priority, billed, counted, line, "
                                 f"id], got {e!r}")
            out.offer(list(e))
        for e in _list(data, "tail"):
            if (not isinstance(e, list) or len(e) != 5 or not _count(e[0])
                    or not isinstance(e[1], int) or not _record_id(e[2])
                    or not all(_count(v) for v in e[3:])):
                raise ValueError(f"figures.tail: expected [|diff|, -line, id, billed, counted], "
                                 f"got {e!r}")
            out.offer_tail(list(e))
        return out


def _first_two(entry: list[Any]) -> tuple[Any, Any]:
    return entry[0], entry[1]


def _priority_line(entry: list[Any]) -> tuple[Any, Any]:
    """A sample entry's order: its priority, then its line (the earlier line wins a tie,
    whatever order the records were offered in: the columnar path's chunks, shards)."""
    return entry[0], entry[3]


def _list(data: dict[str, Any], name: str) -> list[Any]:
    value = data.get(name, [])
    if not isinstance(value, list):
        raise ValueError(f"figures.{name}: expected a list, got {type(value).__name__}")
    return value


def _count(value: Any) -> bool:
    return type(value) is int and value >= 0


def _record_id(value: Any) -> bool:
    return value is None or type(value) in (int, str)


class GroupFigures:
    """tokaudit_group_by: Figures per group of field values (at most MAX_GROUPS, the
    rest under OTHER), kept as [values, figures] in first-seen order."""

    def __init__(self) -> None:
        self.groups: dict[tuple[str, ...], Figures] = {}

    def get(self, key: tuple[str, ...]) -> Figures:
        fig = self.groups.get(key)
        if fig is None:
            if len(self.groups) >= MAX_GROUPS:
                key = tuple(OTHER)
                fig = self.groups.get(key)
            if fig is None:
                fig = self.groups[key] = Figures(GROUP_SAMPLE)
        return fig

    def __bool__(self) -> bool:
        return bool(self.groups)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GroupFigures) and self.to_json() == other.to_json()

    def rebase(self, offset: int) -> None:
        for fig in self.groups.values():
            fig.rebase(offset)

    def merge(self, other: GroupFigures) -> None:
        for key, fig in other.groups.items():
            self.get(key).merge(fig)

    def to_json(self) -> list[Any]:
        return [[list(key), fig.to_json()] for key, fig in self.groups.items()]

    @classmethod
    def from_json(cls, data: Any) -> GroupFigures:
        out = cls()
        if not isinstance(data, list):
            raise ValueError("group_figures: expected a list of [values, figures]")
        for entry in data:
            if (not isinstance(entry, list) or len(entry) != 2 or not isinstance(entry[0], list)
                    or not all(isinstance(v, str) for v in entry[0])):
                raise ValueError(f"group_figures: expected [values, figures], got {entry!r}"[:200])
            out.get(tuple(entry[0])).merge(Figures.from_json(entry[1], GROUP_SAMPLE))
        return out


def quantile(counts: list[int], q: float, ranges: Any) -> float:
    """The value at share q of a histogram (the middle of its bin)."""
    total = sum(counts)
    if not total:
        return math.nan
    seen = 0
    for i, n in enumerate(counts):
        seen += n
        if n and seen >= q * total:
            lo, hi = ranges(i)
            return (lo + hi) / 2
    return math.nan
