"""Allowances are per check, one verdict rule serves every view, and a batch hook's finding
must say which record it is about."""

from __future__ import annotations

import json

import pytest

from conftest import TokProject, assert_no_crash, failure_section, rec

# A check of the user's whose findings an allowance may forgive, like the count's.
SHORT = '''
from pytest_tokaudit import Finding


def pytest_tokaudit_check_record(record):
    if record.n_ids < 5:
        return Finding("short", f"only {record.n_ids} ids", allowable=True)
'''


def outliers_project(project: TokProject, short: int, off: int) -> None:
    """`short` records the user's check flags, `off` records off the count tolerance."""
    project.ini(testpaths="data", tokaudit_count_abs=0, tokaudit_count_outliers=1,
                tokaudit_count_mean_rel="50%")
    project.write("conftest.py", SHORT)
    records = [rec(i) for i in range(1, 21)]
    for i in range(short):
        records[i] = rec(i + 1, n=3)
    for i in range(off):
        records[10 + i] = rec(11 + i, billed=12)
    project.jsonl("data/a.jsonl", records)


def test_each_check_uses_its_own_allowance(project: TokProject):
    # One short record and one count outlier: each check is within its allowance of one.
    # Pooled, the two would exceed it and fail the file.
    outliers_project(project, short=1, off=1)
    result = project.run("-rA", "--tokaudit-json=report.json")
    assert_no_crash(result)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    out = result.stdout.str()
    assert "data/a.jsonl:1: sample_id=1: short: only 3 ids" in out
    assert "data/a.jsonl:11: sample_id=11: count: billed 12, counted 10" in out
    entry = next(f for f in json.loads((project.path / "report.json").read_text())["files"]
                 if f["path"] == "data/a.jsonl")
    assert entry["outliers"] == {"count": 1, "short": 1}


def test_a_user_check_over_its_allowance_fails_naming_it(project: TokProject):
    outliers_project(project, short=2, off=1)
    result = project.run("-rA")
    assert_no_crash(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    section = failure_section(result, "data/a.jsonl")
    assert section[0].startswith("2 of 20 audited records break the contract;"), section
    assert any("short_outliers: 2 records break short (an allowable finding), at most 1 "
               "allowed" in line for line in section), section
    # Its findings are not forgiven, the count's one is.
    assert "data/a.jsonl:1: sample_id=1: short: only 3 ids" in section
    assert any(line.startswith("data/a.jsonl:11: sample_id=11: count:")
               and line.endswith("(allowed outlier)") for line in section), section
    assert not any(": count_outliers:" in line for line in section), section
    assert "tokaudit_count_outliers = 1" in section[-1]  # where the allowance came from


LINELESS = '''
from pytest_tokaudit import Finding


def pytest_tokaudit_check_batch(records):
    if any(r.id == 3 for r in records):
        return [Finding("mine", "something in this batch")]
'''


def test_a_batch_finding_without_a_line_is_an_error_naming_the_fix(project: TokProject):
    project.ini(testpaths="data")
    project.write("conftest.py", LINELESS)
    project.jsonl("data/a.jsonl", [rec(i) for i in range(1, 6)])
    project.jsonl("data/b.jsonl", [rec(i) for i in range(6, 9)])
    result = project.run("-rA")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    out = result.stdout.str()
    assert ("pytest_tokaudit_check_batch returned a finding without a line: mine: something "
            "in this batch. Make it with record.finding(check, message)") in out
    assert "Traceback" not in out and "INTERNALERROR" not in out
    assert "PASSED data/b.jsonl::tokaudit" in out  # the other file is audited as usual
    # The file was not audited to the end: no dataset verdict passes on it.
    assert "PASSED pytest.ini::tokaudit::coverage" not in out


WRITES = '''
def pytest_tokaudit_check_record(record):
    if record.id == 2:
        record.count = 10 ** 6


def pytest_tokaudit_check_file(summary):
    summary.checked = 0
'''


@pytest.mark.parametrize("hook", ["record", "file"])
def test_what_hooks_are_handed_is_read_only(project: TokProject, hook: str):
    project.ini(testpaths="data")
    body = WRITES.split("\n\n\n")[0 if hook == "record" else 1]
    project.write("conftest.py", body)
    project.jsonl("data/a.jsonl", [rec(i) for i in range(1, 4)])
    result = project.run("-rA")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    expected = {
        "record": "AttributeError: a record is read-only (cannot set 'count'); a check returns "
                  "findings, e.g. record.finding(check, message)",
        "file": "AttributeError: the summary handed to hooks is read-only (cannot set 'checked'); "
                "a hook fills summary.channel(name)",
    }[hook]
    # The user's line is in the traceback; the error says what to do instead.
    assert any(line.startswith("E ") and line.strip().endswith(expected)
               for line in result.stdout.lines), result.stdout.str()
    assert "INTERNALERROR" not in result.stdout.str()


def test_the_summary_view_shows_figures_and_hides_the_writers():
    from pytest_tokaudit.base.findings import Finding
    from pytest_tokaudit.model.summary import FileSummary, SummaryView
    summary = FileSummary(path="a.jsonl", checked=3, billed=30)
    summary.add_finding(Finding("x", "y", 1))
    view = SummaryView(summary)
    assert (view.checked, view.billed, view.mean_billed, view.failed) == (3, 30, 10.0, True)
    assert view.shown == (Finding("x", "y", 1),) and dict(view.by_check) == {"x": 1}
    with pytest.raises(TypeError):
        view.by_check["x"] = 5  # type: ignore[index]
    for name in ("add_finding", "merge", "rebase", "_summary_"):
        with pytest.raises(AttributeError):
            getattr(view, name)
    view.channel("mine").append(1)
    assert summary.channels == {"mine": [1]}


def test_the_ids_channel_cannot_be_turned_off(project: TokProject):
    project.ini(testpaths="data", tokaudit_unique_ids="true")
    project.jsonl("data/a.jsonl", [rec(1), rec(1)])
    result = project.run("-p", "no:tokaudit.ids")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "-p no:tokaudit.ids: the record ids the id checks read cannot be turned off" \
        in result.stderr.str()
