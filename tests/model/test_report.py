"""Reading a JSON report back: packed id runs stay packed (a baseline never unpacks them,
the id index unpacks them a chunk at a time), and a report may not claim more ids than its
records, nor lines past its end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import TokProject, assert_no_crash, rec
from pytest_tokaudit.model.report import ReportError
from pytest_tokaudit.sources.reports import load

N = 5_000_000


@pytest.fixture
def report(pytester: pytest.Pytester) -> dict:
    """A real report of one file of three records, with ids kept (unique_ids)."""
    project = TokProject(pytester, ("-p", "no:xdist"))
    project.ini(tokaudit_unique_ids="true")
    project.jsonl("data/a.jsonl", [rec(1), rec(2), rec(3)])
    assert project.run("--tokaudit-json=r.json").ret == pytest.ExitCode.OK
    return json.loads(pytester.path.joinpath("r.json").read_text())


def claiming(report: dict, n: int, records: int | None = None, ids: list | None = None,
             lines: list | None = None, path: str = "data/a.jsonl") -> dict:
    """The report, its file claiming `n` records with ids 1..n at lines 1..n (packed)."""
    data = json.loads(json.dumps(report))
    f = data["files"][0]
    f["path"] = path
    f["channels"]["ids"] = [[None, ids if ids is not None else [{"from": 1, "n": n}],
                             lines if lines is not None else [{"from": 1, "n": n}]]]
    for key in ("records", "lines", "audited", "checked"):
        f[key] = n if records is None else records
    return data


def write(tmp_path: Path, name: str, data: dict) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


LOAD_SCRIPT = '''
import json, re, sys
from pathlib import Path
from pytest_tokaudit.sources.reports import load
report = load(sys.argv[1], ids=sys.argv[2] == "ids")
peak = int(re.search(r"VmHWM:\\s+(\\d+) kB", Path("/proc/self/status").read_text())[1]) * 1024
# Each ids channel entry (shard, ids, lines): how many values or runs its ids list holds.
print(json.dumps([peak, [[len(e[1]) for e in f.channels.get("ids", [])] for f in report.files]]))
'''


@pytest.mark.parametrize("mode", ["baseline", "ids"])
def test_a_report_of_millions_of_packed_ids_loads_without_unpacking_them(report: dict,
                                                                         tmp_path: Path, mode: str):
    """5M ids in one run (a 2.5 KB file): the old loader expanded them (3.5 s, 1 GB). What
    is asserted is what makes it fast: the run stays one run, and memory stays bounded
    (how fast: the kit's `merge` case, benchmarks/cases_outputs.py)."""
    path = write(tmp_path, "big.json", claiming(report, N))
    assert path.stat().st_size < 4000
    proc = subprocess.run([sys.executable, "-c", LOAD_SCRIPT, str(path), mode],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    peak, channels = json.loads(proc.stdout)
    assert peak < 200 << 20, peak / 2**20
    assert channels == ([[]] if mode == "baseline" else [[1]])  # a baseline keeps no ids


@pytest.mark.parametrize("ids", [True, False])
@pytest.mark.parametrize("case, message", [
    ("more_ids", "files[0].channels.ids[0] claims 5,000,001 ids for 5,000,000 records"),
    ("huge_run", "files[0].channels.ids[0] claims 1,099,511,627,776 ids for 3 records"),
    ("literal_ids", "files[0].channels.ids[0] claims 4 ids for 3 records"),
    ("lines_past", "files[0].channels.ids[0][2] names line 5,000,001 of a file of 5,000,000 lines"),
    ("fewer_lines", "files[0].channels.ids[0] has 4,999,999 lines for 5,000,000 ids"),
    ("bad_run", "files[0].channels.ids[0][1][0].n must be an integer"),
])
def test_a_report_may_not_claim_more_than_its_records(report: dict, tmp_path: Path, ids: bool,
                                                       case: str, message: str):
    data = {
        "more_ids": lambda: claiming(report, N + 1, records=N),
        "huge_run": lambda: claiming(report, 2**40, records=3),
        "literal_ids": lambda: claiming(report, 3, ids=[1, 2, 3, 4], lines=[1, 2, 3, 3]),
        "lines_past": lambda: claiming(report, N, lines=[{"from": 2, "n": N}]),
        "fewer_lines": lambda: claiming(report, N, lines=[{"from": 1, "n": N - 1}]),
        "bad_run": lambda: claiming(report, 3, ids=[{"from": 1, "n": -3}]),
    }[case]()
    path = write(tmp_path, "r.json", data)
    with pytest.raises(ReportError) as info:
        load(path, ids=ids)
    assert message in str(info.value), str(info.value)


def test_packed_ids_are_judged_as_unpacked_ones_by_merge(report: dict, tmp_path: Path):
    """Two reports of overlapping runs: the duplicates of the union, counted and named."""
    a = write(tmp_path, "a.json", claiming(report, 200_000))
    b_data = claiming(report, 100_000, path="data/b.jsonl",
                      ids=[{"from": 150_001, "n": 100_000}], lines=[{"from": 1, "n": 100_000}])
    b = write(tmp_path, "b.json", b_data)
    proc = subprocess.run([sys.executable, "-m", "pytest_tokaudit", "merge", str(a), str(b)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert "50,000 ids with more than one record (50,000 records counted twice)" in out, out
    assert "sample_id=150001: 2 records: data/a.jsonl:150001, data/b.jsonl:1" in out, out


def test_a_baseline_of_millions_of_ids_is_read_in_a_moment(pytester: pytest.Pytester, report: dict):
    project = TokProject(pytester, ("-p", "no:xdist"))
    write(pytester.path, "big.json", claiming(report, N))
    result = project.run("--tokaudit-baseline=big.json", "-rA")
    assert_no_crash(result)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert "PASSED data/a.jsonl::tokaudit" in result.stdout.str()
