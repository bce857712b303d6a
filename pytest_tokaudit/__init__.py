"""pytest-tokaudit: LLM token data (JSONL) as data contracts, one test item per file."""

from .contract import Allowance, Contract
from .findings import Finding
from .reader import Record
from .summary import FileSummary

__version__ = "0.1.0"
__all__ = ["Allowance", "Contract", "FileSummary", "Finding", "Record", "__version__"]
