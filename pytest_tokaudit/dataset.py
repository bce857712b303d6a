"""Controller side: gathers every item's summary from the reports and speaks for the run.

Registered only where ``config.workerinput`` is absent: in a plain run, or on the xdist
controller, which sees every report the workers send. After all items have run (the
``yield`` of ``pytest_runtestloop``) it merges shards, judges whole sharded files, runs the
dataset checks, and reports each as an ordinary test outcome (``tokaudit::budget``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from .contract import Contract
from .ids import IdIndex, read_manifest, ranges
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
        count = index.duplicate_count()
        if count:
            lines = [f"{'.'.join(contract.id_field)}={value!r}: {len(places)} records: "
                     f"{', '.join(places)}" for value, places in index.duplicates(DUPLICATES_SHOWN)]
            if count > DUPLICATES_SHOWN:
                lines.append(f"... and {count - DUPLICATES_SHOWN:,} more duplicated ids")
            out.append(Outcome(
                "unique_ids", "failed",
                f"{plural(count, 'id')} with more than one record "
                f"({plural(index.extra_records(), 'record')} counted twice)",
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
    from .remote import manifest_path

    path = manifest_path(contract.expected_ids)  # a Path, or a file at a URL
    try:
        expected = read_manifest(path, contract.id_field)
    except OSError as exc:
        return Outcome("expected_ids", "failed", f"cannot read manifest {path}: {exc.strerror}")
    except ValueError as exc:  # a line without a usable id, or no ids at all
        return Outcome("expected_ids", "failed", f"cannot use the manifest: {exc}")
    missing = expected if index is None else index.missing(expected)
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
