"""The count check (checks/record.py): billed against counted per record, and the allowed
outliers a file may have, never beyond tokaudit_count_outlier_max, and the headline that
counts them."""

from __future__ import annotations

from conftest import FAILED, OK, ONE_MODE, TokProject, assert_no_crash, failure_section


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
