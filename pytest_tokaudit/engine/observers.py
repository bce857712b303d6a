"""What a pass reports to while it runs: handed in by the run, never read from a global."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, Sequence

from ..base.findings import Finding
from ..model.rules import signed_difference


class Meter(Protocol):
    """Progress of one part: called after each batch of records."""

    def tick(self, records: int, offset: int | None) -> None: ...


class Sink(Protocol):
    """Every finding at a record, uncapped (--tokaudit-failures), as the pass finds them."""

    def write(self, found: Sequence[Finding], batch: Sequence[Any], unusable: Sequence[Any]) -> None: ...

    def write_entries(self, found: Sequence[dict[str, Any]]) -> None:
        """Findings as `entries` made them (a Recorder's, from a pass that ran elsewhere)."""


def entries(found: Sequence[Finding], batch: Sequence[Any], unusable: Sequence[Any] = ()
            ) -> list[dict[str, Any]]:
    """A batch's findings at records (lines relative to the part), with each record's counts
    (an unusable record's billed count when it could be read; nothing counted)."""
    records = {r.line: r for r in batch}
    billed_of = {u.line: u.billed for u in unusable}
    out = []
    for f in found:
        if f.line is None:
            continue
        record = records.get(f.line)
        billed = billed_of.get(f.line) if record is None else record.count
        counted = None if record is None else record.n_ids
        out.append({"line": f.line, "id": f.record_id, "check": f.check, "message": f.message,
                    "billed": billed, "counted": counted,
                    "diff": None if record is None else signed_difference(billed, counted),
                    "allowable": f.allowable})
    return out


class Recorder:
    """A Sink that keeps the entries, for a pass that runs away from the failures file (a
    Ray task): the item hands them to the file's sink (write_entries) when it reports."""

    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []

    def write(self, found: Sequence[Finding], batch: Sequence[Any], unusable: Sequence[Any] = ()) -> None:
        self.write_entries(entries(found, batch, unusable))

    def write_entries(self, found: Sequence[dict[str, Any]]) -> None:
        self.entries += found


@dataclass(frozen=True)
class Observers:
    meter: Meter | None = None
    sink: Sink | None = None


NONE = Observers()

