"""One source of truth for how CI shows a file: the id field its own contract names
(a folder's pytest_tokaudit_contract), and one form of path ($GITHUB_WORKSPACE-relative)
in the annotations and the Markdown job summary alike."""

from __future__ import annotations

import re

import pytest

from conftest import TokProject, assert_no_crash, failure_section

FAILED = pytest.ExitCode.TESTS_FAILED

GEN_IDS = """
def pytest_tokaudit_contract(path, contract):
    return contract.replace(id_field="id")
"""


def responses(prefix: str, n: int, bad: int) -> list[dict]:
    rows = [{"id": f"{prefix}-{k}", "completion_tokens": 3, "output_ids": [1, 2, 3]} for k in range(n)]
    rows[bad]["output_ids"] = [1, "x"]
    return rows


def test_ids_are_labelled_with_the_files_own_id_field_everywhere(
        project: TokProject, monkeypatch: pytest.MonkeyPatch):
    project.ini()  # the default id field, sample_id; data/gen/ names its own
    project.write("data/gen/conftest.py", GEN_IDS)
    project.jsonl("data/gen/a.jsonl", responses("gen", 5, 2))
    project.jsonl("data/local.jsonl", [{"sample_id": 7, "completion_tokens": 3, "output_ids": [1, "y"]}])
    monkeypatch.setenv("GITHUB_WORKSPACE", str(project.path.parent))
    result = project.run("--tokaudit-annotations=github", "--tokaudit-markdown=summary.md")
    assert_no_crash(result)
    assert result.ret == FAILED
    terminal = failure_section(result, "data/gen/a.jsonl")[1]
    assert terminal.startswith("data/gen/a.jsonl:3: id='gen-2': schema: ")
    name = project.path.name
    annotations = [line for line in result.stdout.lines if line.startswith("::error")]
    assert f"::error file={name}/data/gen/a.jsonl,line=3,title=tokaudit schema::id='gen-2': " \
           "output_ids[1] must be an integer token id, found 'x' (str)" in annotations, annotations
    assert any(line.startswith(f"::error file={name}/data/local.jsonl,line=1,title=tokaudit "
                               "schema::sample_id=7: ") for line in annotations), annotations
    summary = (project.path / "summary.md").read_text()
    assert "- line 3: id='gen-2': **schema**: " in summary, summary
    assert "- line 1: sample_id=7: **schema**: " in summary, summary
    assert "sample_id='gen-2'" not in summary + "\n".join(annotations)
    # The summary's paths are the annotations': relative to the workspace.
    assert f"#### `{name}/data/gen/a.jsonl`" in summary, summary
    assert re.search(rf"^\| `{name}/data/local\.jsonl` \| 1 \|", summary, re.M), summary
    assert "`data/gen/a.jsonl`" not in summary


def test_the_worst_records_table_names_the_id_field_the_files_share(project: TokProject):
    project.ini()
    project.write("data/gen/conftest.py", GEN_IDS)
    project.jsonl("data/gen/a.jsonl", [{"id": "gen-1", "completion_tokens": 5, "output_ids": [1, 2, 3]}])
    result = project.run()
    assert re.search(r"^record +id +billed +counted +billed - counted$", result.stdout.str(), re.M), result.stdout.str()
    project.jsonl("data/b.jsonl", [{"sample_id": 9, "completion_tokens": 4, "output_ids": [1, 2, 3]}])
    result = project.run()  # two id fields: the column is just "id"
    assert re.search(r"^record +id +billed +counted +billed - counted$", result.stdout.str(), re.M), result.stdout.str()
    project.write("data/gen/conftest.py", "")
    (project.path / "data/gen/a.jsonl").unlink()
    result = project.run()
    assert re.search(r"^record +sample_id +billed +counted +billed - counted$", result.stdout.str(), re.M)


def test_without_a_workspace_both_use_rootdir_paths(project: TokProject, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("GITHUB_WORKSPACE", raising=False)
    project.ini()
    project.jsonl("data/a.jsonl", [{"sample_id": 1, "completion_tokens": 3, "output_ids": [1, "x"]}])
    result = project.run("--tokaudit-annotations=github", "--tokaudit-markdown=summary.md")
    summary = (project.path / "summary.md").read_text()
    assert "::error file=data/a.jsonl,line=1," in result.stdout.str()
    assert "#### `data/a.jsonl`" in summary
