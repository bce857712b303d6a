"""tokaudit_finish_reason (checks/text.py): a response the API cut (finish reason `length`)
is a finding at its line, also when the record cannot be checked otherwise (its text is
null), in JSONL and in Parquet; `-p no:tokaudit.finish_reason` turns it off for both. The
other faults of raw responses, this one among them: test_raw.py."""

from __future__ import annotations

import pytest

from conftest import TokProject, assert_no_crash, failure_section
from tokdata import qwen_dir

FAILED = pytest.ExitCode.TESTS_FAILED


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
