"""Dataset-wide checks across files and xdist workers, reports and merging (the baseline:
checks/test_baseline.py; each dataset check alone: checks/test_<check>.py)."""

from __future__ import annotations

import json
import sys

import pytest

import forkrun
from conftest import UNRELATED_PLUGINS, TokProject, assert_no_crash, rec, summary_section

FAILED = pytest.ExitCode.TESTS_FAILED

# Every way of running the same audit; the verdicts and the tables must not change.
MODES = {
    "no-xdist": ("-p", "no:xdist"),
    "n0": ("-n", "0"),
    "n2": ("-n", "2"),  # --dist load: xdist's default with -n
    "loadfile": ("-n", "2", "--dist", "loadfile"),
    "worksteal": ("-n", "2", "--dist", "worksteal"),
}


def dataset(project: TokProject, budget: int = 1000) -> None:
    project.ini(
        tokaudit_budget=budget,
        tokaudit_price_per_mtok="2.50",
        tokaudit_unique_ids="true",
        tokaudit_expected_ids="manifest.txt",
        tokaudit_shard_size=700,  # big.jsonl is sharded, the others are not
    )
    project.jsonl("data/a.jsonl", [rec(i, 10) for i in range(1, 6)])
    project.jsonl("data/b.jsonl", [rec(i, 10) for i in range(6, 10)] + [rec(3, 10)])
    project.jsonl("data/big.jsonl", [rec(i, 12) for i in range(10, 40)])
    project.write("manifest.txt", "\n".join(str(i) for i in range(1, 45)) + "\n")


def verdicts(result: pytest.RunResult) -> list[str]:
    """Outcome lines of -rA, sorted: xdist reports in completion order."""
    return sorted(
        line for line in result.stdout.lines
        if line.split(" ")[0] in ("PASSED", "FAILED", "SKIPPED", "ERROR")
    )


def test_dataset_checks_identical_in_every_xdist_mode(pytester: pytest.Pytester):
    """The same verdicts, summary and JUnit test cases in every mode; the dataset checks'
    failure sections say what they found."""
    project = TokProject(pytester, ())
    dataset(project)
    seen, results, junit = {}, {}, {}
    for name, mode in MODES.items():
        result = forkrun.runpytest(pytester,   # each mode audits: no run reuses another's
            "--tokaudit", "data", "-rA", "--tokaudit-no-cache", "--junitxml=r.xml", *mode,
            *UNRELATED_PLUGINS, timeout=120,
        )
        assert_no_crash(result)
        assert result.ret == FAILED, (name, result.stdout.str())
        seen[name] = (verdicts(result), summary_section(result))
        results[name] = result
        junit[name] = (project.path / "r.xml").read_text()
    first = seen.pop("no-xdist")
    for name, other in seen.items():
        assert other == first, name
    lines, summary = first
    assert "PASSED pytest.ini::tokaudit::coverage" in lines
    assert "PASSED pytest.ini::tokaudit::budget" in lines
    assert any(l.startswith("FAILED pytest.ini::tokaudit::unique_ids - 1 id with more than one")
               for l in lines)
    assert "FAILED pytest.ini::tokaudit::expected_ids - 5 of 44 expected ids have no record" in lines
    assert "PASSED data/big.jsonl::tokaudit[file]" in lines
    assert [l for l in lines if "shard" in l] == [
        f"PASSED data/big.jsonl::tokaudit[shard {i}]" for i in range(1, 7)
    ]
    assert ("pytest.ini::tokaudit::budget: passed: billed 460 of 1,000 tokens (46.0%); "
            "$0.0011 of $0.0025") in summary
    results["no-xdist"].stdout.fnmatch_lines([
        "*_ tokaudit::unique_ids _*",
        "1 id with more than one record (1 record counted twice)",
        "sample_id=3: 2 records: data/a.jsonl:3, data/b.jsonl:5",
        "*_ tokaudit::expected_ids _*",
        "5 of 44 expected ids have no record",
        "missing: 40-44",
    ])
    # The dataset checks are JUnit test cases, in one process and from xdist's controller.
    for name in ("no-xdist", "n2"):
        xml = junit[name]
        assert '<testcase classname="tokaudit" name="budget"' in xml, name
        assert '<testcase classname="tokaudit" name="unique_ids"' in xml, name
        assert 'message="1 id with more than one record' in xml, name


def test_partial_runs_never_pass_a_dataset_check(project: TokProject):
    dataset(project)
    result = project.run("-rA", paths=("data/a.jsonl",))
    assert_no_crash(result)
    assert result.ret == 0
    assert not [l for l in verdicts(result) if l.startswith("PASSED pytest.ini")], result.stdout.str()
    result.assert_outcomes(passed=1, skipped=4)
    result.stdout.fnmatch_lines([
        "SKIPPED [[]2[]] pytest.ini: partial run: 2 data files not selected (-k, -m, --lf, "
        "--deselect, or not under the paths named): data/b.jsonl, data/big.jsonl",
    ])
    # -k deselects the dataset checks like any test whose name does not match:
    # outputs/test_partial_runs.py::test_a_k_run_names_the_checks_it_left_out.


# A crashed worker loses only its file: test_gate.py::test_a_crashed_worker_makes_the_run_partial.


def test_merge_of_split_runs_matches_one_run(pytester: pytest.Pytester):
    project = TokProject(pytester, ("-p", "no:xdist"))
    dataset(project)
    whole = project.run("--tokaudit-json=all.json")
    # The parts audit (as separate CI jobs would): reused results would be marked cached.
    part1 = project.run("--tokaudit-json=p1.json", "--tokaudit-no-cache",
                        paths=("data/a.jsonl", "data/big.jsonl"))
    part2 = project.run("--tokaudit-json=p2.json", "--tokaudit-no-cache", paths=("data/b.jsonl",))
    # Each part alone is clean: its dataset checks skip as partial, none fails or passes.
    assert whole.ret == FAILED and part1.ret == part2.ret == 0
    merged = pytester.run(sys.executable, "-m", "pytest_tokaudit", "merge", "p1.json", "p2.json",
                          "--json", "merged.json")
    assert merged.ret == 1
    merged.stdout.fnmatch_lines([
        "PASSED tokaudit::coverage - 3 data files (40 records) audited to the end*",
        "PASSED tokaudit::budget - billed 460 of 1,000 tokens*",
        "FAILED tokaudit::unique_ids - 1 id with more than one record*",
        "    sample_id=3: 2 records: data/a.jsonl:3, data/b.jsonl:5",
        "FAILED tokaudit::expected_ids - 5 of 44 expected ids have no record",
        "    missing: 40-44",
    ])
    one = json.loads((pytester.path / "all.json").read_text())
    both = json.loads((pytester.path / "merged.json").read_text())
    assert both["totals"] == one["totals"]
    assert both["dataset"] == one["dataset"]
    strip = lambda files: [{k: v for k, v in f.items() if k not in ("collected",)} for f in files]
    assert strip(both["files"]) == strip(one["files"])
    # The merged table is the single run's table.
    table = [l for l in merged.stdout.lines if l.startswith(("file ", "data/", "all "))]
    assert table[:5] == [l for l in summary_section(whole) if l][:5]
    # The same file in two reports would be counted twice: refused.
    twice = pytester.run(sys.executable, "-m", "pytest_tokaudit", "merge", "p1.json", "all.json")
    assert twice.ret == 2
    twice.stderr.fnmatch_lines(["error: data/a.jsonl is in both p1.json and all.json"])


# --lf and --ff: test_gate.py::test_last_failed_keeps_a_dataset_failure_until_it_is_fixed.


def test_collect_only_lists_the_dataset_checks_and_judges_nothing(project: TokProject):
    dataset(project)
    result = project.run("--collect-only", "-q")
    assert result.ret == 0
    assert [l for l in result.stdout.lines if l.startswith("pytest.ini::")] == [
        "pytest.ini::tokaudit::coverage", "pytest.ini::tokaudit::budget",
        "pytest.ini::tokaudit::unique_ids", "pytest.ini::tokaudit::expected_ids",
    ]
    result.stdout.fnmatch_lines(["13 tests collected*"])  # 2 files, 6 shards + [file], 4 checks
    result.stdout.no_fnmatch_line("*tokaudit summary*")


def test_a_contract_hook_error_is_a_collection_error_with_its_message(project: TokProject):
    dataset(project)
    project.write("data/conftest.py", (
        "def pytest_tokaudit_contract(path, contract):\n"
        "    return contract.replace(require_once=('</think>',))\n"
    ))
    result = project.run("-rA")
    # Without xdist collection errors stop the session; xdist runs on, judging nothing whole.
    xdist = "no:xdist" not in project.mode
    assert result.ret == (FAILED if xdist else pytest.ExitCode.INTERRUPTED)
    if xdist:
        result.stdout.fnmatch_lines(["SKIPPED *partial run*collection error*"])
    assert not [l for l in verdicts(result) if "expected_ids" in l and "FAILED" in l]
    result.stdout.fnmatch_lines(["pytest_tokaudit_contract: tokaudit_require_once: token names "
                                 "[[]'</think>'[]] need a tokenizer*"])
    assert "Traceback" not in result.stdout.str()
