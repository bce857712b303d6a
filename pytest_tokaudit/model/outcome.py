"""Outcome: the verdict of one dataset-wide check (passed, failed or skipped) and why."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Outcome:
    """The verdict of one dataset-wide check: `Outcome.passed("...")`, `.failed`, `.skipped`."""

    name: str
    outcome: str  # "passed", "failed" or "skipped"
    message: str
    lines: list[str] = field(default_factory=list)

    @classmethod
    def passed(cls, message: str) -> Outcome:
        return cls("", "passed", message)

    @classmethod
    def failed(cls, message: str, lines: list[str] | tuple[str, ...] | str = ()) -> Outcome:
        """`lines`: the lines shown under the message (one str is one line)."""
        return cls("", "failed", message, [lines] if isinstance(lines, str) else list(lines))

    @classmethod
    def skipped(cls, message: str) -> Outcome:
        return cls("", "skipped", message)

    @property
    def text(self) -> str:
        return "\n".join([self.message, *self.lines])

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "outcome": self.outcome, "message": self.message,
                "lines": self.lines}
