"""The audit script people write today: stdlib json, a line loop, plain checks.

    python ref_stdlib_json.py FILE

Same contract and output as ref_orjson_loop.py, written the obvious way.
"""

import json
import sys

ONCE, LAST, FORBID = 163607, 163586, 163606


def is_count(x):
    # bool is a subclass of int; JSON true is not a token count.
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def main():
    records = checked = findings = sum_diff = sum_billed = 0
    with open(sys.argv[1], encoding="utf-8") as f:
        for line in f:
            records += 1
            try:
                rec = json.loads(line)
            except ValueError:
                findings += 1
                checked += 1
                continue
            if not isinstance(rec, dict):
                findings += 1
                checked += 1
                continue
            if not rec.get("provider"):
                continue
            checked += 1
            ids = rec.get("output_ids")
            billed = rec.get("completion_tokens")
            ids_ok = isinstance(ids, list) and all(is_count(t) for t in ids)
            billed_ok = is_count(billed)
            if not (ids_ok and billed_ok):
                findings += 1
                continue
            diff = abs(billed - len(ids))
            sum_diff += diff
            sum_billed += billed
            if (
                (diff > 8 and 50 * diff > billed)  # diff > max(8, 2% of billed)
                or ids.count(ONCE) != 1
                or not ids
                or ids[-1] != LAST
                or FORBID in ids
            ):
                findings += 1
    file_bad = sum_diff * 200 > sum_billed  # mean |diff| / mean billed > 0.5%
    mean_rel = sum_diff / sum_billed if sum_billed else 0.0
    print(f"records={records} checked={checked} findings={findings + file_bad} mean_rel={mean_rel:.5f}")


if __name__ == "__main__":
    main()
