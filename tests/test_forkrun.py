"""The suite's forked pytest runs (tests/forkrun.py) are the runs of a fresh `python -m pytest`:
the same output and exit status, the run's environment, working directory, umask and
sys.path (no warning that a plugin could not be rewritten), and a hung run killed at its
timeout. These runs fork whatever TOKAUDIT_TEST_FORK says (the full matrix runs fresh ones)."""

import json
import os
import re

import pytest

import forkrun
from conftest import UNRELATED_PLUGINS, rec

PROBE = """
import json, os, sys

def pytest_configure(config):
    with open("probe.json", "w") as f:
        json.dump({"env": os.environ.get("TOKAUDIT_PROBE"), "cwd": os.getcwd(),
                   "umask": os.umask(0o022), "path": sys.path, "argv0": sys.argv[0],
                   "main": sys.modules["__main__"].__spec__.name}, f)
"""


def normalized(result: pytest.RunResult) -> list[str]:
    return [re.sub(r" in \d+\.\d+s", " in Ns", line) for line in result.stdout.lines]


def test_a_forked_run_is_a_fresh_process_run(pytester: pytest.Pytester, monkeypatch):
    pytester.makeini("[pytest]\ntokaudit_count_abs = 1\n")
    pytester.makeconftest(PROBE)
    data = pytester.path / "data"
    data.mkdir()
    (data / "a.jsonl").write_text(json.dumps(rec("s1", billed=19)) + "\n{broken\n")
    (data / "b.jsonl").write_text(json.dumps(rec("s2")) + "\n")
    monkeypatch.setenv("TOKAUDIT_PROBE", "on")
    forkrun.runpytest(pytester, "--version", fork=True)  # the warm process exists before the umask changes
    old = os.umask(0o027)
    try:
        args = ("--tokaudit", "data", "-p", "no:xdist", "--tokaudit-no-cache", *UNRELATED_PLUGINS)
        forked = forkrun.runpytest(pytester, *args, fork=True)
        forked_probe = json.loads((pytester.path / "probe.json").read_text())
        fresh = pytester.runpytest_subprocess(*args)
        fresh_probe = json.loads((pytester.path / "probe.json").read_text())
    finally:
        os.umask(old)
    assert forked.ret == fresh.ret == pytest.ExitCode.TESTS_FAILED
    assert normalized(forked) == normalized(fresh)
    assert forked.stderr.lines == fresh.stderr.lines == []
    assert forked_probe == fresh_probe
    assert forked_probe["env"] == "on" and forked_probe["umask"] == 0o027
    assert forked_probe["cwd"] == str(pytester.path) in forked_probe["path"]
    assert forked_probe["main"] == "pytest.__main__"


def test_a_hung_forked_run_is_killed_at_its_timeout(pytester: pytest.Pytester):
    pytester.makepyfile(test_hang="import time\n\ndef test_hang():\n    time.sleep(60)\n")
    with pytest.raises(pytest.Pytester.TimeoutExpired):
        forkrun.runpytest(pytester, "-p", "no:xdist", timeout=2, fork=True)
    # The warm process goes on serving runs.
    pytester.makepyfile(test_hang="def test_quick():\n    pass\n")
    forkrun.runpytest(pytester, "-p", "no:xdist", fork=True).assert_outcomes(passed=1)
