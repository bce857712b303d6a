"""The JSONL chunk engine (engine/columnar.py) reads nested fields and billing formulas as
the per-line path does (sources/parse.py with base/fields.get_path): the raw API response
format (`usage.completion_tokens`, `choices.0...`), a count formula with optional and
subtracted terms, tokaudit_where nested, a field read twice. Each case audits the same
bytes with TOKAUDIT_COLUMNAR=0 (the per-line path, the reference) and =1 and compares the
summaries and failure texts; a clean record must never reach the per-line path.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("simdjson")
pytest.importorskip("numpy")

from pytest_tokaudit.engine import columnar  # noqa: E402
from pytest_tokaudit.model.values import parse_count_field  # noqa: E402

from audits import builtin_hook, default_contract  # noqa: E402
from columnar_parity import WholeRecords, assert_same, audited, per_line_lines  # noqa: E402
from conftest import FULL, jsonl_bytes  # noqa: E402
from corpus import BAD_LINES, NEW_BAD_LINES  # noqa: E402

FORMULA = "usage.completion_tokens - usage.details.reasoning_tokens? + 1"
CONTRACTS = {
    "usage": default_contract(max_shown=10**6, id_field=("id",), unique_ids=True,
                              count_field=("usage", "completion_tokens")),
    "formula": default_contract(max_shown=10**6, id_field=("id",), unique_ids=True,
                                count_field=parse_count_field(FORMULA)),
    "deep": default_contract(
        max_shown=10**6, ids_field=("choices", "0", "ids"), id_field=("meta", "id"),
        where=("meta", "keep"), count_field=("usage", "completion_tokens"), unique_ids=True,
        require_once=("3",), require_last=("7",), forbid=("0",), count_rel=0.1),
    "twice": default_contract(max_shown=10**6, id_field=("usage", "completion_tokens"),
                              where=("usage", "completion_tokens"),
                              count_field=("usage", "completion_tokens")),
}


def raw(rid: Any, n: int = 5, billed: int | None = None, reasoning: Any = "absent",
        keep: Any = True, **extra: Any) -> dict[str, Any]:
    """An API response as every contract above reads it (ids top-level and nested)."""
    ids = [3, *range(100, 100 + max(0, n - 2)), 7][:n]
    usage: dict[str, Any] = {"completion_tokens": n if billed is None else billed}
    if reasoning != "absent":
        usage["details"] = {"reasoning_tokens": reasoning}
    return {"id": rid, "meta": {"id": rid, "keep": keep}, "usage": usage,
            "output_ids": ids, "choices": [{"ids": ids, "finish_reason": "stop"}], **extra}


CLEAN = [raw(f"r{i}", 4 + i % 5, reasoning=(0 if i % 3 else "absent")) for i in range(12)]

# Each way a nested field can break, in the middle of clean records.
ODD = [
    raw("c-over", 5, billed=40),
    raw("c-reason", 5, billed=9, reasoning=3),
    raw("c-null-reason", 5, reasoning=None),
    raw("c-neg-total", 1, billed=0, reasoning=4),
    raw("c-str-reason", 5, reasoning="3"),
    raw("c-skip", 5, keep=False),
    raw("c-skip-null", 5, keep=None),
    raw("c-keep-list", 5, keep=[1]),
    raw("c-once", 5, choices=[{"ids": [3, 3, 1, 7]}]),
    raw("c-choices-empty", 5, choices=[]),
    raw("c-choices-obj", 5, choices={"0": {"ids": [3, 1, 7]}}),
    raw("c-nested-ids", 3, choices=[{"ids": [3, [1], 7]}], output_ids=[3, [1], 7]),
    raw("c-neg-id", 3, choices=[{"ids": [3, -1, 7]}], output_ids=[3, -1, 7]),
    raw("c-float-id", 3, choices=[{"ids": [3, 1.0, 7]}], output_ids=[3, 1.0, 7]),
    {"id": "no-usage", "meta": {"id": "x", "keep": 1}, "output_ids": [1],
     "choices": [{"ids": [1]}]},
    {"id": "usage-null", "meta": {"id": "y", "keep": "yes"}, "usage": None, "output_ids": [1],
     "choices": [{"ids": [1]}]},
    {"id": "usage-list", "meta": {"keep": 1, "id": 5}, "usage": [5], "output_ids": [1],
     "choices": [{"ids": [1]}]},
    {"id": ["x"], "meta": {"id": {"a": 1}, "keep": 1}, "usage": {"completion_tokens": 1},
     "output_ids": [1], "choices": [{"ids": [1]}]},
    {"id": 2**64, "meta": {"id": -(2**63) - 1, "keep": 1}, "usage": {"completion_tokens": 2**64},
     "output_ids": [1], "choices": [{"ids": [1]}]},
    {"meta": 3},
    # A key given twice below the top: simdjson reads the first, orjson the last.
    '{"id":"d1","meta":{"id":"d1","keep":1,"keep":0},"usage":{"completion_tokens":1},'
    '"output_ids":[1],"choices":[{"ids":[3,7]}]}',
    '{"id":"d2","meta":{"id":"d2","keep":1},"usage":{"completion_tokens":1,"completion_tokens":2},'
    '"output_ids":[1,2],"choices":[{"ids":[3,1,7],"ids":[3,7]}]}',
    '{"id":"d3","meta":{"id":"d3","keep":1},"usage":{"completion_tokens":2,"details":'
    '{"reasoning_tokens":1,"reasoning_tokens":null}},"output_ids":[1,2],"choices":[{"ids":[3,7]}]}',
    # Text that holds "[" (not a list) beside the fields.
    raw("c-brackets [x]", 5, text="a [b] [[c"),
]


def test_nested_fields_and_formulas_go_columnar(tmp_path, monkeypatch):
    """Clean API responses under each contract: none reaches the per-line path."""
    monkeypatch.setattr(columnar, "CHUNK", 300)
    seen = per_line_lines(monkeypatch)
    path = tmp_path / "x.jsonl"
    path.write_bytes(jsonl_bytes(CLEAN))
    for name, contract in CONTRACTS.items():
        monkeypatch.setenv(columnar.ENV, "1")
        assert columnar.plan(path, contract, builtin_hook()) is not None, name
        seen.clear()
        summary = json.loads(audited(path, contract, "1")[0])
        assert seen == [], name
        assert summary["checked"] == len(CLEAN), name
        assert_same(path, contract)


@pytest.mark.parametrize("which", sorted(CONTRACTS))
@pytest.mark.parametrize("chunk", [64, 1 << 20])
def test_broken_nested_fields_audit_the_same(tmp_path, monkeypatch, which, chunk):
    monkeypatch.setattr(columnar, "CHUNK", chunk)
    lines = [x for pair in zip(CLEAN * 3, ODD) for x in pair] + BAD_LINES + NEW_BAD_LINES
    path = tmp_path / "x.jsonl"
    path.write_bytes(jsonl_bytes(lines))
    assert_same(path, CONTRACTS[which])


def test_a_formula_sums_as_the_per_line_path(tmp_path, monkeypatch):
    monkeypatch.setattr(columnar, "CHUNK", 1 << 20)
    path = tmp_path / "x.jsonl"
    path.write_bytes(jsonl_bytes([raw("a", 5, billed=6, reasoning=2), raw("b", 5, billed=4),
                                  raw("c", 5, billed=9, reasoning=0)]))
    summary = json.loads(audited(path, CONTRACTS["formula"], "1")[0])
    assert summary["billed"] == (6 - 2 + 1) + (4 + 1) + (9 + 1)
    assert_same(path, CONTRACTS["formula"])


# -- fuzzed responses ---------------------------------------------------------------------------

values = st.one_of(st.none(), st.booleans(), st.integers(-3, 12), st.sampled_from([2**40, 2**63, 2**64]),
                   st.floats(allow_nan=False, allow_infinity=False, width=16), st.text(max_size=2),
                   st.lists(st.integers(0, 9), max_size=2), st.just({}))
id_lists = st.lists(st.one_of(st.sampled_from([0, 3, 7, 1, 2, 5]), st.integers(0, 9)), max_size=8)


def rarely(draw, strategy, usual):
    """`usual` most of the time, else a value drawn from `strategy`."""
    return draw(strategy) if not draw(st.integers(0, 5)) else usual


@st.composite
def responses(draw) -> bytes:
    """One API response: mostly clean, each field broken now and then."""
    ids = rarely(draw, values, draw(id_lists))
    n = len(ids) if type(ids) is list else 3
    usage: Any = {"completion_tokens": n + draw(st.sampled_from([0, 0, 0, 1, -1, 9]))}
    if draw(st.booleans()):
        usage["details"] = rarely(draw, values, {"reasoning_tokens": rarely(
            draw, values, draw(st.integers(0, 3)))})
    if not draw(st.integers(0, 5)):
        usage["completion_tokens"] = draw(values)
    usage = rarely(draw, st.one_of(values, st.just({})), usage)
    choice: Any = {"ids": ids}
    choices = rarely(draw, st.sampled_from([[choice, {}], [], None, "missing", {"0": choice}]),
                     [choice])
    rid = rarely(draw, values, draw(st.text(max_size=2)))
    record: dict[str, Any] = {"id": rid, "meta": rarely(
        draw, values, {"id": rid, "keep": rarely(draw, values, 1)}), "usage": usage,
        "output_ids": ids}
    if choices != "missing":
        record["choices"] = choices
    line = json.dumps(record, separators=(",", ":")).encode()
    tweak = draw(st.integers(0, 8))
    if tweak == 0:  # a key given twice below the top
        key = draw(st.sampled_from([b'"completion_tokens":', b'"keep":', b'"ids":',
                                    b'"reasoning_tokens":', b'"id":']))
        line = line.replace(key, key + draw(st.sampled_from([b"1,", b"null,", b"[3,7],"])) + key, 1)
    elif tweak == 1:  # cut short
        line = line[:draw(st.integers(0, len(line)))]
    return line


@settings(max_examples=300 if FULL else 60, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(lines=st.lists(responses(), max_size=25), chunk=st.sampled_from([64, 400, 1 << 20]),
       which=st.sampled_from(sorted(CONTRACTS)), users=st.booleans())
def test_fuzzed_responses_audit_the_same(tmp_path, monkeypatch, lines, chunk, which, users):
    monkeypatch.setattr(columnar, "CHUNK", chunk)
    path = tmp_path / "x.jsonl"
    path.write_bytes(b"\n".join(lines))
    assert_same(path, CONTRACTS[which], *([WholeRecords()] if users else []))
