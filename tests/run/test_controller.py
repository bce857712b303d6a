"""The controller never finds a file by cutting a node id at its first `::` (issue #22,
item 7): a data file may be named `a::b.jsonl`, and under xdist the controller, which
collects nothing, must still judge its whole-file verdict and word its coverage."""

from __future__ import annotations

import json
import os
import re
import sys

import pytest

from conftest import TokProject, assert_no_crash, failure_section, rec

FAILED = pytest.ExitCode.TESTS_FAILED


def lines(records: list) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def outcomes(result: pytest.RunResult) -> list[str]:
    return sorted(re.findall(r"^((?:PASSED|FAILED|SKIPPED|ERROR) .+?)(?: - .*)?$", result.stdout.str(), re.M))


BYTES_NAMES = sys.platform not in ("win32", "darwin")  # file names are bytes


def test_files_named_with_colons_or_not_utf8_get_their_own_verdicts(project: TokProject):
    """Each case a file of one project, read per node id:
    - `data/a::b.jsonl`, sharded, no look-alike file: the [file] item must not fail good data
      for want of `data/a`;
    - `data/x.jsonl` and `data/x.jsonl::y.jsonl`, both sharded. The second breaks its outlier
      allowance across shards, which only its [file] item judges: that verdict must be its
      own, not a second look at `data/x.jsonl`;
    - `data/\\xff.jsonl`, sharded: a node id escapes such a name, it cannot be turned back
      into the file;
    - `data/sub/a::b.jsonl` in the JUnit XML."""
    project.ini(tokaudit_shard_size=700, tokaudit_count_mean_rel="", tokaudit_count_outliers=1)
    project.write("data/a::b.jsonl", lines([rec(i) for i in range(30)]))
    project.write("data/x.jsonl", lines([rec(i) for i in range(30)]))
    bad = [rec(100 + i) for i in range(30)]
    bad[2] = rec(102, billed=40)  # an allowed outlier in the first shard
    bad[27] = rec(127, billed=40)  # and another in the last: 2 > 1 allowed
    project.write("data/x.jsonl::y.jsonl", lines(bad))
    if BYTES_NAMES:
        with open(os.path.join(os.fsencode(project.path / "data"), b"\xff.jsonl"), "wb") as fh:
            fh.write(lines([rec(i) for i in range(30)]))
    project.jsonl("data/sub/a::b.jsonl", [rec(1)])
    result = project.run("-rA", "--junitxml=r.xml")
    assert_no_crash(result)
    assert result.ret == FAILED, result.stdout.str()
    seen = outcomes(result)
    # The one failure: the look-alike's own [file] verdict; every other item passed.
    assert [o for o in seen if not o.startswith("PASSED ")] == [
        "FAILED data/x.jsonl::y.jsonl::tokaudit[file]"], seen
    for nodeid in ["data/a::b.jsonl::tokaudit[file]", "data/x.jsonl::tokaudit[file]",
                   "data/sub/a::b.jsonl::tokaudit", "pytest.ini::tokaudit::coverage",
                   *(["data/\\xff.jsonl::tokaudit[file]"] if BYTES_NAMES else [])]:
        assert f"PASSED {nodeid}" in seen, (nodeid, seen)
    files, records = (5, 121) if BYTES_NAMES else (4, 91)
    assert f"pytest.ini::tokaudit::coverage: passed: {files} data files ({records} records)" \
        in result.stdout.str()
    # Its own verdict: the outlier allowance, judged over both shards (#24: the [file] item
    # fails on its own verdicts and does not repeat the shards' records).
    assert failure_section(result, "data/x.jsonl::y.jsonl [whole file]")[0].startswith(
        "2 records break the count tolerance"), result.stdout.str()
    xml = (project.path / "r.xml").read_text()
    assert '<testcase classname="data.sub" name="a::b.jsonl"' in xml, xml


def test_coverage_words_a_file_named_with_colons_that_did_not_finish(project: TokProject):
    """A selected item that never finished: `did not finish`, not `not selected`."""
    project.ini()
    project.jsonl("data/a::b.jsonl", [rec(1)])
    project.jsonl("data/c.jsonl", [rec(2)])
    project.write("conftest.py", """
import pytest

def pytest_runtest_setup(item):
    if "a::b" in item.nodeid:
        pytest.skip("not today")
""")
    result = project.run("-rA")
    assert_no_crash(result)
    result.stdout.fnmatch_lines(["SKIPPED [[]1[]] pytest.ini: partial run: 1 data file did not "
                                 "finish (*): data/a::b.jsonl"])


