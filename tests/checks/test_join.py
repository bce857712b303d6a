"""tokaudit_requests: OpenAI Batch input files joined to their output files: every request
answered exactly once (missing, orphan and duplicate answers name both places), error lines
counted apart, the prompt audit on the joined pair; partial runs, -n 2."""

from __future__ import annotations

import copy
import json
import re

import pytest

from conftest import (XDIST_MODES, TokProject, assert_no_crash, assert_usage_error, failure_section, merge,
                      summary_section)
from wholebill import audited_both_ways, batch_pair, error_line, tokenizer_copy, write_jsonl

# The merge test judges in this process: numpy (a C extension) is imported at collection, so
# that an in-process pytester run of another test cannot make it load a second time.
pytest.importorskip("numpy")

BATCH_INI = dict(
    testpaths="data",
    tokaudit_id_field="custom_id",
    tokaudit_count_field="response.body.usage.completion_tokens",
    tokaudit_text_template="{response.body.choices.0.message.content}<|im_end|>",
    tokaudit_prompt_count_field="response.body.usage.prompt_tokens",
    tokaudit_requests="batches/*_input.jsonl",
)


def batch_project(project: TokProject) -> tuple[list, list]:
    requests, responses = batch_pair(7)
    by_id = {r["custom_id"]: r for r in responses}
    write_jsonl(project.path / "batches/job_input.jsonl", requests)
    # request-2 unanswered; request-4 answered twice (once more in out2); request-6 an
    # error line; request-99 answers nothing that was asked.
    write_jsonl(project.path / "data/out1.jsonl",
                [by_id[f"request-{k}"] for k in (5, 4, 3, 1, 0)])
    orphan = copy.deepcopy(by_id["request-0"])
    orphan["custom_id"] = "request-99"
    write_jsonl(project.path / "data/out2.jsonl", [by_id["request-4"], orphan])
    write_jsonl(project.path / "data/errors.jsonl", [error_line("request-6")])
    project.ini(**BATCH_INI, tokaudit_tokenizer=str(tokenizer_copy(project.path)))
    return requests, responses


def outcome_lines(result, name: str) -> list[str]:
    text = result.stdout.str()
    m = re.search(rf"^pytest\.ini::tokaudit::{name}: (\w+): (.*)$", text, re.M)
    assert m, text
    return [m.group(1), m.group(2)]


def test_every_request_is_answered_exactly_once(project: TokProject):
    batch_project(project)
    result = project.run("--tokaudit-json=report.json", "--tokaudit-markdown=summary.md",
                         "--tokaudit-html=report.html")
    assert_no_crash(result)
    outcome, message = outcome_lines(result, "requests")
    assert outcome == "failed"
    assert message == ("7 requests, 8 responses: 1 unanswered, 1 answered twice, "
                       "1 response without a request, 1 error line")
    out = result.stdout.str()
    # Both places of each: the request's file:LINE and every answer's.
    assert "custom_id 'request-4' (request batches/job_input.jsonl:5): 2 answers: " \
           "data/out1.jsonl:2, data/out2.jsonl:1" in out
    assert "data/out2.jsonl:2: custom_id 'request-99': no request" in out
    assert "batches/job_input.jsonl:3: custom_id 'request-2'" in out
    assert "data/errors.jsonl:1: custom_id 'request-6': status 500" in out
    # The prompt counts were exact: the joined pairs pass the prompt audit.
    assert "prompt_count" not in out
    assert_error_lines_apart(result, project, outputs=True)


def assert_error_lines_apart(result, project: TokProject, outputs: bool = False) -> None:
    """An error line is no bad record: its file passes, counting it apart (the summary
    table's `errors` column, the JSON report's `errors`); the join lists it. Only the join
    fails."""
    result.assert_outcomes(failed=1, passed=4)
    assert "FAILED data/errors.jsonl" not in result.stdout.str()
    rows = file_rows(result)
    assert (rows["data/errors.jsonl"]["records"], rows["data/errors.jsonl"]["audited"],
            rows["data/errors.jsonl"]["errors"]) == ("1", "0", "1"), rows
    assert rows["data/out1.jsonl"]["errors"] == "0"
    report = json.loads((project.path / "report.json").read_text())
    errors = {f["path"]: f["errors"] for f in report["files"]}
    assert errors == {"data/errors.jsonl": 1, "data/out1.jsonl": 0, "data/out2.jsonl": 0}
    assert report["totals"]["errors"] == 1
    if outputs:  # the Markdown summary and the HTML page say the same
        text = (project.path / "summary.md").read_text()
        assert "(1 error line not among them)" in text, text
        header = next(line for line in text.splitlines() if line.startswith("| file |"))
        assert "| errors |" in header, header
        page = (project.path / "report.html").read_text()
        data = json.loads(re.search(r'id="tokaudit-data">(.*?)</script>', page, re.S).group(1))
        assert data["totals"]["errors"] == 1


def file_rows(result) -> dict[str, dict[str, str]]:
    """The summary table's rows by file, each cell by its column's name (errors among them)."""
    table = [re.split(r"\s{2,}", line.strip()) for line in summary_section(result)]
    header = table[0]
    assert "errors" in header, table
    return {row[0]: dict(zip(header[1:], row[1:])) for row in table[1:] if len(row) == len(header)}


def test_the_join_under_two_workers_is_the_same(pytester: pytest.Pytester):
    project = TokProject(pytester, ("-n", "2"))
    batch_project(project)
    result = project.run("--tokaudit-json=report.json")
    assert_no_crash(result)
    assert outcome_lines(result, "requests") == [
        "failed", "7 requests, 8 responses: 1 unanswered, 1 answered twice, "
                  "1 response without a request, 1 error line"]
    assert "data/out2.jsonl:2: custom_id 'request-99': no request" in result.stdout.str()
    assert_error_lines_apart(result, project)


def test_stored_ids_join_alike_on_both_paths(pytester: pytest.Pytester, monkeypatch):
    """Responses that store their ids, joined to requests, with TOKAUDIT_COLUMNAR=0 and =1:
    the same report, error lines (`error` set, a status other than 200, a status given
    twice) counted apart. The error lines cut the chunk engine's runs of records elsewhere
    than the per-line path's batches of 256: the join's one channel entry per part must
    not depend on where."""
    project = TokProject(pytester, ())
    n = 700
    write_jsonl(project.path / "batches/job_input.jsonl",
                [{"custom_id": f"r{k}", "body": {}} for k in range(n + 1)])
    rows = [{"custom_id": f"r{k}", "completion_tokens": 3, "output_ids": [1, 2, 3],
             "response": {"status_code": 200}, "error": None} for k in range(n)]
    rows[2]["error"] = {"message": "expired"}
    rows[260]["response"] = {"status_code": 500}
    rows[261]["response"] = {"status_code": "200"}  # not the int 200: an error line
    rows[400]["response"] = [200]  # no object: no status, a response
    rows[530]["error"] = False  # set: an error line
    path = write_jsonl(project.path / "data/out.jsonl", rows)
    with path.open("a") as fh:  # the status given twice: orjson reads the last
        fh.write(f'{{"custom_id": "r{n}", "completion_tokens": 3, "output_ids": [1, 2, 3], '
                 '"response": {"status_code": 200, "status_code": 503}}\n')
    project.ini(testpaths="data", tokaudit_id_field="custom_id",
                tokaudit_requests="batches/*_input.jsonl")
    report = audited_both_ways(project, monkeypatch)
    assert report["files"][0]["errors"] == 5
    assert [d["message"] for d in report["dataset"] if d["name"] == "requests"] == [
        f"{n + 1} requests, {n + 1} answered exactly once, 5 error lines"]
    assert len(report["files"][0]["channels"]["join"]) == 1  # one entry for the file


@pytest.mark.parametrize("stored", [True, False], ids=["stored-ids", "text-template"])
def test_error_rows_of_parquet_are_counted_apart_as_in_jsonl(project: TokProject, stored):
    """A Parquet row with `error` set or a status other than 200 is an error line, counted
    apart and listed by the join, as in its JSONL twin: read from the columns (stored ids)
    and row by row (a text template)."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    if stored:
        requests = [{"custom_id": f"request-{k}", "body": {}} for k in range(30)]
        rows = [{"custom_id": f"request-{k}", "completion_tokens": 3, "output_ids": [1, 2, 3],
                 "response": {"status_code": 200}, "error": None} for k in range(30)]
        rows[7]["response"] = {"status_code": 500}
        rows[11].update(error={"code": "429", "message": "rate limited"}, output_ids=None,
                        completion_tokens=None)
        project.ini(testpaths="data", tokaudit_id_field="custom_id",
                    tokaudit_requests="batches/*_input.jsonl")
    else:
        requests, rows = batch_pair(7)
        rows[5] = error_line("request-1")
        project.ini(**BATCH_INI, tokaudit_tokenizer=str(tokenizer_copy(project.path)))
    rows[2]["error"] = {"code": "expired", "message": "expired"}
    write_jsonl(project.path / "batches/job_input.jsonl", requests)
    write_jsonl(project.path / "data/twin.jsonl", [{k: v for k, v in r.items() if v is not None} for r in rows])
    pq.write_table(pa.Table.from_pylist(rows), project.path / "data/twin.parquet", row_group_size=4)
    runs = [project.run("-o", f"tokaudit_glob=*.{suffix}") for suffix in ("jsonl", "parquet")]
    for result in runs:
        assert_no_crash(result)
        assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    jsonl, parquet = runs
    row = file_rows(parquet)["data/twin.parquet"]
    assert row == file_rows(jsonl)["data/twin.jsonl"]
    n, errors = len(rows), 3 if stored else 2
    assert [row["records"], row["audited"], row["errors"]] == [str(n), str(n - errors), str(errors)]
    assert outcome_lines(parquet, "requests") == outcome_lines(jsonl, "requests") == [
        "passed", f"{n} requests, {n} answered exactly once, {errors} error lines"]


# A user's check on chunks with a text template is held in process too
# (tests/engine/test_columnar_template.py): as a pytest run, in the full matrix.
@pytest.mark.parametrize("user", [False, pytest.param(True, marks=pytest.mark.full)],
                         ids=["built-in", "users-check"])
def test_raw_batch_output_is_the_same_on_both_engines(project: TokProject, monkeypatch, user):
    """OpenAI Batch output read with a text template, joined to its requests, its prompts
    audited (light rows: the join id, the billed prompt count), with or without a
    conftest.py check reading whole records: the per-line path and the chunk engine
    (TOKAUDIT_COLUMNAR=0 and =1) write the same report."""
    batch_project(project)
    if not user:
        report = audited_both_ways(project, monkeypatch)
        assert not any(entry["shown"] for entry in report["files"])
        return
    project.path.joinpath("conftest.py").write_text(
        "import pytest\n\n\n@pytest.hookimpl\n"
        "def pytest_tokaudit_check_record(record):\n"
        "    body = record.data['response']['body']\n"
        "    if record.n_ids % 2:\n"
        "        return record.finding('user_odd', f\"{body['model']} {record.ids[-1]}\")\n")
    report = audited_both_ways(project, monkeypatch)
    assert {f["check"] for entry in report["files"] for f in entry["shown"]} == {"user_odd"}
    assert [d["message"] for d in report["dataset"] if d["name"] == "requests"] == [
        "7 requests, 8 responses: 1 unanswered, 1 answered twice, 1 response without a request, "
        "1 error line"]


# Without xdist: the first part of test_the_merge_of_two_parts_judges_the_whole_join (the same
# run). With two workers in the full matrix only, as every -n 2 variant of this module.
@pytest.mark.full
@pytest.mark.parametrize("xdist_mode", [XDIST_MODES["xdist-2"]], ids=["xdist-2"])
def test_partial_run_never_passes_the_join(project: TokProject):
    batch_project(project)
    result = project.run(paths=("data/out1.jsonl",))
    assert_no_crash(result)
    outcome, message = outcome_lines(result, "requests")
    assert outcome == "skipped"
    assert message.startswith("partial run")


def test_the_merge_of_two_parts_judges_the_whole_join(pytester: pytest.Pytester, monkeypatch):
    """Each CI part alone is partial: a partial run never passes the join (the part whose
    answers all have a request is skipped as partial); their reports merged see every answer."""
    project = TokProject(pytester, ("-p", "no:xdist"))
    batch_project(project)
    monkeypatch.chdir(project.path)
    for name, paths in (("p1.json", ("data/out1.jsonl",)), ("p2.json", ("data/out2.jsonl", "data/errors.jsonl"))):
        result = project.run(f"--tokaudit-json={name}", paths=paths)
        assert_no_crash(result)
        outcome, message = outcome_lines(result, "requests")
        if name == "p1.json":
            assert outcome == "skipped" and message.startswith("partial run"), message
        else:
            assert outcome in ("skipped", "failed")
    ret, out, _ = merge("p1.json", "p2.json", "--json", "merged.json")
    assert ret == pytest.ExitCode.TESTS_FAILED
    line = next(l for l in out.splitlines() if "tokaudit::requests" in l)
    assert "7 requests, 8 responses: 1 unanswered, 1 answered twice, 1 response without a request, " \
           "1 error line" in line, out
    # The error line's file passes in the merge too, its error line counted apart.
    merged = json.loads((project.path / "merged.json").read_text())
    entry = next(f for f in merged["files"] if f["path"] == "data/errors.jsonl")
    assert (entry["errors"], entry["findings"]) == (1, 0), entry


# -- the prompt audit, request files compressed, the cache key ------------------------------

# The same inflating path for either codec (each read by sources' tests): .zst in full.
@pytest.mark.parametrize("suffix", [".jsonl.gz", pytest.param(".jsonl.zst", marks=pytest.mark.full)])
def test_prompt_audit_on_the_joined_pair(pytester: pytest.Pytester, suffix: str):
    """The prompt audit on the joined pair names the one response billed off, at its line, and
    its request's place; the request files are read with the package's own codecs (two files,
    one compressed: each request's place is its own file's line). The cache is keyed on the
    chat template and the request files' bytes: each changed alone audits again."""
    if suffix.endswith(".zst"):
        pytest.importorskip("zstandard")
    from conftest import compress

    project = TokProject(pytester, ())
    requests, responses = batch_pair(4)
    # A system prompt added (longer than the template below adds: that one is off too).
    responses[1]["response"]["body"]["usage"]["prompt_tokens"] += 60

    def write_requests() -> None:
        plain = "".join(json.dumps(r) + "\n" for r in requests[:2]).encode()
        packed = "".join(json.dumps(r) + "\n" for r in requests[2:]).encode()
        (project.path / "batches").mkdir(exist_ok=True)
        (project.path / "batches/a_input.jsonl").write_bytes(plain)
        (project.path / f"batches/b_input{suffix}").write_bytes(compress(packed, suffix))

    write_requests()
    write_jsonl(project.path / "data/out.jsonl", responses)
    tok = tokenizer_copy(project.path)
    template = json.loads((tok / "tokenizer_config.json").read_text())["chat_template"]
    (project.path / "chat.jinja").write_text(template)
    project.ini(**{**BATCH_INI, "tokaudit_requests": "batches/*_input.jsonl*"},
                tokaudit_tokenizer=str(tok), tokaudit_chat_template="chat.jinja")

    def run() -> tuple[pytest.RunResult, dict]:
        result = project.run("--tokaudit-json=report.json")
        assert_no_crash(result)
        return result, json.loads((project.path / "report.json").read_text())["cache"]

    def prompt_lines(result: pytest.RunResult) -> list[str]:
        return [s for s in failure_section(result, "data/out.jsonl") if ": prompt_count: " in s]

    project.settle()  # its entry is reused below
    result, cache = run()
    assert cache["audited"] == ["data/out.jsonl::tokaudit"]
    assert outcome_lines(result, "requests") == ["passed", "4 requests, 4 answered exactly once"]
    cid = responses[1]["custom_id"]
    k = int(cid.split("-")[1])
    where = f"batches/a_input.jsonl:{k + 1}" if k < 2 else f"batches/b_input{suffix}:{k - 1}"
    line = prompt_lines(result)
    assert len(line) == 1 and line[0].startswith(
        f"data/out.jsonl:2: custom_id={cid!r}: prompt_count: prompt billed "), line
    assert f"(request {where})" in line[0], line
    assert any(s.startswith("group") for s in summary_section(result))

    # A template that adds a line to every prompt: audited again, and every prompt is off.
    (project.path / "chat.jinja").write_text(
        "{{- 'A hidden instruction the provider adds to every single prompt it is sent, "
        "billed to you without being asked for, which nobody would see.\\n' }}" + template)
    result, cache = run()
    assert cache["audited"] == ["data/out.jsonl::tokaudit"]
    assert len(prompt_lines(result)) == 4, result.stdout.str()
    (project.path / "chat.jinja").write_text(template)
    assert run()[1]["items"] == ["data/out.jsonl::tokaudit"]  # back as it was: the old entry
    # A request file changed (another message): audited again.
    requests[0]["body"]["messages"][1]["content"] += " Show your work."
    write_requests()
    assert run()[1]["audited"] == ["data/out.jsonl::tokaudit"]


def test_request_files_at_a_url_are_a_usage_error_naming_the_key(project: TokProject):
    requests, responses = batch_pair(2)
    write_jsonl(project.path / "data/out.jsonl", responses)
    project.ini(**{**BATCH_INI, "tokaudit_requests": "https://example.com/batches/job_input.jsonl"})
    result = project.run()
    assert_usage_error(result, "tokaudit_requests (pytest.ini): ",
                       "https://example.com/batches/job_input.jsonl", "local")


def test_request_and_response_lines_without_a_usable_id_are_named(project: TokProject):
    """A request line that is not JSON, has no custom_id, or one that is neither a string
    nor an integer cannot be asked for: each is named at its place and fails the join; a
    response without a custom_id answers no request."""
    requests, responses = batch_pair(3)
    write_jsonl(project.path / "batches/job_input.jsonl", requests)
    with open(project.path / "batches/job_input.jsonl", "a") as fh:
        fh.write('{"custom_id": \n{"method": "POST"}\n{"custom_id": 3.5}\n')
    anonymous = copy.deepcopy(responses[2])
    lost = anonymous.pop("custom_id")  # its request goes unanswered
    write_jsonl(project.path / "data/out.jsonl", [responses[0], responses[1], anonymous])
    project.ini(**BATCH_INI, tokaudit_tokenizer=str(tokenizer_copy(project.path)))
    result = project.run()
    assert_no_crash(result)
    outcome, message = outcome_lines(result, "requests")
    assert message == ("3 requests, 3 responses: 1 unanswered, 1 response without a request, "
                       "3 bad request lines")
    out = result.stdout.str()
    place = 1 + [r["custom_id"] for r in requests].index(lost)
    for shown in ("3 request lines without a usable custom_id:",
                  "  batches/job_input.jsonl:4: invalid JSON",
                  "  batches/job_input.jsonl:5: no custom_id",
                  "  batches/job_input.jsonl:6: custom_id is neither a string nor an integer",
                  "data/out.jsonl:3: no custom_id: no request",
                  f"batches/job_input.jsonl:{place}: custom_id {lost!r}"):
        assert shown in out, (shown, out)
