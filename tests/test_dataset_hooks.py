"""Dataset-wide checks are plugins: a conftest.py declares one, fills its channel from a batch
hook, and judges it like the built-in budget / unique_ids / expected_ids; the merge command
runs the same hook on the union of reports."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import TokProject, assert_no_crash, rec

PROVIDERS = '''
from pytest_tokaudit import Outcome


def pytest_tokaudit_dataset_checks(contract):
    return ["providers"]


def pytest_tokaudit_check_batch(records, summary):
    summary.channel("providers").extend(sorted({r.data["provider"] for r in records}))


def pytest_tokaudit_check_dataset(name, dataset):
    if name != "providers":
        return None
    seen = sorted({p for _, values in dataset.channel("providers") for p in values})
    if len(seen) > 1:
        return Outcome.failed(f"{len(seen)} providers mixed: {seen}",
                              [f"{path}: {sorted(set(v))}" for path, v in dataset.channel("providers")])
    return Outcome.passed(f"one provider: {seen}")
'''


def providers_project(project: TokProject, mixed: bool) -> None:
    project.ini(testpaths="data")
    project.write("conftest.py", PROVIDERS)
    project.jsonl("data/a.jsonl", [rec(i, provider="api") for i in range(1, 4)])
    project.jsonl("data/b.jsonl", [rec(i, provider="other" if mixed else "api") for i in range(4, 7)])


def test_a_dataset_check_of_a_conftest_is_collected_and_judged(project: TokProject):
    providers_project(project, mixed=True)
    listed = project.run("--collect-only", "-q")
    assert "pytest.ini::tokaudit::providers" in listed.stdout.lines, listed.stdout.str()
    result = project.run("-rA")
    assert_no_crash(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert ("FAILED pytest.ini::tokaudit::providers - 2 providers mixed: ['api', 'other']"
            in result.stdout.lines), result.stdout.str()
    assert "data/b.jsonl: ['other']" in result.stdout.str()


def test_a_passing_dataset_check_passes_only_on_a_complete_run(project: TokProject):
    providers_project(project, mixed=False)
    whole = project.run("-rA")
    assert whole.ret == pytest.ExitCode.OK, whole.stdout.str()
    whole.stdout.fnmatch_lines(["PASSED pytest.ini::tokaudit::providers"])
    part = project.run("-rA", paths=("data/a.jsonl",))
    assert part.ret == pytest.ExitCode.OK, part.stdout.str()
    assert ("SKIPPED [1] pytest.ini: partial run (one provider: ['api'] on the part audited): "
            "1 data file not selected") in part.stdout.str()


@pytest.mark.parametrize("body, message", [
    ("return None", "no pytest_tokaudit_check_dataset implementation returned an Outcome for it"),
    ("raise KeyError('provider')", "pytest_tokaudit_check_dataset raised KeyError: 'provider'"),
    ("return 'fine'", "pytest_tokaudit_check_dataset returned str, not an Outcome"),
])
def test_a_dataset_check_without_a_verdict_fails_the_check_not_the_run(
    pytester: pytest.Pytester, body: str, message: str
):
    project = TokProject(pytester, ("-p", "no:xdist"))
    project.ini()
    project.write("conftest.py", "def pytest_tokaudit_dataset_checks():\n    return ['mine']\n\n"
                                 f"def pytest_tokaudit_check_dataset(name):\n    {body}\n")
    project.jsonl("data/a.jsonl", [rec(1)])
    result = project.run("-rA")
    assert_no_crash(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert f"pytest.ini::tokaudit::mine: failed: {message}" in result.stdout.lines, result.stdout.str()
    result.stdout.fnmatch_lines(["FAILED pytest.ini::tokaudit::mine - *"])


def test_a_bad_check_name_is_a_usage_error(pytester: pytest.Pytester):
    project = TokProject(pytester, ("-p", "no:xdist"))
    project.ini()
    project.write("conftest.py", "def pytest_tokaudit_dataset_checks():\n    return ['no good']\n")
    project.jsonl("data/a.jsonl", [rec(1)])
    result = project.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*pytest_tokaudit_dataset_checks: 'no good' is not a check name*"])


def test_a_built_in_dataset_check_is_a_plugin_that_can_be_turned_off(pytester: pytest.Pytester):
    project = TokProject(pytester, ("-p", "no:xdist"))
    project.ini(tokaudit_budget=5, tokaudit_unique_ids="true")
    project.jsonl("data/a.jsonl", [rec(1), rec(1)])
    on = project.run("--collect-only", "-q")
    assert {"pytest.ini::tokaudit::budget", "pytest.ini::tokaudit::unique_ids"} <= set(on.stdout.lines)
    off = project.run("-p", "no:tokaudit.budget", "-rA")
    assert "pytest.ini::tokaudit::budget" not in off.stdout.str()
    off.stdout.fnmatch_lines(["FAILED pytest.ini::tokaudit::unique_ids - 1 id with more than one*"])


def test_merge_runs_the_same_dataset_hook_on_the_union(pytester: pytest.Pytester):
    project = TokProject(pytester, ("-p", "no:xdist"))
    providers_project(project, mixed=True)
    for part in ("a", "b"):
        result = project.run(f"--tokaudit-json={part}.json", paths=(f"data/{part}.jsonl",))
        assert result.ret == pytest.ExitCode.OK, result.stdout.str()  # each part alone: one provider
    report = json.loads((pytester.path / "b.json").read_text())
    assert report["files"][0]["channels"]["providers"] == ["other"]
    merged = subprocess.run(
        [sys.executable, "-m", "pytest_tokaudit", "merge", "a.json", "b.json",
         "--plugin", "conftest.py", "--json", "all.json"],
        cwd=pytester.path, capture_output=True, text=True, timeout=60,
    )
    assert merged.returncode == 1, merged.stdout + merged.stderr
    assert "FAILED tokaudit::providers - 2 providers mixed: ['api', 'other']" in merged.stdout
    assert "PASSED tokaudit::coverage" in merged.stdout
    without = subprocess.run([sys.executable, "-m", "pytest_tokaudit", "merge", "a.json", "b.json"],
                             cwd=pytester.path, capture_output=True, text=True, timeout=60)
    assert without.returncode == 0, without.stdout + without.stderr
    bad = subprocess.run([sys.executable, "-m", "pytest_tokaudit", "merge", "a.json",
                          "--plugin", "missing.py"], cwd=pytester.path, capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2 and "--plugin missing.py: FileNotFoundError" in bad.stderr, bad.stderr


def test_the_entry_module_imports_nothing_heavy():
    code = ("import sys, pytest_tokaudit.plugin; "
            "print(sorted(m for m in ('orjson', 'pyarrow', 'transformers', 'pytest_tokaudit.api',"
            " 'pytest_tokaudit.model.summary', 'pytest_tokaudit.checks', 'pytest_tokaudit.engine')"
            " if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
