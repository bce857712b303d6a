"""The engine's one entry: audit one part of one file into its summary.

The source (base/formats.py) says which pass reads it: lines (JSONL: the columnar path
where it applies, else the plain per-line path) or Arrow batches (Parquet, Arrow IPC).
"""

from __future__ import annotations

from typing import Any

from ..base.formats import source_of
from ..model.contract import Contract
from ..model.summary import FileSummary
from ..sources.base import WHOLE, Part
from .columnar import audit_columnar, plan
from .observers import NONE, Observers
from .plain import audit_lines


def audit(path: Any, contract: Contract, hook: Any, summary: FileSummary, part: Part = WHOLE,
          observers: Observers = NONE) -> None:
    """Read the part once, run every per-record check, fill `summary` (lines or rows are
    numbered from the part's first, 1)."""
    source = source_of(path)
    if source.kind == "arrow":
        from .arrow import audit_arrow  # Parquet/Arrow only: a JSONL run never imports it

        audit_arrow(source, path, contract, hook, summary, part.groups, observers)
        return
    start, end = part.byte_range
    how = plan(path, contract, hook, start, end)
    if how is not None:  # whole chunks parsed natively, the checks vectorised
        audit_columnar(path, contract, hook, summary, start, end, how, observers)
    else:
        audit_lines(path, contract, hook, summary, start, end, observers)
