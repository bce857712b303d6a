"""Arrow IPC / Feather as a record source, added through the source registry alone
(base/formats.py + sources/feather.py): the verdicts of the JSONL twin, `path:row N`,
record-batch shards, and a broken file as a finding of that file."""

from __future__ import annotations

import re

import pytest

from conftest import TokProject, assert_no_crash, failure_section, rec, summary_rows
from tables import END, INI, SCHEMA, THINK, corpus, good

pa = pytest.importorskip("pyarrow")
feather = pytest.importorskip("pyarrow.feather")


def write_twins(project: TokProject, rows: list[dict], suffix: str = ".arrow",
                chunksize: int | None = None) -> str:
    project.jsonl("data/twin.jsonl", rows)
    project.path.joinpath("ipc").mkdir(exist_ok=True)
    name = f"ipc/twin{suffix}"
    feather.write_feather(pa.Table.from_pylist(rows, schema=SCHEMA), project.path / name,
                          chunksize=chunksize)
    return name


@pytest.mark.parametrize("suffix", [".arrow", ".feather"])
def test_an_arrow_file_gets_the_verdicts_of_its_jsonl_twin(project: TokProject, suffix: str):
    project.ini(**INI, tokaudit_unique_ids="true", tokaudit_count_outliers=0)
    name = write_twins(project, corpus(), suffix)
    jsonl = project.run("-o", "tokaudit_glob=*.jsonl")
    arrow = project.run(paths=("ipc",))  # collected by the default glob
    for result in (jsonl, arrow):
        assert_no_crash(result)
        assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    want = failure_section(jsonl, "data/twin.jsonl")
    got = [line.replace(f"{name}:row ", "data/twin.jsonl:").replace(name, "data/twin.jsonl")
           for line in failure_section(arrow, name)]
    assert got == want
    assert any(f"{name}:row 3: sample_id=3: count: billed 15, counted 12" in line
               for line in failure_section(arrow, name))
    assert summary_rows(arrow)[name] == summary_rows(jsonl)["data/twin.jsonl"]


def test_record_batch_shards_report_rows_of_the_whole_file(project: TokProject):
    rows = [good(i) for i in range(1, 301)]
    rows[250] = rec(251, 12, 20, once=[THINK], last=END, provider="api")
    project.ini(**INI, tokaudit_shard_size=2000, tokaudit_count_outliers=0)
    name = write_twins(project, rows, chunksize=50)
    result = project.run("-rA", paths=("ipc",))
    assert_no_crash(result)
    items = re.findall(rf"^(?:PASSED|FAILED) ({re.escape(name)}::tokaudit\S*)", result.stdout.str(), re.M)
    assert len(items) > 2 and f"{name}::tokaudit[file]" in items, result.stdout.str()
    assert f"{name}:row 251: sample_id=251: count: billed 20, counted 12" in result.stdout.str()
    assert summary_rows(result)[name][:3] == ["300", "300", "0"]


@pytest.mark.parametrize("damage", ["truncated", "garbage"])
def test_a_broken_arrow_file_is_a_finding_of_that_file(project: TokProject, damage: str):
    project.ini()
    path = project.path / "data/bad.arrow"
    path.parent.mkdir()
    feather.write_feather(pa.Table.from_pylist([rec(i) for i in range(1, 20)]), path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2] if damage == "truncated" else b"ARROW1" + b"x" * 500)
    project.jsonl("data/ok.jsonl", [rec(100)])
    result = project.run()
    assert_no_crash(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "cannot read Arrow IPC: " in failure_section(result, "data/bad.arrow")[0]
    assert summary_rows(result)["data/ok.jsonl"][:2] == ["1", "1"]
