"""Controller side: gathers every item's summary from the reports and speaks for the run.

Registered only where ``config.workerinput`` is absent: in a plain run, or on the xdist
controller, which sees every report the workers send. After all items have run (the
``yield`` of ``pytest_runtestloop``) it merges shards, judges whole sharded files, runs the
dataset checks, and reports each as an ordinary test outcome (``tokaudit::budget``).
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import orjson
import pytest

from .contract import MISSING, Contract
from .reader import get_path
from .summary import PROPERTY, FileSummary

MISSING_SHOWN = 10  # ranges of missing ids shown
DUPLICATES_SHOWN = 20


@dataclass
class Outcome:
    """The verdict of one dataset-wide check."""

    name: str
    outcome: str  # "passed", "failed" or "skipped"
    message: str
    lines: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "\n".join([self.message, *self.lines])

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "outcome": self.outcome, "message": self.message,
                "lines": self.lines}


# -- record ids -----------------------------------------------------------------------------

def id_key(value: Any) -> int:
    """A record id as one unsigned 64-bit int: ids that are ints as they are, others hashed.

    Only ever compared within one process (the controller, or the merge command), so
    Python's own string hash serves.
    """
    if type(value) is int and 0 <= value < 1 << 63:
        return value
    text = value if type(value) is str else f"\x00{value!r}"
    return (1 << 63) | (hash(text) & ((1 << 63) - 1))


class IdIndex:
    """Where each record id was seen, in about 16 bytes per id plus a set of the ids."""

    def __init__(self) -> None:
        self.sources: list[tuple[str, int | None]] = []  # (path, shard)
        self.keys: set[int] = set()
        self.key_at = array("Q")  # every id's key, in the order seen ...
        self.place_at = array("Q")  # ... and its place: source index << 32 | line
        self.names: dict[int, Any] = {}  # key -> id, for ids seen more than once
        # (path, shard) -> lines before the shard; set once every shard has reported
        self.offsets: dict[tuple[str, int | None], int] = {}

    def add(self, summary: FileSummary) -> None:
        fi = len(self.sources)
        self.sources.append((summary.path, summary.shard))
        keys, names = self.keys, self.names
        new = [id_key(v) for v in summary.ids]
        for key, value in zip(new, summary.ids):
            if key in keys:
                names[key] = value
            else:
                keys.add(key)
        self.key_at.extend(new)
        self.place_at.extend(fi << 32 | line for line in summary.id_lines)

    @property
    def dups(self) -> dict[int, list[int]]:
        """key -> every place of an id seen more than once."""
        out: dict[int, list[int]] = {key: [] for key in self.names}
        if out:
            for key, place in zip(self.key_at, self.place_at):
                if key in out:
                    out[key].append(place)
        return out

    def where(self, place: int) -> str:
        source = self.sources[place >> 32]
        return f"{source[0]}:{(place & 0xFFFFFFFF) + self.offsets.get(source, 0)}"

    def __len__(self) -> int:
        return len(self.keys)

    def __contains__(self, value: Any) -> bool:
        return id_key(value) in self.keys


def read_manifest(path: Path, id_field: tuple[str, ...]) -> Iterator[Any]:
    """Ids from a JSONL manifest (objects with the id field) or one id per line."""
    with open(path, "rb") as fh:
        for raw in fh:
            raw = raw.strip()
            if not raw:
                continue
            try:
                value = orjson.loads(raw)
            except orjson.JSONDecodeError:
                yield raw.decode("utf-8", "replace")
                continue
            if type(value) is dict:
                value = get_path(value, id_field)
                if value is MISSING:
                    continue
            yield value


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


# -- the checks ------------------------------------------------------------------------------

def plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def money(tokens: int, contract: Contract) -> str:
    if contract.price_per_mtok is None:
        return ""
    value = tokens * contract.price_per_mtok / 1e6
    return f"${value:,.2f}" if value >= 1 or value == 0 else f"${value:.4f}"


def evaluate(
    files: list[FileSummary], index: IdIndex | None, contract: Contract, partial: str | None
) -> list[Outcome]:
    """The dataset checks that are configured. `partial` is None, or why the run is partial.

    A check judged on part of the dataset fails when the part alone breaks it, and is
    skipped otherwise: it never passes as if it had seen everything.
    """
    out = []
    if contract.budget is not None:
        spent = sum(s.billed_total for s in files)
        unusable = sum(s.unusable_billed for s in files)
        cap = contract.budget
        share = f" ({spent / cap:.1%})" if cap else ""
        cost = f"; {money(spent, contract)} of {money(cap, contract)}" if money(1, contract) else ""
        message = f"billed {spent:,} of {cap:,} tokens{share}{cost}"
        if unusable:
            message += f", {plural(unusable, 'billed record')} with unusable ids included"
        if spent > cap:
            out.append(Outcome("budget", "failed", f"over budget: {message}",
                               [f"contract: {contract.describe(('budget',))}"]))
        elif partial:
            out.append(Outcome("budget", "skipped",
                               f"partial run ({message} on the part audited): {partial}"))
        else:
            out.append(Outcome("budget", "passed", message))
    if contract.unique_ids and index is not None:
        dups = index.dups
        if dups:
            lines = []
            for key, places in list(dups.items())[:DUPLICATES_SHOWN]:
                where = ", ".join(index.where(p) for p in places)
                lines.append(f"{'.'.join(contract.id_field)}={index.names[key]!r}: {len(places)} records: {where}")
            if len(dups) > DUPLICATES_SHOWN:
                lines.append(f"... and {len(dups) - DUPLICATES_SHOWN:,} more duplicated ids")
            extra = sum(len(p) - 1 for p in dups.values())
            out.append(Outcome(
                "unique_ids", "failed",
                f"{plural(len(dups), 'id')} with more than one record "
                f"({plural(extra, 'record')} counted twice)",
                lines,
            ))
        elif partial:
            out.append(Outcome("unique_ids", "skipped",
                               f"partial run ({len(index):,} ids, each once, on the part "
                               f"audited): {partial}"))
        else:
            out.append(Outcome("unique_ids", "passed", f"{len(index):,} ids, each once"))
    if contract.expected_ids:
        out.append(_expected(index, contract, partial))
    return out


def _expected(index: IdIndex | None, contract: Contract, partial: str | None) -> Outcome:
    if partial:
        return Outcome("expected_ids", "skipped", f"partial run: {partial}")
    path = Path(contract.expected_ids)
    try:
        expected = list(read_manifest(path, contract.id_field))
    except OSError as exc:
        return Outcome("expected_ids", "failed", f"cannot read manifest {path}: {exc.strerror}")
    missing = [v for v in expected if index is None or v not in index]
    if not missing:
        return Outcome("expected_ids", "passed", f"all {len(expected):,} expected ids have a record")
    return Outcome(
        "expected_ids", "failed",
        f"{len(missing):,} of {len(expected):,} expected ids have no record",
        ["missing: " + ", ".join(ranges(missing, MISSING_SHOWN))
         + (" ..." if len(missing) > MISSING_SHOWN else "")],
    )


# -- shards -------------------------------------------------------------------------------

def merge_parts(parts: list[FileSummary], offsets: dict[int, int] | None = None) -> FileSummary:
    """Shards of one file made into a summary of the whole file (or of the shards given).

    `offsets` maps a shard to the lines before it; without it the shards must be
    contiguous from the first, and each starts where the one before ended.
    """
    parts = sorted(parts, key=lambda s: s.shard or 0)
    whole = FileSummary.from_json(parts[0].to_json())
    whole.rebase(offsets.get(whole.shard, 0) if offsets else 0)
    for part in parts[1:]:
        part = FileSummary.from_json(part.to_json())
        part.rebase(offsets[part.shard] if offsets else whole.lines)
        whole.merge(part)
    whole.shard, whole.shards = None, 1
    whole.complete = all(p.complete for p in parts) and len(parts) == parts[0].shards
    return whole
