"""An output path that names the data is refused before anything is written: a data file of
the run (the failures file over `data/a.jsonl` would replace the data with its findings),
a file under a data folder the run names, or a name the glob would collect as data next
time. The plugin never writes to the data (issue #31, item 10)."""

from __future__ import annotations

import pytest

from conftest import TokProject, assert_no_crash, rec

USAGE = pytest.ExitCode.USAGE_ERROR
OPTIONS = ["--tokaudit-failures", "--tokaudit-json", "--tokaudit-html", "--tokaudit-markdown",
           "--junitxml"]


@pytest.fixture
def project(pytester: pytest.Pytester) -> TokProject:
    project = TokProject(pytester, ("-p", "no:xdist"))
    project.ini(tokaudit_count_abs=0)
    project.jsonl("data/a.jsonl", [rec(1), rec(2, billed=20)])
    project.jsonl("data/sub/b.jsonl", [rec(3)])
    return project


def refused(project: TokProject, result: pytest.RunResult, option: str, shown: str) -> None:
    assert_no_crash(result)
    assert result.ret == USAGE, result.stdout.str() + result.stderr.str()
    assert f"{option}: {shown} " in result.stderr.str(), result.stderr.str()
    assert "the plugin never writes to the data" in result.stderr.str(), result.stderr.str()


@pytest.mark.parametrize("option", OPTIONS)
def test_an_output_over_a_data_file_is_refused(project: TokProject, option: str):
    before = (project.path / "data/a.jsonl").read_bytes()
    result = project.run(f"{option}=data/a.jsonl")
    refused(project, result, option, "data/a.jsonl")
    assert (project.path / "data/a.jsonl").read_bytes() == before


@pytest.mark.parametrize("option", ["--tokaudit-failures", "--tokaudit-json"])
def test_an_output_under_a_data_folder_or_linked_to_data_is_refused(project: TokProject, option: str):
    refused(project, project.run(f"{option}=data/sub/out.txt"), option, "data/sub/out.txt")
    (project.path / "link.jsonl").symlink_to(project.path / "data/sub/b.jsonl")
    before = (project.path / "data/sub/b.jsonl").read_bytes()
    refused(project, project.run(f"{option}=link.jsonl"), option, "link.jsonl")
    assert (project.path / "data/sub/b.jsonl").read_bytes() == before
    # testpaths name the data folder as the command line does
    project.ini(tokaudit_count_abs=0, testpaths="data")
    refused(project, project.run(f"{option}=data/out.txt", paths=()), option, "data/out.txt")


def test_the_rootdir_as_the_dataset_refuses_names_the_glob_collects(project: TokProject):
    """No path named, no testpaths: the rootdir is the dataset and holds the project too.
    A report beside it is fine; a failures file it would audit as data next time is not."""
    result = project.run("--tokaudit-failures=bad.jsonl", paths=())
    refused(project, result, "--tokaudit-failures", "bad.jsonl")
    assert not (project.path / "bad.jsonl").exists()
    result = project.run("--tokaudit-json=audit.json", "--tokaudit-failures=bad.txt", paths=())
    assert_no_crash(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str() + result.stderr.str()
    assert (project.path / "audit.json").exists() and (project.path / "bad.txt").exists()


def test_outputs_beside_the_data_are_written(project: TokProject):
    (project.path / "out").mkdir()
    result = project.run("--tokaudit-failures=out/bad.jsonl", "--tokaudit-json=audit.json")
    assert_no_crash(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str() + result.stderr.str()
    assert (project.path / "out/bad.jsonl").read_text().count("\n") == 1
