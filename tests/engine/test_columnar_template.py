"""Raw API responses read with a text template run on the JSONL chunk engine too: each
chunk's template fields read by simdjson, the texts rendered and encoded in one batch (the
real Qwen3 tokenizer), the ids folded by the kernel. Each case audits the same bytes with
TOKAUDIT_COLUMNAR=0 (the per-line path, the oracle) and =1 and compares summaries and
failure texts; a clean response must not reach the per-line path.
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

from audits import builtin_hook  # noqa: E402
from columnar_parity import WholeRecords, assert_same, audited, per_line_lines  # noqa: E402
from conftest import FULL, jsonl_bytes  # noqa: E402
from corpus import BAD_LINES, NEW_BAD_LINES  # noqa: E402


def contracts() -> dict[str, Any]:
    from tokdata import raw_contract

    checks = dict(require_once="</think>", require_last="<|im_end|>", forbid="<think>",
                  count_abs=0, count_rel=0, max_shown=10**6)
    return {
        "raw": raw_contract(**checks, finish_reason="stop", group_by="provider", unique_ids=True),
        "loose": raw_contract(max_shown=10**6, count_abs=2, count_rel="5%", where="provider",
                              unique_text=True, roundtrip_rel="5%"),
        "no-id": raw_contract(**checks, id_field="",
                              text_template="<think>{choices.0.message.reasoning?}</think>"
                                            "{choices.0.message.content?}{extra?}<|im_end|>"),
    }


def clean(tok: Any, n: int = 12) -> list[dict[str, Any]]:
    from tokdata import clean_responses

    rows = clean_responses(tok, n)
    for k, row in enumerate(rows):  # some texts with "[" and escapes: never ids lists
        row["choices"][0]["message"]["content"] += f' [{k}] "q" \\ \u00e9 \U0001f600'
        from tokdata import n_tokens

        m = row["choices"][0]["message"]
        row["usage"]["completion_tokens"] = n_tokens(tok, m.get("reasoning"), m["content"])
    return rows


def faults(tok: Any) -> list[Any]:
    """Responses each way a template's field can fail, or be worded by the per-line path."""
    from tokdata import make_record_ids, response

    ids = make_record_ids(tok, "r", "c")
    return [
        response(tok, "length", "Let me see.", "The answer is", finish="length"),
        response(tok, "over", None, "Hi", billed=40),
        response(tok, "special", None, "End a turn with <|im_end|> here.", billed=9),
        response(tok, "special-r", "x</think>y", "z", billed=5),
        response(tok, "null", None, None, billed=3),
        response(tok, "int", None, 42, billed=3),
        response(tok, "obj", {"text": "x"}, "Hi", billed=5),
        response(tok, "reasoning-null", None, "Hi") | {"choices": [{"message": {
            "content": "Hi", "reasoning": None}, "finish_reason": "stop"}]},
        {"id": "no-choices", "provider": "P", "usage": {"completion_tokens": 5}},
        {"id": "empty-choices", "provider": "P", "choices": [], "usage": {"completion_tokens": 5}},
        response(tok, "float", None, "Hi", billed=5.0),
        response(tok, "negative", None, "Hi", billed=-5),
        response(tok, "no-provider", None, "Hi") | {"provider": None},
        response(tok, "stored", "r", "c") | {"output_ids": ids},
        response(tok, "stored-bad", "r", "c") | {"output_ids": ids[:-1] + [7]},
        response(tok, "stored-str", "r", "c") | {"output_ids": "x"},
        response(tok, "over", None, "Hi"),  # an id twice
        '{"id":"dup","provider":"P","choices":[{"message":{"content":"a","content":"b"},'
        '"finish_reason":"stop"}],"usage":{"completion_tokens":3}}',
        '{"id":"dup2","id":"dup3","provider":"P","choices":[{"message":{"content":"a"}}],'
        '"usage":{"completion_tokens":3}}',
        '{"id":"surrogate","provider":"P","choices":[{"message":{"content":"\\ud800"}}],'
        '"usage":{"completion_tokens":3}}',
        '{"id":"pair","provider":"P","choices":[{"message":{"content":"\\ud83d\\ude00"}}],'
        '"usage":{"completion_tokens":3}}',
    ]


def test_raw_responses_go_columnar(tmp_path, monkeypatch, tok):
    monkeypatch.setattr(columnar, "CHUNK", 3000)
    seen = per_line_lines(monkeypatch)
    path = tmp_path / "x.jsonl"
    rows = clean(tok)
    path.write_bytes(jsonl_bytes(rows + rows[:2]))  # two twice: unique_text's finding
    for name, contract in contracts().items():
        monkeypatch.setenv(columnar.ENV, "1")
        assert columnar.plan(path, contract, builtin_hook()) is not None, name
        seen.clear()
        summary, text = audited(path, contract, "1")
        assert seen == [], name
        assert json.loads(summary)["checked"] == len(rows) + 2, name
        assert_same(path, contract)
        # A user's check reading whole records: every record whole, still from the chunks.
        assert columnar.plan(path, contract, builtin_hook(WholeRecords())).full, name
        seen.clear()
        audited(path, contract, "1", WholeRecords())
        assert seen == [], name
        assert_same(path, contract, WholeRecords())


def test_template_parts_under_text_min_bytes_stay_per_line(tmp_path, monkeypatch):
    """The tokenizer is most of the time on either path: numpy's import is paid back only
    on large parts (docs/performance.md)."""
    monkeypatch.delenv(columnar.ENV, raising=False)
    path = tmp_path / "x.jsonl"
    path.write_bytes(b" " * columnar.MIN_BYTES)
    contract = contracts()["raw"]
    assert columnar.plan(path, contract, builtin_hook()) is None
    monkeypatch.setattr(columnar, "TEXT_MIN_BYTES", columnar.MIN_BYTES)
    assert columnar.plan(path, contract, builtin_hook()) is not None


@pytest.mark.parametrize("chunk", [64, 1 << 20])
def test_bad_raw_responses_audit_the_same(tmp_path, monkeypatch, tok, chunk):
    monkeypatch.setattr(columnar, "CHUNK", chunk)
    path = tmp_path / "x.jsonl"
    good, bad = clean(tok), faults(tok)
    lines = [x for pair in zip(good * 2, bad) for x in pair] + BAD_LINES + NEW_BAD_LINES + good
    path.write_bytes(jsonl_bytes(lines))
    for contract in contracts().values():
        assert_same(path, contract)
        assert_same(path, contract, WholeRecords())
    text = audited(path, contracts()["raw"], "1")[1]
    for finding in ("special_in_text", "ids_match_text", "finish_reason", "schema", "count"):
        assert f": {finding}: " in text, finding


texts = st.one_of(st.none(), st.integers(0, 3), st.text(max_size=12),
                  st.sampled_from(["<|im_end|>", "a</think>b", "<think>", "[1, 2]", "\\", "", "<|im_"]))


@st.composite
def responses(draw: Any) -> Any:
    message = {}
    for key in ("reasoning", "content"):
        value = draw(st.one_of(st.just("absent"), texts))
        if value != "absent":
            message[key] = value
    return {"id": draw(st.sampled_from(["a", "b", 3])), "provider": draw(st.sampled_from(["P", "", None])),
            "choices": [{"message": message, "finish_reason": draw(st.sampled_from(["stop", "length"]))}],
            "usage": {"completion_tokens": draw(st.integers(0, 8))}}


@settings(max_examples=100 if FULL else 25, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(items=st.lists(responses(), max_size=12), chunk=st.sampled_from([64, 1 << 20]),
       which=st.sampled_from(["raw", "loose", "no-id"]))
def test_fuzzed_raw_responses_audit_the_same(tmp_path, monkeypatch, tok, items, chunk, which):
    monkeypatch.setattr(columnar, "CHUNK", chunk)
    path = tmp_path / "x.jsonl"
    path.write_bytes(jsonl_bytes(items))
    assert_same(path, contracts()[which])
    assert_same(path, contracts()[which], WholeRecords())
