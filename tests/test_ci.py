"""CI outputs (issue #12): GitHub annotations, the Markdown job summary, the failures file,
the `tokaudit = true` ini switch.

One dataset, without xdist and with two workers: a.jsonl (bad counts at lines 3 and 6),
a sharded big.jsonl (a conftest check's finding at lines 5, 17, 29, 41, 53, a bad count at
line 50: the later shards' lines must be rebased), we,ird.jsonl (a comma in the file name;
the conftest finding at line 2) and ok.jsonl (passes). The conftest check's name and
message hold `%`, `:`, `,` and a newline, so the annotations' escaping is read back.
Annotations and the failures file are checked against the findings of --tokaudit-json.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import TokProject, assert_no_crash, rec

CHECK = "odd:check,name"
MESSAGE = "100% off: see a,b\nsecond line"
SHARD = 1000
MAX_SHOWN = 4

# (path, line) -> check, every record finding of the dataset
RECORD_FINDINGS = {
    **{("data/a.jsonl", line): "count" for line in (3, 6)},
    **{("data/big.jsonl", line): CHECK for line in (5, 17, 29, 41, 53)},
    ("data/big.jsonl", 50): "count",
    ("data/we,ird.jsonl", 2): CHECK,
}


def dataset(project: TokProject) -> None:
    project.ini(
        tokaudit_shard_size=SHARD,
        tokaudit_max_shown=MAX_SHOWN,
        tokaudit_count_mean_rel="",
        tokaudit_unique_ids="true",
    )
    project.write("conftest.py", (
        "from pytest_tokaudit import Finding\n\n"
        "def pytest_tokaudit_check_record(record):\n"
        "    if record.data.get('odd'):\n"
        f"        return Finding({CHECK!r}, {MESSAGE!r})\n"
    ))
    project.jsonl("data/a.jsonl", [rec(i, 10, 40) if i in (2, 5) else rec(i, 10) for i in range(10)])
    big = [rec(100 + i, 12, 40) if i == 49 else rec(100 + i, 12, odd=1) if i % 12 == 4
           else rec(100 + i, 12) for i in range(60)]
    path = project.jsonl("data/big.jsonl", big)
    assert path.stat().st_size > 4 * SHARD  # several shards
    project.jsonl("data/we,ird.jsonl", [rec(300, 10), rec(5, 10, odd=1)])  # 5: also in a.jsonl
    project.jsonl("data/ok.jsonl", [rec(400 + i, 10) for i in range(3)])


def unescape(text: str) -> str:
    return (text.replace("%0D", "\r").replace("%0A", "\n").replace("%3A", ":")
            .replace("%2C", ",").replace("%25", "%"))


def parse_commands(lines: list[str]) -> list[dict[str, str]]:
    """Workflow commands read back as the runner would: level, properties, message."""
    out = []
    for line in lines:
        if not line.startswith("::"):
            continue
        m = re.match(r"^::(error|warning|notice)(?: ([^:]*))?::(.*)$", line)
        assert m, line
        cmd = {"level": m.group(1), "message": unescape(m.group(3))}
        for prop in (m.group(2) or "").split(","):
            key, _, value = prop.partition("=")
            cmd[key] = unescape(value)
        out.append(cmd)
    return out


def read_report(path: Path) -> dict[str, dict]:
    return {f["path"]: f for f in json.loads(path.read_text())["files"]}


def test_annotations_are_the_findings_escaped_and_rebased(
    project: TokProject, monkeypatch: pytest.MonkeyPatch
):
    dataset(project)
    monkeypatch.delenv("GITHUB_WORKSPACE", raising=False)
    result = project.run("--tokaudit-annotations=github", "--tokaudit-json=audit.json")
    assert_no_crash(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    commands = parse_commands(result.stdout.lines)
    assert not [line for line in result.stderr.lines if line.startswith("::")]

    expected = []
    for path, f in read_report(project.path / "audit.json").items():
        forgiven = not any(x["check"] == "count_outliers" for x in f["file_findings"])
        shown = [(x, "error") for x in f["shown"]]
        shown += [(x, "warning" if forgiven else "error") for x in f["shown_allowable"]]
        for x, level in sorted(shown, key=lambda p: p[0]["line"]):
            label = f"sample_id={x['record_id']!r}: "
            expected.append((level, path, str(x["line"]), f"tokaudit {x['check']}",
                             label + x["message"]))
        more = f["findings"] - len(f["file_findings"]) - len(shown)
        if more:
            expected.append(("error", path, "1", "tokaudit", f"{more} more"))
        for x in f["file_findings"]:
            expected.append(("error", path, "1", f"tokaudit {x['check']}", x["message"]))
    got = [(c["level"], c.get("file"), c.get("line"), c["title"], c["message"]) for c in commands]
    # The "N more" annotation is compared by its opening words.
    got = [g[:4] + (g[4].split(" finding")[0],) if g[3] == "tokaudit" else g for g in got]
    ini = [g for g in got if g[1] == "pytest.ini"]
    assert [g for g in got if g[1] != "pytest.ini"] == expected, result.stdout.str()
    assert len(ini) == 1 and ini[0][3] == "tokaudit unique_ids", got
    assert "sample_id=5" in ini[0][4] and "\n" in ini[0][4], ini  # the check's lines too

    # Read back independently of the report: escaping, shard lines, the bound per file.
    odd = [g for g in got if g[3] == f"tokaudit {CHECK}"]
    assert ("error", "data/we,ird.jsonl", "2", f"tokaudit {CHECK}",
            f"sample_id=5: {MESSAGE}") in odd
    big = sorted(int(g[2]) for g in odd if g[1] == "data/big.jsonl")
    assert big == [5, 17, 29, 41]  # later shards' lines, rebased; MAX_SHOWN of the 5
    assert ("error", "data/big.jsonl", "50", "tokaudit count",
            "sample_id=149: billed 40, counted 12 (+28, +70.0%) > max(8, 2%)") in got
    assert ("error", "data/big.jsonl", "1", "tokaudit", "1 more") in got  # line 53
    assert not [g for g in got if g[1] == "data/ok.jsonl"]


def test_annotations_follow_github_actions_and_can_be_turned_off(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
):
    project = TokProject(pytester, ("-p", "no:xdist"))
    dataset(project)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_WORKSPACE", str(project.path.parent))
    on = project.run()
    files = {c.get("file") for c in parse_commands(on.stdout.lines)}
    name = project.path.name
    assert files == {f"{name}/data/a.jsonl", f"{name}/data/big.jsonl", f"{name}/data/we,ird.jsonl",
                     f"{name}/pytest.ini"}, on.stdout.str()
    off = project.run("--tokaudit-annotations=none")
    assert not parse_commands(off.stdout.lines)
    assert off.ret == on.ret == pytest.ExitCode.TESTS_FAILED
    monkeypatch.delenv("GITHUB_ACTIONS")
    assert not parse_commands(project.run().stdout.lines)


def test_failures_file_lists_every_bad_record_once(project: TokProject):
    dataset(project)
    (project.path / "out").mkdir()
    result = project.run("--tokaudit-failures=out/bad.jsonl", "--tokaudit-json=audit.json")
    assert_no_crash(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    entries = [json.loads(line) for line in (project.path / "out/bad.jsonl").read_text().splitlines()]
    got = {(e["path"], e["line"]): e["check"] for e in entries}
    assert len(got) == len(entries)  # each finding once (xdist, shards)
    assert got == RECORD_FINDINGS
    # Uncapped: every finding at a record the summaries counted, past tokaudit_max_shown.
    report = read_report(project.path / "audit.json")
    for path, f in report.items():
        n = sum(1 for e in entries if e["path"] == path)
        assert n == f["findings"] - len(f["file_findings"]), (path, entries)
    assert report["data/big.jsonl"]["findings"] - 1 > MAX_SHOWN  # (its count_outliers)
    by_line = {(e["path"], e["line"]): e for e in entries}
    count = by_line[("data/big.jsonl", 50)]
    assert (count["id"], count["billed"], count["counted"]) == (149, 40, 12)
    assert count["location"] == "data/big.jsonl:50"
    odd = by_line[("data/we,ird.jsonl", 2)]
    assert (odd["id"], odd["message"], odd["billed"], odd["counted"]) == (5, MESSAGE, 10, 10)
    assert sorted(p.name for p in (project.path / "out").iterdir()) == ["bad.jsonl"]  # no parts
    assert "tokaudit failures file: out/bad.jsonl (9 findings at records)" in result.stdout.str()


def test_failures_file_is_empty_for_clean_data_and_checked_before_the_audit(
    pytester: pytest.Pytester,
):
    project = TokProject(pytester, ("-p", "no:xdist"))
    project.ini()
    project.jsonl("data/ok.jsonl", [rec(i, 10) for i in range(3)])
    result = project.run("--tokaudit-failures=bad.jsonl")
    assert result.ret == pytest.ExitCode.OK
    assert (project.path / "bad.jsonl").read_text() == ""
    result = project.run("--tokaudit-failures=nowhere/bad.jsonl")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--tokaudit-failures: cannot write" in result.stderr.str()


def test_markdown_summary_is_appended_to_the_step_summary(
    project: TokProject, monkeypatch: pytest.MonkeyPatch
):
    dataset(project)
    summary = project.path / "step_summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = project.run()
    assert_no_crash(result)
    text = summary.read_text()
    assert text.startswith("earlier step\n## ❌ tokaudit: failed\n"), text
    assert "4 data files, 75 records audited, 3 failing" in text, text
    assert "| `pytest.ini::tokaudit::unique_ids` | ❌ failed |" in text, text
    assert "| `pytest.ini::tokaudit::coverage` | ✅ passed |" in text, text
    failing, _, passing = text.partition("<details>")
    for path in ("data/a.jsonl", "data/big.jsonl", "data/we,ird.jsonl"):
        assert f"#### `{path}`" in failing, text
    assert "data/ok.jsonl" not in failing and "| `data/ok.jsonl` | 3 | 3 |" in passing, text
    assert "1 file passed" in passing, text
    # Findings read back: the file's verdict first, then records; HTML and pipes escaped.
    section = failing.split("#### `data/we,ird.jsonl`")[1]
    assert f"- line 2: sample_id=5: **{CHECK}**: 100% off: see a,b<br>second line" in section
    assert "- line 3: sample_id=2: **count**: billed 40, counted 10" in failing, text
    assert f"tokaudit Markdown summary: {summary}" in result.stdout.str()


def test_an_unwritable_markdown_summary_never_fails_the_run(pytester: pytest.Pytester):
    project = TokProject(pytester, ("-p", "no:xdist"))
    project.ini()
    project.jsonl("data/ok.jsonl", [rec(i, 10) for i in range(3)])
    (project.path / "adir").mkdir()
    result = project.run("--tokaudit-markdown=adir")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert re.search(r"^tokaudit Markdown summary NOT written: cannot write .*adir",
                     result.stdout.str(), re.M), result.stdout.str()


def test_the_ini_switch_turns_the_audit_on(pytester: pytest.Pytester):
    project = TokProject(pytester, ("-p", "no:xdist"))
    project.ini(tokaudit="true")
    project.jsonl("data/x.jsonl", [rec(1, 10, 40)])
    result = project.run(tokaudit=False)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["FAILED data/x.jsonl::tokaudit - *"])
    project.ini(tokaudit="maybe")
    result = project.run(tokaudit=False)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "tokaudit: " in result.stderr.str() and "maybe" in result.stderr.str()


def test_ini_keys_without_the_switch_get_a_note_when_nothing_is_collected(
    pytester: pytest.Pytester,
):
    project = TokProject(pytester, ("-p", "no:xdist"))
    project.ini(tokaudit_count_abs=4, tokaudit_unique_ids="true")
    project.jsonl("data/x.jsonl", [rec(1, 10, 40)])
    result = project.run(tokaudit=False)
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines([
        "tokaudit: the ini file sets tokaudit_count_abs ... but the audit is off: pass "
        "--tokaudit or set `tokaudit = true` in the ini file",
    ])
    # A test suite that collects something is not told.
    project.write("test_plain.py", "def test_plain():\n    pass\n")
    result = project.run(tokaudit=False, paths=(".",))
    assert result.ret == pytest.ExitCode.OK
    assert "the audit is off" not in result.stdout.str()


def test_a_long_summary_table_lists_failing_files_first_and_counts_the_rest(
    pytester: pytest.Pytester,
):
    from conftest import summary_section

    project = TokProject(pytester, ("-p", "no:xdist"))
    project.ini(tokaudit_count_mean_rel="")
    for k in range(25):
        bad = k in (7, 21)
        project.jsonl(f"data/f{k:02}.jsonl", [rec(100 * k + 1, 10, 40 if bad else 11),
                                             rec(100 * k + 2, 10)])
    result = project.run()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    section = summary_section(result)
    table = section[: section.index("")]
    names = [line.split()[0] for line in table[1:]]
    assert names[:2] == ["data/f07.jsonl", "data/f21.jsonl"], table
    assert len(names) == 20 + 1 + 1, table  # 20 files, the total, the note
    assert names[-2] == "all" and table[-1] == "... and 5 more files passed (-v lists every file)"
    # Across all files: the two outside the tolerance first, then the worst 5 of the rest.
    worst = section[section.index("worst records by |billed - counted|:") + 2:]
    worst = worst[: worst.index("")]
    assert [line.split()[0] for line in worst[:3]] == [
        "data/f07.jsonl:1", "data/f21.jsonl:1", "data/f00.jsonl:1"], section
    assert len(worst) == 2 + 5, section

    verbose = summary_section(project.run("-v"))
    table = verbose[: verbose.index("")]
    assert len(table) == 1 + 25 + 1 and "more files passed" not in "\n".join(verbose)
    assert [line.split()[0] for line in table[1:3]] == ["data/f00.jsonl", "data/f01.jsonl"]


def test_failures_file_takes_each_item_once_under_dist_each(pytester: pytest.Pytester):
    project = TokProject(pytester, ("-n", "2", "--dist", "each"))
    dataset(project)
    result = project.run("--tokaudit-failures=bad.jsonl")
    assert_no_crash(result)
    entries = [json.loads(line) for line in (project.path / "bad.jsonl").read_text().splitlines()]
    assert [(e["path"], e["line"]) for e in entries] == sorted(RECORD_FINDINGS)  # file order


VANISH = """
import shutil

def pytest_collection_finish(session):
    shutil.rmtree("out")  # the failures file's directory goes away while the audit runs
"""


def test_a_failures_file_that_cannot_be_written_fails_the_run(pytester: pytest.Pytester):
    project = TokProject(pytester, ("-p", "no:xdist"))
    project.ini()
    project.jsonl("data/a.jsonl", [rec(1, 10, 40), rec(2, 10)])
    project.write("conftest.py", VANISH)
    (project.path / "out").mkdir()
    result = project.run("--tokaudit-failures=out/bad.jsonl", "-o", "tokaudit_count_outliers=1",
                         "-o", "tokaudit_count_mean_rel=")
    assert_no_crash(result)
    # The data passed (one allowed outlier); the list a job relies on is missing: not green.
    result.stdout.fnmatch_lines(["tokaudit failures file NOT written: cannot write *out/bad.jsonl: *",
                                 "*2 passed*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED
