"""Raw template audit: rebuild each response's ids with encode_batch, then the checks.

    python ref_template.py FILE --tokenizer DIR

What a user writes for raw chat completions (benchmarks/generate.py --raw): per line
orjson.loads, the text reasoning + `</think>` + content + `<|im_end|>`, then per batch of
records one `Tokenizer.encode_batch(texts, add_special_tokens=False)` (tokenizers loaded
directly) and the checks on the ids: |billed - len(ids)| <= max(8, 2%), `</think>` once,
last id `<|im_end|>`, no `<think>`, finish_reason "stop"; per file mean |diff| / mean
billed <= 0.5%. It does not guard against special-token strings inside the text, which
the plugin encodes as plain text (the generated text holds none).
"""

import argparse
import os

import orjson
from tokenizers import Tokenizer


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("file")
    ap.add_argument("--tokenizer", required=True, help="dir with tokenizer.json")
    ap.add_argument("--batch", type=int, default=256, help="records per encode_batch")
    a = ap.parse_args()

    tok = Tokenizer.from_file(os.path.join(a.tokenizer, "tokenizer.json"))
    once, last, forbid = (tok.token_to_id(t) for t in ("</think>", "<|im_end|>", "<think>"))
    records = findings = tokens = sum_diff = sum_billed = 0
    pending = []  # (billed, finish reason, text)

    def flush():
        nonlocal findings, tokens, sum_diff, sum_billed
        encoded = tok.encode_batch([text for _, _, text in pending], add_special_tokens=False)
        for (billed, finish, _), enc in zip(pending, encoded):
            ids = enc.ids
            n = len(ids)
            tokens += n
            sum_diff += abs(billed - n)
            sum_billed += billed
            findings += (abs(billed - n) > max(8, 0.02 * billed) or ids.count(once) != 1
                         or ids[-1] != last or forbid in ids or finish != "stop")
        pending.clear()

    with open(a.file, "rb") as f:
        for line in f:
            records += 1
            r = orjson.loads(line)
            choice = r["choices"][0]
            m = choice["message"]
            text = f"{m.get('reasoning') or ''}</think>{m['content']}<|im_end|>"
            pending.append((r["usage"]["completion_tokens"], choice.get("finish_reason"), text))
            if len(pending) >= a.batch:
                flush()
    if pending:
        flush()
    file_bad = sum_diff * 200 > sum_billed
    print(f"records={records} findings={findings + file_bad} tokens={tokens} "
          f"mean_rel={sum_diff / max(sum_billed, 1):.5f}")


if __name__ == "__main__":
    main()
