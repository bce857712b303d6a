"""The whole bill (docs/whole-bill.md): prompt counts through the chat template, the request join.

prompt         records carrying their request (a short system prompt, a long unique
               question of ~1,250 tokens, tools on every other one) and the billed prompt
               count: ref_chat_template.py (`apply_chat_template(..., tokenize=True)` per
               record, the count rule) against `pytest --tokaudit -n 0` with
               `tokaudit_prompt_messages`
prompt_shared  the same with a long system prompt (~1,100 words) shared by every request
               and a short question: where encoding each distinct piece once pays
join           OpenAI Batch output lines joined to N requests (`tokaudit_requests`): the
               run without the join (ref) against the run with it; the peak RSS column is
               the point (the index keeps 24 bytes per request)

The prompt files' counts are the Qwen3 chat template's own (transformers, when the file is
generated); ~1% of records are billed 40 prompt tokens more. The tokenizer is the one of the
tokenizer cases (cases_tokenizer.py): Qwen3's, or --tokenizer DIR.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random

from benchmarks.cases_outputs import scaled
from benchmarks.kit import Case, Context, Row, Skip, describe

TOOLS = [{"type": "function", "function": {
    "name": "search", "description": "Search the code base",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}]
WORDS = ("the function returns a list of token ids for each record and the audit checks "
         "that billed counts match within tolerance while the provider may add hidden "
         "system prompts tools or framing tokens def class import return yield async").split()

PROMPT_INI = """[pytest]
tokaudit_tokenizer = {tokenizer}
tokaudit_id_field = id
tokaudit_prompt_messages = request.messages
tokaudit_prompt_tools = request.tools
tokaudit_prompt_count_abs = 8
tokaudit_prompt_count_rel = 2%
"""

JOIN_INI = """[pytest]
tokaudit_id_field = custom_id
tokaudit_count_field = response.body.usage.completion_tokens
tokaudit_ids_field = response.body.output_ids
{requests}"""


def conversations(n: int, shared: bool, seed: int = 7) -> list[tuple[list[dict], list | None]]:
    rng = random.Random(seed)
    system = (" ".join(random.Random(1).choice(WORDS) for _ in range(1100)) if shared
              else "You are a careful reviewer.")
    out = []
    for k in range(n):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(*((100, 160) if shared else (900, 1400)))))
        out.append(([{"role": "system", "content": system}, {"role": "user", "content": f"Request {k}: {text}"}],
                    TOOLS if k % 2 else None))
    return out


def write_prompt_file(path: str, tokenizer: str, n: int, shared: bool) -> None:
    """OpenRouter-style records with their request and transformers' exact prompt count."""
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer, local_files_only=True)
    rng = random.Random(11)
    with open(path, "w") as f:
        for k, (messages, tools) in enumerate(conversations(n, shared)):
            ids = tok.apply_chat_template(messages, tools=tools, tokenize=True, add_generation_prompt=True)
            billed = len(ids["input_ids"] if hasattr(ids, "keys") else ids)
            if rng.random() < 0.01:
                billed += 40  # a system prompt added behind the user's back
            request = {"model": "qwen/qwen3-32b", "messages": messages, **({"tools": tools} if tools else {})}
            f.write(json.dumps({"id": f"gen-{k}", "request": request, "output_ids": [1, 2, 3],
                                "completion_tokens": 3, "usage": {"prompt_tokens": billed}}) + "\n")


def cached(ctx: Context, name: str, write) -> str:
    from benchmarks.generate import _atomic

    path = os.path.join(str(ctx.data), name)
    if not os.path.exists(path):
        os.makedirs(str(ctx.data), exist_ok=True)
        _atomic(path, write)
    return path


def prompt(ctx: Context, shared: bool) -> Case:
    from benchmarks.cases_tokenizer import _tokenizer

    name = "prompt_shared" if shared else "prompt"
    tok = _tokenizer(ctx, name)
    if importlib.util.find_spec("transformers") is None or importlib.util.find_spec("jinja2") is None:
        raise Skip(f"{name}: transformers and jinja2 render the chat template (pip install transformers jinja2)")
    n = scaled(ctx, 2000, 20)
    suffix = "" if tok == _default_tokenizer() else "-" + os.path.basename(os.path.normpath(tok))
    path = cached(ctx, f"{name.replace('_', '-')}-{n}rec-seed{ctx.seed}{suffix}.jsonl",
                  lambda tmp: write_prompt_file(tmp, tok, n, shared))
    ini = ctx.ini(name, PROMPT_INI.format(tokenizer=tok))
    ref = Row("apply_chat_template loop", [ctx.python, ctx.script("ref_chat_template.py"), path, "--tokenizer", tok])
    n0 = ctx.pytest_row("pytest --tokaudit -n 0", ini, "--tokaudit", "--tokaudit-no-cache", path, "-n", "0")
    return Case(name, [ref, n0], ref=ref.name, size=ctx.size, input=describe(path))


def _default_tokenizer() -> str | None:
    from benchmarks.generate import default_tokenizer_dir

    return default_tokenizer_dir()


def write_join(folder: str, n: int) -> None:
    """N Batch input lines and their N answers (in another order, as the API writes them)."""
    os.makedirs(os.path.join(folder, "data"), exist_ok=True)
    with open(os.path.join(folder, "requests.jsonl"), "w") as f:
        for start in range(0, n, 100_000):
            f.write("".join(f'{{"custom_id":"request-{k}","method":"POST","url":"/v1/chat/completions",'
                            f'"body":{{"messages":[{{"role":"user","content":"q{k}"}}]}}}}\n'
                            for k in range(start, min(n, start + 100_000))))
    order = list(range(n))
    random.Random(5).shuffle(order)
    with open(os.path.join(folder, "data", "responses.jsonl"), "w") as f:
        for start in range(0, n, 100_000):
            f.write("".join(f'{{"custom_id":"request-{k}","response":{{"status_code":200,"body":'
                            f'{{"usage":{{"completion_tokens":3}},"output_ids":[1,2,3]}}}},"error":null}}\n'
                            for k in order[start:start + 100_000]))


def join(ctx: Context) -> Case:
    if importlib.util.find_spec("numpy") is None:
        raise Skip("join: numpy is not installed (the request index needs it)")
    n = scaled(ctx, 1_000_000, 10_000)
    folder = os.path.join(str(ctx.data), f"join-{n}req")
    if not os.path.exists(os.path.join(folder, "data", "responses.jsonl")):
        tmp = f"{folder}.part-{os.getpid()}"
        write_join(tmp, n)
        os.replace(tmp, folder)
    responses = os.path.join(folder, "data", "responses.jsonl")
    requests = os.path.join(folder, "requests.jsonl")
    plain = ctx.ini("join-off", JOIN_INI.format(requests=""))
    joined = ctx.ini("join-on", JOIN_INI.format(requests=f"tokaudit_requests = {requests}\n"))
    rows = [ctx.pytest_row("pytest --tokaudit -n 0, no join", plain, "--tokaudit", "--tokaudit-no-cache",
                           responses, "-n", "0"),
            ctx.pytest_row(f"pytest --tokaudit -n 0, joined to {n:,} requests", joined, "--tokaudit",
                           "--tokaudit-no-cache", responses, "-n", "0")]
    info = describe(responses)
    info["file"] = f"responses.jsonl + requests.jsonl ({os.path.getsize(requests) / 1e6:.0f} MB)"
    return Case("join", rows, ref=rows[0].name, size=ctx.size, input=info)


CASES = {
    "prompt": lambda ctx: prompt(ctx, False),
    "prompt_shared": lambda ctx: prompt(ctx, True),
    "join": join,
}
