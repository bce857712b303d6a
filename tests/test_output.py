"""Output that scales (issue #12): the summary fitted to the terminal and coloured through
pytest's terminal writer, the worst records bounded across files, JUnit names."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from conftest import TokProject, assert_no_crash, rec, summary_section

FAILED = pytest.ExitCode.TESTS_FAILED
LONG = "data/a_rather_long_folder_name/and_another_one/records_of_some_provider_2026.jsonl"


def long_paths(project: TokProject) -> None:
    project.ini(tokaudit_count_mean_rel="")
    project.jsonl(LONG, [rec(1, 10), rec(2, 10, 40)])
    project.jsonl("data/b.jsonl", [rec(3, 10)])


def test_paths_are_shortened_to_the_terminal_width(pytester: pytest.Pytester, monkeypatch):
    project = TokProject(pytester, ("-p", "no:xdist"))
    long_paths(project)
    monkeypatch.setenv("COLUMNS", "140")
    section = summary_section(project.run())
    table = section[: section.index("")]
    assert all(len(line) <= 140 for line in table), table
    assert table[1].startswith(".../records_of_some_provider_2026.jsonl "), table
    assert all(len(line) <= 140 for line in section if line.startswith(("record", "data/")))
    # Narrower: the name itself loses its middle.
    monkeypatch.setenv("COLUMNS", "100")
    table = summary_section(project.run())
    assert table[1].startswith("records_of_...2026.jsonl "), table  # MIN_PATH wide

    # In a log (not a terminal, COLUMNS unset) paths stay whole.
    monkeypatch.delenv("COLUMNS")
    section = summary_section(project.run())
    assert section[1].startswith(LONG + "  "), section


@pytest.mark.parametrize("color", ["yes", "no"])
def test_failing_rows_and_verdicts_are_coloured_by_the_terminal_writer(
    pytester: pytest.Pytester, color: str
):
    project = TokProject(pytester, ("-p", "no:xdist"))
    long_paths(project)
    result = project.run(f"--color={color}")
    assert result.ret == FAILED
    text = result.stdout.str()
    red, green = "\x1b[31m", "\x1b[32m"
    if color == "no":
        assert "\x1b[" not in text
        return
    rows = [line for line in result.stdout.lines if "records_of_some_provider" in line]
    assert any(line.startswith(red + LONG + " ") for line in rows), rows
    assert any(line.startswith(red + LONG + ":2 ") for line in rows), rows  # outside tolerance
    (good,) = [line for line in result.stdout.lines if re.match(r"data/b.jsonl +1 ", line)]
    assert any(line.startswith(green + "pytest.ini::tokaudit::coverage: passed")
               for line in result.stdout.lines), text


def test_worst_records_are_bounded_across_files(pytester: pytest.Pytester):
    """30 files of +-2 noise and two records outside the tolerance: the two first, then
    the worst 5 of the rest, not 5 rows per file."""
    project = TokProject(pytester, ("-p", "no:xdist"))
    project.ini(tokaudit_count_mean_rel="")
    for k in range(30):
        records = [rec(100 * k + j, 10, 10 + (j % 3)) for j in range(6)]  # diffs 0, -1, -2
        if k in (4, 17):
            records.append(rec(100 * k + 50, 10, 30 + k))
        project.jsonl(f"data/f{k:02}.jsonl", records)
    for args in ((), ("-v",)):
        result = project.run(*args)
        assert result.ret == FAILED
        section = summary_section(result)
        start = section.index("worst records by |billed - counted|:") + 2
        worst = section[start: section.index("", start)]
        assert [line.split()[0] for line in worst] == [
            "data/f17.jsonl:7", "data/f04.jsonl:7",  # outside the tolerance, worst first
            "data/f00.jsonl:3", "data/f00.jsonl:6", "data/f01.jsonl:3", "data/f01.jsonl:6",
            "data/f02.jsonl:3",
        ], section
        assert_no_crash(result)


def test_outside_tolerance_rows_are_bounded_without_v(pytester: pytest.Pytester):
    project = TokProject(pytester, ("-p", "no:xdist"))
    project.ini(tokaudit_count_mean_rel="")
    for k in range(25):
        project.jsonl(f"data/f{k:02}.jsonl", [rec(k, 10, 40 + k)])
    section = summary_section(project.run())
    start = section.index("worst records by |billed - counted|:") + 2
    worst = section[start: section.index("", start)]
    assert len(worst) == 20 + 1, worst
    assert worst[0].startswith("data/f24.jsonl:1 ")
    assert worst[-1].startswith("... and 5 more outside the count tolerance"), worst
    section = summary_section(project.run("-v"))
    start = section.index("worst records by |billed - counted|:") + 2
    assert len(section[start: section.index("", start)]) == 25


def test_junit_names_are_the_folder_and_the_file(project: TokProject):
    project.ini(tokaudit_shard_size=200, tokaudit_count_mean_rel="")
    project.jsonl("data/chat/big.jsonl", [rec(i, 10) for i in range(8)])
    project.jsonl("top.jsonl", [rec(100, 10, 40)])
    result = project.run("--junitxml=r.xml", "--junitprefix=ci", paths=("data", "top.jsonl"))
    assert result.ret == FAILED
    cases = {(c.get("classname"), c.get("name")): c
             for c in ET.parse(project.path / "r.xml").getroot().iter("testcase")}
    n = sum(1 for name in cases if name[1].startswith("big.jsonl [shard "))
    assert n >= 2
    assert set(cases) == {
        *(("ci.data.chat", f"big.jsonl [shard {i}]") for i in range(1, n + 1)),
        ("ci.data.chat", "big.jsonl [whole file]"),
        ("ci.tokaudit", "top.jsonl"),
        ("ci.tokaudit", "coverage"),
    }, cases
    assert cases["ci.tokaudit", "top.jsonl"].find("failure") is not None
    # The shard names stay when the file grows into more shards.
    project.jsonl("data/chat/big.jsonl", [rec(i, 10) for i in range(30)])
    project.run("--junitxml=r2.xml", paths=("data",))
    names = {c.get("name") for c in ET.parse(project.path / "r2.xml").getroot().iter("testcase")}
    assert {f"big.jsonl [shard {i}]" for i in range(1, n + 1)} < names
    assert max(int(m) for m in re.findall(r"shard (\d+)", " ".join(names))) > n


# -- signs of life ------------------------------------------------------------------------------

# Durations as progress.py words them: "0.4 s", "12 s", "2 min 05 s", "1 h 02 min".
DURATION = r"(?:[\d.]+ s|\d+ min \d\d s|\d+ h \d\d min)"
PROGRESS = re.compile(  # an xdist worker's line for an item that runs long
    r"^\[gw\d\] tokaudit: data/slow\.jsonl\.gz: ([\d,]+) records, [\d.]+ MB in " + DURATION +
    r" \([\d.]+ MB/s\), (\d+)% of [\d.]+ MB(?:, ETA " + DURATION + ")?$"
)
RUN_PROGRESS = re.compile(  # the run's line, in a plain run and on the xdist controller
    r"^tokaudit: ([\d,]+) records, [\d.]+ MB of ([\d.]+) MB \((\d+)%\) in " + DURATION +
    r" \([\d.]+ MB/s\)(?:, ETA " + DURATION + r")?; (\d+) of 2 items done(, now data/slow\.jsonl\.gz)?$"
)


def test_a_slow_run_prints_progress_lines(project: TokProject):
    """Where the lines come from and what they say; not how fast (no sleeps, no clock): an
    interval of a microsecond makes every batch of the long item, and every item's end,
    outlast it. The lines' figures under a clock: tests/outputs/test_progress.py."""
    project.ini(tokaudit_progress_interval="0.000001")
    project.jsonl("data/slow.jsonl.gz", [rec(i, 10) for i in range(1200)])
    project.jsonl("data/quick.jsonl", [rec(5000, 10)])
    total = sum(p.stat().st_size for p in (project.path / "data").iterdir()) / 1e6
    result = project.run()
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert_no_crash(result)
    runs = [m for m in map(RUN_PROGRESS.match, result.outlines) if m]
    assert runs, result.outlines
    assert all(m.group(2) == f"{total:.1f}" for m in runs)  # the whole run's bytes
    assert all(0 <= int(m.group(3)) <= 100 for m in runs)
    if "-n" in project.mode:
        # The controller counts the run as items end; the worker says how far its long
        # item got, on stderr, as before.
        assert all(m.group(5) is None and m.group(4) != "0" for m in runs)
        found = [m for m in map(PROGRESS.match, result.errlines) if m]
        assert [m.group(1) for m in found] == ["256", "512", "768", "1,024"], result.errlines
        assert all(0 < int(m.group(2)) <= 100 for m in found)
    else:
        # After each batch of the slow item, whose records count as they are read (after
        # quick.jsonl's one, which ran first).
        during = [m for m in runs if m.group(5)]
        assert [m.group(1) for m in during] == ["257", "513", "769", "1,025"], result.outlines
        assert [m.group(1) for m in runs if not m.group(5)][-1:] in ([], ["1,201"])
    # Each on a line of its own, no other output cut by one, and pytest's [ NN%] column
    # where pytest puts it: the run's last line of dots ends in [100%] at the edge.
    assert not [line for line in result.outlines + result.errlines
                if "tokaudit: " in line and "records" in line
                and not (RUN_PROGRESS.match(line) or PROGRESS.match(line))]
    ends = [line for line in result.outlines if re.search(r"\[ *\d+%\]$", line)]
    assert ends and ends[-1].endswith("[100%]"), result.outlines
    assert len({len(line) for line in ends}) == 1, ends
    assert summary_section(result)[1].startswith("data/quick.jsonl")

    quiet = project.run("-o", "tokaudit_progress_interval=0")
    assert not [line for line in quiet.outlines + quiet.errlines
                if RUN_PROGRESS.match(line) or PROGRESS.match(line)]


def test_a_bad_progress_interval_is_a_usage_error(pytester: pytest.Pytester):
    project = TokProject(pytester, ("-p", "no:xdist"))
    project.jsonl("data/a.jsonl", [rec(1)])
    result = project.run("-o", "tokaudit_progress_interval=soon")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: tokaudit_progress_interval: expected a number of "
                                 "seconds (0: off), got 'soon'"])
