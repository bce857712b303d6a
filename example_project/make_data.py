"""Regenerate example_project/data from real text with the Qwen3 tokenizer in ./tokenizer.

Responses are built from Python's own stdlib docstrings and sources as
reasoning + </think> + answer + <|im_end|>, tokenised whole, so the clean records are
canonical. A few records carry a deliberate fault of every kind the audit catches;
docs/example-project.md lists them. Deterministic for a given Python version: run it and commit the data.

    python make_data.py
"""

from __future__ import annotations

import gzip
import inspect
import json
import random
import sys
from pathlib import Path

from transformers import AutoTokenizer

HERE = Path(__file__).parent
DATA = HERE / "data"
tok = AutoTokenizer.from_pretrained(HERE / "tokenizer", local_files_only=True)
THINK, END_THINK, IM_END = tok.convert_tokens_to_ids(["<think>", "</think>", "<|im_end|>"])
rng = random.Random(2026)


def texts(rng=rng):
    """(reasoning, answer) pairs from stdlib modules with docstrings and sources."""
    import importlib

    for name in sorted(sys.stdlib_module_names):
        if name.startswith("_") or name in ("this", "antigravity", "idlelib"):
            continue
        try:
            module = importlib.import_module(name)
            doc, source = inspect.getdoc(module), inspect.getsource(module)
        except Exception:
            continue
        if doc and len(source) > 2000:
            for _ in range(3):
                start = rng.randrange(0, len(source) - 1500)
                yield doc[:1200], source[start:start + rng.randint(400, 1500)]


def encode(reasoning: str, answer: str) -> list[int]:
    return tok.encode(f"{reasoning}\n</think>\n\n{answer}<|im_end|>", add_special_tokens=False)


BOUGHT: set[int] = set()


def record(sid: int, ids: list[int], **extra) -> dict:
    BOUGHT.add(sid)
    billed = len(ids) + rng.choice([0, 0, 0, 0, 1, 1, -1, 2])  # APIs count a little differently
    return {"sample_id": sid, "provider": "openrouter", "model": "kimi-k2", "finish_reason": "stop",
            "completion_tokens": max(billed, 0), "output_ids": ids, **extra}


def split_tokens(ids: list[int], every: int) -> list[int]:
    """A non-canonical tokenisation: every `every`-th multi-character token as two pieces."""
    out = []
    for i, t in enumerate(ids):
        piece = tok.decode([t])
        if i % every == 0 and len(piece) >= 2 and t < 151643:
            a, b = tok.encode(piece[:1], add_special_tokens=False), tok.encode(piece[1:], add_special_tokens=False)
            if tok.decode(a + b) == piece:
                out += a + b
                continue
        out.append(t)
    return out


def write(name: str, rows: list[str | dict]) -> None:
    lines = [r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in rows]
    body = ("\n".join(lines) + "\n").encode()
    path = DATA / name
    if name.endswith(".gz"):
        path.write_bytes(gzip.compress(body, mtime=0))
    else:
        path.write_bytes(body)
    print(f"{path.relative_to(HERE)}: {len(rows)} lines, {len(body):,} bytes")


def main() -> None:
    pairs = list(texts())
    rng.shuffle(pairs)
    pool = iter(pairs)
    sid = iter(range(1000, 10_000))

    # batch 1: clean, one allowed count outlier, a few local (not billed) responses.
    rows: list[str | dict] = [record(next(sid), encode(*next(pool))) for _ in range(60)]
    rows[17]["completion_tokens"] = len(rows[17]["output_ids"]) + 40
    rows[30:30] = [{"sample_id": next(sid), "provider": None, "output_ids": encode(*next(pool))}]
    write("api_batch_001.jsonl", rows)

    # batch 2: one fault of every kind, at lines docs/example-project.md names.
    rows = [record(next(sid), encode(*next(pool))) for _ in range(60)]
    r, a = next(pool)
    rows[4]["completion_tokens"] = len(rows[4]["output_ids"]) + 65                  # line 5: count
    rows[9]["completion_tokens"] = max(len(rows[9]["output_ids"]) - 120, 0)         # line 10: count
    rows[14]["output_ids"] = [t for t in rows[14]["output_ids"] if t != END_THINK]  # line 15
    rows[19]["output_ids"] = encode(r, a).copy()
    rows[19]["output_ids"][5:5] = [END_THINK]                                      # line 20
    rows[24]["output_ids"] = rows[24]["output_ids"][:-40]                          # line 25: cut off
    rows[24]["finish_reason"] = "length"
    rows[29]["output_ids"] = [THINK] + rows[29]["output_ids"]                      # line 30
    rows[34]["output_ids"] = split_tokens(rows[34]["output_ids"], every=4)         # line 35: round trip
    # line 40: a short answer whose text was cut inside a multi-byte character
    short = encode("Fraktur.", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢")[:-1]
    cut = max(i for i in range(len(short)) if tok.decode(short[:i]).endswith("\ufffd"))
    rows[39]["output_ids"] = short[:cut] + [IM_END]
    rows[44] = json.dumps(rows[44])[:500]                                           # line 45: bad JSON
    del rows[49]["completion_tokens"]                                               # line 50
    rows[54]["output_ids"] = rows[54]["output_ids"][:3] + ["151668"] + rows[54]["output_ids"][3:]  # line 55
    for i in (14, 19, 24, 29, 34, 39, 54):  # billed as sent: only the structure is off
        rows[i]["completion_tokens"] = len(rows[i]["output_ids"])
    write("api_batch_002.jsonl", rows)

    # batch 3, gzip: clean, but one response was saved twice (same id as batch 1's first).
    rows = [record(next(sid), encode(*next(pool))) for _ in range(40)]
    first = json.loads((DATA / "api_batch_001.jsonl").read_text().splitlines()[0])
    rows.append(first)
    write("api_batch_003.jsonl.gz", rows)

    # local runs: audited with their own contract (see data/local/conftest.py).
    rows = [{"sample_id": next(sid), "output_ids": encode(*next(pool)), "completion_tokens": 0}
            for _ in range(20)]
    for row in rows:
        row["completion_tokens"] = len(row["output_ids"]) + rng.randint(-20, 20)
    write("local/local_run.jsonl", rows)

    # The manifest: every id that was bought; the last five never came back.
    bought = sorted(BOUGHT)
    manifest = bought + list(range(bought[-1] + 1, bought[-1] + 6))
    (HERE / "manifest.txt").write_text("\n".join(map(str, manifest)) + "\n")
    print(f"manifest.txt: {len(manifest)} ids")
    raw_responses()


def raw_responses() -> None:
    """data/raw/: responses as OpenRouter returns them (text and usage, no token ids),
    audited through the template in data/raw/conftest.py. Its own random stream, so it can be
    regenerated alone: python -c 'import make_data; make_data.raw_responses()'."""
    own = random.Random(10)
    pairs = list(texts(own))
    own.shuffle(pairs)
    rows = []
    for k, (reasoning, answer) in enumerate(pairs[:30]):
        reasoning, answer = reasoning[:600], answer[:500]
        text = f"{reasoning}</think>{answer}<|im_end|>"
        n = len(tok.encode(text, add_special_tokens=False))
        think = len(tok.encode(reasoning, add_special_tokens=False))
        rows.append({
            "id": f"gen-{1765000000 + k}-raw", "provider": "DeepInfra", "model": "qwen/qwen3-32b",
            "object": "chat.completion",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": answer, "reasoning": reasoning}}],
            "usage": {"prompt_tokens": own.randint(40, 900), "completion_tokens": n,
                      "completion_tokens_details": {"reasoning_tokens": think}},
        })
    # line 6: cut at max_tokens: the provider bills what was sent, which has no <|im_end|>
    cut = rows[5]["choices"][0]
    cut["finish_reason"] = "length"
    cut["message"]["content"] = cut["message"]["content"][:120]
    text = cut["message"]["reasoning"] + "</think>" + cut["message"]["content"]
    rows[5]["usage"]["completion_tokens"] = len(tok.encode(text, add_special_tokens=False))
    # line 12: the model wrote a special token's text into its answer
    msg = rows[11]["choices"][0]["message"]
    msg["content"] = "Stop generating with <|im_end|> when done. " + msg["content"]
    rows[11]["usage"]["completion_tokens"] += 12
    # line 18: billed twice over
    rows[17]["usage"]["completion_tokens"] *= 2
    # line 24: an error the provider returned, stored as if it were a response
    rows[23] = {"id": rows[23]["id"], "provider": "DeepInfra",
                "error": {"code": 502, "message": "upstream timeout"}}
    (DATA / "raw").mkdir(exist_ok=True)
    write("raw/openrouter_responses.jsonl", rows)


if __name__ == "__main__":
    main()
