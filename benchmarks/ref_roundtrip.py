"""Raw round-trip audit: decode ids to text and re-encode with the HF tokenizer.

    python ref_roundtrip.py FILE --tokenizer DIR [--rel 0.05]

Runs the same contract checks as ref_orjson_loop.py (special ids looked up in
the tokenizer), then for each checked record with well-typed ids calls
backend_tokenizer.decode_batch(ids, skip_special_tokens=False) and
encode_batch(texts, add_special_tokens=False); a record whose re-encoded
length differs by more than --rel of its id count is a finding. The tokenizer
is loaded with `tokenizers` directly: it is the same object transformers
exposes as `backend_tokenizer`, without the ~2 s transformers import.
"""

import argparse
import os

import orjson
from tokenizers import Tokenizer

from ref_orjson_loop import check


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("file")
    ap.add_argument("--tokenizer", required=True, help="dir with tokenizer.json")
    ap.add_argument("--rel", type=float, default=0.05)
    ap.add_argument("--batch", type=int, default=64, help="records per decode/encode batch")
    a = ap.parse_args()

    tok = Tokenizer.from_file(os.path.join(a.tokenizer, "tokenizer.json"))
    once, last, forbid = (tok.token_to_id(t) for t in ("</think>", "<|im_end|>", "<think>"))

    records = checked = findings = tokens = sum_diff = sum_billed = 0
    pending = []  # (bad so far, ids) waiting for one batched round trip

    def flush():
        nonlocal findings, tokens
        texts = tok.decode_batch([ids for _, ids in pending], skip_special_tokens=False)
        for (bad, ids), enc in zip(pending, tok.encode_batch(texts, add_special_tokens=False)):
            tokens += len(ids)
            findings += bad or abs(len(enc.ids) - len(ids)) > a.rel * len(ids)
        pending.clear()

    with open(a.file, "rb") as f:
        for line in f:
            records += 1
            try:
                res = check(orjson.loads(line), once, last, forbid)
            except orjson.JSONDecodeError:
                res = (True, None, None)
            if res is None:
                continue
            checked += 1
            bad, ids, billed = res
            if ids is not None and billed is not None:
                sum_diff += abs(billed - len(ids))
                sum_billed += billed
            if ids is None:
                findings += 1
                continue
            pending.append((bad, ids))
            if len(pending) >= a.batch:
                flush()
    if pending:
        flush()
    file_bad = sum_diff * 200 > sum_billed  # mean |diff| / mean billed > 0.5%
    mean_rel = sum_diff / sum_billed if sum_billed else 0.0
    print(
        f"records={records} checked={checked} findings={findings + file_bad} "
        f"tokens={tokens} mean_rel={mean_rel:.5f}"
    )


if __name__ == "__main__":
    main()
