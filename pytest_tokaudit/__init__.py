"""pytest-tokaudit: LLM token data (JSONL) as data contracts, one test item per file."""

from .contract import Allowance, Contract
from .findings import Finding

__version__ = "0.1.0"
__all__ = ["Allowance", "Contract", "Finding", "__version__"]
