"""The prompt audit: billed prompt counts against the real Qwen3 chat template (tools
section included), on OpenRouter-style JSONL records carrying their messages and on a
Hugging Face `datasets`-style Parquet export; images counted apart; a tokenizer without a
chat template is a usage error, a template file overrides it."""

from __future__ import annotations

import json

import pytest

from conftest import TokProject, assert_no_crash, failure_section, summary_section
from wholebill import TOOLS, audited_both_ways, messages, prompt_len, tokenizer_copy, write_jsonl

from pytest_tokaudit.tokenizers.chat import chat_for, conversation

# The unit test below loads transformers in this process: its C extensions (numpy's,
# tokenizers') are imported at collection, so that an in-process pytester run of another
# test (which drops the modules it imported) cannot make them load a second time.
pytest.importorskip("numpy")
pytest.importorskip("tokenizers")


def openrouter_rows() -> list[dict]:
    rows = []
    for k in range(6):
        tools = TOOLS if k % 2 else None
        request = {"model": "qwen/qwen3-32b", "messages": messages(k), **({"tools": tools} if tools else {})}
        rows.append({
            "id": f"gen-{k}", "provider": "Alpha" if k < 3 else "Beta", "model": "qwen/qwen3-32b",
            "request": request, "output_ids": [1, 2, 3], "completion_tokens": 3,
            "usage": {"prompt_tokens": prompt_len(messages(k), tools), "completion_tokens": 3}})
    return rows


PROMPT_INI = dict(testpaths="data", tokaudit_id_field="id",
                  tokaudit_prompt_messages="request.messages", tokaudit_prompt_tools="request.tools",
                  tokaudit_group_by="provider model")


def prompt_run(project: TokProject, rows: list[dict]) -> tuple[pytest.RunResult, list[str]]:
    """`rows` as data/or.jsonl under PROMPT_INI (no mean check), run: the result and the
    file's failure section."""
    write_jsonl(project.path / "data/or.jsonl", rows)
    project.ini(**PROMPT_INI, tokaudit_tokenizer=str(tokenizer_copy(project.path)),
                tokaudit_prompt_count_mean_rel="")
    result = project.run()
    assert_no_crash(result)
    return result, failure_section(result, "data/or.jsonl")


def test_lengths_equal_apply_chat_template(tmp_path):
    tok = tokenizer_copy(tmp_path)
    chat = chat_for(str(tok), False, "")
    convs = [(messages(k), TOOLS if k % 2 else None) for k in range(4)]
    convs.append(([{"role": "user", "content": "a <|im_end|> in text"}], None))
    assert chat.lengths([conversation(m, t) for m, t in convs]) == [prompt_len(m, t) for m, t in convs]
    # Text parts are joined; an image part cannot be counted.
    parts = [{"role": "user", "content": [{"type": "text", "text": "What is "},
                                          {"type": "text", "text": "this?"}]}]
    joined = conversation(parts, None)
    assert not isinstance(joined, str)
    assert chat.lengths([joined]) == [prompt_len([{"role": "user", "content": "What is this?"}])]
    image = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]
    assert conversation(image, None) == "message 0 has a part the template cannot count (image_url)"


def test_openrouter_records_prompt_counts(pytester: pytest.Pytester, monkeypatch):
    project = TokProject(pytester, ())
    rows = openrouter_rows()
    rows[4]["usage"]["prompt_tokens"] += 40  # a system prompt added behind the user's back
    image = json.loads(json.dumps(rows[0]))
    image["id"] = "gen-img"
    image["request"]["messages"][1]["content"] = [{"type": "text", "text": "What is it?"},
                                                  {"type": "image_url", "image_url": {"url": "data:,"}}]
    rows.append(image)
    result, section = prompt_run(project, rows)
    billed = rows[4]["usage"]["prompt_tokens"]
    assert (f"data/or.jsonl:5: id='gen-4': prompt_count: prompt billed {billed}, counted "
            f"{billed - 40} (+40, {40 / billed:+.1%}) > max(8, 2%)") in section
    assert section[-1] == ("contract: default [tokaudit_prompt_count_abs = 8, tokaudit_prompt_count_rel = 2%, "
                           "tokaudit_prompt_count_outliers = 0]")
    # By provider/model, the image record counted apart (never passed as counted).
    table = summary_section(result)
    at = table.index("prompt tokens through the chat template:")
    rows_shown = [line.split() for line in table[at + 2:at + 4]]
    assert rows_shown[0][:2] == ["provider=Alpha,", "model=qwen/qwen3-32b"] and rows_shown[0][-1] == "1"
    assert rows_shown[1][:2] == ["provider=Beta,", "model=qwen/qwen3-32b"] and rows_shown[1][-1] == "0"
    assert rows_shown[1][-3] == "13.33"  # 40 tokens over the 3 records of Beta
    # The prompt audit reads whole records: the columnar path hands it the same.
    report = audited_both_ways(project, monkeypatch)
    assert report["files"][0]["findings"]
    # The outlier allowance of its own: one prompt outlier allowed, the file passes.
    result = project.run("-o", "tokaudit_prompt_count_outliers=1")
    result.assert_outcomes(passed=2)


def test_records_the_prompt_audit_cannot_count_are_findings_at_their_lines(pytester: pytest.Pytester):
    """A billed prompt count that is missing or not a count, a request without its
    messages, or messages the chat template refuses: a prompt_count finding naming what is
    wrong, never a crash nor a count of 0. Messages of no OpenAI shape are counted apart,
    as an image part is (the table's last column), not judged."""
    project = TokProject(pytester, ())
    rows = openrouter_rows()
    rows[1]["usage"]["prompt_tokens"] = "12"
    del rows[2]["usage"]["prompt_tokens"]
    del rows[3]["request"]["messages"]
    rows[4]["request"]["messages"] = "hello"
    rows[5]["request"]["messages"] = [{"role": "user", "content": 5}]  # the template refuses it
    result, section = prompt_run(project, rows)
    found = [line for line in section if ": prompt_count: " in line]
    assert found == [
        "data/or.jsonl:2: id='gen-1': prompt_count: usage.prompt_tokens is '12', not a count",
        "data/or.jsonl:3: id='gen-2': prompt_count: missing field 'usage.prompt_tokens'",
        "data/or.jsonl:4: id='gen-3': prompt_count: missing field 'request.messages'",
        "data/or.jsonl:6: id='gen-5': prompt_count: the chat template cannot render the messages: "
        "UndefinedError: 'int object' has no attribute 'startswith'"], section
    table = summary_section(result)
    beta = table[table.index("prompt tokens through the chat template:") + 3].split()
    assert beta[:2] == ["provider=Beta,", "model=qwen/qwen3-32b"] and beta[-1] == "1", table


def test_parquet_export_is_audited_alike(pytester: pytest.Pytester):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    project = TokProject(pytester, ())
    rows = openrouter_rows()
    rows[2]["usage"]["prompt_tokens"] += 25
    # A `datasets` export: the request's messages as a column of list<struct<role, content>>.
    flat = [{"id": r["id"], "provider": r["provider"], "model": r["model"],
             "messages": r["request"]["messages"], "output_ids": r["output_ids"],
             "completion_tokens": r["completion_tokens"], "usage": r["usage"]} for r in rows if "tools" not in r["request"]]
    (project.path / "data").mkdir()
    pq.write_table(pa.Table.from_pylist(flat), project.path / "data/train-00000-of-00001.parquet")
    project.ini(**{**PROMPT_INI, "tokaudit_prompt_messages": "messages", "tokaudit_prompt_tools": ""},
                tokaudit_tokenizer=str(tokenizer_copy(project.path)))
    result = project.run()
    assert_no_crash(result)
    section = failure_section(result, "data/train-00000-of-00001.parquet")
    assert any(line.startswith("data/train-00000-of-00001.parquet:row 2: id='gen-2': prompt_count: "
                               "prompt billed ") for line in section), section


def test_no_chat_template_is_a_usage_error_and_a_file_overrides(pytester: pytest.Pytester):
    project = TokProject(pytester, ())
    tok = tokenizer_copy(project.path)
    config = json.loads((tok / "tokenizer_config.json").read_text())
    template = config.pop("chat_template")
    (tok / "tokenizer_config.json").write_text(json.dumps(config))
    write_jsonl(project.path / "data/or.jsonl", openrouter_rows())
    project.ini(**PROMPT_INI, tokaudit_tokenizer=str(tok))
    result = project.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "has no chat template: set tokaudit_chat_template" in result.stderr.str()
    # A template file that does not parse is refused at start, naming the key and the line;
    # a tag of transformers' own (`generation`, for assistant masks) is the renderer's to know.
    (project.path / "chatml.jinja").write_text("{% for m in messages %}\n{{ m.content }\n")
    project.ini(**PROMPT_INI, tokaudit_tokenizer=str(tok), tokaudit_chat_template="chatml.jinja")
    result = project.run()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    assert result.stderr.lines[0] == (f"ERROR: tokaudit_chat_template: {project.path / 'chatml.jinja'}, "
                                      "line 2: unexpected '}'"), result.stderr.str()
    generation = template.replace("{{- message.content }}", "{% generation %}{{- message.content }}{% endgeneration %}", 1)
    assert generation != template
    (project.path / "chatml.jinja").write_text(generation)
    result = project.run()
    assert_no_crash(result)
    result.assert_outcomes(passed=2)
