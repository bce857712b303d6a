"""JSON reports: validated when read back (baseline, merge), checked before the audit when
written, written safely (symlinks, FIFOs, stale temporary files), and merged honestly."""

from __future__ import annotations

import json
import os
import stat
import sys
import threading
from pathlib import Path
from typing import Any, Callable

import pytest

from conftest import TokProject, assert_no_crash, rec, summary_section
from pytest_tokaudit.base.atomic import write as write_report
from pytest_tokaudit.model import report as jsonreport
from pytest_tokaudit.sources.reports import load as load_report
from pytest_tokaudit.__main__ import main as merge_main
USAGE = pytest.ExitCode.USAGE_ERROR
FAILED = pytest.ExitCode.TESTS_FAILED


def audit_to_json(pytester: pytest.Pytester, name: str, *args: str, paths=("data",)) -> dict:
    """A real report: audit `paths` in process and read back what --tokaudit-json wrote."""
    result = pytester.runpytest("--tokaudit", *paths, "-p", "no:xdist", f"--tokaudit-json={name}",
                                *args)
    assert result.ret in (0, 1), result.stdout.str() + result.stderr.str()
    return json.loads((pytester.path / name).read_text())


# The report project's files (ini, data, base.json) by relative path, once audited.
_REPORT_PROJECT: dict[str, bytes] = {}


@pytest.fixture
def report(pytester: pytest.Pytester) -> dict:
    """A report of two files (one with a finding), its contract keeping ids. The audit runs
    once per process (46 tests read it); later tests get a copy of its project's files."""
    if not _REPORT_PROJECT:
        project = TokProject(pytester, ())
        project.ini(tokaudit_unique_ids="true", tokaudit_count_mean_rel="")
        project.jsonl("data/a.jsonl", [rec(1, 10), rec(2, 10, 30)])
        project.jsonl("data/b.jsonl", [rec(3, 10)])
        audit_to_json(pytester, "base.json")
        for rel in ("pytest.ini", "data/a.jsonl", "data/b.jsonl", "base.json"):
            _REPORT_PROJECT[rel] = (pytester.path / rel).read_bytes()
    else:
        for rel, data in _REPORT_PROJECT.items():
            TokProject(pytester, ()).write(rel, data)
    return json.loads(_REPORT_PROJECT["base.json"])


def save(pytester: pytest.Pytester, name: str, data: Any) -> str:
    (pytester.path / name).write_text(json.dumps(data))
    return name


def changed(data: dict, change: Callable[[dict], None]) -> dict:
    data = json.loads(json.dumps(data))
    change(data)
    return data


def _set(path: str, value: Any) -> Callable[[dict], None]:
    def change(data: dict) -> None:
        *parents, last = path.split(".")
        node = data
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value
    return change


def _drop(path: str) -> Callable[[dict], None]:
    def change(data: dict) -> None:
        *parents, last = path.split(".")
        node = data
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        del node[last]
    return change


# Each malformed report and the message naming what is wrong in it.
MALFORMED = [
    pytest.param(_set("files", None), "files must be a list, got None", id="files-null"),
    pytest.param(_set("files", [1]), "files[0] must be an object, got 1", id="files-of-ints"),
    pytest.param(_set("files", {"a": 1}), "files must be a list, got {'a': 1}", id="files-object"),
    pytest.param(_set("files", [{"x": 1}]), "files[0].path is missing", id="file-without-path"),
    pytest.param(_set("files", [{"path": ["x"]}]), "files[0].path must be a non-empty string, got ['x']",
                 id="path-list"),
    pytest.param(_set("files.1.mean_ratio", "abc"), "files[1].mean_ratio must be a number, got 'abc'",
                 id="mean-ratio-text"),
    pytest.param(_set("files.1.billed", "12"), "files[1].billed must be an integer, got '12'",
                 id="billed-text"),
    pytest.param(_set("files.0.records", -1), "files[0].records must be an integer from 0 to "
                 "18,446,744,073,709,551,615, got -1", id="negative-count"),
    pytest.param(_set("files.0.channels.ids.0.1", [1, 2, True]), "files[0].channels.ids[0][1][2] "
                 "must be a record id (a string or an integer), got True", id="bool-id"),
    pytest.param(_set("files.0.channels.ids.0.2", [1]), "files[0].channels.ids[0] has 1 lines "
                 "for 2 ids", id="id-lines-short"),
    pytest.param(_set("files.0.channels.ids.0.0", 1), "files[0].channels.ids[0] must be [null, ids, "
                 "lines] (a report holds whole files), got [1, [1, 2], [1, 2]]", id="ids-of-a-shard"),
    pytest.param(_set("files.0.shown", [{"check": "count"}]), "files[0].shown[0].message must be a "
                 "string, got None", id="finding-without-message"),
    pytest.param(_set("files.0.worst", [[1, 2, 3]]), "files[0].worst[0] must be [absdiff, -line, "
                 "id, billed, counted], got [1, 2, 3]", id="worst-short"),
    pytest.param(_set("files.1.path", "data/a.jsonl"), "files[1].path 'data/a.jsonl' is also "
                 "files[0].path", id="same-file-twice"),
    pytest.param(_drop("contract"), "contract is missing", id="no-contract"),
    pytest.param(_set("contract.tokaudit_count_abs", "x"), "contract: tokaudit_count_abs: expected a "
                 "whole number, got 'x'", id="contract-bad-value"),
    pytest.param(_set("contract.tokaudit_count_rel", 2), "contract: tokaudit_count_rel: expected a "
                 "string as written in pytest.ini, got 2", id="contract-not-text"),
    pytest.param(_set("format", 99), "written in report format 99 by a newer pytest-tokaudit; this "
                 "one reads format 3", id="newer-format"),
    pytest.param(_set("partial", 3), "partial must be null or a string, got 3", id="partial-int"),
]


def test_a_real_report_is_valid(report: dict, pytester: pytest.Pytester):
    loaded = load_report(pytester.path / "base.json")
    assert [s.path for s in loaded.files] == ["data/a.jsonl", "data/b.jsonl"]
    assert loaded.contract.unique_ids
    assert loaded.metrics["data/a.jsonl"]["records_with_findings"] == 1
    assert [s.channels["ids"] for s in loaded.files] == [[[None, [1, 2], [1, 2]]], [[None, [3], [1]]]]


def test_a_format_1_report_keeps_its_record_ids(report: dict, pytester: pytest.Pytester):
    """Format 1 kept the ids beside the channels: still read, into the same channel."""
    def as_format_1(data: dict) -> None:
        data["format"] = 1
        for entry in data["files"]:
            _, ids, lines = entry["channels"].pop("ids")[0]
            entry["ids"], entry["id_lines"] = ids, lines
    save(pytester, "old.json", changed(report, as_format_1))
    loaded = load_report(pytester.path / "old.json")
    assert [s.channels["ids"] for s in loaded.files] == [[[None, [1, 2], [1, 2]]], [[None, [3], [1]]]]
    # Nor had it a spend channel: its billed counts stand in, so a budget still sees them.
    assert [s.channels["budget"] for s in loaded.files] == [[[40, 0, 0]], [[10, 0, 0]]]


def test_merge_gives_no_budget_verdict_on_a_file_without_its_spend(
    pytester: pytest.Pytester, report: dict, capsys
):
    def blind(data: dict) -> None:
        data["contract"]["tokaudit_budget"] = "45"
        del data["files"][1]["channels"]["budget"]
    save(pytester, "blind.json", changed(report, blind))
    rc, out, _ = merge(capsys, "blind.json")
    assert rc == 1
    assert "FAILED tokaudit::budget - no spend recorded for 1 file: data/b.jsonl" in out
    save(pytester, "seen.json", changed(report, lambda d: d["contract"].update(tokaudit_budget="45")))
    rc, out, _ = merge(capsys, "seen.json")
    assert "FAILED tokaudit::budget - over budget: billed 50 of 45 tokens (111.1%)" in out


# -- F. a malformed baseline is a usage error at start-up ----------------------------------------

@pytest.mark.parametrize(("change", "message"), MALFORMED)
def test_a_malformed_baseline_is_a_usage_error_naming_entry_and_field(
    pytester: pytest.Pytester, report: dict, change, message: str
):
    save(pytester, "bad.json", changed(report, change))
    result = pytester.runpytest("--tokaudit", "data", "-p", "no:xdist", "--tokaudit-baseline=bad.json")
    assert result.ret == USAGE
    assert [l for l in result.errlines if l] == [f"ERROR: --tokaudit-baseline: bad.json: {message}"]
    assert_no_crash(result)


def test_a_baseline_without_derived_figures_uses_the_counts(pytester: pytest.Pytester, report: dict):
    """A figure a report lacks is recomputed from its counts, not taken as 0 (which made
    every file with a finding worse than such a baseline)."""
    def strip(data: dict) -> None:
        for entry in data["files"]:
            for key in ("mean_ratio", "records_with_findings", "rt_ratio_mean"):
                del entry[key]
    save(pytester, "bare.json", changed(report, strip))
    result = pytester.runpytest("--tokaudit", "data", "-p", "no:xdist", "--tokaudit-baseline=bare.json")
    assert result.ret == FAILED  # a.jsonl's own finding; nothing got worse
    result.stdout.no_fnmatch_line("*worse than baseline*")
    TokProject(pytester, ()).jsonl("data/b.jsonl", [rec(3, 10), rec(4, 10, 30)])
    result = pytester.runpytest("--tokaudit", "data", "-p", "no:xdist", "--tokaudit-baseline=bare.json")
    result.stdout.fnmatch_lines([
        "data/b.jsonl: baseline: worse than baseline bare.json by more than 10%: "
        "mean |diff| / mean billed 0.000% -> 50.000%; records with findings 0 -> 1",
    ])


# -- G. the merge command validates its reports --------------------------------------------------

def merge(capsys, *argv: str) -> tuple[int, str, str]:
    rc = merge_main(["merge", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize(("change", "message"), MALFORMED)
def test_a_malformed_report_is_a_merge_usage_error(
    pytester: pytest.Pytester, report: dict, capsys, change, message: str
):
    save(pytester, "bad.json", changed(report, change))
    rc, out, err = merge(capsys, "bad.json")
    assert (rc, out, err) == (2, "", f"error: bad.json: {message}\n")


def test_merge_usage_errors_from_the_command_line(pytester: pytest.Pytester, report: dict):
    """A subprocess, as CI runs it: rc 2 and one line, no traceback."""
    save(pytester, "bad.json", changed(report, _set("files.1.billed", "12")))
    result = pytester.run(sys.executable, "-m", "pytest_tokaudit", "merge", "base.json", "bad.json")
    assert result.ret == 2
    assert result.errlines == ["error: bad.json: files[1].billed must be an integer, got '12'"]
    assert result.outlines == []


def test_merge_checks_its_json_target_before_any_work(pytester: pytest.Pytester, report: dict, capsys):
    rc, out, err = merge(capsys, "base.json", "--json", "/nonexistent/dir/merged.json")
    assert (rc, out) == (2, "")
    assert err == ("error: --json: cannot write /nonexistent/dir/merged.json: /nonexistent/dir "
                   "does not exist\n")
    (pytester.path / "adir").mkdir()
    rc, out, err = merge(capsys, "base.json", "--json", "adir")
    assert (rc, out, err) == (2, "", "error: --json: cannot write adir: it is a directory\n")


def test_a_merged_report_is_itself_a_valid_report(pytester: pytest.Pytester, report: dict, capsys):
    rc, out, err = merge(capsys, "base.json", "--json", "merged.json")
    assert rc == 1 and err == ""  # a.jsonl has a finding
    merged = load_report(pytester.path / "merged.json")
    assert [s.path for s in merged.files] == ["data/a.jsonl", "data/b.jsonl"]
    assert merged.contract == load_report(pytester.path / "base.json").contract


# -- H. --tokaudit-json: checked at start-up, never lost to a write error ------------------------

def test_an_unwritable_json_target_is_a_usage_error_before_the_audit(project: TokProject):
    project.jsonl("data/a.jsonl", [rec(1)])
    result = project.run("--tokaudit-json=/nonexistent/dir/audit.json")
    assert result.ret == USAGE
    result.stderr.fnmatch_lines([
        "ERROR: --tokaudit-json: cannot write /nonexistent/dir/audit.json: /nonexistent/dir does "
        "not exist"
    ])
    assert_no_crash(result)
    result.stdout.no_fnmatch_line("*tokaudit summary*")


def test_write_returns_the_problem_instead_of_raising(tmp_path: Path):
    assert write_report(tmp_path / "no" / "dir" / "a.json", {"x": 1}) == (
        f"cannot write the JSON report {tmp_path}/no/dir/a.json: No such file or directory")
    assert write_report(tmp_path, {"x": 1}) == (
        f"cannot write the JSON report {tmp_path}: Is a directory")
    assert sorted(os.listdir(tmp_path)) == []  # no temporary file left behind


VANISH = """
import shutil

def pytest_collection_finish(session):
    shutil.rmtree("out")  # the report's directory goes away while the audit runs
"""


def test_a_report_that_cannot_be_written_at_the_end_keeps_the_summary(pytester: pytest.Pytester):
    project = TokProject(pytester, ("-p", "no:xdist"))
    project.jsonl("data/a.jsonl", [rec(1)])
    project.write("conftest.py", VANISH)
    (pytester.path / "out").mkdir()
    result = project.run("--tokaudit-json=out/audit.json")
    assert_no_crash(result)
    # The summary survives, says the report is missing, and the run is not green.
    assert result.ret == 1
    assert summary_section(result)[1].startswith("data/a.jsonl")
    result.stdout.fnmatch_lines(["tokaudit JSON report NOT written: *"])


# -- I. safe writes: symlinks, FIFOs, stale temporary files --------------------------------------

DATA = {"tool": "pytest-tokaudit", "n": 1}


def written(path: Path) -> dict:
    return json.loads(path.read_text())


def test_a_new_report_gets_the_usual_file_mode(tmp_path: Path):
    mask = os.umask(0o022)
    os.umask(mask)
    assert write_report(tmp_path / "a.json", DATA) is None
    assert stat.S_IMODE((tmp_path / "a.json").stat().st_mode) == 0o666 & ~mask
    (tmp_path / "a.json").chmod(0o640)
    assert write_report(tmp_path / "a.json", {"n": 2}) is None
    assert stat.S_IMODE((tmp_path / "a.json").stat().st_mode) == 0o640
    assert written(tmp_path / "a.json") == {"n": 2}
    assert os.listdir(tmp_path) == ["a.json"]


def test_a_symlink_at_the_path_is_followed_not_replaced(tmp_path: Path):
    (tmp_path / "reports").mkdir()
    target = tmp_path / "reports" / "audit.json"
    target.write_text("old")
    link = tmp_path / "audit.json"
    link.symlink_to(target)
    assert write_report(link, DATA) is None
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert written(target) == DATA
    # A symlink to a file not there yet: the file is made where it points.
    dangling = tmp_path / "new.json"
    dangling.symlink_to(tmp_path / "reports" / "new.json")
    assert write_report(dangling, DATA) is None
    assert dangling.is_symlink() and written(tmp_path / "reports" / "new.json") == DATA


def test_a_fifo_at_the_path_gets_the_report(tmp_path: Path):
    fifo = tmp_path / "audit.json"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    assert write_report(fifo, DATA) is None
    reader.join(timeout=30)
    assert not reader.is_alive()
    assert json.loads(got[0]) == DATA
    assert stat.S_ISFIFO(fifo.stat().st_mode)  # still the FIFO, not a file put in its place


def test_a_stale_tmp_symlink_is_never_written_through(tmp_path: Path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (tmp_path / "audit.json.tmp").symlink_to(victim)
    assert write_report(tmp_path / "audit.json", DATA) is None
    assert victim.read_text() == "keep me"
    assert (tmp_path / "audit.json.tmp").is_symlink()
    assert written(tmp_path / "audit.json") == DATA
    assert not (tmp_path / "audit.json").is_symlink()


def test_the_plugin_writes_through_a_symlink(pytester: pytest.Pytester):
    project = TokProject(pytester, ("-p", "no:xdist"))
    project.jsonl("data/a.jsonl", [rec(1)])
    (pytester.path / "reports").mkdir()
    (pytester.path / "audit.json").symlink_to(pytester.path / "reports" / "audit.json")
    result = project.run("--tokaudit-json=audit.json")
    assert result.ret == 0
    assert (pytester.path / "audit.json").is_symlink()
    assert written(pytester.path / "reports" / "audit.json")["files"][0]["path"] == "data/a.jsonl"


# -- J. the merge command does not judge what a report cannot support ----------------------------

def test_merge_refuses_parts_that_kept_no_ids_for_an_id_check(pytester: pytest.Pytester):
    """A part written with tokaudit_unique_ids = false kept no ids: it was written under
    another contract than a part that checks them, which the merge refuses (exit 2) in any
    order, rather than judging the union by whichever report comes first (issue #22)."""
    project = TokProject(pytester, ("-p", "no:xdist"))
    project.ini(tokaudit_unique_ids="true")
    project.jsonl("data/part1/a.jsonl", [rec(1), rec(2)])
    project.jsonl("data/part2/b.jsonl", [rec(1), rec(3)])  # sample_id 1 again
    audit_to_json(pytester, "part1.json", paths=("data/part1",))
    audit_to_json(pytester, "part2.json", "-o", "tokaudit_unique_ids=false", paths=("data/part2",))
    for order in (("part1.json", "part2.json"), ("part2.json", "part1.json")):
        result = pytester.run(sys.executable, "-m", "pytest_tokaudit", "merge", *order,
                              "--json", "merged.json")
        assert result.ret == 2, result.stdout.str()
        result.stderr.fnmatch_lines(["error: part1.json and part2.json were written under "
                                     "different contracts: tokaudit_unique_ids (true vs false)*"])
        assert not (pytester.path / "merged.json").exists()
    # Both kept their ids: the duplicate is found, whichever report comes first.
    audit_to_json(pytester, "part2.json", paths=("data/part2",))
    for order in (("part1.json", "part2.json"), ("part2.json", "part1.json")):
        result = pytester.run(sys.executable, "-m", "pytest_tokaudit", "merge", *order)
        assert result.ret == 1
        result.stdout.fnmatch_lines([
            "FAILED tokaudit::unique_ids - 1 id with more than one record (1 record counted twice)",
            "    sample_id=1: 2 records: data/part1/a.jsonl:1, data/part2/b.jsonl:1",
        ])


# -- compact id lists (issue #12) -----------------------------------------------------------------

def test_record_ids_are_packed_as_runs_and_merge_judges_them_as_one_run(
    pytester: pytest.Pytester, capsys
):
    """Counter ids and lines travel as runs ({"from", "n"}), other ids as they are; the merge
    of two parts reads them back and gives the verdicts one run over both parts gives."""
    project = TokProject(pytester, ())
    project.ini(tokaudit_unique_ids="true", tokaudit_count_mean_rel="")
    part1 = [rec(f"s-{i:04}", 10) for i in range(1, 400)] + [rec("odd-a", 10), rec(7, 10)]
    part2 = [rec(f"s-{i:04}", 10) for i in range(398, 900)] + [rec("", 10), rec("odd-a", 10)]
    project.jsonl("data/p1/a.jsonl", part1)
    project.jsonl("data/p2/b.jsonl", [*part2[:10], "", *part2[10:]])  # a blank line: a gap
    whole = audit_to_json(pytester, "whole.json")
    one = audit_to_json(pytester, "one.json", paths=("data/p1",))
    audit_to_json(pytester, "two.json", paths=("data/p2",))
    assert one["format"] == jsonreport.FORMAT == 3
    (chunk,) = one["files"][0]["channels"]["ids"]
    assert chunk == [None, [{"from": "s-0001", "n": 399}, "odd-a", 7], [{"from": 1, "n": 401}]]

    capsys.readouterr()
    assert merge_main(["merge", str(pytester.path / "one.json"), str(pytester.path / "two.json"),
                       "--json", str(pytester.path / "merged.json")]) == 1
    printed = capsys.readouterr().out
    merged = json.loads((pytester.path / "merged.json").read_text())

    def verdicts(report: dict) -> dict[str, tuple]:
        return {d["name"]: (d["outcome"], d["message"], d["lines"]) for d in report["dataset"]}

    assert verdicts(merged) == verdicts(whole)
    assert verdicts(whole)["unique_ids"][0] == "failed"
    assert "FAILED tokaudit::unique_ids - 3 ids with more than one record" in printed, printed
    # Read back, the ids are the records' own, in line order (the blank line 11 has none).
    (b,) = [f for f in load_report(pytester.path / "two.json").files]
    ((_, ids, lines),) = b.channels["ids"]  # runs stay packed; the id index unpacks them
    assert jsonreport.unpack(ids) == [f"s-{i:04}" for i in range(398, 900)] + ["", "odd-a"]
    assert jsonreport.unpack(lines) == [*range(1, 11), *range(12, 506)]


def test_a_bad_run_is_named(report: dict, pytester: pytest.Pytester):
    data = changed(report, lambda d: d["files"][0]["channels"].__setitem__(
        "ids", [[None, [{"from": -3, "n": 2}], [1, 2]]]))
    save(pytester, "bad.json", data)
    with pytest.raises(jsonreport.ReportError, match=r"channels.ids\[0\]\[1\]\[0\] must be "):
        load_report(pytester.path / "bad.json")


def test_the_controller_keeps_a_files_ids_packed_for_the_json_report(pytester: pytest.Pytester):
    """With --tokaudit-json the controller keeps each file's ids for the report. They are
    packed as runs when the summary arrives, not at the end: a file of counter ids is a
    few objects on the controller, not a Python object per record (issue #13's 100M ids).
    The report reads back the same ids and lines; a sharded file's runs shift their lines."""
    from pytest_tokaudit.run.keys import RESULT
    pytester.makeini("[pytest]\ntokaudit_unique_ids = true\ntokaudit_shard_size = 20000\n")
    records = [rec(i) for i in range(1, 1001)]
    data = b"".join(json.dumps(r).encode() + b"\n" for r in records)
    assert len(data) > 2 * 20000  # sharded
    (pytester.path / "data").mkdir()
    (pytester.path / "data" / "a.jsonl").write_bytes(data)
    reprec = pytester.inline_run("--tokaudit", "--tokaudit-json=r.json", "-p", "no:cacheprovider",
                                 "-p", "no:randomly", "data")
    assert not reprec.getfailures()
    result = reprec.getcalls("pytest_unconfigure")[0].config.stash[RESULT]
    shards = list(result.items.values())
    assert len(shards) > 2
    for summary in shards:
        for _, ids, lines in summary.channels["ids"]:
            assert len(ids) <= 2 and len(lines) <= 2, (ids, lines)  # runs, not records
    report = json.loads((pytester.path / "r.json").read_text())
    (entry,) = report["files"]
    got = [(i, line) for _, ids, lines in entry["channels"]["ids"]
           for i, line in zip(jsonreport.unpack(ids), jsonreport.unpack(lines))]
    assert got == [(i, i) for i in range(1, 1001)]
