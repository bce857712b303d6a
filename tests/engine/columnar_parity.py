"""The columnar path against the per-line path, in process: one part audited both ways.

Helpers only (no fixtures, no tests), imported by name by the tests of engine/columnar.py
beside it: `from columnar_parity import assert_same`.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from audits import builtin_hook
from pytest_tokaudit.engine import columnar
from pytest_tokaudit.engine import plain as plain_module
from pytest_tokaudit.engine.failure import failure_text
from pytest_tokaudit.engine.passes import audit
from pytest_tokaudit.engine.plain import check_file
from pytest_tokaudit.model.summary import FileSummary


def audited(path: Any, contract: Any, mode: str, *extra: Any) -> tuple[str, str]:
    """(summary JSON, failure text) of the file, through the path `mode` selects."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(columnar.ENV, mode)
        summary = FileSummary(path="data/x.jsonl", max_shown=contract.max_shown)
        hook = builtin_hook(*extra)  # each check once, as the plugin registers them
        audit(path, contract, hook, summary)
        check_file(path, contract, hook, summary)
    return summary.to_json(), failure_text(summary, contract)


def assert_same(path: Any, contract: Any, *extra: Any) -> None:
    plain = audited(path, contract, "0", *extra)
    fast = audited(path, contract, "1", *extra)
    assert json.loads(fast[0]) == json.loads(plain[0])
    assert fast == plain


def per_line_lines(monkeypatch: Any) -> list[int]:
    """The lines that reach the per-line path from now on (a list filled as they do)."""
    seen: list[int] = []
    take = plain_module.PlainPass.take

    def spy(self: Any, line: int, body: Any) -> None:
        seen.append(line)
        take(self, line, body)

    monkeypatch.setattr(plain_module.PlainPass, "take", spy)
    return seen
