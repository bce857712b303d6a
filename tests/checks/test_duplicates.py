"""tokaudit_unique_text (checks/duplicates.py): the same completion stored under more than
one record id is a dataset finding naming the ids and their places."""

from __future__ import annotations

import json

from conftest import FAILED, ONE_MODE, TokProject, assert_no_crash
from tokdata import clean_responses, raw_ini


@ONE_MODE
def test_the_same_completion_under_two_ids_is_reported(project: TokProject, tok):
    rows = clean_responses(tok, 10)
    again = json.loads(json.dumps(rows[3]))
    again["id"] = "gen-resent"  # bought again under another id
    same_id = json.loads(json.dumps(rows[5]))  # the same record twice: unique_ids' business
    project.jsonl("data/a.jsonl", rows)
    project.jsonl("data/b.jsonl", [*clean_responses(tok, 12)[10:], again, same_id])
    raw_ini(project, tokaudit_unique_text="true")
    result = project.run()
    assert_no_crash(result)
    assert result.ret == FAILED
    out = result.stdout.str()
    assert "pytest.ini::tokaudit::unique_text: failed: 1 completion stored under more than one " \
           "id (1 record paid for twice)" in out
    assert "id 'gen-4', 'gen-resent': the same completion: data/a.jsonl:4, data/b.jsonl:3" in out
    failed = [line for line in out.splitlines() if line.startswith("FAILED ")]
    assert len(failed) == 1 and failed[0].startswith("FAILED pytest.ini::tokaudit::unique_text"), failed
