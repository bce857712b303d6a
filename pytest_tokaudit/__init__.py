"""pytest-tokaudit: LLM token data (JSONL, Parquet) as data contracts, one test item per file.

The names users touch, imported on first use: pytest imports this package on every run
(the entry point is a module of it), with or without --tokaudit, so it stays light.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .contract import Allowance, Contract
    from .dataset import Dataset, Outcome
    from .findings import Finding
    from .reader import AuditedRecord, Record
    from .summary import FileSummary

__version__ = "0.1.0"
_WHERE = {
    "Allowance": "contract", "AuditedRecord": "reader", "Contract": "contract", "Dataset": "dataset",
    "FileSummary": "summary", "Finding": "findings", "Outcome": "dataset", "Record": "reader",
}
__all__ = [*sorted(_WHERE), "__version__"]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        value = getattr(import_module(f".{_WHERE[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
