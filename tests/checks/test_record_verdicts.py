"""Per-record verdicts that must add up: outliers beyond tokaudit_count_outlier_max in the
allowance's headline, and a record that is both unreadable and cut by the API."""

from __future__ import annotations

import pytest

from conftest import TokProject, assert_no_crash, failure_section
from tokdata import qwen_dir

FAILED = pytest.ExitCode.TESTS_FAILED


def test_the_outlier_headline_counts_every_record_it_lists(project: TokProject):
    rows = [{"sample_id": k, "completion_tokens": 100, "output_ids": list(range(100))}
            for k in range(1, 31)]
    rows[2]["completion_tokens"] = 130  # 23% off: an outlier the allowance may forgive
    rows[9]["completion_tokens"] = 125
    rows[5]["completion_tokens"] = 1000  # 10x: beyond tokaudit_count_outlier_max
    project.jsonl("data/a.jsonl", rows)
    project.ini(tokaudit_count_outlier_max="50%", tokaudit_count_mean_rel="")
    result = project.run()
    assert_no_crash(result)
    section = failure_section(result, "data/a.jsonl")
    headline = ("3 records break the count tolerance, 1 of them beyond "
                "tokaudit_count_outlier_max (never allowed); of the other 2, at most 0 allowed "
                "(0 of 30 audited)")
    assert section[0] == f"3 of 30 audited records break the contract; {headline}", section
    assert len([line for line in section if ": count: " in line]) == 3
    assert f"data/a.jsonl: count_outliers: {headline}" in section
    # Within the allowance, the one beyond the limit still fails alone; the headline is
    # the plain one when no record is beyond it.
    result = project.run("-o", "tokaudit_count_outliers=2")
    assert failure_section(result, "data/a.jsonl")[0] == "1 of 30 audited records break the contract"
    result = project.run("-o", "tokaudit_count_outlier_max=")
    assert failure_section(result, "data/a.jsonl")[0] == (
        "3 of 30 audited records break the contract; 3 records break the count tolerance, at "
        "most 0 allowed (0 of 30 audited)")


RAW = [
    {"id": "g1", "choices": [{"message": {"content": "Hello there."}, "finish_reason": "stop"}],
     "usage": {"completion_tokens": 4}},
    {"id": "g2", "choices": [{"message": {"content": None}, "finish_reason": "length"}],
     "usage": {"completion_tokens": 4}},
    {"id": "g3", "choices": [{"message": {"content": "Fine."}, "finish_reason": "length"}],
     "usage": {"completion_tokens": 3}},
    {"id": "g4", "choices": [{"message": {"content": None}, "finish_reason": "stop"}],
     "usage": {"completion_tokens": 3}},
]


def raw_ini(project: TokProject) -> None:
    project.ini(tokaudit_tokenizer=str(qwen_dir()), tokaudit_id_field="id",
                tokaudit_count_field="usage.completion_tokens", tokaudit_finish_reason="stop",
                tokaudit_text_template="{choices.0.message.content}<|im_end|>")


NULL = ("schema: text_template: choices.0.message.content is null; write "
        "{choices.0.message.content?} if it may be null")
CUT = "finish_reason: choices.0.finish_reason 'length', expected stop (the response was cut at max_tokens)"


def test_an_unreadable_record_cut_by_the_api_gets_both_findings(project: TokProject):
    project.jsonl("data/raw.jsonl", RAW)
    raw_ini(project)
    result = project.run()
    assert_no_crash(result)
    assert result.ret == FAILED
    assert failure_section(result, "data/raw.jsonl") == [
        "3 of 4 audited records break the contract",
        f"data/raw.jsonl:2: id='g2': {NULL}",
        f"data/raw.jsonl:2: id='g2': {CUT}",
        f"data/raw.jsonl:3: id='g3': {CUT}",
        f"data/raw.jsonl:4: id='g4': {NULL}",
    ]
    # -p no:tokaudit.finish_reason turns it off for unreadable records too.
    result = project.run("-p", "no:tokaudit.finish_reason")
    assert "finish_reason" not in "\n".join(failure_section(result, "data/raw.jsonl"))


@pytest.mark.parametrize("xdist_mode", [("-p", "no:xdist")], ids=["no-xdist"])
def test_so_does_a_parquet_row(project: TokProject):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    project.path.joinpath("pq").mkdir()
    pq.write_table(pa.Table.from_pylist(RAW), project.path / "pq/raw.parquet")
    raw_ini(project)
    result = project.run(paths=("pq",))
    section = failure_section(result, "pq/raw.parquet")
    assert f"pq/raw.parquet:row 2: id='g2': {CUT}" in section, section
    assert f"pq/raw.parquet:row 2: id='g2': {NULL}" in section, section
