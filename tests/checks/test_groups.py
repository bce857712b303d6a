"""tokaudit_group_by (checks/groups.py): the counts and the mean check split by the values
of some fields, so a group that drifts shows even when its file passes."""

from __future__ import annotations

import json

from conftest import FAILED, OK, ONE_MODE, TokProject, assert_no_crash, failure_section


@ONE_MODE
def test_group_by_shows_a_drifting_provider_in_a_passing_file(project: TokProject):
    rows = []
    for k in range(1, 41):
        provider = "steady" if k % 2 else "drifting"
        billed = 100 + (3 if provider == "drifting" else 0)  # 2.9%: within the record tolerance
        rows.append({"sample_id": k, "provider": provider, "model": "m",
                     "completion_tokens": billed, "output_ids": list(range(100))})
    project.jsonl("data/a.jsonl", rows)
    project.ini(tokaudit_count_mean_rel="2%", tokaudit_count_mean_abs=0, tokaudit_group_by="provider model")
    result = project.run("--tokaudit-json=audit.json")
    assert_no_crash(result)
    assert result.ret == FAILED
    section = failure_section(result, "data/a.jsonl")
    assert "data/a.jsonl: count_mean: [provider=drifting, model=m] mean |diff| 3.00 / mean billed " \
           "103.0 = 2.913% > 2.000% (20 records)" in section
    out = result.stdout.lines
    at = out.index("by group (tokaudit_group_by):")
    assert out[at + 2].split() == ["provider=drifting,", "model=m", "20", "103.0", "100.0", "3.00", "(2.91%)"]
    assert out[at + 3].split() == ["provider=steady,", "model=m", "20", "100.0", "100.0", "0.00", "(0.00%)"]
    report = json.loads((project.path / "audit.json").read_text())
    (entry,) = [f for f in report["files"] if f["path"] == "data/a.jsonl"]
    assert sorted(entry["channels"]["groups"]) == [[["drifting", "m"], 20, 2060, 2000, 60],
                                                   [["steady", "m"], 20, 2000, 2000, 0]]
    # without group_by the file passes: the drift hides in the file's mean (1.47%)
    project.ini(tokaudit_count_mean_rel="2%", tokaudit_count_mean_abs=0)
    assert project.run().ret == OK
