"""Data for the whole bill's tests: OpenAI Batch input/output pairs and OpenRouter-style
records whose billed prompt counts are the real Qwen3 chat template's (transformers'
apply_chat_template, tokenize=True), written into a tmp copy of the tokenizer directory."""

from __future__ import annotations

import functools
import json
import shutil
from pathlib import Path
from typing import Any

from tokdata import qwen_dir

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}]


def tokenizer_copy(root: Path) -> Path:
    """The Qwen3 tokenizer files (a ChatML chat template with a tools section), copied."""
    out = root / "tokenizer"
    shutil.copytree(qwen_dir(), out)
    return out


@functools.cache
def _renderer() -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(qwen_dir()), local_files_only=True)


def prompt_len(messages: list[dict[str, Any]], tools: list[Any] | None = None) -> int:
    """transformers' own count: apply_chat_template(..., tokenize=True, add_generation_prompt=True)."""
    out = _renderer().apply_chat_template(messages, tools=tools, tokenize=True,
                                          add_generation_prompt=True)
    ids = out["input_ids"] if hasattr(out, "keys") else out
    return len(ids)


def completion_len(content: str) -> int:
    """The completion's tokens as the template `{...content}<|im_end|>` rebuilds them."""
    return len(_renderer().encode(content, add_special_tokens=False)) + 1


def messages(k: int) -> list[dict[str, Any]]:
    return [{"role": "system", "content": "You answer in one sentence."},
            {"role": "user", "content": f"What is {k} plus {k}? Explain briefly."}]


def batch_pair(n: int = 6) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """OpenAI Batch input lines and their output lines (in another order, as the API
    writes them), every prompt count exact; odd requests carry tools."""
    requests, responses = [], []
    for k in range(n):
        tools = TOOLS if k % 2 else None
        body: dict[str, Any] = {"model": "gpt-4o-mini", "messages": messages(k), "max_tokens": 100}
        if tools:
            body["tools"] = tools
        requests.append({"custom_id": f"request-{k}", "method": "POST", "url": "/v1/chat/completions",
                         "body": body})
        responses.append({
            "id": f"batch_req_{k}", "custom_id": f"request-{k}",
            "response": {"status_code": 200, "request_id": f"req_{k}", "body": {
                "id": f"chatcmpl-{k}", "object": "chat.completion", "model": "gpt-4o-mini",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": f"It is {2 * k}."},
                             "finish_reason": "stop"}],
                "usage": {"prompt_tokens": prompt_len(messages(k), tools),
                          "completion_tokens": completion_len(f"It is {2 * k}."),
                          "total_tokens": 0,
                          "prompt_tokens_details": {"cached_tokens": 0}}}},
            "error": None})
    return requests, responses[::-1]


def error_line(custom_id: str) -> dict[str, Any]:
    return {"id": "batch_req_err", "custom_id": custom_id,
            "response": {"status_code": 500, "request_id": "req_err", "body": {
                "error": {"message": "The server had an error", "type": "server_error"}}},
            "error": None}


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def audited_both_ways(project: Any, monkeypatch: Any, *args: str) -> dict[str, Any]:
    """The project's JSON report through the per-line path and through the columnar path
    (TOKAUDIT_COLUMNAR=0 and =1, whatever the files' size), asserted equal: the checks
    reading whole records get the same records either way. Returns the report."""
    reports = []
    for mode in ("0", "1"):
        monkeypatch.setenv("TOKAUDIT_COLUMNAR", mode)
        written = project.path.parent / f"report-{mode}.json"  # outside the project's root
        project.run(*args, f"--tokaudit-json={written}", "--tokaudit-no-cache")
        report = json.loads(written.read_text())
        for key in ("created", "duration", "started", "finished", "environment"):
            report.pop(key, None)
        reports.append(report)
    monkeypatch.delenv("TOKAUDIT_COLUMNAR")
    assert reports[1] == reports[0]
    return reports[0]
