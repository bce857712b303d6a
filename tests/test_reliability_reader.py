"""Reliability of the reader on hostile input: each test pins a case that once went wrong.

1. the fast path read forged or duplicate ids keys differently from orjson;
2. form feed / vertical tab counted as white space;
3. a good zstd frame followed by garbage lost every line;
4. valid JSON numbers past 64 bits / a double failed whole records;
5. an over-long line was held in memory whole;
6. blank lines cost a Python step each;
7. findings embedded whole bad values;
8. the billed count of a record with unusable ids was dropped;
9. a git-lfs pointer gave three invalid-JSON findings.

In-process tests use real files and the real built-in checks (see test_reader.py); the
end-to-end test runs pytest in a subprocess.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pytest_tokaudit.contract import Contract
from pytest_tokaudit.reader import SKIPPED, Record, Rejected, parse_line
from pytest_tokaudit.summary import FileSummary

from conftest import assert_no_crash, compress, failure_section, jsonl_bytes, rec, summary_rows
from test_core import BAD_LINES
from test_reader import CONTRACTS, Spy, _parsed, audit_both, physical_lines, run_audit

FUZZ = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
DEFAULT = CONTRACTS["default"]
LFS = b"version https://git-lfs.github.com/spec/v1"


def messages(result: Any) -> list[str]:
    assert type(result) is Rejected, result
    return [f.message for f in result.findings]


def both(raw: bytes, contract: Contract = DEFAULT) -> Any:
    """parse_line on both paths; they must agree. Returns the fast path's answer."""
    fast = parse_line(raw, 1, contract)
    plain = parse_line(raw, 1, contract, fast=False)
    assert _parsed(fast) == _parsed(plain), raw
    return fast


# -- 8. spend of records that cannot be checked is kept -----------------------------------------

def test_billed_count_and_id_of_unusable_records_are_kept(tmp_path):
    path = tmp_path / "spend.jsonl"
    path.write_bytes(jsonl_bytes([
        rec("ok", 10),                                                          # 1 checked
        {"sample_id": "nul", "completion_tokens": 100, "output_ids": None},     # 2 unusable ids
        {"sample_id": "el", "completion_tokens": 200, "output_ids": [1, "x"]},  # 3 a bad element
        {"sample_id": 7, "completion_tokens": 300},                             # 4 no ids
        {"sample_id": ["bad"], "completion_tokens": 400, "output_ids": {}},    # 5 no usable id
        {"sample_id": "neg", "completion_tokens": -5, "output_ids": None},      # 6 no valid count
        "{not json",                                                            # 7
        {"sample_id": "big", "completion_tokens": 2**64, "output_ids": [1]},    # 8 out of range
    ]))
    contract = dataclasses.replace(DEFAULT, unique_ids=True)
    summary = run_audit(path, contract, Spy())
    assert (summary.checked, summary.billed) == (1, 10)
    assert (summary.unusable_billed, summary.billed_unusable) == (4, 1000)
    assert summary.billed_total == 1010
    assert (summary.ids, summary.id_lines) == (["ok", "nul", "el", 7, "neg", "big"], [1, 2, 3, 4, 6, 8])
    back = FileSummary.from_json(summary.to_json())
    assert back == summary and back.billed_total == 1010
    other = FileSummary.from_json(summary.to_json())
    other.merge(back)
    assert (other.unusable_billed, other.billed_unusable, other.billed_total) == (8, 2000, 2020)


def test_parse_line_gives_back_what_it_could_read():
    raw = b'{"sample_id":"s","completion_tokens":5,"output_ids":null}'
    assert both(raw) == Rejected(
        [parse_line(raw, 1, DEFAULT, fast=False).findings[0]], "s", 5)
    assert both(b'{"sample_id":1.5,"completion_tokens":true,"output_ids":[]}').record_id is None
    assert both(b'{"sample_id":1,"completion_tokens":true,"output_ids":[]}').count is None
    assert both(b"[]") == Rejected(both(b"[]").findings, None, None)


def test_shards_add_up_the_spend_of_unusable_records(tmp_path):
    from test_reader import audited_summary, merged_by_controller

    records = [{"sample_id": f"u{i}", "completion_tokens": i, "output_ids": None} for i in range(40)]
    path = tmp_path / "x.jsonl"
    data = jsonl_bytes(records + [rec("ok")])
    path.write_bytes(data)
    whole = audited_summary(path, DEFAULT)
    cuts = [0, len(data) // 3, 2 * len(data) // 3, len(data)]
    parts = [audited_summary(path, DEFAULT, a, b, shard=(i, 3)) for i, (a, b) in enumerate(zip(cuts, cuts[1:]))]
    merged = merged_by_controller(parts, DEFAULT)
    assert (merged.unusable_billed, merged.billed_unusable) == (whole.unusable_billed, whole.billed_unusable) == (40, 780)
