"""Rows the columnar source tests write as Parquet and as Arrow IPC, each beside its JSONL
twin: good rows and one of every way a row breaks a check or is unusable; red_twins, which
audits both, and BIG_ROW_SCRIPT, shared by test_parquet.py and test_parquet_huge_row.py (no
test module imports another).

Helpers only (no fixtures, no tests), imported by name: `from tables import SCHEMA, corpus`.
"""

from __future__ import annotations

import pytest

from conftest import TokProject, assert_no_crash, rec

pa = pytest.importorskip("pyarrow")

THINK, END, OPEN = 7, 8, 9
INI = dict(
    tokaudit_require_once=THINK, tokaudit_require_last=END, tokaudit_forbid=OPEN,
    tokaudit_count_abs=0, tokaudit_count_rel="0%", tokaudit_where="provider",
)
SCHEMA = pa.schema([
    ("sample_id", pa.int64()),
    ("provider", pa.string()),
    ("completion_tokens", pa.int64()),
    ("output_ids", pa.list_(pa.int64())),
])


def good(i: int, **kw):
    return rec(i, 12, once=[THINK], last=END, provider="api", **kw)


def corpus() -> list[dict]:
    """Good rows and one of every way a row breaks a check or is unusable."""
    rows = [good(i) for i in range(1, 41)]
    rows[2] = rec(3, 12, 15, once=[THINK], last=END, provider="api")  # count
    rows[5] = rec(6, 12, once=[THINK, THINK], last=END, provider="api")  # require_once
    rows[7] = rec(8, 12, once=[THINK, OPEN], last=END, provider="api")  # forbid
    rows[9] = rec(10, 12, once=[THINK], provider="api")  # require_last
    rows[11] = {**good(12), "output_ids": None}  # unusable ids, billed still counted
    rows[13] = {**good(14), "output_ids": [THINK, -1, END]}
    rows[15] = {**good(16), "output_ids": [THINK, None, END]}
    rows[17] = {**good(18), "completion_tokens": None}
    rows[19] = {**good(20), "provider": None}  # skipped by tokaudit_where
    rows[21] = {**good(22), "output_ids": []}
    rows[23] = {**good(24), "sample_id": None}
    rows[25] = good(5)  # a repeated id
    return rows


def red_twins(project: TokProject) -> tuple[pytest.RunResult, pytest.RunResult]:
    """The JSONL files under data/ and their Parquet (or Arrow) twins under pq/, each audited
    in a run of its own; both runs must end red without a crash."""
    jsonl = project.run("-o", "tokaudit_glob=*.jsonl")
    parquet = project.run(paths=("pq",))
    for result in (jsonl, parquet):
        assert_no_crash(result)
        assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    return jsonl, parquet


# A subprocess auditing one file with no check, printing what it read and its peak memory.
BIG_ROW_SCRIPT = '''
import json, re, sys
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from audits import CONTRACTS
from pytest_tokaudit.engine.passes import audit
from pytest_tokaudit.model.summary import FileSummary


class NoChecks:  # what the pass calls of the hook relay: no check of anyone's
    def pytest_tokaudit_check_record(self, **kw):
        return []

    pytest_tokaudit_check_batch = pytest_tokaudit_check_record


contract = CONTRACTS["default"].replace(max_line_bytes=8 << 20)
summary = FileSummary(path="x")
audit(Path(sys.argv[1]), contract, NoChecks(), summary)
# This process's own high-water mark (ru_maxrss would count the parent's, from before exec).
peak = int(re.search(r"VmHWM:\\s+(\\d+) kB", Path("/proc/self/status").read_text())[1]) * 1024
print(json.dumps([summary.records, summary.checked, [(f.line, f.check) for f in summary.shown], peak]))
'''
