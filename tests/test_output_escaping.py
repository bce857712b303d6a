"""Data values never reach output raw: a group value, a file name, a finding or dataset
check message quoting a field, each with a newline (a GitHub workflow command on a line of
its own: `::stop-commands::`), a carriage return or a terminal escape, is shown escaped in
the terminal, the annotations and the Markdown summary (ids already were, by repr)."""

from __future__ import annotations

import sys

import pytest

from conftest import TokProject, assert_no_crash, rec

EVIL = ["x\n::stop-commands::tok1", "y\r\n::error::boom", "z\x1b[2Jclear", "w\u2028::warning::sep",
        "v\x85::notice::nel"]

CONFTEST = '''
from pytest_tokaudit import Outcome


def pytest_tokaudit_check_record(record):
    return record.data["provider"] != "ok" and f"odd provider {record.data['provider']}"


def pytest_tokaudit_dataset_checks():
    return ["providers"]


def pytest_tokaudit_check_batch(records, summary):
    summary.channel("providers").extend(r.data["provider"] for r in records)


def pytest_tokaudit_check_dataset(name, dataset):
    if name == "providers":
        seen = sorted({p for _, values in dataset.channel("providers") for p in values})
        return Outcome.failed("mixed: " + " / ".join(seen), ["seen: " + p for p in seen])
'''


def lines_starting_a_command(text: str) -> list[str]:
    """Lines a GitHub runner would read as workflow commands, but this plugin's own."""
    out = []
    for line in text.splitlines():  # every line break a runner honours
        for piece in line.replace("\r", "\n").split("\n"):
            if piece.lstrip().startswith("::") and not piece.startswith(("::error file=",
                                                                          "::warning file=")):
                out.append(piece)
    return out


def evil_project(project: TokProject, file_name: bool) -> None:
    project.ini(testpaths="data", tokaudit_group_by="provider", tokaudit_count_abs=0,
                tokaudit_count_mean_rel="1%")
    project.write("conftest.py", CONFTEST)
    rows = [rec(i, provider=p, billed=11 if i == 1 else None) for i, p in enumerate(EVIL, 1)]
    rows += [rec(10, provider="ok")]
    project.jsonl("data/a.jsonl", rows)
    if file_name:
        project.jsonl("data/b\n::stop-commands::tok2.jsonl", [rec(20, provider="ok", billed=12)])


@pytest.mark.parametrize("file_name", [False, pytest.param(True, marks=pytest.mark.skipif(
    sys.platform == "win32", reason="a newline in a file name"))])
def test_data_values_are_escaped_in_every_output(project: TokProject, file_name: bool):
    evil_project(project, file_name)
    result = project.run("-rA", "--tokaudit-annotations=github", "--tokaudit-markdown=summary.md")
    assert_no_crash(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    out = result.stdout.str()
    markdown = project.path.joinpath("summary.md").read_text()
    for text in (out, result.stderr.str(), markdown):
        assert lines_starting_a_command(text) == [], text
        for raw in ("\x1b", "\u2028", "\x85"):
            assert raw not in text
    # Shown, escaped, where they belong: the group table, the findings, the dataset check.
    assert "provider=x\\n::stop-commands::tok1" in out  # the group table and count_mean
    assert "data/a.jsonl:1: sample_id=1: custom: odd provider x\\n::stop-commands::tok1" in out
    assert "data/a.jsonl:3: sample_id=3: custom: odd provider z\\x1b[2Jclear" in out
    assert "pytest.ini::tokaudit::providers: failed: mixed: " in out
    assert "seen: y\\r\\n::error::boom" in out
    assert "::error file=data/a.jsonl,line=1,title=tokaudit custom::" in out  # annotations stay
    if file_name:
        assert "data/b\\n::stop-commands::tok2.jsonl" in out
        assert "`data/b\\n::stop-commands::tok2.jsonl`" in markdown
