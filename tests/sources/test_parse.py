"""Reading a record by the contract (sources/parse.py): billing formulas with `-` and whole
numbers, template escapes, and a field no record has said once for the file."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import TokProject, assert_no_crash, examples, failure_section, failure_sections, rec
from pytest_tokaudit.sources import parse
from pytest_tokaudit.tokenizers.hf import load_tokenizer
from tokdata import qwen_dir, sample_texts

FAILED, OK = pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.OK
ONE_MODE = pytest.mark.parametrize("xdist_mode", [("-p", "no:xdist")], ids=["no-xdist"])
NET = "usage.completion_tokens - usage.completion_tokens_details.reasoning_tokens"


def billed_with_reasoning(i: int, visible: int, reasoning: int) -> dict:
    """A record whose ids are the visible answer; the API billed hidden reasoning on top."""
    r = rec(i, visible)
    del r["completion_tokens"]
    r["usage"] = {"completion_tokens": visible + reasoning,
                  "completion_tokens_details": {"reasoning_tokens": reasoning}}
    return r


def test_billing_without_hidden_reasoning_subtracts_it(project: TokProject):
    rows = [billed_with_reasoning(i, 10 + i % 7, 5 * i) for i in range(1, 31)]
    rows[4]["usage"]["completion_tokens"] += 3  # billed 3 more than its ids
    rows[9]["usage"]["completion_tokens_details"]["reasoning_tokens"] = 500  # more than billed
    rows[14]["usage"]["completion_tokens_details"]["reasoning_tokens"] = None  # not a count
    project.jsonl("data/a.jsonl", rows)
    project.ini(tokaudit_count_field=NET, tokaudit_count_abs=0, tokaudit_count_rel=0,
                tokaudit_count_mean_rel="", tokaudit_budget=100000)
    result = project.run("-rA")
    assert_no_crash(result)
    assert result.ret == FAILED
    section = failure_section(result, "data/a.jsonl")
    assert section[1:4] == [
        "data/a.jsonl:5: sample_id=5: count: billed 18, counted 15 (+3, +16.7%) > max(0, 0%)",
        f"data/a.jsonl:10: sample_id=10: schema: {NET} = -437: a billed count cannot be negative",
        "data/a.jsonl:15: sample_id=15: schema: usage.completion_tokens_details.reasoning_tokens "
        "must be an integer, found null",
    ], section
    # The budget sums the same formula: the visible tokens only (the two schema rows' too,
    # where the formula could be read: neither).
    billed = sum(10 + i % 7 for i in range(1, 31) if i not in (10, 15)) + 3
    assert f"billed {billed:,} of 100,000 tokens" in result.stdout.str()


@ONE_MODE
def test_a_formula_reads_parquet_as_it_reads_jsonl(project: TokProject):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rows = [billed_with_reasoning(i, 10 + i % 7, 5 * i) for i in range(1, 21)]
    rows[4]["usage"]["completion_tokens"] += 3
    rows[9]["usage"]["completion_tokens_details"]["reasoning_tokens"] = 500
    project.jsonl("data/twin.jsonl", rows)
    project.path.joinpath("pq").mkdir()
    pq.write_table(pa.Table.from_pylist(rows), project.path / "pq/twin.parquet")
    project.ini(tokaudit_count_field=f"{NET} + 1", tokaudit_count_abs=1, tokaudit_count_rel=0,
                tokaudit_count_mean_rel="")
    jsonl, parquet = project.run(), project.run(paths=("pq",))
    assert jsonl.ret == parquet.ret == FAILED
    lines = failure_section(jsonl, "data/twin.jsonl")
    assert [re.sub(r"pq/twin.parquet:row ", "data/twin.jsonl:", line).replace("pq/twin.parquet", "data/twin.jsonl")
            for line in failure_section(parquet, "pq/twin.parquet")] == lines
    # `+ 1`: every record is billed one more than its ids (inside count_abs = 1), but the
    # one billed 3 more.
    assert [line.split(": ", 2)[1:] for line in lines[1:3]] == [
        ["sample_id=5", "count: billed 19, counted 15 (+4, +21.1%) > max(1, 0%)"],
        ["sample_id=10", f"schema: {NET} + 1 = -436: a billed count cannot be negative"],
    ], lines


@ONE_MODE
def test_a_template_holds_newlines_and_the_framing_counts_exactly(project: TokProject):
    """A provider that bills the `<think>` framing: the newlines written in the template
    rebuild exactly the tokens billed; without them each record is 3-4 tokens short."""
    tok = load_tokenizer(qwen_dir())
    texts = sample_texts()
    rows = []
    for k in range(20):
        reasoning, content = texts[k][:400].strip(), texts[k + 20][:300].strip()
        billed = len(tok.encode(f"<think>\n{reasoning}\n</think>\n\n{content}<|im_end|>",
                                add_special_tokens=False))
        rows.append({"id": f"gen-{k}", "choices": [{"message": {"reasoning": reasoning, "content": content}}],
                     "usage": {"completion_tokens": billed}})
    project.jsonl("data/raw.jsonl", rows)
    framed = r"<think>\n{choices.0.message.reasoning?}\n</think>\n\n{choices.0.message.content}<|im_end|>"
    project.ini(tokaudit_tokenizer=str(qwen_dir()), tokaudit_id_field="id",
                tokaudit_count_field="usage.completion_tokens", tokaudit_count_abs=0,
                tokaudit_count_rel=0, tokaudit_text_template=framed)
    result = project.run()
    assert result.ret == OK, result.stdout.str()
    bare = "{choices.0.message.reasoning?}</think>{choices.0.message.content}<|im_end|>"
    result = project.run("-o", f"tokaudit_text_template={bare}")
    assert result.ret == FAILED
    diffs = [int(m[1]) for m in re.finditer(r"billed \d+, counted \d+ \(\+(\d+),", result.stdout.str())]
    assert len(diffs) == 20 and set(diffs) <= {3, 4}, diffs


def test_a_field_no_record_has_is_one_finding_of_the_file(project: TokProject):
    rows = [rec(i, 12, usage={"completion_tokens": 12, "prompt_tokens": 40}) for i in range(1, 41)]
    for r in rows:
        del r["completion_tokens"]
    rows[6]["output_ids"] = [1, "x"]  # a finding of its own, still listed
    project.jsonl("data/a.jsonl", rows)
    project.ini(tokaudit_count_field="usage.completion_tokns", tokaudit_max_shown=5)
    result = project.run()
    assert_no_crash(result)
    assert result.ret == FAILED
    said = ("no record has field 'usage.completion_tokns' (all 40 lack it: a typo in the "
            "contract?); closest in the records: 'usage.completion_tokens', 'usage.prompt_tokens'")
    assert failure_section(result, "data/a.jsonl") == [
        f"40 of 40 audited records break the contract; {said}",
        "data/a.jsonl:7: sample_id=7: schema: output_ids[1] must be an integer token id, found 'x' (str)",
        f"data/a.jsonl: schema: {said}",
    ]


def test_a_field_no_record_of_a_sharded_file_has_is_said_once_per_item(project: TokProject):
    rows = [{"id": i, "choices": [{"message": {"content": f"answer {i}"}}], "completion_tokens": 3,
             "output_ids": [1, 2, 3]} for i in range(1, 401)]
    rows[350]["choices"][0]["message"]["contnet"] = "one record has the typo'd field"
    project.jsonl("data/big.jsonl", rows)
    project.jsonl("data/small.jsonl", rows[:20])
    project.ini(tokaudit_id_field="sample_id", tokaudit_shard_size=6000, tokaudit_max_shown=3)
    result = project.run()
    assert result.ret == FAILED
    shards = [t for t in re.findall(r"_ (tokaudit: data/big.jsonl[^_]*?) _", result.stdout.str())]
    assert len(shards) >= 3, result.stdout.str()  # every shard, and the whole file
    said = ("no record has field 'sample_id' (all 20 lack it: a typo in the contract?); the records "
            "have 'id', 'choices', 'completion_tokens', 'output_ids'")
    assert failure_section(result, "data/small.jsonl") == [f"20 of 20 audited records break the contract; {said}",
                                                          f"data/small.jsonl: schema: {said}"]
    for title in shards:
        for section in failure_sections(result, title):
            assert not any("missing field" in line for line in section), section
            assert sum("no record has field 'sample_id'" in line for line in section) == 2, section


def test_a_field_some_records_have_is_a_finding_at_each_record_that_lacks_it(project: TokProject):
    rows = [rec(i, 5) for i in range(1, 11)]
    del rows[3]["completion_tokens"], rows[7]["completion_tokens"]
    project.jsonl("data/a.jsonl", rows)
    project.ini()
    result = project.run()
    assert failure_section(result, "data/a.jsonl") == [
        "2 of 10 audited records break the contract",
        "data/a.jsonl:4: sample_id=4: schema: missing field 'completion_tokens'",
        "data/a.jsonl:8: sample_id=8: schema: missing field 'completion_tokens'",
    ]


class _Id(int):  # an int subclass (an IntEnum's kind): marshal refuses it
    pass


id_lists = st.lists(st.one_of(
    st.integers(0, 200_000), st.integers(0, 200_000), st.integers(-3, 3),
    st.sampled_from([2**31 - 1, 2**31, -(2**31), 2**32, 2**63, 2**64 - 1, 2**64, -(2**63) - 1]),
    st.booleans(), st.floats(allow_nan=False), st.none(), st.text(max_size=2),
    st.lists(st.integers(0, 9), max_size=2), st.builds(_Id, st.integers(0, 9)),
), max_size=12)


@settings(max_examples=examples(300), derandomize=True, deadline=None)
@given(ids=id_lists)
def test_the_ids_check_says_what_it_says_with_or_without_its_marshal_pass(ids):
    """check_ids' one pass through marshal (ids of 0..2**31-1) is a shortcut only: on any
    list it answers as the checks after it do alone (None, or the same reason)."""
    fast = parse.check_ids(ids, "output_ids")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(parse, "MARSHAL_INT32", False)
        assert parse.check_ids(ids, "output_ids") == fast
    assert (fast is None) == all(type(i) is int and 0 <= i < 2**64 for i in ids)
