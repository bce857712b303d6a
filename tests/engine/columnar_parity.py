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


class WholeRecords:
    """A user's checks reading whole records (its object, ids, last id), per record and
    per batch: the chunk engine hands them every record whole (the kernel's full mode).
    What they find does not depend on where a batch ends (the two paths cut batches
    differently)."""

    @pytest.hookimpl
    def pytest_tokaudit_check_record(self, record):
        data = record.data
        if record.n_ids % 3 == 0:  # the whole object: its text differs from record to record
            text = json.dumps(data, sort_keys=True, default=repr)[:60]
            return record.finding("user_thirds", f"{text} {record.ids[-1:]} {record.last_id}")
        return None

    @pytest.hookimpl
    def pytest_tokaudit_check_batch(self, records):
        return [r.finding("user_batch", f"{sorted(r.data)} {r.data.get('id')!r}")
                for r in records if r.count % 4 == 1]


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
