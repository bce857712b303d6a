"""`python -m pytest_tokaudit merge`: the final job of an audit split over CI jobs judges the
union of the parts' reports as one run. It passes only when the parts together audited the
whole dataset (issue #22, item 4), and only on parts written under one contract, whatever
the order they are given in (item 5)."""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from conftest import TokProject, assert_no_crash, rec

from pytest_tokaudit.__main__ import main

FAILED = pytest.ExitCode.TESTS_FAILED
OK = pytest.ExitCode.OK


def merge(*argv: str) -> tuple[int, str, str]:
    """The merge command, in process, in the project (pytester's working directory):
    (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        ret = main(["merge", *argv])
    return ret, out.getvalue(), err.getvalue()


def part(project: TokProject, name: str, *paths: str, args: tuple[str, ...] = ()) -> pytest.RunResult:
    """One CI job: audit `paths` and write its report to `name`."""
    result = project.run(f"--tokaudit-json={name}", "--tokaudit-no-cache", *args, paths=paths)
    assert_no_crash(result)
    assert (project.path / name).exists(), result.stdout.str()
    return result


@pytest.fixture
def split(pytester: pytest.Pytester) -> TokProject:
    """The README's CI split: testpaths = data, two folders audited by two jobs."""
    project = TokProject(pytester, ("-p", "no:xdist"))
    project.ini(testpaths="data", tokaudit_unique_ids="true")
    project.jsonl("data/part1/a.jsonl", [rec(i) for i in range(1, 4)])
    project.jsonl("data/part2/b.jsonl", [rec(i) for i in range(4, 7)])
    return project


def coverage_line(out: str) -> str:
    return next(l for l in out.splitlines() if " tokaudit::coverage - " in l)


# -- item 4: the union must cover the dataset --------------------------------------------------

def test_the_readme_split_covering_the_dataset_passes(split: TokProject):
    part(split, "p1.json", "data/part1")
    part(split, "p2.json", "data/part2")
    ret, out, _ = merge("p1.json", "p2.json")
    assert ret == 0, out
    assert coverage_line(out).startswith("PASSED tokaudit::coverage - 2 data files (6 records)")


def test_a_folder_no_part_audits_fails_the_merge(split: TokProject):
    """A new folder nobody added to the CI matrix: every part is partial, and so is their
    union. The final job fails, naming the file."""
    split.jsonl("data/part3/c.jsonl", [rec(7, billed=30)])  # bad, and never audited
    part(split, "p1.json", "data/part1")
    part(split, "p2.json", "data/part2")
    for order in (("p1.json", "p2.json"), ("p2.json", "p1.json")):
        ret, out, _ = merge(*order, "--json", "m.json")
        assert ret == 1, out
        line = coverage_line(out)
        assert line.startswith("FAILED tokaudit::coverage - the reports together did not audit "
                               "the whole dataset: 1 data file audited by no report"), line
        assert "data/part3/c.jsonl" in out
        merged = json.loads((split.path / "m.json").read_text())
        assert [d["outcome"] for d in merged["dataset"] if d["name"] == "coverage"] == ["failed"]


def test_a_file_a_part_deselected_fails_the_merge(split: TokProject):
    split.jsonl("data/part2/skipped.jsonl", [rec(8)])
    part(split, "p1.json", "data/part1")
    part(split, "p2.json", "data/part2", args=("--deselect", "data/part2/skipped.jsonl::tokaudit"))
    ret, out, _ = merge("p1.json", "p2.json")
    assert ret == 1, out
    assert coverage_line(out).startswith("FAILED tokaudit::coverage - the reports together did not "
                                         "audit the whole dataset: 1 data file audited by no "
                                         "report"), out
    assert "data/part2/skipped.jsonl" in coverage_line(out)


def test_a_part_with_a_collection_error_fails_the_merge(split: TokProject):
    split.write("data/part2/conftest.py", """
def pytest_tokaudit_contract(path, contract):
    raise ValueError("no contract for " + path.name)
""")
    part(split, "p1.json", "data/part1")
    part(split, "p2.json", "data/part2")
    ret, out, _ = merge("p1.json", "p2.json")
    assert ret == 1, out
    assert "1 collection error" in coverage_line(out), out
    assert coverage_line(out).startswith("FAILED tokaudit::coverage"), out


def test_reports_without_coverage_cannot_pass_a_merge(split: TokProject):
    """A report of an older version records no coverage: whether the parts covered the
    dataset cannot be known, so the merge cannot pass."""
    part(split, "p1.json", "data/part1")
    part(split, "p2.json", "data/part2")
    for name in ("p1.json", "p2.json"):
        data = json.loads((split.path / name).read_text())
        del data["coverage"]
        (split.path / name).write_text(json.dumps(data))
    ret, out, _ = merge("p1.json", "p2.json")
    assert ret == 1, out
    line = coverage_line(out)
    assert line.startswith("FAILED tokaudit::coverage - cannot tell whether the reports cover the "
                           "dataset: p1.json, p2.json record no coverage"), line
