"""Parquet as a record source: the same verdicts as the JSONL twin of the same records,
row-group shards, broken files as findings, and a clear error without pyarrow."""

from __future__ import annotations

import json
import re

import pytest

from conftest import TokProject, assert_no_crash, failure_section, rec, summary_rows
from tables import BIG_ROW_SCRIPT, END, INI, OPEN, SCHEMA, THINK, corpus, good, red_twins

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


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
    jsonl, parquet = red_twins(project)
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


BROKEN = {
    "truncated": "cannot read Parquet: ",
    "garbage": "cannot read Parquet: ",
    "missing_column": "no column 'output_ids' in the file (columns: sample_id, completion_tokens)",
    "wrong_type": "column 'output_ids' must be a list of integer token ids, found string",
}


def test_a_broken_parquet_file_is_a_finding_of_that_file(project: TokProject):
    """Every kind of damage in a file of its own, in one run: each file's own finding, and
    the good file beside them audited."""
    project.ini()
    project.path.joinpath("data").mkdir()
    rows = [rec(i) for i in range(1, 20)]
    for damage in BROKEN:
        path = project.path / f"data/{damage}.parquet"
        if damage == "missing_column":
            pq.write_table(pa.Table.from_pylist([{k: v for k, v in r.items() if k != "output_ids"}
                                                 for r in rows]), path)
        elif damage == "wrong_type":
            pq.write_table(pa.Table.from_pylist([{**r, "output_ids": "1 2 3"} for r in rows]), path)
        else:
            pq.write_table(pa.Table.from_pylist(rows), path)
            data = path.read_bytes()
            path.write_bytes(data[: len(data) // 2] if damage == "truncated" else b"PAR1" + b"x" * 500)
    project.jsonl("data/ok.jsonl", [rec(100)])
    result = project.run()
    assert_no_crash(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    for damage, want in BROKEN.items():
        section = failure_section(result, f"data/{damage}.parquet")
        assert want in section[0], (damage, section)
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


# -- raw API responses (issue 10): the OpenRouter shape of tests/test_raw.py, in Parquet ------

RAW_SCHEMA = pa.schema([
    ("id", pa.string()), ("model", pa.string()), ("provider", pa.string()),
    ("choices", pa.list_(pa.struct([
        ("index", pa.int64()),
        ("message", pa.struct([("role", pa.string()), ("content", pa.string()),
                               ("reasoning", pa.string())])),
        ("finish_reason", pa.string())]))),
    ("usage", pa.struct([("prompt_tokens", pa.int64()), ("completion_tokens", pa.int64()),
                         ("completion_tokens_details", pa.struct([("reasoning_tokens", pa.int64())]))])),
    ("output_ids", pa.list_(pa.int64())),
])


def raw_corpus(tok) -> list[dict]:
    """Clean responses and every fault a typed Parquet column can hold, each at its row."""
    from tokdata import clean_responses, n_tokens, response
    from tokdata import sample_texts

    from pytest_tokaudit.engine.template import plain_ids
    texts = sample_texts()
    rows = clean_responses(tok, 30)
    rows[2] = response(tok, "gen-3", "Let me see.", "The answer is", finish="length")  # cut
    reasoning = texts[3][:800]  # never closed: no </think> among the model's tokens
    rows[4] = response(tok, "gen-5", reasoning, "",
                       billed=len(tok.encode(reasoning + "<|im_end|>", add_special_tokens=False)))
    r, c = texts[5][:900], texts[6][:300]  # reasoning billed apart: the sum formula adds it
    think = len(tok.encode(r, add_special_tokens=False))
    rows[6] = response(tok, "gen-7", r, c, billed=n_tokens(tok, r, c) - think,
                       completion_tokens_details={"reasoning_tokens": think})
    content = "Close thinking with </think>."  # billed as plain text, as the model wrote it
    rows[8] = response(tok, "gen-9", None, content, billed=len(plain_ids(tok, content)) + 2)
    rows[10]["usage"]["completion_tokens"] *= 2  # billed twice over
    rows[12] = {**rows[12], "choices": []}
    rows[13] = response(tok, "gen-14", None, None, billed=3)  # content null
    rows[14] = {k: v for k, v in rows[14].items() if k != "usage"}
    rows[15] = response(tok, "gen-16", None, "Hi", billed=-5)
    for k in (16, 17, 18):  # stored ids: right, then swapped between two lines
        m = rows[k]["choices"][0]["message"]
        rows[k]["output_ids"] = tok.encode(f"{m.get('reasoning') or ''}</think>{m['content']}<|im_end|>",
                                           add_special_tokens=False)
    rows[17]["output_ids"], rows[18]["output_ids"] = rows[18]["output_ids"], rows[17]["output_ids"]
    rows[20] = {**rows[1], "id": "gen-resent", "provider": "Other"}  # the same completion again
    return rows


def write_raw_twins(project: TokProject, rows: list[dict]) -> None:
    project.jsonl("data/raw.jsonl", rows)
    project.path.joinpath("pq").mkdir(exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=RAW_SCHEMA), project.path / "pq/raw.parquet",
                   row_group_size=7)  # several row groups: batches cut across them


def raw_normalised(lines: list[str]) -> list[str]:
    return [line.replace("pq/raw.parquet:row ", "data/raw.jsonl:").replace("pq/raw.parquet", "data/raw.jsonl")
            for line in lines]


@pytest.mark.parametrize("xdist_mode", [("-p", "no:xdist")], ids=["no-xdist"])
@pytest.mark.parametrize("count_field", ["usage.completion_tokens",
                                         "usage.completion_tokens + usage.completion_tokens_details.reasoning_tokens?"])
def test_raw_responses_in_parquet_get_the_verdicts_of_their_jsonl_twin(project: TokProject, tok, count_field):
    from tokdata import raw_ini

    write_raw_twins(project, raw_corpus(tok))
    raw_ini(project, tokaudit_count_field=count_field, tokaudit_unique_text="true",
            tokaudit_group_by="provider model", tokaudit_count_mean_rel="2%", tokaudit_count_mean_abs=0,
            tokaudit_budget=1)
    jsonl, parquet = red_twins(project)
    section = failure_section(parquet, "pq/raw.parquet")
    assert raw_normalised(section) == failure_section(jsonl, "data/raw.jsonl")
    assert summary_rows(parquet)["pq/raw.parquet"] == summary_rows(jsonl)["data/raw.jsonl"]
    checks = [re.match(r"pq/raw\.parquet:row (\d+): id='[^']*': (\w+)", s) for s in section]
    found = sorted({(int(m[1]), m[2]) for m in checks if m})
    billed_apart = [(7, "count")] if count_field == "usage.completion_tokens" else []
    assert found == sorted([
        (3, "finish_reason"), (5, "count"), *billed_apart, (9, "special_in_text"), (11, "count"),
        (13, "schema"), (14, "schema"), (15, "schema"), (16, "schema"),
        (18, "count"), (18, "ids_match_text"), (19, "count"), (19, "ids_match_text")]), section
    text = "\n".join(section)
    assert "pq/raw.parquet:row 13: id='gen-13': schema: text_template: missing field " \
           "'choices.0.message.content' (choices is an empty list)" in text
    assert "pq/raw.parquet:row 15: id='gen-15': schema: missing field 'usage.completion_tokens'" in text
    # dataset checks and tables: the same, but for the path
    out = [line for line in parquet.stdout.lines
           if "unique_text" in line or "over budget" in line or "provider=" in line]
    assert raw_normalised(out) == [line for line in jsonl.stdout.lines
                                   if "unique_text" in line or "over budget" in line or "provider=" in line]
    assert "id 'gen-2', 'gen-resent': the same completion: pq/raw.parquet:row 2, " \
           "pq/raw.parquet:row 21" in parquet.stdout.str()
    assert any(line.startswith("provider=Other, model=qwen/qwen3-32b") for line in parquet.stdout.lines)


@pytest.mark.parametrize("xdist_mode", [("-p", "no:xdist")], ids=["no-xdist"])
def test_parquet_text_columns_of_other_types_are_findings_at_their_rows(project: TokProject):
    """A text field that is not text (an object, a number) fails each row holding one, as
    in JSONL; a required text column the file lacks fails the file, naming it."""
    from tokdata import raw_ini

    rows = [{"id": f"gen-{k}", "choices": [{"message": {"content": {"text": "x"}}}],
             "usage": {"completion_tokens": 3}} for k in range(1, 4)]
    rows[1]["choices"][0]["message"]["content"] = None
    project.path.joinpath("data").mkdir()
    pq.write_table(pa.Table.from_pylist(rows), project.path / "data/obj.parquet")
    pq.write_table(pa.Table.from_pylist([{"id": "a", "usage": {"completion_tokens": 3}}]),
                   project.path / "data/none.parquet")
    raw_ini(project, tokaudit_count_outliers=5)
    result = project.run()
    assert_no_crash(result)
    section = failure_section(result, "data/obj.parquet")
    assert section[1:4] == [
        "data/obj.parquet:row 1: id='gen-1': schema: text_template: choices.0.message.content "
        "must be a string, found {'text': 'x'} (dict)",
        "data/obj.parquet:row 2: id='gen-2': schema: text_template: choices.0.message.content is null; "
        "write {choices.0.message.content?} if it may be null",
        "data/obj.parquet:row 3: id='gen-3': schema: text_template: choices.0.message.content "
        "must be a string, found {'text': 'x'} (dict)",
    ], section
    assert failure_section(result, "data/none.parquet")[0] == (
        "no column 'choices.0.message.content' in the file (columns: id, usage)")


@pytest.mark.parametrize("xdist_mode", [("-p", "no:xdist")], ids=["no-xdist"])
def test_stored_ids_with_a_sum_groups_finish_reasons_and_unique_text(project: TokProject):
    """The vectorised path (ids stored, no template) with the raw-response keys."""
    rows = []
    for i in range(1, 31):
        row = good(i, model="m")
        row["output_ids"][1] = 1000 + i  # a completion of its own
        row["completion_tokens"] -= 2 * (i % 3 == 0)
        row["extra"] = 2 if i % 3 == 0 else None  # billed apart, on some rows
        row["choices"] = [{"finish_reason": "length" if i == 7 else "stop"}]
        row["provider"] = "a" if i % 2 else "b"
        rows.append(row)
    rows[11]["extra"] = -1
    rows[20]["output_ids"] = list(rows[4]["output_ids"])
    rows[20]["completion_tokens"] = rows[4]["completion_tokens"]
    rows[20]["extra"] = rows[4]["extra"]
    rows[20]["sample_id"] = 99  # the same ids under another id
    rows[25]["extra"] = 40
    rows[3]["choices"] = []  # no finish reason: a null on the way, the per-line path's
    rows[9]["choices"] = None
    project.jsonl("data/twin.jsonl", rows)
    project.path.joinpath("pq").mkdir()
    pq.write_table(pa.Table.from_pylist(rows), project.path / "pq/twin.parquet", row_group_size=8)
    project.ini(tokaudit_count_abs=0, tokaudit_count_rel="0%", tokaudit_count_field="completion_tokens + extra?",
                tokaudit_finish_reason="stop", tokaudit_group_by="provider", tokaudit_unique_text="true",
                tokaudit_count_mean_rel="1%", tokaudit_count_mean_abs=0, tokaudit_count_outliers=0)
    jsonl, parquet = red_twins(project)
    section = failure_section(parquet, "pq/twin.parquet")
    assert normalised(section) == failure_section(jsonl, "data/twin.jsonl")
    flagged = [s.split(": ")[2] for s in section if ":row " in s]
    assert [s.split(":")[1] for s in section if ":row " in s] == ["row 7", "row 12", "row 26"]
    assert flagged == ["finish_reason", "schema", "count"], section
    assert "count_mean: [provider=b]" in "\n".join(section)
    pick = ("unique_text", "provider=", "the same completion")
    out = [line for line in parquet.stdout.lines if any(p in line for p in pick)]
    assert normalised(out) == [line for line in jsonl.stdout.lines if any(p in line for p in pick)]
    assert "sample_id 5, 99: the same completion: pq/twin.parquet:row 5, pq/twin.parquet:row 21" in out


# -- what hooks see, and column types a JSONL twin cannot tell apart (issue #22) ----------

FINISH_HOOKS = {
    # The README's own example: a field the contract does not read.
    "record": '''
from pytest_tokaudit import Finding

def pytest_tokaudit_check_record(record):
    if record.data.get("finish_reason") == "length":
        return Finding("finish_reason", "response cut off by the API (finish_reason=length)")
''',
    "batch": '''
def pytest_tokaudit_check_batch(records):
    return [r.finding("meta", f"from {r.data['meta']['source']}") for r in records
            if r.data["meta"]["source"] != "api"]
''',
    "keys": '''
def pytest_tokaudit_check_record(record):
    return record.id == 3 and ", ".join(sorted(record.data))
''',
}


def hook_rows() -> list[dict]:
    rows = [good(i, finish_reason="stop", meta={"source": "api"}) for i in range(1, 9)]
    rows[2]["finish_reason"] = "length"
    rows[5]["meta"] = {"source": "scraped"}
    return rows


def write_any(path, rows: list[dict], schema=None, **kw) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist(rows, schema=schema)
    if path.suffix == ".parquet":
        pq.write_table(table, path, **kw)
    else:
        import pyarrow.feather as feather

        feather.write_feather(table, path, compression="uncompressed")


def twin_of(line: str) -> str:
    """A Parquet or Arrow file's finding line as its JSONL twin's (pq/x/y.parquet:row 3 ->
    data/x/y.jsonl:3): the twins are pq/NAME.parquet or pq/NAME.arrow and data/NAME.jsonl."""
    line = re.sub(r"\bpq/([\w/.-]+?)\.(?:parquet|arrow):row ", r"data/\1.jsonl:", line)
    return re.sub(r"\bpq/([\w/.-]+?)\.(?:parquet|arrow)\b", r"data/\1.jsonl", line)


def all_twins(project: TokProject) -> pytest.RunResult:
    """The JSONL files under data/ and their twins under pq/ in one run, which must end red
    without a crash: for contracts whose checks are each file's own."""
    result = project.run(paths=("data", "pq"))
    assert_no_crash(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    return result


def test_a_hook_sees_every_field_of_a_row_as_of_its_jsonl_twin(project: TokProject):
    """Each hook in a folder of its own (its conftest.py reaches only that folder's files),
    over a JSONL file and its Parquet and Arrow twins, all audited in one run (no check of
    this contract looks across files)."""
    project.ini(**INI, tokaudit_count_outliers=0)
    rows = hook_rows()
    for hook, code in FINISH_HOOKS.items():
        project.write(f"data/{hook}/conftest.py", code)
        project.write(f"pq/{hook}/conftest.py", code)
        project.jsonl(f"data/{hook}/twin.jsonl", rows)
        for suffix in (".parquet", ".arrow"):
            write_any(project.path / f"pq/{hook}/twin{suffix}", rows, row_group_size=3)
    jsonl = parquet = all_twins(project)
    for hook in FINISH_HOOKS:
        want = failure_section(jsonl, f"data/{hook}/twin.jsonl")
        for suffix in (".parquet", ".arrow"):
            section = failure_section(parquet, f"pq/{hook}/twin{suffix}")
            assert [twin_of(line) for line in section] == want, (hook, suffix)
            assert len([line for line in section if ":row " in line]) == 1, (hook, suffix, section)


def test_the_builtin_checks_alone_read_only_the_contract_columns(project: TokProject):
    """Without a check of the user's, a column nobody reads is not read: a column of a type
    pyarrow cannot turn into Python values does not matter."""
    project.ini(**INI)
    rows = [good(i) for i in range(1, 4)]
    table = pa.Table.from_pylist(rows, schema=SCHEMA).append_column(
        "blob", pa.array([b"x" * 10] * 3, pa.binary()))
    project.path.joinpath("pq").mkdir()
    pq.write_table(table, project.path / "pq/a.parquet")
    result = project.run(paths=("pq",))
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()


U64_BIG = 2**63 + 5


COLUMN_CASES = [
    "dictionary_id", "large_string_id", "dictionary_where", "dictionary_group",
    "uint64_ids", "uint64_ids_tokens", "uint32_ids", "uint64_count", "uint64_id",
]

# One contract for every case: unique ids judged across the dataset (the dictionary and
# large_string ids), grouped by provider (a dictionary column) and only where it is set (the
# other dictionary case), the largest uint32 token forbidden.
COLUMN_INI = {**INI, "tokaudit_unique_ids": "true", "tokaudit_group_by": "provider",
              "tokaudit_forbid": f"{OPEN} {2**32 - 1}"}


def column_case(k: int, case: str) -> tuple[list[dict], pa.Schema]:
    """The rows of one case (sample ids of their own: the dataset checks see every file)
    and the Parquet schema giving one column another type of the same values."""
    rows = [good(100 * k + i) for i in range(1, 7)]
    rows[3] = rec(100 * k + 4, 12, 13, once=[THINK], last=END, provider="api")  # one count finding
    fields = {f.name: f.type for f in SCHEMA}
    if case in ("dictionary_id", "large_string_id"):
        for i, r in enumerate(rows, 1):
            r["sample_id"] = f"{case}-{i}"
        fields["sample_id"] = (pa.dictionary(pa.int32(), pa.string()) if case == "dictionary_id"
                               else pa.large_string())
        rows[5]["sample_id"] = f"{case}-5"  # a duplicate, judged across the dataset
    elif case == "dictionary_where":
        fields["provider"] = pa.dictionary(pa.int8(), pa.string())
        rows[1]["provider"] = None
    elif case == "dictionary_group":
        fields["provider"] = pa.dictionary(pa.int8(), pa.string())
        rows[1]["provider"] = "other"
    elif case.startswith("uint") and "ids" in case:
        fields["output_ids"] = pa.list_(pa.uint32() if case == "uint32_ids" else pa.uint64())
        if case != "uint32_ids":
            rows[0]["output_ids"][1] = U64_BIG
            rows[1]["output_ids"][1] = 2**64 - 1
        if case == "uint64_ids_tokens":
            rows[4]["output_ids"][1] = 2**32 - 1  # the contract's largest token
    elif case == "uint64_count":
        fields["completion_tokens"] = pa.uint64()
        rows[2]["completion_tokens"] = U64_BIG
    elif case == "uint64_id":
        fields["sample_id"] = pa.uint64()
        rows[2]["sample_id"] = U64_BIG
    return rows, pa.schema(list(fields.items()))


@pytest.mark.parametrize("xdist_mode", [("-p", "no:xdist")], ids=["no-xdist"])
def test_column_types_of_the_same_values_get_the_jsonl_verdict(project: TokProject):
    """Every case a file of its own (pq/CASE.parquet beside data/CASE.jsonl), one run per
    format: each file's findings and summary row are its twin's, and so are the dataset
    checks and group tables over all of them."""
    project.ini(**COLUMN_INI, tokaudit_count_outliers=0)
    for k, case in enumerate(COLUMN_CASES):
        rows, schema = column_case(k, case)
        project.jsonl(f"data/{case}.jsonl", rows)
        write_any(project.path / f"pq/{case}.parquet", rows, schema, row_group_size=4)
    jsonl, parquet = red_twins(project)
    for case in COLUMN_CASES:
        section = failure_section(parquet, f"pq/{case}.parquet")
        assert [twin_of(line) for line in section] == failure_section(jsonl, f"data/{case}.jsonl"), case
        assert summary_rows(parquet)[f"pq/{case}.parquet"] == summary_rows(jsonl)[f"data/{case}.jsonl"], case
        assert any(":row 4: sample_id" in line for line in section), (case, section)

    def dataset_lines(result):
        return [twin_of(line) for line in result.stdout.lines
                if line.startswith("pytest.ini::tokaudit::") or "provider=" in line]
    assert [line for line in dataset_lines(parquet) if "coverage" not in line] == \
        [line for line in dataset_lines(jsonl) if "coverage" not in line]


# -- a per-record bound (issue #22) -------------------------------------------------------

# Each Parquet or Arrow layout of the same rows as a file of its own: pq/NAME beside data/NAME.jsonl.
LIMIT_LAYOUTS = {"rows-1.parquet": 1, "rows-4.parquet": 4, "rows-4.arrow": 4}


def test_a_row_over_the_record_limit_is_a_finding_at_its_row(project: TokProject):
    """tokaudit_max_line_bytes bounds a row as it bounds a JSONL line: a row whose values
    take more bytes is a `line_length` finding at its row, never checked; the others are.
    Parquet in row groups of 1 and 4 rows, and Arrow, audited with their JSONL twins in one
    run (no check of this contract looks across files)."""
    rows = [good(i) for i in range(1, 9)]
    rows[2] = rec(3, 600, once=[THINK], last=END, provider="api")  # 600 ids: 4,800 bytes
    rows[5] = rec(6, 12, 13, once=[THINK], last=END, provider="api")  # a count finding
    project.ini(**INI, tokaudit_max_line_bytes=1000, tokaudit_count_outliers=0)
    for layout, group in LIMIT_LAYOUTS.items():
        stem = layout.rsplit(".", 1)[0]
        project.jsonl(f"data/{stem}.jsonl", rows)
        write_any(project.path / f"pq/{layout}", rows, pa.schema([*SCHEMA]), row_group_size=group)
    jsonl = parquet = all_twins(project)
    for layout in LIMIT_LAYOUTS:
        name, twin = f"pq/{layout}", f"data/{layout.rsplit('.', 1)[0]}.jsonl"
        section = failure_section(parquet, name)
        long = [line for line in section if "line_length" in line]
        assert len(long) == 1 and long[0].startswith(f"{name}:row 3: line_length: the row holds "), section
        assert long[0].endswith(" bytes, over the limit of 1,000 bytes (tokaudit_max_line_bytes)")
        assert [twin_of(line).replace("unreadable row", "unreadable line") for line in section
                if "line_length" not in line] == \
            [line for line in failure_section(jsonl, twin) if "line_length" not in line], layout
        assert summary_rows(parquet)[name] == summary_rows(jsonl)[twin], layout


HUGE_FILE_SCRIPT = '''
import sys
import pyarrow as pa
import pyarrow.parquet as pq
n = 12_000_000
ids = pa.ListArray.from_arrays(pa.array([0, n], pa.int32()), pa.repeat(pa.scalar(7, pa.int64()), n))
table = pa.table({"sample_id": [1], "completion_tokens": [n], "output_ids": ids})
small = pa.table({"sample_id": [2], "completion_tokens": [3],
                  "output_ids": pa.array([[1, 2, 3]], pa.list_(pa.int64()))})
with pq.ParquetWriter(sys.argv[1], table.schema) as w:
    for part in (small, table, small):  # a row group each
        w.write_table(part)
'''


def test_a_huge_row_of_a_tiny_file_is_never_decoded(tmp_path):
    """A file of a few KB whose one row holds 12M ids (96 MB as int64): found from the
    footer, not decoded (reading that row group alone raises the high-water mark by about
    285 MB, past the bound); the old reader decoded and computed on it."""
    import subprocess
    import sys
    from pathlib import Path

    path = tmp_path / "huge.parquet"
    subprocess.run([sys.executable, "-c", HUGE_FILE_SCRIPT, str(path)], check=True, timeout=300)
    assert path.stat().st_size < 1 << 20
    tests = Path(__file__).parent.parent
    proc = subprocess.run([sys.executable, "-c", BIG_ROW_SCRIPT, str(path), str(tests)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    records, checked, shown, peak = json.loads(proc.stdout)
    assert (records, checked, shown) == (3, 2, [[2, "line_length"]])
    assert peak < 250 << 20, f"peak RSS {peak / 2**20:.0f} MiB"
