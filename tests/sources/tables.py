"""Rows the columnar source tests write as Parquet and as Arrow IPC, each beside its JSONL
twin: good rows and one of every way a row breaks a check or is unusable.

Helpers only (no fixtures, no tests), imported by name: `from tables import SCHEMA, corpus`.
"""

from __future__ import annotations

import pytest

from conftest import rec

pa = pytest.importorskip("pyarrow")

THINK, END, OPEN = 7, 8, 9
INI = dict(
    tokaudit_require_once=THINK, tokaudit_require_last=END, tokaudit_forbid=OPEN,
    tokaudit_count_abs=0, tokaudit_count_rel="0%", tokaudit_where="provider",
)
SCHEMA = pa.schema([
    ("sample_id", pa.int64()),
    ("provider", pa.string()),
    ("completion_tokens", pa.int64()),
    ("output_ids", pa.list_(pa.int64())),
])


def good(i: int, **kw):
    return rec(i, 12, once=[THINK], last=END, provider="api", **kw)


def corpus() -> list[dict]:
    """Good rows and one of every way a row breaks a check or is unusable."""
    rows = [good(i) for i in range(1, 41)]
    rows[2] = rec(3, 12, 15, once=[THINK], last=END, provider="api")  # count
    rows[5] = rec(6, 12, once=[THINK, THINK], last=END, provider="api")  # require_once
    rows[7] = rec(8, 12, once=[THINK, OPEN], last=END, provider="api")  # forbid
    rows[9] = rec(10, 12, once=[THINK], provider="api")  # require_last
    rows[11] = {**good(12), "output_ids": None}  # unusable ids, billed still counted
    rows[13] = {**good(14), "output_ids": [THINK, -1, END]}
    rows[15] = {**good(16), "output_ids": [THINK, None, END]}
    rows[17] = {**good(18), "completion_tokens": None}
    rows[19] = {**good(20), "provider": None}  # skipped by tokaudit_where
    rows[21] = {**good(22), "output_ids": []}
    rows[23] = {**good(24), "sample_id": None}
    rows[25] = good(5)  # a repeated id
    return rows
