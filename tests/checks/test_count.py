"""The count check (checks/record.py): billed against counted per record, and the allowed
outliers a file may have, never beyond tokaudit_count_outlier_max."""

from __future__ import annotations

from conftest import FAILED, OK, ONE_MODE, TokProject, failure_section


@ONE_MODE
def test_count_outlier_max_is_never_forgiven(project: TokProject):
    rows = [{"sample_id": k, "completion_tokens": 100, "output_ids": list(range(100))}
            for k in range(1, 11)]
    rows[2]["completion_tokens"] = 130  # 23% off: an allowed outlier
    rows[5]["completion_tokens"] = 1000  # 10x: never forgiven
    project.jsonl("data/a.jsonl", rows)
    project.ini(tokaudit_count_outliers=2, tokaudit_count_mean_rel="",
                tokaudit_count_outlier_max="50%")
    result = project.run()
    assert result.ret == FAILED
    section = failure_section(result, "data/a.jsonl")
    assert "data/a.jsonl:3: sample_id=3: count: billed 130, counted 100 (+30, +23.1%) > max(8, 2%) " \
           "(allowed outlier)" in section
    assert "data/a.jsonl:6: sample_id=6: count: billed 1000, counted 100 (+900, +90.0%) > max(8, 2%), " \
           "beyond tokaudit_count_outlier_max = 50%: never an allowed outlier" in section
    project.ini(tokaudit_count_outliers=2, tokaudit_count_mean_rel="")
    assert project.run().ret == OK
