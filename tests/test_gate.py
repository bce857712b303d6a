"""Gate tests: the dataset checks as real collected items, and complete vs partial runs.

These pin the reporting of dataset checks from the outside: each test builds a small
project (conftest.py's ``gate`` fixture), runs pytest in a subprocess with ``--tokaudit``
and asserts on outcomes per node id (``-rA`` lines), exit
statuses, counts and key substrings, never on whole messages or on xdist's order.

The contract, in short:

- ``<inifile>::tokaudit::budget``, ``::unique_ids``, ``::expected_ids`` and the always
  present ``::coverage`` are collected items: listed by ``--collect-only``, counted in the
  progress, selectable by node id, ``-k`` and ``-m tokaudit``.
- A run is complete when every data file under ``testpaths`` (else the rootdir) was
  collected and audited to the end. Otherwise it is partial, and then no dataset check
  passes: ``expected_ids`` is skipped, ``budget`` and ``unique_ids`` fail on what the
  audited part alone breaks and are skipped otherwise, ``coverage`` is skipped saying what
  was not audited. A complete run that audited no record fails ``coverage``.
- Reports (terminal, junitxml, pytest-html, pytest-json-report) agree; reruns, xdist modes,
  timeouts, markers and other real plugins change none of the dataset verdicts.

Real plugins of this venv that a test is not about are blocked in its subprocesses (and so
in their xdist workers): each costs start-up time in every process.
"""

from __future__ import annotations

import html
import json
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Iterable

import pytest

import forkrun
from conftest import (
    FAILED,
    INI,
    OK,
    UNRELATED_PLUGINS,
    Gate,
    Run,
    assert_clean,
    assert_no_internal_error,
    ds,
    failure_sections,
    ids_text,
    is_check,
    is_data,
    jsonl_bytes,
    rec,
    summary_rows,
)
from pytest_tokaudit.sources.base import shard_count

INTERRUPTED = pytest.ExitCode.INTERRUPTED
CHECKS = ("budget", "unique_ids", "expected_ids", "coverage")


def assert_no_dataset_pass(run: Run) -> None:
    passed = [n for n, o in run.outcomes().items() if is_check(n) and o == "PASSED"]
    assert not passed, (passed, run)


def assert_skipped_partial(run: Run, *names: str, ini: str = INI) -> None:
    for name in names:
        nodeid = ds(name, ini)
        assert run.outcome(nodeid) == "SKIPPED", (nodeid, run)
        assert "partial" in run.message(nodeid).lower(), (nodeid, run)


def assert_coverage_names_missing(run: Run, missing: Iterable[str], ini: str = INI) -> None:
    """coverage is skipped, and its reason says what was not audited."""
    nodeid = ds("coverage", ini)
    assert run.outcome(nodeid) == "SKIPPED", run
    reason = run.message(nodeid)
    assert any(Path(m).name in reason for m in missing), (reason, list(missing), run)


def merged_verdicts(result: pytest.RunResult) -> dict[str, tuple[str, str]]:
    """`python -m pytest_tokaudit merge` lines: {check name: (outcome, message)}."""
    out = {}
    for line in result.stdout.lines:
        m = re.match(r"^(PASSED|FAILED|SKIPPED) (?:\S*::)?tokaudit::(\w+)(?: - (.*))?$", line)
        if m:
            out[m.group(2)] = (m.group(1), m.group(3) or "")
    return out

# -- the whole-feature dataset ---------------------------------------------------------------

SHARD = 700


def feature_dataset(gate: Gate) -> list[str]:
    """Four files in two parts, one sharded; a manifest, a budget, unique ids.

    Complete runs: c.jsonl fails (a count), sample_id 3 is in a.jsonl and b.jsonl
    (unique_ids fails), every manifest id has a record, 530 of 1,000 tokens billed
    (counted once per xdist worker, it would be over). scratch/ is outside testpaths: not
    part of the dataset. Returns every node id of a complete run.
    """
    gate.ini(
        testpaths="data",
        tokaudit_budget=1000,
        tokaudit_unique_ids="true",
        tokaudit_expected_ids="manifest.txt",
        tokaudit_shard_size=SHARD,
    )
    gate.jsonl("data/part1/a.jsonl", [rec(i, 10) for i in range(1, 6)])
    big = gate.jsonl("data/part1/big.jsonl", [rec(i, 12) for i in range(10, 40)])
    gate.jsonl("data/part2/b.jsonl", [rec(i, 10) for i in range(6, 10)] + [rec(3, 10)])
    gate.jsonl("data/part2/c.jsonl", [rec(40, 10), rec(41, 10, 30)] + [rec(i, 10) for i in range(42, 45)])
    gate.jsonl("scratch/old.jsonl", [rec(1, 10, 99)])  # a broken leftover, outside testpaths
    gate.write("manifest.txt", ids_text(range(1, 45)))
    n = shard_count(big.stat().st_size, SHARD)
    assert n >= 3
    return list(feature_expected(n))


def feature_expected(shards: int) -> dict[str, str]:
    out = {
        "data/part1/a.jsonl::tokaudit": "PASSED",
        **{f"data/part1/big.jsonl::tokaudit[shard {i}]": "PASSED"
           for i in range(1, shards + 1)},
        "data/part1/big.jsonl::tokaudit[file]": "PASSED",
        "data/part2/b.jsonl::tokaudit": "PASSED",
        "data/part2/c.jsonl::tokaudit": "FAILED",
        ds("budget"): "PASSED",
        ds("unique_ids"): "FAILED",
        ds("expected_ids"): "PASSED",
        ds("coverage"): "PASSED",
    }
    return out


def feature_shards(gate: Gate) -> int:
    return shard_count((gate.path / "data/part1/big.jsonl").stat().st_size, SHARD)


# -- collected items: listing, progress, selection -------------------------------------------

def test_dataset_checks_are_collected_items_counted_in_the_progress(gate: Gate):
    nodeids = feature_dataset(gate)
    listed = gate.run("--collect-only", "-q")
    assert_clean(listed)
    assert listed.ret == OK, listed
    shown = {line.strip() for line in listed.lines if "::" in line}
    assert shown == set(nodeids), listed
    assert re.search(rf"^{len(nodeids)} tests? collected", listed.out, re.M), listed

    run = gate.run()
    assert_clean(run)
    assert run.outcomes() == feature_expected(feature_shards(gate)), run
    assert re.search(rf"^collected {len(nodeids)} items", run.out, re.M), run
    counts = run.counts()
    assert sum(counts.get(k, 0) for k in ("passed", "failed", "skipped")) == len(nodeids), run
    progress = [int(p) for p in re.findall(r"\[\s*(\d+)%\]", run.out)]
    assert progress and progress[-1] == 100 and max(progress) == 100, (progress, run)


def test_dataset_checks_are_selected_by_node_id_keyword_and_marker(gate: Gate):
    feature_dataset(gate)
    expected = feature_expected(feature_shards(gate))
    data_ids = {n for n in expected if is_data(n)}

    only = gate.run(ds("budget"))
    assert_clean(only)
    got = only.outcomes()
    assert ds("budget") in got and data_ids <= set(got), only
    assert ds("unique_ids") not in got and ds("expected_ids") not in got, only
    assert got[ds("budget")] == "PASSED", only  # every data file ran: a complete run

    deselected = gate.run("--deselect", ds("budget"))
    assert_clean(deselected)
    got = deselected.outcomes()
    assert ds("budget") not in got, deselected
    assert deselected.counts().get("deselected") == 1, deselected
    assert got[ds("unique_ids")] == "FAILED" and got[ds("expected_ids")] == "PASSED", deselected

    keyword = gate.run("-k", "budget")
    assert_clean(keyword)
    got = keyword.outcomes()
    assert not data_ids & set(got), keyword
    assert ds("unique_ids") not in got and ds("expected_ids") not in got, keyword
    # No data file was audited and nothing else ran: a green run would say nothing was
    # checked and passed, so the one verdict selected fails, saying why.
    assert got[ds("budget")] == "FAILED", keyword
    assert keyword.ret == pytest.ExitCode.TESTS_FAILED, keyword
    assert "no data audited: the run selected no data file and no other test" in keyword.out, keyword

    gate.write("tests/test_plain.py", "def test_plain():\n    pass\n")
    marked = gate.run("-m", "tokaudit", "--strict-markers", paths=("data", "tests"))
    assert_clean(marked)
    assert marked.outcomes() == expected, marked
    assert marked.counts().get("deselected") == 1, marked


# -- complete and partial runs ---------------------------------------------------------------

KEYBOARD_INTERRUPT = """
def pytest_tokaudit_check_record(record):
    if record.id == 12:
        raise KeyboardInterrupt
"""

MARK_SLOW = """
import pytest

def pytest_collection_modifyitems(items):
    for item in items:
        if "c.jsonl" in item.nodeid:
            item.add_marker(pytest.mark.slow)
"""

CONTRACT_ERROR = """
def pytest_tokaudit_contract(path, contract):
    return contract.replace(require_once=("</think>",))  # names need a tokenizer: an error
"""

# name: (extra args, paths, --tokaudit, files not audited, exit status, conftest files)
PARTIAL = {
    "k": (("-k", "not c.jsonl"), ("data",), True, ["c.jsonl"], OK, {}),
    "m": (("-m", "not slow"), ("data",), True, ["c.jsonl"], OK,
          {"conftest.py": MARK_SLOW}),
    "deselect": (("--deselect", "data/c.jsonl::tokaudit"), ("data",), True, ["c.jsonl"], OK, {}),
    "file-path": ((), ("data/a.jsonl",), True, ["b.jsonl", "c.jsonl"], OK, {}),
    "subfolder": ((), ("data/sub",), True, ["a.jsonl", "c.jsonl"], OK, {}),
    "addopts-tests": ((), ("tests",), False, ["a.jsonl", "b.jsonl", "c.jsonl"], OK, {}),
    "collection-error": (("--continue-on-collection-errors",), ("data",), True, ["b.jsonl"],
                         FAILED, {"data/sub/conftest.py": CONTRACT_ERROR}),
    "keyboard-interrupt": ((), ("data",), True, None, INTERRUPTED,
                           {"conftest.py": KEYBOARD_INTERRUPT}),
}


@pytest.mark.parametrize("case", list(PARTIAL))
def test_a_partial_run_passes_no_dataset_check(gate: Gate, case: str):
    args, paths, tokaudit, missing, status, conftests = PARTIAL[case]
    gate.ini(
        addopts="--tokaudit" if not tokaudit else "",
        markers="slow: a slow file",
        tokaudit_budget=1000,
        tokaudit_unique_ids="true",
        tokaudit_expected_ids="manifest.txt",
    )
    gate.jsonl("data/a.jsonl", [rec(i, 10) for i in range(1, 6)])
    gate.jsonl("data/sub/b.jsonl", [rec(i, 10) for i in range(6, 10)])
    gate.jsonl("data/c.jsonl", [rec(i, 10) for i in range(10, 15)])
    gate.write("manifest.txt", ids_text(range(1, 15)))
    gate.write("tests/test_plain.py", "def test_plain():\n    pass\n")
    for rel, text in conftests.items():
        gate.write(rel, text)
    run = gate.run(*args, paths=paths, tokaudit=tokaudit)
    assert_no_internal_error(run)
    assert run.ret == status, run
    assert_no_dataset_pass(run)
    if missing is None:  # interrupted: whatever is reported, nothing of the dataset passed
        return
    # Under the cap, no duplicate: the audited part breaks nothing, the whole is unknown.
    assert_skipped_partial(run, "budget", "unique_ids", "expected_ids")
    assert_coverage_names_missing(run, missing)


def test_a_partial_run_fails_what_the_audited_part_alone_breaks(gate: Gate):
    gate.ini(tokaudit_budget=1000, tokaudit_unique_ids="true", tokaudit_expected_ids="manifest.txt")
    gate.jsonl("data/a.jsonl", [rec(i, 300) for i in range(1, 6)])  # 1,500 billed
    gate.jsonl("data/b.jsonl", [rec(i, 10) for i in range(6, 10)] + [rec(3, 10)])
    gate.jsonl("data/c.jsonl", [rec(i, 10) for i in range(10, 15)])
    gate.write("manifest.txt", ids_text(range(1, 15)))
    run = gate.run("--deselect", "data/c.jsonl::tokaudit")
    assert_clean(run)
    assert run.ret == FAILED, run
    assert run.outcome(ds("budget")) == "FAILED", run
    assert "1,550" in run.message(ds("budget")), run
    assert run.outcome(ds("unique_ids")) == "FAILED", run
    assert_skipped_partial(run, "expected_ids")
    assert_coverage_names_missing(run, ["c.jsonl"])


@pytest.mark.parametrize("stop", [("-x",), ("--maxfail=2",)], ids=["x", "maxfail"])
def test_stopping_early_reports_dataset_checks_as_skipped(gate: Gate, stop: tuple[str, ...]):
    gate.ini(tokaudit_budget=100000, tokaudit_unique_ids="true", tokaudit_expected_ids="manifest.txt")
    gate.jsonl("data/a.jsonl", [rec(1, 10, 40)])
    gate.jsonl("data/b.jsonl", [rec(2, 10, 40)])
    gate.jsonl("data/c.jsonl", [rec(3, 10)])
    gate.jsonl("data/d.jsonl", [rec(4, 10)])
    gate.write("manifest.txt", ids_text(range(1, 5)))
    run = gate.run(*stop)
    assert_clean(run)
    assert run.ret == FAILED, run
    assert run.outcome("data/a.jsonl::tokaudit") == "FAILED", run
    assert run.outcome("data/d.jsonl::tokaudit") is None, run  # never ran
    for name in CHECKS:
        assert run.outcome(ds(name)) == "SKIPPED", (name, run)
        reason = re.sub(r"^skipped:\s*", "", run.message(ds(name)).strip(), flags=re.I)
        assert reason, (name, run)
    assert_skipped_partial(run, "budget", "unique_ids", "expected_ids")


CRASH = """
import os

def pytest_tokaudit_check_record(record):
    if record.data.get("crash"):
        os._exit(3)  # a worker killed mid-file, as by the out-of-memory killer
"""


def test_a_crashed_worker_makes_the_run_partial(gate: Gate):
    """A worker killed mid-file loses only its file (reported failed once, the other files
    and a sharded file's whole verdict stand), and the run is partial."""
    gate.ini(tokaudit_budget=1000, tokaudit_unique_ids="true", tokaudit_expected_ids="manifest.txt",
             tokaudit_shard_size=SHARD)
    gate.jsonl("data/a.jsonl", [rec(i, 10) for i in range(1, 6)])
    gate.jsonl("data/b.jsonl", [rec(i, 10) for i in range(6, 10)])
    gate.jsonl("data/big.jsonl", [rec(i, 12) for i in range(10, 40)])  # sharded
    gate.jsonl("data/crash.jsonl", [rec(90, 10), rec(91, 10, crash=True)])
    gate.write("manifest.txt", ids_text([*range(1, 40), 90, 91]))
    gate.write("conftest.py", CRASH)
    run = gate.run("-n", "2")
    assert_no_internal_error(run)
    assert run.ret == FAILED, run
    failed = [n for n, o in run.outcomes().items() if o == "FAILED" and n.startswith("data/")]
    assert failed == ["data/crash.jsonl::tokaudit"], run  # once, and no other file
    assert run.outcome("data/a.jsonl::tokaudit") == "PASSED", run
    assert run.outcome("data/big.jsonl::tokaudit[file]") == "PASSED", run
    run.result.stdout.fnmatch_lines(["*crashed while running*data/crash.jsonl::tokaudit*"])
    run.result.stdout.fnmatch_lines(["SKIPPED *partial run: 1 data file did not finish*crash.jsonl"])
    assert_no_dataset_pass(run)
    assert_skipped_partial(run, "budget", "unique_ids", "expected_ids")
    assert_coverage_names_missing(run, ["crash.jsonl"])


SLOW = """
import time

def pytest_tokaudit_check_record(record):
    if record.id == 99:
        time.sleep(5)
"""


def test_a_timed_out_file_makes_the_run_partial(gate: Gate):
    gate.ini(tokaudit_budget=1000, tokaudit_unique_ids="true", tokaudit_expected_ids="manifest.txt")
    gate.jsonl("data/a.jsonl", [rec(i, 400) for i in range(1, 6)])  # 2,000 billed: over
    gate.jsonl("data/slow.jsonl", [rec(98, 10), rec(99, 10), rec(100, 10)])
    gate.write("manifest.txt", ids_text([1, 2, 3, 4, 5, 98, 99, 100]))
    gate.write("conftest.py", SLOW)
    run = gate.run("--timeout=2", plugins=("timeout",))
    assert_no_internal_error(run)  # pytest-timeout prints the stack it stopped: expected
    assert run.ret == FAILED, run
    assert run.outcome("data/slow.jsonl::tokaudit") == "FAILED", run
    assert "timeout" in run.out.lower(), run
    assert run.outcome("data/a.jsonl::tokaudit") == "PASSED", run
    assert run.outcome(ds("budget")) == "FAILED", run  # the audited part alone is over the cap
    assert_no_dataset_pass(run)
    assert_skipped_partial(run, "unique_ids", "expected_ids")
    assert_coverage_names_missing(run, ["slow.jsonl"])


def test_last_failed_keeps_a_dataset_failure_until_it_is_fixed(gate: Gate):
    """--lf audits the failed files alone: the dataset checks cannot judge, say why, and the
    failures they had stay on record for the next --lf; --ff runs every file (failures
    first): nothing is partial, and the failure is back."""
    gate.ini(tokaudit_budget=100000, tokaudit_unique_ids="true", tokaudit_expected_ids="manifest.txt",
             tokaudit_shard_size=SHARD)
    gate.jsonl("data/a.jsonl", [rec(i, 10) for i in range(1, 6)])
    gate.jsonl("data/b.jsonl", [rec(6, 10), rec(7, 10, 40), rec(3, 10)])  # a count, and 3 again
    gate.jsonl("data/big.jsonl", [rec(i, 12) for i in range(10, 40)])  # sharded
    gate.jsonl("data/bad.jsonl", ["not json"])
    gate.write("manifest.txt", ids_text([*range(1, 8), *range(10, 45)]))  # 40-44: no record
    cache = ("cacheprovider",)
    first = gate.run(plugins=cache)
    assert_clean(first)
    assert first.outcome("data/b.jsonl::tokaudit") == "FAILED", first
    assert first.outcome("data/bad.jsonl::tokaudit") == "FAILED", first
    assert first.outcome(ds("unique_ids")) == "FAILED", first
    assert first.outcome(ds("expected_ids")) == "FAILED", first

    gate.jsonl("data/b.jsonl", [rec(6, 10), rec(7, 10), rec(3, 10)])  # the count fixed, not 3
    lf = gate.run("--lf", plugins=cache)
    assert_clean(lf)
    assert lf.outcome("data/b.jsonl::tokaudit") == "PASSED", lf
    assert lf.outcome("data/bad.jsonl::tokaudit") == "FAILED", lf
    assert lf.outcome("data/a.jsonl::tokaudit") is None, lf  # not a failure: not run
    assert lf.outcome(ds("unique_ids")) != "PASSED", lf
    assert lf.outcome(ds("expected_ids")) == "SKIPPED", lf
    assert "partial run: 2 data files not selected" in lf.message(ds("expected_ids")), lf
    assert_no_dataset_pass(lf)
    lastfailed = json.loads((gate.path / ".pytest_cache/v/cache/lastfailed").read_text())
    assert ds("unique_ids") in lastfailed, (lastfailed, lf)
    assert ds("expected_ids") in lastfailed, (lastfailed, lf)

    again = gate.run("--ff", plugins=cache)
    assert_clean(again)
    assert again.outcome(ds("unique_ids")) == "FAILED", again
    assert again.outcome(ds("expected_ids")) == "FAILED", again
    assert again.message(ds("expected_ids")) == "5 of 42 expected ids have no record", again
    assert again.ret == FAILED, again


# -- no data, unusable data, spend -----------------------------------------------------------

def test_a_run_that_audits_no_record_fails(gate: Gate):
    gate.ini(tokaudit_budget=1000, tokaudit_unique_ids="true")
    (gate.path / "empty_dir").mkdir()
    empty = gate.run(paths=("empty_dir",))
    assert_clean(empty)
    assert empty.ret == FAILED, empty
    assert empty.outcome(ds("coverage")) == "FAILED", empty
    assert empty.outcome(ds("budget")) != "PASSED", empty
    assert empty.outcome(ds("unique_ids")) != "PASSED", empty
    text = empty.out.lower()
    assert "empty_dir" in text and "*.jsonl" in text, empty

    gate.write("data/x.csv", "sample_id,completion_tokens\n1,10\n")
    gate.write("data/x.jsonl.dvc", "outs:\n- md5: 0123456789abcdef\n  path: x.jsonl\n")
    gate.write("data/x.parquet", b"PAR1\x00\x00PAR1")  # matched, and unreadable: no record
    parquet = gate.run(paths=("data",))
    assert_clean(parquet)
    assert parquet.ret == FAILED, parquet
    assert parquet.outcome(ds("coverage")) == "FAILED", parquet
    assert parquet.outcome(ds("budget")) != "PASSED", parquet
    assert parquet.outcome(ds("unique_ids")) != "PASSED", parquet
    assert "x.csv" in parquet.out and "x.jsonl.dvc" in parquet.out, parquet
    assert parquet.outcome("data/x.parquet::tokaudit") == "FAILED", parquet
    assert "*.jsonl" in parquet.out, parquet


def test_a_run_that_selects_no_data_outside_the_dataset_is_red(gate: Gate):
    """`pytest --tokaudit empty/` with `testpaths = data`: the dataset is not the run's, so
    the run is partial, and partial verdicts skip; but with nothing else selected, skips
    alone would exit 0 (pytest itself exits 5 on `pytest empty/`). Coverage fails instead;
    a partial run that runs other tests (`pytest tests/`) still skips the verdicts."""
    gate.ini(testpaths="data", tokaudit_budget=1000, tokaudit_unique_ids="true")
    gate.jsonl("data/a.jsonl", [rec(i, 10) for i in range(1, 4)])
    (gate.path / "empty").mkdir()
    gate.write("tests/test_plain.py", "def test_plain():\n    pass\n")
    for mode in ((), ("-n", "2")):
        empty = gate.run(*mode, paths=("empty",))
        assert_clean(empty)
        assert empty.ret == FAILED, empty
        assert empty.outcome(ds("coverage")) == "FAILED", empty
        assert "no data audited: the run selected no data file and no other test (paths " \
               "named: empty)" in empty.message(ds("coverage")) + empty.out, empty
        # One red item says it; the other verdicts skip with the same reason.
        assert empty.outcome(ds("budget")) == "SKIPPED", empty
        assert empty.outcome(ds("unique_ids")) == "SKIPPED", empty
    tests_only = gate.run(paths=("tests",))
    assert_clean(tests_only)
    assert tests_only.ret == pytest.ExitCode.OK, tests_only
    assert_skipped_partial(tests_only, "coverage", "budget", "unique_ids")


LFS_POINTER = (
    "version https://git-lfs.github.com/spec/v1\n"
    "oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\n"
    "size 123\n"
)


def test_a_git_lfs_pointer_is_one_finding_that_says_so(gate: Gate):
    gate.ini()
    gate.write("data/a.jsonl", LFS_POINTER)
    gate.jsonl("data/b.jsonl", [rec(1, 10)])
    run = gate.run()
    assert_clean(run)
    assert run.ret == FAILED, run
    assert run.outcome("data/a.jsonl::tokaudit") == "FAILED", run
    (section,) = failure_sections(run.result, "tokaudit: data/a.jsonl")
    text = "\n".join(section)
    assert "git-lfs" in text.lower(), run
    assert "invalid json" not in text.lower(), run
    assert summary_rows(run.result)["data/a.jsonl"][-1] == "1", run  # findings: one


def test_spend_counts_billed_records_whose_ids_are_unusable(gate: Gate):
    gate.ini(tokaudit_budget=10_000_000, tokaudit_unique_ids="true")
    paid = [rec(i, 10, 1_000_000) for i in range(1, 9)]  # 8M, usable ids (bad counts)
    paid += [{"sample_id": i, "completion_tokens": 1_000_000, "output_ids": None}
             for i in range(9, 13)]  # 4M more, billed all the same
    gate.jsonl("data/paid.jsonl", paid)
    # Id 9 again, in a record with nothing else usable: still a second record of 9.
    gate.jsonl("data/other.jsonl", [{"sample_id": 9, "completion_tokens": "n/a", "output_ids": "x"}])
    run = gate.run()
    assert_clean(run)
    assert run.ret == FAILED, run
    assert run.outcome(ds("budget")) == "FAILED", run
    assert re.search(r"12,?000,?000", run.message(ds("budget"))), run
    assert run.outcome(ds("unique_ids")) == "FAILED", run


# -- report consumers ------------------------------------------------------------------------

def html_counts(path: Path) -> tuple[dict[str, int], set[str]]:
    """pytest-html's embedded results: outcome counts (reruns aside) and node ids."""
    text = path.read_text()
    m = re.search(r'<div[^>]*id="data-container"[^>]*data-jsonblob="([^"]*)"', text)
    assert m, "no data-container in the pytest-html report"
    blob = json.loads(html.unescape(m.group(1)))
    counts: dict[str, int] = {}
    for entries in blob["tests"].values():
        for entry in entries:
            result = entry["result"].lower()
            if result != "rerun":
                counts[result] = counts.get(result, 0) + 1
    return counts, set(blob["tests"])


def test_report_plugins_count_what_the_terminal_counts(gate: Gate):
    gate.ini(
        tokaudit_budget=100000,
        tokaudit_unique_ids="true",
        tokaudit_expected_ids="manifest.txt",
        tokaudit_shard_size=1000,
        tokaudit_count_mean_rel="1%",
        tokaudit_count_mean_abs=0,  # the relative part alone judges big.jsonl
    )
    gate.jsonl("data/a.jsonl", [rec(i, 10) for i in range(1, 6)])
    gate.jsonl("data/bad.jsonl", [rec(6, 10), rec(7, 10, 40)])
    # Every record within its tolerance (2 of 102), the file's mean not (1.96% > 1%).
    big = gate.jsonl("data/big.jsonl", [rec(i, 100, 102) for i in range(10, 20)])
    gate.write("manifest.txt", ids_text([*range(1, 8), *range(10, 20), 99]))  # 99: no record
    gate.write("tests/test_plain.py", (
        "import pytest\n\ndef test_plain():\n    pass\n\n"
        "def test_skipped():\n    pytest.skip('not today')\n"
    ))
    run = gate.run(
        "--html=report.html", "--self-contained-html",
        "--json-report", "--json-report-file=report.json", "--junitxml=junit.xml",
        paths=("data", "tests"), plugins=("html", "json-report"),
    )
    assert_clean(run)
    assert run.ret == FAILED, run
    n = shard_count(big.stat().st_size, 1000)
    got = run.outcomes()
    assert [got[f"data/big.jsonl::tokaudit[shard {i}]"] for i in range(1, n + 1)] == ["PASSED"] * n
    assert got["data/big.jsonl::tokaudit[file]"] == "FAILED", run
    assert got["data/bad.jsonl::tokaudit"] == "FAILED", run
    assert got[ds("expected_ids")] == "FAILED" and got[ds("budget")] == "PASSED", run
    assert got[ds("coverage")] == "PASSED", run
    terminal = {k: run.counts().get(k, 0) for k in ("passed", "failed", "skipped")}
    assert terminal == {"passed": len(got) - 4, "failed": 3, "skipped": 1}, run

    report = json.loads((gate.path / "report.json").read_text())
    assert {k: report["summary"].get(k, 0) for k in terminal} == terminal, report["summary"]
    tests = {t["nodeid"]: t for t in report["tests"]}
    assert {n: t["outcome"].upper() for n, t in tests.items()} == got
    for nodeid in [*map(ds, CHECKS), "data/big.jsonl::tokaudit[file]"]:
        assert {"setup", "call", "teardown"} <= set(tests[nodeid]), (nodeid, tests[nodeid])

    counts, html_ids = html_counts(gate.path / "report.html")
    assert {k: counts.get(k, 0) for k in terminal} == terminal, counts
    assert sum(counts.values()) == sum(terminal.values()), counts
    assert html_ids == set(got)

    suite = ET.parse(gate.path / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    assert int(suite.get("failures")) == terminal["failed"]
    assert int(suite.get("skipped")) == terminal["skipped"]
    assert int(suite.get("errors")) == 0
    assert int(suite.get("tests")) == sum(terminal.values())
    names = {(c.get("classname"), c.get("name")) for c in suite.iter("testcase")}
    for name in CHECKS:
        assert any(n == name and cls.endswith("tokaudit") for cls, n in names), (name, names)


# -- other plugins and options ----------------------------------------------------------------

def example_like(gate: Gate) -> None:
    """Like example_project without a tokenizer: a clean batch, a bad one, a repeated record."""
    gate.ini(
        tokaudit_budget=535,  # 530 billed: counting any record twice breaks it
        tokaudit_count_outliers=1,
        tokaudit_unique_ids="true",
        tokaudit_expected_ids="manifest.txt",
    )
    gate.jsonl("data/api_batch_001.jsonl", [rec(i, 20) for i in range(1000, 1010)])
    gate.jsonl("data/api_batch_002.jsonl", [
        rec(1010, 20, 30),  # a count outlier, allowed
        {"sample_id": 1011, "completion_tokens": 20},  # no ids: a finding, still billed
        "not json",
        *[rec(i, 20) for i in range(1012, 1020)],
    ])
    gate.jsonl("data/api_batch_003.jsonl.gz", [rec(i, 20) for i in range(1020, 1025)] + [rec(1003, 20)])
    gate.write("manifest.txt", ids_text(range(1000, 1030)))  # 1025-1029: no record


def test_reruns_change_no_verdict_and_never_rerun_data(gate: Gate):
    example_like(gate)
    plugins = ("rerunfailures",)
    base = gate.run(plugins=plugins)
    assert_clean(base)
    assert base.ret == FAILED, base
    assert base.outcome("data/api_batch_002.jsonl::tokaudit") == "FAILED", base
    assert base.outcome(ds("budget")) == "PASSED", base
    assert base.outcome(ds("unique_ids")) == "FAILED", base
    assert base.outcome(ds("expected_ids")) == "FAILED", base
    for args in (("--reruns", "2"), ("--reruns", "2", "-n", "2")):
        run = gate.run("-rAR", *args, plugins=plugins)
        assert_clean(run)
        assert run.ret == FAILED, (args, run)
        assert run.outcomes() == base.outcomes(), (args, run)
        assert run.verdicts() == base.verdicts(), (args, run)
        # Neither data items nor the checks (made on the controller under xdist) rerun.
        reruns = [l for l in run.lines if re.search(r"\bRERUN\b", l)]
        assert not reruns, (args, reruns, run)


SKIP_MARKERS = """
import pytest

def pytest_collection_modifyitems(items):
    for item in items:
        if item.nodeid.endswith("::tokaudit"):  # every unsharded data file
            if "a.jsonl" in item.nodeid:
                item.add_marker(pytest.mark.skip(reason="x"))
            else:
                item.add_marker(pytest.mark.skipif(True, reason="x"))
"""


def test_skip_markers_on_audit_items_skip_them_and_make_the_run_partial(gate: Gate):
    gate.ini(
        tokaudit_budget=1000,
        tokaudit_unique_ids="true",
        tokaudit_expected_ids="manifest.txt",
        tokaudit_shard_size=SHARD,
    )
    gate.jsonl("data/a.jsonl", [rec(i, 10) for i in range(1, 6)])
    gate.jsonl("data/b.jsonl", [rec(i, 10) for i in range(6, 10)])
    big = gate.jsonl("data/big.jsonl", [rec(i, 12) for i in range(10, 40)])  # shards still run
    gate.write("manifest.txt", ids_text(range(1, 40)))
    gate.write("conftest.py", SKIP_MARKERS)
    run = gate.run()
    assert_clean(run)
    assert run.outcome("data/a.jsonl::tokaudit") == "SKIPPED", run  # skip
    assert run.outcome("data/b.jsonl::tokaudit") == "SKIPPED", run  # skipif
    n = shard_count(big.stat().st_size, SHARD)
    assert run.outcome(f"data/big.jsonl::tokaudit[shard {n}]") == "PASSED", run
    assert_no_dataset_pass(run)
    assert_skipped_partial(run, "budget", "unique_ids", "expected_ids")
    assert_coverage_names_missing(run, ["a.jsonl", "b.jsonl"])


def test_disabled_plugin_ignores_a_conftest_check(gate: Gate):
    gate.ini()
    gate.jsonl("data/a.jsonl", [rec(1, 10)])
    gate.write("conftest.py", "def pytest_tokaudit_check_record(record):\n    return None\n")
    gate.write("tests/test_plain.py", "def test_plain():\n    pass\n")
    run = gate.run("-p", "no:tokaudit", paths=(), tokaudit=False)
    assert_clean(run)
    assert "unknown hook" not in (run.out + run.err).lower(), run
    assert run.ret == OK, run
    assert run.outcome("tests/test_plain.py::test_plain") == "PASSED", run


def test_benchmark_only_does_not_crash_or_pass_skipped_data(gate: Gate):
    gate.ini(tokaudit_budget=1000, tokaudit_unique_ids="true", tokaudit_expected_ids="manifest.txt")
    gate.jsonl("data/a.jsonl", [rec(i, 10) for i in range(1, 6)])
    gate.jsonl("data/b.jsonl", [rec(i, 10) for i in range(6, 10)])
    gate.write("manifest.txt", ids_text(range(1, 10)))
    run = gate.run("--benchmark-only", plugins=("benchmark",))
    assert_clean(run)
    data = [run.outcome(f"data/{f}::tokaudit") for f in ("a.jsonl", "b.jsonl")]
    assert set(data) <= {"SKIPPED", "PASSED"}, run
    if "SKIPPED" in data:
        assert_no_dataset_pass(run)


def test_toml_lists_work_like_ini_strings(gate: Gate):
    gate.jsonl("data/good.jsonl", [rec(i, 10, once=[151668]) for i in range(1, 4)])
    gate.jsonl("data/bad.jsonl", [rec(4, 10), rec(5, 10, once=[151668, 151667])])
    gate.jsonl("data/more.ndjson", [rec(6, 10, once=[151668])])
    ini = gate.ini(
        tokaudit_glob="*.jsonl *.ndjson",
        tokaudit_require_once="151668",
        tokaudit_forbid="151667 151666",
        tokaudit_budget=1000,
        tokaudit_unique_ids="true",
    )
    by_ini = gate.run()
    assert_clean(by_ini)
    ini.unlink()
    gate.write("pyproject.toml", (
        "[tool.pytest.ini_options]\n"
        'tokaudit_glob = ["*.jsonl", "*.ndjson"]\n'
        'tokaudit_require_once = ["151668"]\n'
        'tokaudit_forbid = ["151667", "151666"]\n'
        "tokaudit_budget = 1000\n"
        "tokaudit_unique_ids = true\n"
    ))
    by_toml = gate.run()
    assert_clean(by_toml)
    assert by_toml.ret == by_ini.ret == FAILED, (by_ini, by_toml)
    renamed = {n.replace("pyproject.toml::", "pytest.ini::"): o for n, o in by_toml.outcomes().items()}
    assert renamed == by_ini.outcomes(), (by_ini, by_toml)
    assert by_toml.outcome("data/bad.jsonl::tokaudit") == "FAILED", by_toml
    assert by_toml.outcome("data/good.jsonl::tokaudit") == "PASSED", by_toml
    assert by_toml.outcome("data/more.ndjson::tokaudit") == "PASSED", by_toml
    assert by_toml.outcome(ds("budget", "pyproject.toml")) == "PASSED", by_toml
    for run in (by_ini, by_toml):
        (section,) = failure_sections(run.result, "tokaudit: data/bad.jsonl")
        text = "\n".join(section)
        assert "require_once" in text and "forbid" in text, run


def test_short_tracebacks_keep_data_failures_short(gate: Gate):
    gate.ini()
    gate.jsonl("data/a.jsonl", [rec(i, 10, 40) for i in range(1, 31)])  # 30 bad counts
    gate.jsonl("data/b.jsonl", [rec(31, 10, 40), rec(32, 10)])
    gate.jsonl("data/c.jsonl", [rec(33, 10)])

    line = gate.run("--tb=line")
    assert_clean(line)
    assert line.ret == FAILED, line
    body = [l for l in line.sections.get("FAILURES", []) if l.strip()]
    assert len(body) == 2, (body, line)  # one line per failed item
    assert sum("a.jsonl" in l for l in body) == 1 and sum("b.jsonl" in l for l in body) == 1, body

    short = gate.run("--tb=short")
    assert_clean(short)
    (section,) = failure_sections(short.result, "tokaudit: data/a.jsonl")
    section = [l for l in section if l.strip()]
    assert len(section) <= 12, (section, short)  # the default shows 25 lines here
    assert any(l.startswith("data/a.jsonl:1:") for l in section), (section, short)


# -- xdist, split runs, the whole feature ----------------------------------------------------

def test_every_xdist_mode_gives_the_verdicts_of_one_process(gate: Gate):
    feature_dataset(gate)
    expected = feature_expected(feature_shards(gate))
    one = gate.run()
    assert_clean(one)
    assert one.outcomes() == expected, one
    for dist in ("each", "load", "loadfile", "loadscope", "worksteal"):
        # load and loadfile in random orders too (test_random_order_changes_no_verdict's
        # runs under xdist): pytest-randomly shuffles on the controller and on each worker.
        seed = {"load": 3, "loadfile": 4}.get(dist)
        shuffled = ("-p", "randomly", f"--randomly-seed={seed}") if seed else ()
        run = gate.run("-n", "2", "--dist", dist, *shuffled, plugins=("randomly",) if seed else ())
        assert_clean(run)
        if seed:
            assert "randomly-seed" in run.out, (dist, run)  # the plugin was active
        assert run.ret == one.ret, (dist, run)
        assert run.verdicts() == one.verdicts(), (dist, run)
        # --dist each runs every data item on every worker: the same outcome twice.
        assert run.outcomes() == expected, (dist, run)
    # One worker takes every scope in turn: a sharded file's scope holds its deferred
    # whole-file item, so a data file always follows an item the worker put off.
    for dist in ("loadfile", "loadscope"):
        run = gate.run("-n", "1", "--dist", dist)
        assert_clean(run)
        assert (run.ret, run.verdicts()) == (one.ret, one.verdicts()), (dist, run)


def test_random_order_changes_no_verdict(gate: Gate):
    """pytest-randomly shuffles the items (dataset checks and [file] items included) on the
    controller and on each worker alike; the verdicts must not depend on the order. (Its
    runs under xdist, -n 2 with load and loadfile, are test_every_xdist_mode's.)"""
    feature_dataset(gate)
    expected = feature_expected(feature_shards(gate))
    one = gate.run()
    assert_clean(one)
    assert one.outcomes() == expected, one
    orders = set()
    for args in (("--randomly-seed=1",), ("--randomly-seed=2",)):
        run = gate.run("-v", "-p", "randomly", *args, plugins=("randomly",))
        assert_clean(run)
        assert "randomly-seed" in run.out, (args, run)  # the plugin was active
        assert (run.ret, run.outcomes(), run.verdicts()) == (one.ret, expected, one.verdicts()), (args, run)
        if "-n" not in args:  # the order the items ran in, from -v's progress lines
            orders.add(tuple(l.split(" ")[0] for l in run.lines if re.search(r" (PASSED|FAILED|SKIPPED)\b", l)
                             and "::" in l.split(" ")[0]))
    assert len(orders) == 2, orders  # two seeds, two orders: the items really were shuffled


def test_split_jobs_pass_alone_and_their_merge_judges_the_whole(gate: Gate):
    gate.ini(
        testpaths="data",
        tokaudit_budget=1000,
        tokaudit_unique_ids="true",
        tokaudit_expected_ids="manifest.txt",
    )
    gate.jsonl("data/part1/a.jsonl", [rec(i, 10) for i in range(101, 106)])
    gate.jsonl("data/part2/b.jsonl", [rec(i, 10) for i in range(106, 110)])
    gate.write("manifest.txt", ids_text(range(101, 110)))
    for part in ("part1", "part2"):
        job = gate.run(f"--tokaudit-json={part}.json", paths=(f"data/{part}",))
        assert_clean(job)
        assert job.ret == OK, (part, job)
        assert_skipped_partial(job, "expected_ids")
        assert_no_dataset_pass(job)
    merged = gate.merge("part1.json", "part2.json")
    assert merged.ret == 0, merged.stdout.str() + merged.stderr.str()
    verdicts = merged_verdicts(merged)
    assert verdicts["expected_ids"][0] == "PASSED", merged.stdout.str()
    assert verdicts["budget"][0] == "PASSED" and verdicts["unique_ids"][0] == "PASSED", verdicts

    gate.jsonl("data/part2/b.jsonl", [rec(i, 10) for i in (106, 108, 109)])  # 107 has gone
    job = gate.run("--tokaudit-json=part2.json", paths=("data/part2",))
    assert job.ret == OK, job
    merged = gate.merge("part1.json", "part2.json")
    assert merged.ret == 1, merged.stdout.str()
    verdicts = merged_verdicts(merged)
    assert verdicts["expected_ids"][0] == "FAILED", merged.stdout.str()
    assert "107" in merged.stdout.str().split("expected_ids", 1)[1], merged.stdout.str()


def test_whole_feature_complete_runs_agree_and_partial_runs_never_pass(gate: Gate):
    feature_dataset(gate)
    expected = feature_expected(feature_shards(gate))
    cache = ("cacheprovider",)

    # Complete runs: testpaths (scratch/ is not part of the dataset), reruns (-n 2: every
    # xdist mode's in test_every_xdist_mode_gives_the_verdicts_of_one_process).
    plain = gate.run(paths=(), plugins=cache)
    assert_clean(plain)
    assert plain.ret == FAILED, plain
    assert plain.outcomes() == expected, plain
    reference = plain.verdicts()
    run = gate.run("--reruns", "2", plugins=("rerunfailures",))
    assert_clean(run)
    assert run.outcomes() == expected, run
    assert run.verdicts() == reference, run

    # Partial runs: --lf after the failing run, -k, one path.
    lf = gate.run("--lf", plugins=cache)
    assert_clean(lf)
    assert lf.outcome("data/part2/c.jsonl::tokaudit") == "FAILED", lf
    assert_no_dataset_pass(lf)
    assert_skipped_partial(lf, "unique_ids")  # c.jsonl alone holds no duplicate
    keyword = gate.run("-k", "not c.jsonl")
    assert_clean(keyword)
    assert keyword.outcome(ds("unique_ids")) == "FAILED", keyword  # a.jsonl and b.jsonl ran
    assert_no_dataset_pass(keyword)
    assert_skipped_partial(keyword, "budget", "expected_ids")
    one = gate.run(paths=("data/part1/a.jsonl",))
    assert_clean(one)
    assert_no_dataset_pass(one)
    assert_skipped_partial(one, "budget", "unique_ids", "expected_ids")
    assert_coverage_names_missing(one, ["big.jsonl", "b.jsonl", "c.jsonl"])

    # The merge recipe: two partial jobs, judged whole.
    for part in ("part1", "part2"):
        job = gate.run(f"--tokaudit-json={part}.json", paths=(f"data/{part}",))
        assert_clean(job)
        assert_no_dataset_pass(job)
    merged = gate.merge("part1.json", "part2.json")
    assert merged.ret == 1, merged.stdout.str()
    got = {name: outcome for name, (outcome, _) in merged_verdicts(merged).items()}
    assert got.pop("coverage") == "PASSED", merged.stdout.str()  # the union is complete
    want = {name: reference[ds(name)][0] for name in ("budget", "unique_ids", "expected_ids")}
    assert got == want, merged.stdout.str()


@pytest.mark.parametrize("mode", [(), ("-n", "2")], ids=["in-process", "xdist-2"])
def test_a_sharded_file_outside_the_rootdir_is_judged_whole(pytester: pytest.Pytester, mode,
                                                            monkeypatch: pytest.MonkeyPatch):
    """A data file named on the command line outside the rootdir (an ini given with -c):
    pytest's own node id for it is "", so the whole-file verdict found no shards and was
    skipped, and a count breach only the whole file judges went green."""
    (pytester.path / "run").mkdir()
    (pytester.path / "run/pytest.ini").write_text("[pytest]\ntokaudit_shard_size = 4000\n")
    data = pytester.path / "data"
    data.mkdir()
    records = [rec(i, 10, 40 if i == 150 else 10) for i in range(200)]
    (data / "big.jsonl").write_bytes(jsonl_bytes(records))
    monkeypatch.chdir(pytester.path / "run")
    result = forkrun.runpytest(pytester, 
        "-c", "pytest.ini", "--tokaudit", str(data / "big.jsonl"), "-rA",
        *(mode or ("-p", "no:xdist")), *UNRELATED_PLUGINS, timeout=120)
    assert result.ret == FAILED, result.stdout.str()
    result.stdout.fnmatch_lines(["FAILED ../data/big.jsonl::tokaudit[[]file[]] - 1 record breaks the count*"])
    assert "SKIPPED" not in result.stdout.str(), result.stdout.str()
