"""A partial run says so last in the terminal summary, green or red: what it did not audit
and which verdicts it did not give, and why. A check that -k or --lf left out is "not
selected", never reported as "skipped: partial run"."""

from __future__ import annotations

import pytest

from conftest import TokProject, assert_no_crash, merge, rec
from pytest_tokaudit.sources.base import shard_count

OK, FAILED = pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED
HEAD = "tokaudit: PARTIAL RUN: a green result covers the part audited only, not the dataset"
NOT_SELECTED = "not selected (-k, -m, --lf, --deselect, or not under the paths named)"


def dataset(project: TokProject) -> None:
    project.ini(testpaths="data", tokaudit_unique_ids="true", tokaudit_budget=10**6,
                tokaudit_shard_size=600)
    project.jsonl("data/a.jsonl", [rec(i, 10) for i in range(5)])
    project.jsonl("data/sub/b.jsonl", [rec(i, 10) for i in range(10, 15)])
    project.jsonl("data/big.jsonl", [rec(i, 10) for i in range(100, 130)])


def tail(result: pytest.RunResult) -> list[str]:
    lines = result.stdout.lines
    at = lines.index(HEAD) if HEAD in lines else len(lines)
    return [line for line in lines[at:] if not line.startswith("=")]


def test_a_subfolder_run_says_what_it_did_not_judge(project: TokProject):
    dataset(project)
    result = project.run(paths=("data/sub",))
    assert_no_crash(result)
    assert result.ret == OK
    assert tail(result) == [
        HEAD,
        f"  not audited: 2 data files {NOT_SELECTED}: data/a.jsonl, data/big.jsonl",
        "  not judged (skipped): coverage, budget, unique_ids",
    ], result.stdout.str()


def test_a_k_run_names_the_checks_it_left_out(project: TokProject):
    dataset(project)
    result = project.run("-k", "big")
    assert result.ret == OK
    assert tail(result) == [
        HEAD,
        f"  not audited: 2 data files {NOT_SELECTED}: data/a.jsonl, data/sub/b.jsonl",
        "  not judged (not selected): coverage, budget, unique_ids",
    ], result.stdout.str()
    # The sharded file's own verdict ran (every shard did): it is no partial part.
    assert "big.jsonl [file]" not in result.stdout.str()
    # -k deselects the dataset checks like any test whose name does not match: the other
    # two files and the three checks (test_dataset.py's -k run, folded here).
    shards = shard_count((project.path / "data/big.jsonl").stat().st_size, 600)
    counts = result.parseoutcomes()
    assert counts.get("passed") == shards + 1 and not counts.get("skipped"), counts
    if "-n" not in project.mode:  # xdist's summary line counts no deselected item
        assert counts.get("deselected") == 5, counts


def test_a_shard_left_out_leaves_its_file_verdict_unjudged(project: TokProject):
    dataset(project)
    assert shard_count((project.path / "data/big.jsonl").stat().st_size, 600) > 1
    result = project.run("--deselect", "data/big.jsonl::tokaudit[shard 1]")
    assert result.ret == OK
    assert tail(result) == [
        HEAD,
        f"  not audited: 1 data file did not finish (failed to run, skipped, timed out, crashed "
        f"or stopped): data/big.jsonl",
        "  not judged (skipped): coverage, budget, unique_ids, data/big.jsonl [file]",
    ], result.stdout.str()


@pytest.mark.parametrize("xdist_mode", [("-p", "no:xdist")], ids=["no-xdist"])
def test_lf_does_not_report_the_checks_it_deselected_as_skipped(project: TokProject):
    dataset(project)
    project.jsonl("data/a.jsonl", [rec(i, 10, 40 if i == 2 else None) for i in range(5)])
    assert project.run().ret == FAILED  # a.jsonl alone; the dataset checks pass
    project.jsonl("data/a.jsonl", [rec(i, 10) for i in range(5)])
    result = project.run("--lf")
    assert result.ret == OK, result.stdout.str()
    out = result.stdout.str()
    assert "pytest.ini::tokaudit::" not in out, out  # none ran, none is reported skipped
    assert tail(result) == [
        HEAD,
        f"  not audited: 2 data files {NOT_SELECTED}: data/big.jsonl, data/sub/b.jsonl",
        "  not judged (not selected): coverage, budget, unique_ids",
    ], out


def test_a_whole_run_says_nothing_of_the_kind(project: TokProject):
    dataset(project)
    result = project.run()
    assert result.ret == OK
    assert HEAD not in result.stdout.lines


@pytest.mark.parametrize("how", [("--deselect", "data/big.jsonl::tokaudit[file]"),
                                 ("-k", "not file")], ids=["deselect", "k"])
def test_a_file_verdict_left_out_leaves_the_file_unaudited(project: TokProject, how, tmp_path):
    """Every shard ran, but the file's own verdict (allowances, the mean, file checks) did
    not: the file is not audited to the end, the run is partial, and a merge of its report
    cannot pass the file (issue #31, item 7)."""
    dataset(project)
    assert shard_count((project.path / "data/big.jsonl").stat().st_size, 600) > 1
    result = project.run(*how, "--tokaudit-json=part.json")
    assert_no_crash(result)
    out = result.stdout.str()
    assert result.ret == OK, out
    assert "coverage: passed" not in out
    assert tail(result) == [
        HEAD,
        "  not audited: 1 data file whose own verdict ([file]) was not selected (-k, -m, "
        "--lf, --deselect): data/big.jsonl",
        "  not judged (skipped): coverage, budget, unique_ids",
        "  not judged (not selected): data/big.jsonl [file]",
        "tokaudit JSON report: part.json",
    ], out
    ret, out, err = merge(str(project.path / "part.json"))
    assert ret == FAILED, out + err
    assert "FAILED tokaudit::coverage - the reports together did not audit the whole dataset" \
        in out, out
    assert "data/big.jsonl" in out
