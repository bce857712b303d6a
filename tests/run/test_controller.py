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
OK = pytest.ExitCode.OK


def lines(records: list) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def outcomes(result: pytest.RunResult) -> list[str]:
    return sorted(re.findall(r"^((?:PASSED|FAILED|SKIPPED|ERROR) .+?)(?: - .*)?$", result.stdout.str(), re.M))


def test_a_sharded_file_named_with_colons_gets_its_whole_file_verdict(project: TokProject):
    """No look-alike file: the [file] item must not fail good data for want of `data/a`."""
    project.ini(tokaudit_shard_size=700, tokaudit_count_mean_rel="")
    project.write("data/a::b.jsonl", lines([rec(i) for i in range(30)]))
    result = project.run("-rA")
    assert_no_crash(result)
    assert result.ret == OK, result.stdout.str()
    assert "PASSED data/a::b.jsonl::tokaudit[file]" in outcomes(result), result.stdout.str()
    assert "pytest.ini::tokaudit::coverage: passed: 1 data file (30 records)" in result.stdout.str()


def test_a_look_alike_file_does_not_stand_in_for_a_file_named_with_colons(project: TokProject):
    """`data/x.jsonl` and `data/x.jsonl::y.jsonl`, both sharded. The second breaks its
    outlier allowance across shards, which only its [file] item judges: that verdict must be
    its own, not a second look at `data/x.jsonl`."""
    project.ini(tokaudit_shard_size=700, tokaudit_count_mean_rel="", tokaudit_count_outliers=1)
    project.write("data/x.jsonl", lines([rec(i) for i in range(30)]))
    bad = [rec(100 + i) for i in range(30)]
    bad[2] = rec(102, billed=40)  # an allowed outlier in the first shard
    bad[27] = rec(127, billed=40)  # and another in the last: 2 > 1 allowed
    project.write("data/x.jsonl::y.jsonl", lines(bad))
    result = project.run("-rA")
    assert_no_crash(result)
    assert result.ret == FAILED, result.stdout.str()
    seen = outcomes(result)
    assert "PASSED data/x.jsonl::tokaudit[file]" in seen, seen
    assert "FAILED data/x.jsonl::y.jsonl::tokaudit[file]" in seen, seen
    # Its own verdict: the outlier allowance, judged over both shards (#24: the [file] item
    # fails on its own verdicts and does not repeat the shards' records).
    assert failure_section(result, "data/x.jsonl::y.jsonl [whole file]")[0].startswith(
        "2 records break the count tolerance"), result.stdout.str()


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


@pytest.mark.skipif(sys.platform in ("win32", "darwin"), reason="file names must be bytes")
def test_a_sharded_file_whose_name_is_not_utf8_gets_its_whole_file_verdict(project: TokProject):
    """A node id escapes such a name (\\xff): it cannot be turned back into the file."""
    project.ini(tokaudit_shard_size=700, tokaudit_count_mean_rel="")
    (project.path / "data").mkdir()
    with open(os.path.join(os.fsencode(project.path / "data"), b"\xff.jsonl"), "wb") as fh:
        fh.write(lines([rec(i) for i in range(30)]))
    result = project.run("-rA")
    assert_no_crash(result)
    assert result.ret == OK, result.stdout.str()
    assert "PASSED data/\\xff.jsonl::tokaudit[file]" in outcomes(result), result.stdout.str()


def test_junit_names_a_file_named_with_colons(project: TokProject):
    project.ini()
    project.jsonl("data/sub/a::b.jsonl", [rec(1)])
    result = project.run("--junitxml=r.xml")
    assert result.ret == OK, result.stdout.str()
    xml = (project.path / "r.xml").read_text()
    assert '<testcase classname="data.sub" name="a::b.jsonl"' in xml, xml
