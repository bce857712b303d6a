"""The structure check (checks/record.py): special tokens required once, required last or
forbidden, named in pytest.ini and resolved by the real Qwen3 tokenizer loaded from disk,
flag exactly the records that break them (the round trip alongside); an unknown name is a
usage error listing the closest special tokens."""

from __future__ import annotations

import pytest

from conftest import TokProject, assert_no_crash, failure_section, summary_section
from tokdata import END_THINK, IM_END, THINK, byte_ids, qwen_dir, sample_records, split_token

FAILED = pytest.ExitCode.TESTS_FAILED
USAGE = pytest.ExitCode.USAGE_ERROR


def record(sid: int, ids: list[int]) -> dict:
    return {"sample_id": sid, "provider": "x", "completion_tokens": len(ids), "output_ids": ids}


def names_ini(project: TokProject, **more) -> None:
    project.ini(
        tokaudit_tokenizer=str(qwen_dir()),
        tokaudit_require_once="</think>",
        tokaudit_require_last="<|im_end|>",
        tokaudit_forbid="<think>",
        tokaudit_roundtrip_rel="5%",
        **more,
    )


def test_token_names_and_round_trip_flag_exactly_the_bad_records(project: TokProject, tok):
    clean = sample_records(tok, 12)
    rows = [record(i + 1, ids) for i, ids in enumerate(clean)]
    # line 3: every third token split in two valid pieces: a non-canonical tokenisation
    split = []
    for k, t in enumerate(clean[2]):
        pair = split_token(tok, t) if k % 3 == 0 else None
        split += list(pair) if pair else [t]
    rows[2] = record(3, split)
    # line 5: one split in a long record: a change, but within 5%
    ids = list(clean[4])
    k = next(k for k, t in enumerate(ids) if split_token(tok, t))
    ids[k:k + 1] = split_token(tok, ids[k])
    rows[4] = record(5, ids)
    # line 7: a short answer cut inside a multi-byte character
    head = tok.encode("Parrot?</think>", add_special_tokens=False)
    rows[6] = record(7, head + byte_ids(tok, "🦜".encode()[:3]) + [IM_END])
    # line 9: no </think>; line 11: a <think> and not closed by <|im_end|>
    rows[8] = record(9, [t for t in clean[8] if t != END_THINK])
    rows[10] = record(11, [THINK] + clean[10][:-1])
    project.jsonl("data/rt.jsonl", rows)
    names_ini(project)

    result = project.run()
    assert_no_crash(result)
    assert result.ret == FAILED
    section = failure_section(result, "data/rt.jsonl")
    assert section[0] == "4 of 12 audited records break the contract"
    flagged = [line.split(": ")[0] + ": " + line.split(": ")[2] for line in section[1:-1]]
    assert flagged == [
        "data/rt.jsonl:3: roundtrip",
        "data/rt.jsonl:7: roundtrip",
        "data/rt.jsonl:9: require_once",
        "data/rt.jsonl:11: require_last",
        "data/rt.jsonl:11: forbid",
    ]
    assert "data/rt.jsonl:9: sample_id=9: require_once: expected </think> (151668) once, found 0 times" in section
    assert "data/rt.jsonl:11: sample_id=11: forbid: expected no <think> (151667), found 1" in section
    (line7,) = [l for l in section if l.startswith("data/rt.jsonl:7:")]
    assert "first difference at token" in line7 and "\\ufffd" in line7
    assert section[-1].startswith("contract: pytest.ini [tokaudit_roundtrip_rel = 5%, "
                                  "tokaudit_require_once = </think>")
    # The round-trip columns: 3 records changed (lines 3, 5, 7), 2 beyond 5%.
    (row,) = [l for l in summary_section(result) if l.startswith("data/rt.jsonl")]
    assert row.split()[-3] == "3"


def test_unknown_token_name_lists_the_closest_special_tokens(project: TokProject):
    names_ini(project)
    project.jsonl("data/a.jsonl", [])
    result = project.run("-o", "tokaudit_require_once=</thnk>")
    assert result.ret == USAGE
    result.stderr.fnmatch_lines([
        "*tokaudit_require_once: unknown token '</thnk>'; closest special tokens: '</think>'*"
    ])
