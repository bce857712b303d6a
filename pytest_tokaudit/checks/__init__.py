"""The built-in checks, one list: each a plugin on the public hooks a conftest.py uses.

Registered by name in every process that audits (the names decide what is collected);
`-p no:NAME` turns one off. Each check declares beside itself what the columnar path
(engine/columnar.py) needs to know: `native(contract)` and `native_key` for a per-record
check whose work it does over its columns (count, structure) or whose findings it hands to
the per-line path (finish_reason); `reads(contract)` for a batch hook: what of a record it
reads, of "line", "id", "count", "n_ids", "ids", or field paths (tuples: the light records
carry their values in `field_values`); "data" or no `reads` means the whole record (the
kernel's full mode). Modules are imported when the checks are loaded, not here.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

# name -> "module:Class"; per record or per file first, then the dataset checks.
RECORD = {
    "tokaudit.count": "record:CountCheck",
    "tokaudit.structure": "record:StructureCheck",
    "tokaudit.roundtrip": "record:RoundTripCheck",
    "tokaudit.empty": "record:EmptyCheck",
    "tokaudit.ids_match_text": "text:IdsMatchTextCheck",
    "tokaudit.finish_reason": "text:FinishReasonCheck",
    "tokaudit.group_by": "groups:GroupCheck",
    "tokaudit.prompt": "prompt:PromptCheck",
}
DATASET = {
    "tokaudit.budget": "dataset:BudgetCheck",
    "tokaudit.unique_ids": "dataset:UniqueIdsCheck",
    "tokaudit.expected_ids": "dataset:ExpectedIdsCheck",
    "tokaudit.unique_text": "duplicates:UniqueTextCheck",
    "tokaudit.requests": "join:JoinCheck",
    "tokaudit.money": "money:MoneyCheck",
}


def load(table: dict[str, str]) -> dict[str, type[Any]]:
    """The check classes of a table, by name."""
    out = {}
    for name, where in table.items():
        module, _, cls = where.partition(":")
        out[name] = getattr(import_module(f"{__name__}.{module}"), cls)
    return out


def builtin() -> dict[str, type[Any]]:
    """Every built-in check class, by the name it is registered (and blocked) under."""
    return load({**RECORD, **DATASET})
