"""The bare orjson loop a user writes first (issue #13's reference row, as written there).

    python ref_bare_loop.py FILE [--processes N]

It does not skip local runs or validate each id's type, so its count of bad records is
not the contract's; the harness shows it for the speed, not for the findings. The one
change to the issue's loop: a line it cannot handle (invalid JSON, not an object, ids
null) counts as bad instead of stopping the script.

--processes N runs the same loop in N processes, each on its own byte range of the file
(cut at newlines): what two cores can give a pure-Python loop on this machine, the ceiling
to read `pytest -n 2` against.
"""

import argparse
import os
from concurrent.futures import ProcessPoolExecutor

import orjson

MARK, END, THINK = 163607, 163586, 163606  # </think>, <|im_end|>, <think>


def loop(path, start=0, end=None):
    """(records, bad) over the lines that start in [start, end)."""
    n = bad = 0
    with open(path, "rb") as f:
        if start:
            f.seek(start - 1)
            f.readline()  # the line straddling `start` belongs to the range before
        at = f.tell()
        for line in f:
            if end is not None and at >= end:
                break
            at += len(line)
            try:
                r = orjson.loads(line)
                ids, c = r["output_ids"], r["completion_tokens"]
                n += 1
                if abs(c - len(ids)) > max(8, 0.02 * c) or ids.count(MARK) != 1 or ids[-1] != END or THINK in ids:
                    bad += 1
            except Exception:  # noqa: BLE001 - see the docstring
                bad += 1
    return n, bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("--processes", type=int, default=1)
    args = ap.parse_args()
    if args.processes == 1:
        n, bad = loop(args.path)
    else:
        size = os.path.getsize(args.path)
        cuts = [size * i // args.processes for i in range(args.processes + 1)]
        with ProcessPoolExecutor(args.processes) as pool:
            parts = list(pool.map(loop, [args.path] * args.processes, cuts[:-1], cuts[1:]))
        n, bad = sum(p[0] for p in parts), sum(p[1] for p in parts)
    print(f"records={n} bad={bad}")


if __name__ == "__main__":
    main()
