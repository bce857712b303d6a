"""The JSONL chunk engine (engine/columnar.py) parses a chunk's lines as ONE JSON array and
must still give exactly what the per-line reference gives: lines that are no JSON value
alone but join their neighbours into one (or split into two), lines simdjson refuses in the
middle of a chunk, and records the count or structure rule fails, which the engine words
through the checks' own hooks from its columns. Each case audits the same bytes with
TOKAUDIT_COLUMNAR=0 (the per-line path) and =1 and compares the summaries and failure texts
(the harness of tests/test_columnar.py). A fuzz test draws files from these hard lines.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("simdjson")
pytest.importorskip("numpy")

from pytest_tokaudit.engine import columnar  # noqa: E402
from pytest_tokaudit.engine.failure import failure_text  # noqa: E402
from pytest_tokaudit.engine.passes import audit  # noqa: E402
from pytest_tokaudit.engine.plain import check_file  # noqa: E402
from pytest_tokaudit.model.summary import FileSummary  # noqa: E402

from audits import builtin_hook, default_contract  # noqa: E402
from conftest import FULL, rec  # noqa: E402

CONTRACTS = {
    "default": default_contract(max_shown=10**6, unique_ids=True),
    "where": default_contract(max_shown=10**6, where=("provider",), unique_ids=True),
    "structure": default_contract(
        max_shown=10**6, require_once=("3",), require_last=("7", "8"), forbid=("0",),
        where=("provider",), unique_ids=True, count_rel=0.1,
    ),
    "no-id": default_contract(max_shown=10**6, id_field=()),
    "short-lines": default_contract(max_shown=10**6, max_line_bytes=60),
}


def audited(path, contract, mode: str) -> tuple[str, str]:
    """(summary JSON, failure text) of the file, through the path `mode` selects."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(columnar.ENV, mode)
        summary = FileSummary(path="data/x.jsonl", max_shown=contract.max_shown)
        hook = builtin_hook()
        audit(path, contract, hook, summary)
        check_file(path, contract, hook, summary)
    return summary.to_json(), failure_text(summary, contract)


def assert_same(path, contract) -> None:
    plain = audited(path, contract, "0")
    fast = audited(path, contract, "1")
    assert json.loads(fast[0]) == json.loads(plain[0])
    assert fast == plain


def ok(name: str, n: int = 10, **kw) -> bytes:
    return json.dumps(rec(name, n, provider="p", **kw)).encode()


# `{"a":[{}` and `{}]}` are each invalid, but side by side in one array they make one
# object; `{...},{...}` is invalid, but makes two. Together the array has as many values as
# lines, each record one line off: only the sentinels between lines show it.
MERGE = [b'{"a":[{}', b'{}]}']
SPLIT = ok("s1") + b"," + ok("s2")
INVALID = [b'{"sample_id": "x", "completion_tokens": 1, "output_ids": [1],}',
           b'{"sample_id": "u\xff", "completion_tokens": 1, "output_ids": [1]}',
           b'{"sample_id": "d", "completion_tokens": 1, "output_ids": [1], "sample_id": 5}',
           b'{"sample_id": "n", "completion_tokens": 2, "output_ids": [1, [2]]}',
           b'{"sample_id": "f", "completion_tokens": 2, "output_ids": [1, 2.0]}',
           b'{"sample_id": "neg", "completion_tokens": 2, "output_ids": [1, -2]}',
           b'{"sample_id": "q", "completion_tokens": 1, "output_ids": [1], "provider": null}',
           b"[1, 2]", b"", b"  ", b'{"sample_id": "cr", "completion_tokens": 1, "output_ids": [1]}\r']
FINDINGS = [ok("count", 10, billed=40), ok("under", 30, billed=10),
            ok("once", 10, once=[3, 3], last=7), ok("last", 10, once=[3], last=9),
            ok("forbid", 10, once=[3, 0], last=7), ok("clean", 10, once=[3], last=7)]


@pytest.fixture
def big_chunks(monkeypatch):
    """Chunks that hold the whole test file: every line in one joined array."""
    monkeypatch.setattr(columnar, "CHUNK", 1 << 20)


@pytest.mark.parametrize("which", ["default", "structure", "where"])
def test_lines_that_merge_and_split_in_the_array_audit_the_same(tmp_path, big_chunks, which):
    lines = [ok("r1"), *MERGE, SPLIT, ok("r2", 12), ok("r3", 10, billed=30), ok("r4")]
    path = tmp_path / "x.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    assert_same(path, CONTRACTS[which])
    summary = json.loads(audited(path, CONTRACTS[which], "1")[0])
    assert summary["channels"]["ids"][0][1] == ["r1", "r2", "r3", "r4"]


def test_a_refused_line_mid_chunk_audits_the_same(tmp_path, big_chunks):
    lines = [ok(f"r{i}") for i in range(20)]
    for at, bad in zip(range(1, 20, 2), INVALID):
        lines.insert(at, bad)
    path = tmp_path / "x.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    for contract in CONTRACTS.values():
        assert_same(path, contract)


def test_count_and_structure_findings_come_from_the_columns(tmp_path, big_chunks):
    path = tmp_path / "x.jsonl"
    path.write_bytes(b"\n".join(FINDINGS * 3) + b"\n")
    assert_same(path, CONTRACTS["structure"])
    text = audited(path, CONTRACTS["structure"], "1")[1]
    assert "expected 3 once, found 2 times" in text and "billed 40, counted 10" in text


@settings(max_examples=400 if FULL else 40, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.sampled_from([ok("a"), ok("b", 12), *MERGE, SPLIT, *INVALID, *FINDINGS]),
                      max_size=25),
       chunk=st.sampled_from([64, 300, 1 << 20]),
       which=st.sampled_from(["default", "structure", "where", "no-id"]))
def test_files_of_hard_lines_audit_the_same(tmp_path, monkeypatch, lines, chunk, which):
    monkeypatch.setattr(columnar, "CHUNK", chunk)
    path = tmp_path / "x.jsonl"
    path.write_bytes(b"\n".join(lines))
    assert_same(path, CONTRACTS[which])
