"""The text checks (checks/text.py): ids_match_text holds stored ids to the text they were
tokenised from, record by record, with the real Qwen3 tokenizer (finish_reason, the other
text check: test_finish_reason.py)."""

from __future__ import annotations

import json

from conftest import FAILED, ONE_MODE, TokProject, assert_no_crash, failure_section, flagged
from pytest_tokaudit.engine.template import rebuild
from pytest_tokaudit.sources.parse import parse_line
from tokdata import END_THINK, clean_responses, qwen_dir, raw_contract, raw_ini


@ONE_MODE
def test_stored_ids_must_match_the_text(project: TokProject, tok):
    rows = []
    for row in clean_responses(tok, 12):
        m = row["choices"][0]["message"]
        row["output_ids"] = tok.encode(f"{m.get('reasoning', '')}</think>{m['content']}<|im_end|>",
                                       add_special_tokens=False)
        rows.append(row)
    # 3 and 4: ids swapped between the lines
    rows[2]["output_ids"], rows[3]["output_ids"] = rows[3]["output_ids"], rows[2]["output_ids"]
    # 6: the text edited after tokenising (one word)
    m = rows[5]["choices"][0]["message"]
    m["content"] = m["content"].replace(" ", " very ", 1)
    # 8: stored ids without </think>
    rows[7]["output_ids"] = [t for t in rows[7]["output_ids"] if t != END_THINK]
    rows[7]["usage"]["completion_tokens"] -= 1
    project.jsonl("data/ids.jsonl", rows)
    raw_ini(project, tokaudit_count_abs=8, tokaudit_count_rel="2%")

    result = project.run()
    assert_no_crash(result)
    assert result.ret == FAILED
    section = failure_section(result, "data/ids.jsonl")
    checks = flagged(section, "data/ids.jsonl")
    assert [k for k in checks if k[1] == "ids_match_text"] == [
        (3, "ids_match_text"), (4, "ids_match_text"), (6, "ids_match_text"), (8, "ids_match_text")]
    assert (8, "require_once") in checks
    (line6,) = [s for s in section if s.startswith("data/ids.jsonl:6:")]
    assert "first difference at token" in line6 and "very" in line6
    assert {k[0] for k in checks} == {3, 4, 6, 8}

    # -p no:tokaudit.ids_match_text turns the check off
    result = project.run("-p", "no:tokaudit.ids_match_text")
    checks = flagged(failure_section(result, "data/ids.jsonl"), "data/ids.jsonl")
    assert all(k[1] != "ids_match_text" for k in checks) and (8, "require_once") in checks


def test_a_tokenizer_with_other_merges_is_caught_by_ids_match_text(tok, tmp_path):
    """Ids stored by the real tokenizer, checked against a copy missing a few merges."""
    import shutil

    from pytest_tokaudit.checks.text import IdsMatchTextCheck
    other = tmp_path / "other"
    shutil.copytree(qwen_dir(), other)
    spec = json.loads((other / "tokenizer.json").read_text(encoding="utf-8"))
    dropped = {("Ġt", "he"), ("Ġth", "e"), ("Ġ", "the")}  # every way to " the" in one token
    spec["model"]["merges"] = [m for m in spec["model"]["merges"] if tuple(m) not in dropped]
    (other / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
    (other / "merges.txt").unlink()  # the fast tokenizer.json alone decides
    rows = clean_responses(tok, 8)
    for row in rows:
        m = row["choices"][0]["message"]
        row["output_ids"] = tok.encode(f"{m.get('reasoning', '')}</think>{m['content']}<|im_end|>",
                                       add_special_tokens=False)
    the = tok.encode(" the", add_special_tokens=False)
    assert len(the) == 1
    for c, caught in [(raw_contract(), set()), (raw_contract(tokenizer=str(other)), None)]:
        records = [parse_line(json.dumps(r).encode(), k + 1, c) for k, r in enumerate(rows)]
        assert rebuild(records, c) == []
        findings = IdsMatchTextCheck().pytest_tokaudit_check_batch(records, c)
        lines = {f.line for f in findings}
        if caught is None:  # the records holding " the" as one token, and only those
            caught = {r.line for r in records if the[0] in r.ids}
            assert len(caught) >= 4
        assert lines == caught
        assert all("first difference at token" in f.message for f in findings)
