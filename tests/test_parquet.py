"""Parquet as a record source: the same verdicts as the JSONL twin of the same records,
row-group shards, broken files as findings, and a clear error without pyarrow."""

from __future__ import annotations

import re

import pytest

from conftest import TokProject, assert_no_crash, failure_section, rec, summary_rows

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

THINK, END, OPEN = 7, 8, 9
INI = dict(
    tokaudit_require_once=THINK, tokaudit_require_last=END, tokaudit_forbid=OPEN,
    tokaudit_count_abs=0, tokaudit_count_rel="0%", tokaudit_where="provider",
)
SCHEMA = pa.schema([
    ("sample_id", pa.int64()),
    ("provider", pa.string()),
    ("completion_tokens", pa.int64()),
    ("output_ids", pa.list_(pa.int64())),
])


def good(i: int, **kw):
    return rec(i, 12, once=[THINK], last=END, provider="api", **kw)


def corpus() -> list[dict]:
    """Good rows and one of every way a row breaks a check or is unusable."""
    rows = [good(i) for i in range(1, 41)]
    rows[2] = rec(3, 12, 15, once=[THINK], last=END, provider="api")  # count
    rows[5] = rec(6, 12, once=[THINK, THINK], last=END, provider="api")  # require_once
    rows[7] = rec(8, 12, once=[THINK, OPEN], last=END, provider="api")  # forbid
    rows[9] = rec(10, 12, once=[THINK], provider="api")  # require_last
    rows[11] = {**good(12), "output_ids": None}  # unusable ids, billed still counted
    rows[13] = {**good(14), "output_ids": [THINK, -1, END]}
    rows[15] = {**good(16), "output_ids": [THINK, None, END]}
    rows[17] = {**good(18), "completion_tokens": None}
    rows[19] = {**good(20), "provider": None}  # skipped by tokaudit_where
    rows[21] = {**good(22), "output_ids": []}
    rows[23] = {**good(24), "sample_id": None}
    rows[25] = good(5)  # a repeated id
    return rows


def write_twins(project: TokProject, rows: list[dict], row_group_size: int = 1000) -> None:
    project.jsonl("data/twin.jsonl", rows)
    project.path.joinpath("pq").mkdir(exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), project.path / "pq/twin.parquet",
                   row_group_size=row_group_size)


def normalised(lines: list[str]) -> list[str]:
    return [line.replace("pq/twin.parquet:row ", "data/twin.jsonl:").replace(
        "pq/twin.parquet", "data/twin.jsonl") for line in lines]


def test_a_parquet_file_gets_the_verdicts_of_its_jsonl_twin(project: TokProject):
    project.ini(**INI, tokaudit_unique_ids="true", tokaudit_count_outliers=0)
    write_twins(project, corpus())
    jsonl = project.run("-o", "tokaudit_glob=*.jsonl")
    parquet = project.run(paths=("pq",))
    for result in (jsonl, parquet):
        assert_no_crash(result)
        assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    want = normalised(failure_section(jsonl, "data/twin.jsonl"))
    assert normalised(failure_section(parquet, "pq/twin.parquet")) == want
    assert any(":row 3: sample_id=3: count: billed 15, counted 12" in line
               for line in failure_section(parquet, "pq/twin.parquet"))
    assert summary_rows(parquet)["pq/twin.parquet"] == summary_rows(jsonl)["data/twin.jsonl"]
    assert "sample_id=5: 2 records: pq/twin.parquet:row 5, pq/twin.parquet:row 26" in parquet.stdout.str()


def test_parquet_is_collected_by_default_and_counts_in_the_budget(project: TokProject):
    project.ini(tokaudit_budget=100)
    project.path.joinpath("data").mkdir()
    pq.write_table(pa.Table.from_pylist([rec(1, 60), rec(2, 60)]), project.path / "data/a.parquet")
    result = project.run("-rA")
    assert_no_crash(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.stdout.fnmatch_lines(["PASSED data/a.parquet::tokaudit",
                                 "FAILED pytest.ini::tokaudit::budget - over budget: billed 120 *"])


def test_row_group_shards_report_rows_of_the_whole_file(project: TokProject):
    rows = [good(i) for i in range(1, 301)]
    rows[250] = rec(251, 12, 20, once=[THINK], last=END, provider="api")
    project.ini(**INI, tokaudit_shard_size=2000, tokaudit_count_outliers=0)
    write_twins(project, rows, row_group_size=50)
    result = project.run("-rA", paths=("pq",))
    assert_no_crash(result)
    items = re.findall(r"^(?:PASSED|FAILED) (pq/twin\.parquet::tokaudit\S*)", result.stdout.str(), re.M)
    assert len(items) > 2 and "pq/twin.parquet::tokaudit[file]" in items, result.stdout.str()
    assert "pq/twin.parquet:row 251: sample_id=251: count: billed 20, counted 12" in result.stdout.str()
    assert summary_rows(result)["pq/twin.parquet"][:3] == ["300", "300", "0"]


@pytest.mark.parametrize("damage", ["truncated", "garbage", "missing_column", "wrong_type"])
def test_a_broken_parquet_file_is_a_finding_of_that_file(project: TokProject, damage: str):
    project.ini()
    path = project.path / "data/bad.parquet"
    path.parent.mkdir()
    rows = [rec(i) for i in range(1, 20)]
    if damage == "missing_column":
        pq.write_table(pa.Table.from_pylist([{k: v for k, v in r.items() if k != "output_ids"}
                                             for r in rows]), path)
        want = "no column 'output_ids' in the file (columns: sample_id, completion_tokens)"
    elif damage == "wrong_type":
        pq.write_table(pa.Table.from_pylist([{**r, "output_ids": "1 2 3"} for r in rows]), path)
        want = "column 'output_ids' must be a list of integer token ids, found string"
    else:
        pq.write_table(pa.Table.from_pylist(rows), path)
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2] if damage == "truncated" else b"PAR1" + b"x" * 500)
        want = "cannot read Parquet: "
    project.jsonl("data/ok.jsonl", [rec(100)])
    result = project.run()
    assert_no_crash(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    section = failure_section(result, "data/bad.parquet")
    assert want in section[0], section
    assert summary_rows(result)["data/ok.jsonl"][:2] == ["1", "1"]


def test_nested_fields_are_read_by_dotted_path(project: TokProject):
    project.ini(tokaudit_ids_field="resp.ids", tokaudit_count_field="resp.usage.completion_tokens")
    rows = [{"sample_id": i, "resp": {"ids": [1, 2, 3], "usage": {"completion_tokens": 3 + (i == 2) * 9}}}
            for i in range(1, 4)]
    path = project.path / "data/n.parquet"
    path.parent.mkdir()
    pq.write_table(pa.Table.from_pylist(rows), path)
    result = project.run()
    assert_no_crash(result)
    assert failure_section(result, "data/n.parquet")[1].startswith(
        "data/n.parquet:row 2: sample_id=2: count: billed 12, counted 3"), result.stdout.str()


def test_without_pyarrow_a_parquet_file_fails_naming_the_extra(project: TokProject):
    # An import hook, as if pyarrow were not installed (the subprocess imports it only here).
    blocker = project.path / "noarrow"
    blocker.mkdir()
    (blocker / "pyarrow").mkdir()
    (blocker / "pyarrow/__init__.py").write_text("raise ImportError('No module named pyarrow')\n")
    project.ini(tokaudit_budget=1000)
    path = project.path / "data/a.parquet"
    path.parent.mkdir()
    pq.write_table(pa.Table.from_pylist([rec(1)]), path)
    project.jsonl("data/b.jsonl", [rec(2)])
    project.pytester._monkeypatch.setenv("PYTHONPATH", str(blocker))
    result = project.run("-rA")
    assert_no_crash(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "SKIPPED [[]1[]] pytest.ini: partial run (billed 10 of 1,000 tokens*data/a.parquet",
        "FAILED data/a.parquet::tokaudit - reading Parquet needs pyarrow*",
    ], consecutive=False)
    assert failure_section(result, "data/a.parquet")[0] == (
        "reading Parquet needs pyarrow: pip install 'pytest-tokaudit[parquet]'")
