"""Finding: one thing wrong with the data, from a built-in check or a user's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable


@dataclass(frozen=True, slots=True)
class Finding:
    """What is wrong, where.

    Checks return ``Finding("check_name", "expected X, found Y")``; the plugin fills in
    ``line`` and ``record_id`` for per-record checks. ``allowable`` findings may be
    forgiven by the file's outlier allowance (``tokaudit_count_outliers``).
    """

    check: str
    message: str
    line: int | None = None
    record_id: Any = None
    allowable: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "message": self.message,
            "line": self.line,
            "record_id": self.record_id,
            "allowable": self.allowable,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Finding:
        return cls(**data)


def as_findings(result: Any, default_check: str = "custom") -> Iterable[Finding]:
    """Normalise a hook's answer: None, a str, a Finding, or an iterable of those."""
    if result is None:
        return ()
    if isinstance(result, (str, Finding)):
        result = (result,)
    out = []
    for item in result:
        if item is None:
            continue
        if isinstance(item, str):
            item = Finding(default_check, item)
        elif not isinstance(item, Finding):
            raise TypeError(
                f"a tokaudit check returned {type(item).__name__}; "
                "return a Finding, a str, or a list of them"
            )
        out.append(item)
    return out
