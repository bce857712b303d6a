"""The built-in checks that read more of a record than its counts run on the JSONL chunk
engine (engine/columnar.py) too, fed the columns they declare (`reads`): tokaudit_finish_reason
and tokaudit_group_by (field values). Each case audits the same bytes with
TOKAUDIT_COLUMNAR=0 (the per-line path, the reference) and =1 and compares summaries and
failure texts; a clean record must not reach the per-line path.
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

from audits import builtin_hook, default_contract  # noqa: E402
from columnar_parity import WholeRecords, assert_same, audited, per_line_lines  # noqa: E402
from conftest import FULL, jsonl_bytes  # noqa: E402
from corpus import BAD_LINES, NEW_BAD_LINES  # noqa: E402

BASE = dict(max_shown=10**6, id_field=("id",), count_field=("usage", "completion_tokens"),
            unique_ids=True)
CONTRACTS = {
    "finish": default_contract(**BASE, finish_reason=("stop", "tool_calls")),
    "groups": default_contract(**BASE, group_by=("model", "meta.tier")),
    "both": default_contract(**BASE, finish_reason=("stop",), group_by=("model",),
                             require_once=("3",), require_last=("7",), count_rel=0.1),
    "top-finish": default_contract(**BASE, finish_reason=("stop",), group_by=("model",),
                                   finish_reason_field=("finish",)),
}


def response(rid: Any, n: int = 5, billed: int | None = None, finish: Any = "stop",
             model: Any = "m1", **extra: Any) -> dict[str, Any]:
    ids = [3, *range(100, 100 + max(0, n - 2)), 7][:n]
    choice: dict[str, Any] = {"index": 0}
    if finish != "absent":
        choice["finish_reason"] = finish
    record = {"id": rid, "model": model, "meta": {"tier": "t1" if n % 2 else "t2"},
              "usage": {"completion_tokens": n if billed is None else billed},
              "output_ids": ids, "choices": [choice], "finish": choice.get("finish_reason")}
    record.update(extra)
    return record


CLEAN = [response(f"r{i}", 4 + i % 4, finish=("stop" if i % 3 else "absent"),
                  model=("m1" if i % 2 else "m2")) for i in range(12)]
ODD = [
    response("length", finish="length"),
    response("null", finish=None),
    response("int", finish=5),
    response("bool", finish=True),
    response("list", finish=["stop"]),
    response("tool", finish="tool_calls"),
    response("count", billed=30),
    response("count-length", billed=30, finish="length"),
    response("model-null", model=None),
    response("model-int", model=7),
    response("model-float", model=2.5),
    response("model-bool", model=False),
    response("model-obj", model={"a": 1}),
    response("tier-missing", meta={}),
    response("choices-empty", choices=[]),
    response("missing-usage", usage=None),
    '{"id":"dup","model":"m1","model":"m2","meta":{"tier":"t1"},"usage":{"completion_tokens":2},'
    '"output_ids":[3,7],"choices":[{"finish_reason":"stop","finish_reason":"length"}]}',
    '{"id":"dup2","model":"m1","meta":{"tier":"t1","tier":"t2"},"usage":{"completion_tokens":2},'
    '"output_ids":[3,7],"choices":[{"finish_reason":"stop"}]}',
]


@pytest.mark.parametrize("which", sorted(CONTRACTS))
def test_finish_reason_and_groups_go_columnar(tmp_path, monkeypatch, which):
    monkeypatch.setattr(columnar, "CHUNK", 400)
    seen = per_line_lines(monkeypatch)
    contract = CONTRACTS[which]
    path = tmp_path / "x.jsonl"
    path.write_bytes(jsonl_bytes(CLEAN))
    monkeypatch.setenv(columnar.ENV, "1")
    assert columnar.plan(path, contract, builtin_hook()) is not None
    summary = json.loads(audited(path, contract, "1")[0])
    assert seen == []
    assert summary["checked"] == len(CLEAN)
    assert_same(path, contract)


@pytest.mark.parametrize("which", sorted(CONTRACTS))
@pytest.mark.parametrize("chunk", [64, 1 << 20])
def test_odd_finish_reasons_and_groups_audit_the_same(tmp_path, monkeypatch, which, chunk):
    monkeypatch.setattr(columnar, "CHUNK", chunk)
    lines = [x for pair in zip(CLEAN * 2, ODD) for x in pair] + BAD_LINES + NEW_BAD_LINES
    path = tmp_path / "x.jsonl"
    path.write_bytes(jsonl_bytes(lines))
    assert_same(path, CONTRACTS[which])
    if which in ("finish", "both"):
        assert "choices.0.finish_reason 'length', expected" in audited(path, CONTRACTS[which], "1")[1]


scalars = st.one_of(st.none(), st.booleans(), st.integers(-2, 3), st.floats(width=16, allow_nan=False),
                    st.sampled_from(["stop", "length", "tool_calls", "m1", "m2", ""]),
                    st.lists(st.just("stop"), max_size=1), st.just({}))


@st.composite
def lines(draw) -> Any:
    if draw(st.integers(0, 3)):
        return response(draw(st.text(max_size=2)), draw(st.integers(2, 6)),
                        finish=draw(st.one_of(st.sampled_from(["stop", "stop", "absent"]), scalars)),
                        model=draw(st.one_of(st.sampled_from(["m1", "m2"]), scalars)))
    return draw(st.sampled_from(ODD + BAD_LINES[:10]))


@settings(max_examples=200 if FULL else 40, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(items=st.lists(lines(), max_size=20), chunk=st.sampled_from([64, 500, 1 << 20]),
       which=st.sampled_from(sorted(CONTRACTS)), users=st.booleans())
def test_fuzzed_finish_reasons_and_groups_audit_the_same(tmp_path, monkeypatch, items, chunk, which,
                                                         users):
    monkeypatch.setattr(columnar, "CHUNK", chunk)
    path = tmp_path / "x.jsonl"
    path.write_bytes(jsonl_bytes(items))
    assert_same(path, CONTRACTS[which], *([WholeRecords()] if users else []))


# -- the checks that read ids: the round trip (real Qwen3 tokenizer), unique_text -----------------

def ids_contracts() -> dict[str, Any]:
    from tokdata import qwen_dir

    return {
        "roundtrip": default_contract(max_shown=10**6, tokenizer=str(qwen_dir()), roundtrip_rel=0.05,
                                      unique_ids=True),
        "unique_text": default_contract(max_shown=10**6, unique_text=True),
        "both": default_contract(max_shown=10**6, tokenizer=str(qwen_dir()), roundtrip_rel=0.0,
                                 unique_text=True, group_by=("model",), finish_reason=("stop",),
                                 finish_reason_field=("finish",)),
    }


def ids_records(tok: Any) -> list[Any]:
    from tokdata import make_record_ids

    good = [make_record_ids(tok, f"thinking {i} about x{i % 3}", f"answer {i % 4}") for i in range(10)]
    out: list[Any] = [{"sample_id": f"s{i}", "completion_tokens": len(ids), "output_ids": ids,
                       "model": f"m{i % 2}", "finish": "stop"} for i, ids in enumerate(good)]
    # Ids no text gives back (the round trip changes them); the same ids under two record ids
    # (unique_text); a count finding; an empty list; a bad line between.
    broken = [t for ch in "hello world, hello again" for t in tok.encode(ch, add_special_tokens=False)]
    out += [{"sample_id": "rt", "completion_tokens": len(broken), "output_ids": broken, "model": "m0"},
            {"sample_id": "dup", "completion_tokens": len(good[3]), "output_ids": good[3]},
            {"sample_id": "over", "completion_tokens": 999, "output_ids": good[4], "finish": "stop"},
            {"sample_id": "empty", "completion_tokens": 0, "output_ids": []},
            {"sample_id": "len", "completion_tokens": 2, "output_ids": good[5][:2], "finish": "length"},
            '{"sample_id": "bad", "completion_tokens": 2, "output_ids": [1, 2.0]}']
    return out


def test_round_trip_and_unique_text_go_columnar(tmp_path, monkeypatch, tok):
    monkeypatch.setattr(columnar, "CHUNK", 2000)
    seen = per_line_lines(monkeypatch)
    path = tmp_path / "x.jsonl"
    clean = ids_records(tok)[:10]
    path.write_bytes(jsonl_bytes(clean + clean[:2]))  # two stored twice: unique_text's finding
    for name, contract in ids_contracts().items():
        monkeypatch.setenv(columnar.ENV, "1")
        assert columnar.plan(path, contract, builtin_hook()).ids, name
        seen.clear()
        summary = json.loads(audited(path, contract, "1")[0])
        assert seen == [], name
        assert summary["checked"] == 12, name
        assert_same(path, contract)


@pytest.mark.parametrize("chunk", [64, 1 << 20])
def test_round_trip_and_unique_text_audit_the_same(tmp_path, monkeypatch, tok, chunk):
    monkeypatch.setattr(columnar, "CHUNK", chunk)
    path = tmp_path / "x.jsonl"
    records = ids_records(tok)
    path.write_bytes(jsonl_bytes(records + BAD_LINES + records[::-1]))
    for name, contract in ids_contracts().items():
        assert_same(path, contract)
    text = audited(path, ids_contracts()["roundtrip"], "1")[1]
    assert "x.jsonl:11: " in text and "tokens change" in text
