"""What a pass reports to while it runs: handed in by the run, never read from a global."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, Sequence

import pytest

from ..base.findings import Finding


class Meter(Protocol):
    """Progress of one part: called after each batch of records."""

    def tick(self, records: int, offset: int | None) -> None: ...


class Sink(Protocol):
    """Every finding at a record, uncapped (--tokaudit-failures), as the pass finds them."""

    def write(self, found: Sequence[Finding], batch: Sequence[Any], unusable: Sequence[Any]) -> None: ...


@dataclass(frozen=True)
class Observers:
    meter: Meter | None = None
    sink: Sink | None = None


NONE = Observers()


# Set on an audit item's stash around its call by the outputs that want them (progress,
# --tokaudit-failures); the item hands them to its pass.
METER = pytest.StashKey[Meter]()
SINK = pytest.StashKey[Sink]()
