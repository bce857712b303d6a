"""What a check hook answers: a falsy value is no finding; anything the audit cannot use
(a value of another type, a Finding or Outcome with a field of the wrong type) fails the
item or the dataset check with an error naming the hook and the value, never a traceback
or an INTERNALERROR. A channel named like a built-in one is refused the same way."""

from __future__ import annotations

import pytest

from conftest import TokProject, assert_no_crash, failure_section, rec

NO_XDIST = ("-p", "no:xdist")

RECORD = '''
from pytest_tokaudit import Finding


def pytest_tokaudit_check_record(record):
    return {answer}
'''

BATCH = '''
from pytest_tokaudit import Finding


def pytest_tokaudit_check_batch(records):
    return [{answer} for record in records]
'''

WHOLE_BATCH = '''
def pytest_tokaudit_check_batch(records):
    return {answer}
'''

FILE = '''
from pytest_tokaudit import Finding


def pytest_tokaudit_check_file(summary):
    return {answer}
'''

HOOKS = {"record": RECORD, "batch": BATCH, "file": FILE, "whole_batch": WHOLE_BATCH}


def hook_project(project: TokProject, hook: str, answer: str) -> None:
    project.ini(testpaths="data")
    project.write("conftest.py", HOOKS[hook].format(answer=answer))
    project.jsonl("data/a.jsonl", [rec(i) for i in range(1, 4)])


def folder_project(project: TokProject, conftests: dict[str, str], **ini: str) -> None:
    """One folder of data per case, each with its own conftest.py (whose hooks reach only its
    own folder's files): every case in one run (a run per case cost most of a second each)."""
    project.ini(testpaths="data", **ini)
    for folder, conftest in conftests.items():
        project.write(f"data/{folder}/conftest.py", conftest)
        project.jsonl(f"data/{folder}/a.jsonl", [rec(i, provider="api") for i in range(1, 4)])


def own_lines(result: pytest.RunResult, folder: str, *words: str) -> list[str]:
    """The output lines naming `folder`'s data file that hold every one of `words`."""
    return [line for line in result.stdout.lines
            if f"data/{folder}/a.jsonl" in line and all(w in line for w in words)]


FALSY = ["False", "0", "''", "[]", "()", "[None, False]"]


# `return cond and "msg"` answers False (or 0, "", []) for a good record.
def test_a_falsy_answer_is_no_finding(pytester: pytest.Pytester):
    project = TokProject(pytester, NO_XDIST)
    cases = {f"{hook}-{k}": HOOKS[hook].format(answer=answer)
             for hook in ("record", "whole_batch", "file") for k, answer in enumerate(FALSY)}
    folder_project(project, cases)
    result = project.run("-rA")
    assert_no_crash(result)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    for folder in cases:
        assert f"PASSED data/{folder}/a.jsonl::tokaudit" in result.stdout.lines, (folder, result.stdout.str())


@pytest.mark.parametrize("hook, answer", [
    ("record", "record.id == 2 and 'two is bad'"),
    ("batch", "record.id == 2 and record.finding('custom', 'two is bad')"),
])
def test_cond_and_message_finds_only_where_the_condition_holds(project: TokProject, hook: str,
                                                               answer: str):
    hook_project(project, hook, answer)
    result = project.run("-rA")
    assert_no_crash(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    assert "data/a.jsonl:2: sample_id=2: custom: two is bad" in result.stdout.lines, result.stdout.str()
    assert "1 of 3 audited records break the contract" in result.stdout.str()


BAD = [
    ("True", "returned True"),
    ("5", "returned 5"),
    ("{'check': 'x'}", "returned {'check': 'x'}"),
    ("Finding(None, 'no check name')", "Finding(check=None"),
    ("Finding('mine', None)", "message=None"),
    ("Finding('mine', 42)", "message=42"),
    ("Finding('mine', 'msg', line='5')", "line='5'"),
    ("Finding('mine', 'msg', line=0)", "line=0"),
    ("Finding('mine', 'msg', line=True)", "line=True"),
    ("Finding('mine', 'msg', record_id=[1])", "record_id=[1]"),
    ("Finding('mine', 'msg', allowable='yes')", "allowable='yes'"),
    ("Finding('', 'msg')", "check=''"),
]


def test_an_answer_the_audit_cannot_use_is_an_error_naming_hook_and_value(pytester: pytest.Pytester):
    """Every bad answer of every hook, each in a folder of its own: each file fails with its
    own hook's error naming its value and its conftest.py, and no other folder's."""
    cases: dict[str, tuple[str, str, str]] = {}
    for hook in ("record", "batch", "file"):
        for k, (answer, shown) in enumerate(BAD):
            if hook == "batch" and answer.startswith("Finding("):  # a batch finding names its record
                answer = _with_line(answer)
            cases[f"{hook}-{k}"] = (hook, answer, shown)
    project = TokProject(pytester, NO_XDIST)
    folder_project(project, {folder: HOOKS[hook].format(answer=answer)
                             for folder, (hook, answer, _) in cases.items()})
    result = project.run("-rA")
    assert_no_crash(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    out = result.stdout.str()
    assert "PASSED" not in out, out
    for folder, (hook, answer, shown) in cases.items():
        lines = own_lines(result, folder, "returned")
        assert lines, (folder, answer, out)
        assert all(f"pytest_tokaudit_check_{hook} (in data/{folder}/conftest.py) returned" in line
                   for line in lines), (folder, lines)  # where the hook is; no other folder's
        assert any(shown in line for line in lines), (folder, answer, lines)


def _with_line(answer: str) -> str:
    """A batch hook's Finding must name its record: add line and id unless the case sets them."""
    inner = answer[len("Finding("):-1]
    parts = [p.strip() for p in inner.split(",")]
    named = {p.split("=", 1)[0] for p in parts if "=" in p}
    if "line" not in named:
        parts.append("line=record.line")
    if "record_id" not in named:
        parts.append("record_id=record.id")
    return f"Finding({', '.join(parts)})"


@pytest.mark.parametrize("hook", ["record", "file"])
def test_a_bad_answer_under_xdist_fails_the_item_not_the_run(project: TokProject, hook: str):
    hook_project(project, hook, "Finding('mine', 'msg', line='5')")
    project.jsonl("data/b.jsonl", [rec(i) for i in range(4, 6)])
    result = project.run("-rA")
    assert_no_crash(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    for path in ("data/a.jsonl", "data/b.jsonl"):
        assert (f"{path}::tokaudit: pytest_tokaudit_check_{hook} "
                "(in conftest.py) returned Finding(check='mine', message='msg', line='5'") \
            in result.stdout.str(), result.stdout.str()


DATASET = '''
from pytest_tokaudit import Outcome


def pytest_tokaudit_dataset_checks():
    return ["mine"]


def pytest_tokaudit_check_dataset(name):
    if name == "mine":
        return {answer}
'''


@pytest.mark.parametrize("answer, shown", [
    ("Outcome.failed(None)", "message=None"),
    ("Outcome.passed(5)", "message=5"),
    ("Outcome.failed('bad', lines=[1, 2])", "lines=[1, 2]"),
    ("Outcome.failed('bad', lines=['ok', None])", "lines=['ok', None]"),
    ("Outcome('x', 'failed', 'bad', lines=None)", "lines=None"),
    ("True", "returned bool"),
])
def test_a_dataset_outcome_the_audit_cannot_use_fails_naming_the_value(
    project: TokProject, answer: str, shown: str
):
    project.ini(testpaths="data")
    project.write("conftest.py", DATASET.format(answer=answer))
    project.jsonl("data/a.jsonl", [rec(1)])
    result = project.run("-rA")
    assert_no_crash(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    failed = [line for line in result.stdout.lines
              if line.startswith("pytest.ini::tokaudit::mine: failed: pytest_tokaudit_check_dataset")]
    assert failed and shown in failed[0], result.stdout.str()
    result.stdout.fnmatch_lines(["FAILED pytest.ini::tokaudit::mine - *"])
    assert "PASSED data/a.jsonl::tokaudit" in result.stdout.str()


def test_one_str_of_lines_is_one_line(pytester: pytest.Pytester):
    project = TokProject(pytester, NO_XDIST)
    project.ini(testpaths="data")
    project.write("conftest.py", DATASET.format(answer="Outcome.failed('bad', 'two words')"))
    project.jsonl("data/a.jsonl", [rec(1)])
    result = project.run("-rA")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    assert "two words" in result.stdout.lines, result.stdout.str()


# -- channels --------------------------------------------------------------------------------

CHANNEL = '''
def pytest_tokaudit_check_{hook}({args}):
    summary.channel({name!r}).append(1)
'''


@pytest.mark.parametrize("ini", [{}, {"tokaudit_unique_ids": "true", "tokaudit_group_by": "provider",
                                      "tokaudit_unique_text": "true", "tokaudit_budget": "1000"}],
                         ids=["checks-off", "checks-on"])
def test_a_channel_named_like_a_built_in_one_is_refused(pytester: pytest.Pytester, ini: dict):
    """Each built-in channel's name, from a batch and a file hook, each in a folder of its own."""
    cases = {f"{hook}-{name}": (hook, args, name)
             for name in ("ids", "budget", "groups", "unique_text")
             for hook, args in (("batch", "records, summary"), ("file", "summary"))}
    project = TokProject(pytester, NO_XDIST)
    folder_project(project, {folder: CHANNEL.format(hook=hook, args=args, name=name)
                             for folder, (hook, args, name) in cases.items()}, **ini)
    result = project.run("-rA")
    assert_no_crash(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    for folder, (hook, args, name) in cases.items():
        section = failure_section(result, f"data/{folder}/a.jsonl")
        assert any(f"summary.channel({name!r}) is a channel of tokaudit's own built-in checks; "
                   "name yours differently" in line for line in section), (folder, section)
        assert not any("summary.channel(" in line and f"({name!r})" not in line for line in section), \
            (folder, section)  # no other folder's hook


def test_a_built_in_channel_name_under_xdist_is_no_internal_error(project: TokProject):
    project.ini(testpaths="data", tokaudit_unique_ids="true")
    project.write("conftest.py", CHANNEL.format(hook="batch", args="records, summary", name="ids"))
    project.jsonl("data/a.jsonl", [rec(i) for i in range(1, 4)])
    project.jsonl("data/b.jsonl", [rec(i) for i in range(4, 7)])
    result = project.run("-rA")
    assert_no_crash(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    assert "FAILED data/a.jsonl::tokaudit" in result.stdout.str()


def test_a_channel_of_its_own_name_still_travels(project: TokProject):
    project.ini(testpaths="data")
    project.write("conftest.py", CHANNEL.format(hook="batch", args="records, summary", name="my_ids"))
    project.jsonl("data/a.jsonl", [rec(i) for i in range(1, 4)])
    result = project.run("-rA", "--tokaudit-json=r.json")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    import json

    report = json.loads(project.path.joinpath("r.json").read_text())
    assert [f["channels"]["my_ids"] for f in report["files"]] == [[1]]
