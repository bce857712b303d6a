"""pytest-tokaudit: LLM token data (JSONL, Parquet) as data contracts, one test item per file.

The names users touch (and `api`, the audit without pytest), imported on first use: pytest imports this package on every run
(the entry point is a module of it), with or without --tokaudit, so it stays light.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from . import api
    from .base.findings import Finding
    from .checks.dataset import Dataset
    from .model.contract import Allowance, Contract
    from .model.outcome import Outcome
    from .model.records import AuditedRecord, Record
    from .model.summary import FileSummary


__version__ = "0.1.0"


_WHERE = {
    "Allowance": "model.contract", "AuditedRecord": "model.records", "Contract": "model.contract",
    "Dataset": "checks.dataset", "FileSummary": "model.summary", "Finding": "base.findings",
    "Outcome": "model.outcome", "Record": "model.records",
}


__all__ = [*sorted(_WHERE), "__version__", "api"]


def __getattr__(name: str) -> Any:
    if name == "api":  # the public API: `from pytest_tokaudit import api`, or this attribute
        return import_module(".api", __name__)
    if name in _WHERE:
        value = getattr(import_module(f".{_WHERE[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
