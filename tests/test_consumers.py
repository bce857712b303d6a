"""Report consumers show exactly the failures the terminal shows (issue #9).

pytest-html, pytest-json-report and junitxml are held to the terminal in test_gate.py. Here
the real pytest-sugar, pytest-instafail and pytest-github-actions-annotate-failures are,
without xdist and with two workers. One partial audit run (data/sub/c.jsonl is not named)
fails three items: a data file's records (data/x.jsonl::tokaudit), a sharded file's whole
(data/big.jsonl::tokaudit[file], its shards pass) and a dataset check
(pytest.ini::tokaudit::unique_ids); coverage, expected_ids and a plain test are skipped.

Each consumer's run is read its own way and compared with a plain run's `-rA` lines:

- sugar (--force-sugar, the subprocess has no tty): each failure printed once as it
  happens, the "Results" listing names the failed files, and its counts are the terminal's;
- instafail (--instafail): each failure printed before the end of the session, the
  deferred whole-file and dataset checks included, and no FAILURES section after;
- annotations (GITHUB_ACTIONS=true): one `::error file=...` workflow command per failed
  item, naming its file (the data file or pytest.ini) and the line of its first bad
  record, none for a passed item.

The three failed items are in three different files, so a file names a failure here.
"""

from __future__ import annotations

import re

import pytest

from conftest import Gate, Run, assert_clean, ds, ids_text, rec
from pytest_tokaudit.sources.base import shard_count

PATHS = ("data/a.jsonl", "data/x.jsonl", "data/big.jsonl", "tests")  # not data/sub: partial
FAILED = {"data/x.jsonl::tokaudit", "data/big.jsonl::tokaudit[file]", ds("unique_ids")}
SKIPPED = {"tests/test_plain.py::test_skipped", ds("coverage"), ds("expected_ids")}

# A failure's title line: pytest's '____ title ____', pytest-sugar's '―――― title ――――'.
_TITLE = re.compile(r"^([_―])\1{2,} (.*?) \1{2,}$")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def failed(run: Run) -> set[str]:
    """The FAILED lines of `-rA` (under pytest-sugar, whose -rA adds a PASSED line for the
    setup and teardown of every item, the PASSED lines say nothing)."""
    return {n for n, results in run.results.items() if any(w == "FAILED" for w, _ in results)}


def titles(lines: list[str]) -> list[str]:
    return sorted(m.group(2) for m in map(_TITLE.match, lines) if m)


def files(nodeids: set[str]) -> list[str]:
    return sorted(n.split("::")[0] for n in nodeids)


def plain_run(gate: Gate, mode: tuple[str, ...]) -> Run:
    """Write the dataset and run it with no consumer: the reference."""
    gate.ini(
        testpaths="data",
        tokaudit_unique_ids="true",
        tokaudit_expected_ids="manifest.txt",
        tokaudit_shard_size=1000,
        tokaudit_count_mean_rel="1%",
        tokaudit_count_mean_abs=0,  # the relative part alone judges big.jsonl
    )
    gate.jsonl("data/a.jsonl", [rec(i, 10) for i in range(1, 6)])
    gate.jsonl("data/x.jsonl", [rec(6, 10), rec(7, 10, 40), rec(3, 10)])  # a bad count; 3 again
    # Every record within its tolerance (2 of 102), the file's mean not (1.96% > 1%).
    big = gate.jsonl("data/big.jsonl", [rec(i, 100, 102) for i in range(10, 20)])
    gate.jsonl("data/sub/c.jsonl", [rec(i, 10) for i in range(20, 23)])
    gate.write("manifest.txt", ids_text([*range(1, 8), *range(10, 23)]))
    gate.write("tests/test_plain.py", (
        "import pytest\n\ndef test_plain():\n    pass\n\n"
        "def test_skipped():\n    pytest.skip('not today')\n"
    ))
    shards = shard_count(big.stat().st_size, 1000)
    assert shards >= 3
    run = gate.run(*mode, paths=PATHS)
    assert_clean(run)
    assert run.ret == pytest.ExitCode.TESTS_FAILED, run
    assert failed(run) == FAILED, run
    assert {n for n, o in run.outcomes().items() if o == "SKIPPED"} == SKIPPED, run
    for i in range(1, shards + 1):
        assert run.outcome(f"data/big.jsonl::tokaudit[shard {i}]") == "PASSED", run
    assert len(titles(run.sections["FAILURES"])) == len(FAILED), run
    return run


def test_sugar_reports_the_terminal_failures(gate: Gate, xdist_mode: tuple[str, ...]):
    plain = plain_run(gate, xdist_mode)
    run = gate.run("--force-sugar", *xdist_mode, paths=PATHS, plugins=("sugar",))
    assert_clean(run)
    assert run.ret == plain.ret, run
    assert failed(run) == failed(plain), run
    lines = [_ANSI.sub("", line) for line in run.lines]
    # Printed as they happen, each once, under the titles of the plain run's FAILURES.
    assert titles(lines) == titles(plain.sections["FAILURES"]), run
    starts = [i for i, line in enumerate(lines) if line.startswith("Results (")]
    assert len(starts) == 1, run
    results = lines[starts[0] + 1:]
    counts = {w: int(n) for n, w in re.findall(r"^ +(\d+) (\w+)$", "\n".join(results), re.M)}
    assert counts == plain.counts(), (counts, run)
    listed = [re.match(r"^ +- (\S+):(?:\d+|\?) (.*)$", line) for line in results]
    listed = [m.groups() for m in listed if m]
    assert sorted(path for path, _ in listed) == files(failed(plain)), (listed, run)
    # Each at the line of its first bad record, as the annotations below.
    at = {m.group(1): m.group(2) for m in map(re.compile(r"^ +- (\S+):(\d+|\?) ").match, results) if m}
    assert at == {"data/x.jsonl": "2", "data/big.jsonl": "1", "pytest.ini": "1"}, (at, run)
    assert sorted(title for _, title in listed) == titles(plain.sections["FAILURES"]), run


def test_instafail_prints_every_failure_as_it_happens(gate: Gate, xdist_mode: tuple[str, ...]):
    plain = plain_run(gate, xdist_mode)
    run = gate.run("--instafail", *xdist_mode, paths=PATHS, plugins=("instafail",))
    assert_clean(run)
    assert run.ret == plain.ret, run
    assert failed(run) == failed(plain), run
    # The run's own output: from the session header to the first section after it.
    start = next(i for i, line in enumerate(run.lines) if "test session starts" in line)
    end = next(i for i in range(start + 1, len(run.lines)) if re.match(r"^=+ .* =+$", run.lines[i]))
    assert titles(run.lines[start:end]) == titles(plain.sections["FAILURES"]), run
    assert titles(run.lines[end:]) == [], run  # none again at the end
    assert "FAILURES" not in run.sections, run


def test_annotations_name_the_file_of_each_failure(
    gate: Gate, xdist_mode: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
):
    plain = plain_run(gate, xdist_mode)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.delenv("GITHUB_WORKSPACE", raising=False)  # paths as pytest gives them
    monkeypatch.delenv("PYTEST_RUN_PATH", raising=False)
    run = gate.run(*xdist_mode, paths=PATHS, plugins=("annotate",))
    assert_clean(run)
    assert run.ret == plain.ret, run
    assert failed(run) == failed(plain), run
    commands = [line for line in run.err.splitlines() if line.startswith("::error")]
    parsed = [re.match(r"^::error file=([^,]+),line=(\d+)::(.*)$", line) for line in commands]
    assert all(parsed), commands
    assert sorted(m.group(1) for m in parsed) == files(failed(plain)), (commands, run)
    # Each at the line of its failure's first bad record: x.jsonl's bad count is line 2;
    # the whole-file and dataset verdicts name no record, so their file's first line.
    lines = {m.group(1): int(m.group(2)) for m in parsed}
    assert lines == {"data/x.jsonl": 2, "data/big.jsonl": 1, "pytest.ini": 1}, commands
    # The message opens with the failure's title, as in the plain run's FAILURES.
    got = sorted(m.group(3).split("%0A")[0] for m in parsed)
    assert got == titles(plain.sections["FAILURES"]), (commands, run)
    # This plugin's own annotations (one per finding, test_ci.py) go to stdout, titled.
    ours = [line for line in run.lines if line.startswith("::")]
    assert ours and all(",title=tokaudit" in line for line in ours), run
