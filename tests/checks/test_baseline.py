"""--tokaudit-baseline (checks/baseline.py): a file that got worse than in an earlier JSON
report fails, new and vanished files are named, and a baseline that is not a report is a
usage error."""

from __future__ import annotations

import json

import pytest

from conftest import TokProject, rec

FAILED = pytest.ExitCode.TESTS_FAILED


def test_json_report_and_baseline_regression(project: TokProject):
    project.ini(tokaudit_count_mean_rel="")
    good = [rec(i, 100, 100 + i % 3) for i in range(20)]
    project.jsonl("data/a.jsonl", good)
    project.jsonl("data/gone.jsonl", good)
    assert project.run("--tokaudit-json=base.json").ret == 0
    report = json.loads((project.path / "base.json").read_text())
    assert report["tool"] == "pytest-tokaudit" and report["partial"] is None
    assert report["contract"]["tokaudit_count_abs"] == "8"
    (a,) = [f for f in report["files"] if f["path"] == "data/a.jsonl"]
    assert (a["records"], a["billed"], a["counted"], a["max_absdiff"]) == (20, 2019, 2000, 2)
    assert a["worst_records"][0] == {"line": 3, "location": "data/a.jsonl:3", "id": 2, "billed": 102,
                                     "counted": 100, "diff": 2}

    # Still inside every absolute tolerance, but clearly worse than the baseline.
    (project.path / "data/gone.jsonl").unlink()
    project.jsonl("data/a.jsonl", [rec(i, 100, 105) for i in range(20)])
    project.jsonl("data/new.jsonl", good)
    result = project.run("--tokaudit-baseline=base.json")
    assert result.ret == FAILED
    result.stdout.fnmatch_lines([
        "data/a.jsonl: baseline: worse than baseline base.json by more than 10%: "
        "mean |diff| / mean billed 0.941% -> 4.762%",
        "*new since the baseline: data/new.jsonl",
        "vanished since the baseline: data/gone.jsonl",
    ])
    # A baseline that is not a report is a usage error.
    project.write("bad.json", "{}")
    bad = project.run("--tokaudit-baseline=bad.json")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--tokaudit-baseline: bad.json is not a pytest-tokaudit JSON report*"])
