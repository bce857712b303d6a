"""`python -m pytest_tokaudit merge`: the final job of an audit split over CI jobs judges the
union of the parts' reports as one run. It passes only when the parts together audited the
whole dataset (issue #22, item 4), and only on parts written under one contract, whatever
the order they are given in (item 5)."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

import forkrun
from conftest import FULL, TokProject, assert_no_crash, merge, rec

FAILED = pytest.ExitCode.TESTS_FAILED
OK = pytest.ExitCode.OK


def part(project: TokProject, name: str, *paths: str, args: tuple[str, ...] = ()) -> pytest.RunResult:
    """One CI job: audit `paths` and write its report to `name` (a report of that name
    written before is gone first)."""
    (project.path / name).unlink(missing_ok=True)
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
    """The split's two parts pass together. The same two reports (one part written again
    under another contract in turn) then show items 4 and 5 below: parts of different
    contracts are a usage error in any order, and reports without coverage cannot pass."""
    split.ini(testpaths="data", tokaudit_unique_ids="true", tokaudit_budget=1000)
    part(split, "p1.json", "data/part1")
    part(split, "p2.json", "data/part2")
    ret, out, _ = merge("p1.json", "p2.json")
    assert ret == 0, out
    assert coverage_line(out).startswith("PASSED tokaudit::coverage - 2 data files (6 records)")
    p2 = (split.path / "p2.json").read_bytes()
    for other in OTHER_CONTRACTS:
        assert_other_contract_is_a_usage_error(split, other)
    (split.path / "p2.json").write_bytes(p2)
    assert_reports_without_coverage_cannot_pass_a_merge(split)


def test_files_no_part_audits_fail_the_merge(split: TokProject):
    """A new folder nobody added to the CI matrix, and a file one part deselected: every part
    is partial, and so is their union. The final job fails, naming both files."""
    split.jsonl("data/part3/c.jsonl", [rec(7, billed=30)])  # bad, and never audited
    split.jsonl("data/part2/skipped.jsonl", [rec(8)])
    part(split, "p1.json", "data/part1")
    part(split, "p2.json", "data/part2", args=("--deselect", "data/part2/skipped.jsonl::tokaudit"))
    for order in (("p1.json", "p2.json"), ("p2.json", "p1.json")):
        ret, out, _ = merge(*order, "--json", "m.json")
        assert ret == 1, out
        line = coverage_line(out)
        assert line.startswith("FAILED tokaudit::coverage - the reports together did not audit "
                               "the whole dataset: 2 data files audited by no report"), line
        assert "data/part3/c.jsonl" in out
        assert "data/part2/skipped.jsonl" in line
        merged = json.loads((split.path / "m.json").read_text())
        assert [d["outcome"] for d in merged["dataset"] if d["name"] == "coverage"] == ["failed"]


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


def assert_reports_without_coverage_cannot_pass_a_merge(split: TokProject) -> None:
    """A report of an older version records no coverage: whether the parts covered the
    dataset cannot be known, so the merge cannot pass."""
    for name in ("p1.json", "p2.json"):
        data = json.loads((split.path / name).read_text())
        del data["coverage"]
        (split.path / name).write_text(json.dumps(data))
    ret, out, _ = merge("p1.json", "p2.json")
    assert ret == 1, out
    line = coverage_line(out)
    assert line.startswith("FAILED tokaudit::coverage - cannot tell whether the reports cover the "
                           "dataset: p1.json, p2.json record no coverage"), line


# -- item 5: one contract, any order -----------------------------------------------------------

OTHER_CONTRACTS = [
    ("-o", "tokaudit_budget=10"),  # a dataset key the union is judged by
    ("-o", "tokaudit_count_abs=0"),  # a file key the part's verdicts were made with
    ("-o", "tokaudit_unique_ids=false"),  # the part keeps no ids for the id checks
]


def assert_other_contract_is_a_usage_error(split: TokProject, other: tuple[str, str]) -> None:
    """p2.json written again under `other`: with p1.json, a usage error in either order."""
    part(split, "p2.json", "data/part2", args=other)
    key = other[1].split("=")[0]
    for order in (("p1.json", "p2.json"), ("p2.json", "p1.json")):
        (split.path / "m.json").unlink(missing_ok=True)
        ret, out, err = merge(*order, "--json", "m.json")
        assert ret == 2, out + err
        assert f"error: p1.json and p2.json were written under different contracts: {key}" in err, err
        assert "merge the reports of one contract" in err, err
        assert not (split.path / "m.json").exists()


def test_parts_from_checkouts_in_other_folders_are_one_contract(pytester: pytest.Pytester):
    """The manifest is named by an absolute path in a report: two CI jobs checking out the
    project in different folders wrote the same contract (the same manifest's bytes). The
    same path holding another manifest is another contract."""
    def checkout(name: str, manifest: str) -> TokProject:
        project = TokProject(pytester, ("-p", "no:xdist"))
        root = pytester.path / name
        root.mkdir()
        project.path = root
        project.ini(testpaths="data", tokaudit_expected_ids="manifest.txt")
        project.write("manifest.txt", manifest)
        project.jsonl("data/part1/a.jsonl", [rec(i) for i in range(1, 4)])
        project.jsonl("data/part2/b.jsonl", [rec(i) for i in range(4, 7)])
        return project

    def run(project: TokProject, report: str, paths: str) -> None:
        result = forkrun.runpytest(pytester, 
            "--tokaudit", paths, "-p", "no:xdist", f"--tokaudit-json={pytester.path / report}",
            "--rootdir", str(project.path), "-c", str(project.path / "pytest.ini"),
            "--tokaudit-no-cache")
        assert_no_crash(result)

    ones = "\n".join(map(str, range(1, 7))) + "\n"
    run(checkout("job1", ones), "p1.json", str(pytester.path / "job1/data/part1"))
    run(checkout("job2", ones), "p2.json", str(pytester.path / "job2/data/part2"))
    a = json.loads((pytester.path / "p1.json").read_text())["contract"]["tokaudit_expected_ids"]
    b = json.loads((pytester.path / "p2.json").read_text())["contract"]["tokaudit_expected_ids"]
    assert a != b  # absolute paths: another folder
    for order in (("p1.json", "p2.json"), ("p2.json", "p1.json")):
        ret, out, err = merge(*order)
        assert ret == 0, out + err
        assert "PASSED tokaudit::expected_ids - all 6 expected ids have a record" in out
    run(checkout("job3", ones + "7\n"), "p3.json", str(pytester.path / "job3/data/part2"))
    for order in (("p1.json", "p3.json"), ("p3.json", "p1.json")):
        ret, out, err = merge(*order)
        assert ret == 2, out + err
        assert "different contracts: tokaudit_expected_ids" in err, err


def test_a_manifest_changed_since_the_reports_were_written_is_a_usage_error(split: TokProject):
    """The parts were judged under a manifest naming an id no record has; the merge reads
    the manifest again from disk, where it has since lost that id. The union is judged by
    the manifest its reports were written under, or not at all (issue #31, item 9)."""
    split.ini(testpaths="data", tokaudit_expected_ids="manifest.txt")
    split.write("manifest.txt", "".join(f"{i}\n" for i in range(1, 8)))  # 7 has no record
    part(split, "p1.json", "data/part1")
    part(split, "p2.json", "data/part2")
    ret, out, err = merge("p1.json", "p2.json")
    assert ret == 1, out + err
    assert "FAILED tokaudit::expected_ids - 1 of 7 expected ids have no record" in out, out
    split.write("manifest.txt", "".join(f"{i}\n" for i in range(1, 7)))
    for order in (("p1.json", "p2.json"), ("p2.json", "p1.json")):
        ret, out, err = merge(*order, "--json", "m.json")
        assert ret == 2, out + err
        manifest = split.path / "manifest.txt"
        assert f"error: tokaudit_expected_ids: {manifest} holds other bytes than when " \
               "p1.json and p2.json were written" in err, err
        assert not (split.path / "m.json").exists()


# The property: however the dataset is split into parts (some files left to no part, one part
# perhaps run under another contract), the merge in every order of the parts gives one
# answer: the single run's verdicts when the parts cover the dataset under one contract, a
# failed coverage when they do not, a usage error when the contracts differ.
FILES = ["a", "b", "c", "d", "big"]
NOBODY = 3  # a file given to no part


def dataset(project: TokProject) -> None:
    project.ini(testpaths="data", tokaudit_budget=1000, tokaudit_unique_ids="true",
                tokaudit_expected_ids="manifest.txt", tokaudit_shard_size=700,
                tokaudit_count_mean_rel="")
    project.jsonl("data/a.jsonl", [rec(i) for i in range(1, 6)])
    project.jsonl("data/b.jsonl", [rec(6), rec(7, billed=30), rec(8)])  # a count finding
    project.jsonl("data/c.jsonl", [rec(9), rec(3)])  # id 3 again: unique_ids fails
    project.jsonl("data/d.jsonl", [rec(10)])
    project.jsonl("data/big.jsonl", [rec(i, 12) for i in range(11, 41)])  # sharded
    project.write("manifest.txt", "\n".join(map(str, range(1, 43))) + "\n")  # 41, 42 missing


# The suite runs the examples below; the full matrix (nox -s full) searches on.
@settings(max_examples=6, deadline=None, phases=tuple(Phase) if FULL else (Phase.explicit,),
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(assign=st.lists(st.integers(0, NOBODY), min_size=len(FILES), max_size=len(FILES)),
       other_contract=st.booleans())
@example(assign=[0, 1, 2, 0, 1], other_contract=False)  # three parts covering it
@example(assign=[0, 0, 1, 1, NOBODY], other_contract=False)  # the sharded file left out
@example(assign=[0, 1, 0, 1, 0], other_contract=True)
def test_random_splits_merged_in_every_order_agree_with_one_run(
    pytester: pytest.Pytester, assign: list[int], other_contract: bool
):
    project = TokProject(pytester, ("-p", "no:xdist"))
    if not (pytester.path / "all.json").exists():
        dataset(project)
        single = part(project, "all.json", "data")
        files = sorted({m for m in re.findall(r"^FAILED (data/\S+?)::tokaudit", single.stdout.str(), re.M)})
        (pytester.path / "all.verdict").write_text(json.dumps([int(single.ret), files]))
    one = json.loads((pytester.path / "all.json").read_text())
    one_ret, one_failed = json.loads((pytester.path / "all.verdict").read_text())
    parts = sorted({k for k in assign if k != NOBODY})
    if not parts:
        return
    names = []
    for k in parts:
        name = f"part{k}.json"
        (pytester.path / name).unlink(missing_ok=True)
        args = ("-o", "tokaudit_budget=999") if other_contract and k == parts[-1] else ()
        part(project, name, *(f"data/{f}.jsonl" for f, a in zip(FILES, assign) if a == k), args=args)
        names.append(name)
    differ = other_contract and len(parts) > 1
    covered = NOBODY not in assign
    answers = set()
    for order in itertools.permutations(names):
        (pytester.path / "m.json").unlink(missing_ok=True)
        ret, out, err = merge(*order, "--json", "m.json")
        if differ:
            assert ret == 2, out + err
            answers.add(ret)
            continue
        merged = json.loads((pytester.path / "m.json").read_text())
        verdicts = {d["name"]: (d["outcome"], d["message"]) for d in merged["dataset"]}
        failed = re.findall(r"^FAILED (data/\S+)$", out, re.M)
        if covered:
            assert ret == one_ret, out
            assert merged["dataset"] == one["dataset"], out
            assert failed == one_failed, out
            assert merged["totals"] == one["totals"]
        else:
            assert ret == 1, out
            assert verdicts["coverage"][0] == "failed", out
        answers.add(json.dumps([ret, verdicts, failed]))
    assert len(answers) == 1, answers  # never order-dependent
