"""The bare orjson loop a user writes first (issue #13's reference row, as written there).

    python ref_bare_loop.py FILE

It does not skip local runs or validate each id's type, so its count of bad records is
not the contract's; the harness shows it for the speed, not for the findings. The one
change to the issue's loop: a line it cannot handle (invalid JSON, not an object, ids
null) counts as bad instead of stopping the script.
"""

import sys

import orjson

MARK, END, THINK = 163607, 163586, 163606  # </think>, <|im_end|>, <think>


def main(path):
    n = bad = 0
    with open(path, "rb") as f:
        for line in f:
            try:
                r = orjson.loads(line)
                ids, c = r["output_ids"], r["completion_tokens"]
                n += 1
                if abs(c - len(ids)) > max(8, 0.02 * c) or ids.count(MARK) != 1 or ids[-1] != END or THINK in ids:
                    bad += 1
            except Exception:  # noqa: BLE001 - see the docstring
                bad += 1
    print(f"records={n} bad={bad}")


if __name__ == "__main__":
    main(sys.argv[1])
