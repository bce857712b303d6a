"""Prompt counts the plain way: apply_chat_template per record, against the billed count.

    python ref_chat_template.py FILE --tokenizer DIR

What a user writes to audit billed prompt counts (benchmarks/cases_bill.py's files): per
line orjson.loads, then
`len(tok.apply_chat_template(messages, tools=tools, tokenize=True, add_generation_prompt=True))`
with transformers' tokenizer, and the count rule |billed - counted| <= max(8, 2%). Prints
`findings=N` (records outside the rule).
"""

import argparse
import os

import orjson

os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("file")
    ap.add_argument("--tokenizer", required=True, help="a Hugging Face tokenizer directory")
    a = ap.parse_args()
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(a.tokenizer, local_files_only=True)
    records = findings = tokens = 0
    with open(a.file, "rb") as f:
        for line in f:
            r = orjson.loads(line)
            request = r["request"]
            ids = tok.apply_chat_template(request["messages"], tools=request.get("tools"), tokenize=True,
                                          add_generation_prompt=True)
            n = len(ids["input_ids"] if hasattr(ids, "keys") else ids)
            billed = r["usage"]["prompt_tokens"]
            records += 1
            tokens += n
            findings += abs(billed - n) > max(8, 0.02 * billed)
    print(f"records={records} findings={findings} tokens={tokens}")


if __name__ == "__main__":
    main()
