"""Reference audit: a bare orjson line loop with the tokaudit contract.

    python ref_orjson_loop.py FILE [--once ID --last ID --forbid ID]

Prints one line of key=value pairs; `findings` counts records that break any
check, plus 1 if the file's mean relative count error is over 0.5%.
"""

import argparse

import orjson

ONCE, LAST, FORBID = 163607, 163586, 163606  # </think>, <|im_end|>, <think>


def check(rec, once=ONCE, last=LAST, forbid=FORBID):
    """Check one parsed line.

    Returns None for a skipped (local) record, else (bad, ids, billed) where
    ids/billed are None unless well-typed (they feed the per-file mean).
    """
    if type(rec) is not dict:
        return True, None, None
    if not rec.get("provider"):
        return None
    ids = rec.get("output_ids")
    billed = rec.get("completion_tokens")
    # C-speed type check: one pass of map(type), no per-id Python bytecode.
    if type(ids) is not list or (ids and (set(map(type, ids)) != {int} or min(ids) < 0)):
        ids = None
    if type(billed) is not int or billed < 0:
        billed = None
    if ids is None or billed is None:
        return True, ids, billed
    diff = abs(billed - len(ids))
    # Integer form of diff > max(8, 0.02 * billed): no float rounding at the edge.
    bad = (
        (diff > 8 and 50 * diff > billed)
        or ids.count(once) != 1
        or not ids
        or ids[-1] != last
        or forbid in ids
    )
    return bad, ids, billed


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("file")
    ap.add_argument("--once", type=int, default=ONCE)
    ap.add_argument("--last", type=int, default=LAST)
    ap.add_argument("--forbid", type=int, default=FORBID)
    a = ap.parse_args()

    records = checked = findings = sum_diff = sum_billed = 0
    with open(a.file, "rb") as f:
        for line in f:
            records += 1
            try:
                rec = orjson.loads(line)
            except orjson.JSONDecodeError:
                findings += 1
                checked += 1
                continue
            res = check(rec, a.once, a.last, a.forbid)
            if res is None:
                continue
            checked += 1
            bad, ids, billed = res
            findings += bad
            if ids is not None and billed is not None:
                sum_diff += abs(billed - len(ids))
                sum_billed += billed
    file_bad = sum_diff * 200 > sum_billed  # mean |diff| / mean billed > 0.5%
    mean_rel = sum_diff / sum_billed if sum_billed else 0.0
    print(f"records={records} checked={checked} findings={findings + file_bad} mean_rel={mean_rel:.5f}")


if __name__ == "__main__":
    main()
