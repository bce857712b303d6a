"""Microseconds per record for each step of the fast path, next to orjson.loads.

    python benchmarks/fastpath_profile.py /tmp/tokaudit-bench/500mb.jsonl [--records 2000]

Times each step on the first records of the file (best of 5 passes per record, so a
noisy neighbour inflates less), with the same calls fastids.count_valid makes.
"""

import argparse
import time

import orjson

from pytest_tokaudit.model.fastids import _CLASSES, _mask, count_valid as _count_valid_ids
from pytest_tokaudit.sources.parse import parse_line
from pytest_tokaudit.model.contract import KEYS, Contract
KEY = b'"output_ids"'


def steps(line):
    """Yield (step name, seconds) for one line."""
    clock = time.perf_counter
    t = clock()
    orjson.loads(line)
    yield "orjson.loads, whole line (what the reference pays)", clock() - t
    t = clock()
    start = line.find(b"[", line.find(KEY))
    end = line.find(b"]", start)
    csv = bytearray(memoryview(line)[start : end + 1])
    csv[0] = csv[-1] = 44
    yield "cut the array out (find, copy)", clock() - t
    n = len(csv)
    t = clock()
    classes = csv.translate(_CLASSES)
    b"\xff" in classes
    yield "translate into classes + search for others", clock() - t
    t = clock()
    x = int.from_bytes(classes, "little")
    yield "int.from_bytes", clock() - t
    t = clock()
    pairs = x & (x << 9)
    yield "pairs: x & (x << 9)", clock() - t
    t = clock()
    pairs & _mask(0x02, n)
    yield "empty element (AND)", clock() - t
    t = clock()
    pairs & (pairs << 10) & _mask(0x10, n)
    yield "leading zero (shift, 2 ANDs)", clock() - t
    t = clock()
    runs = pairs & (pairs << 16)
    runs &= runs << 32
    yield "8-digit runs (2 shifts, 2 ANDs)", clock() - t
    t = clock()
    2 * n - x.bit_count() // 2
    yield "comma count (popcount)", clock() - t
    t = clock()
    csv.find(b",16360")
    yield "token scan (one find over the array)", clock() - t
    t = clock()
    _count_valid_ids(csv)
    yield "= _count_valid_ids as one call", clock() - t
    t = clock()
    parse_line(line, 1, CONTRACT)
    yield "= parse_line, fast path (all of it)", clock() - t


CONTRACT = Contract(**{k.attr: k.parse(k.default) for k in KEYS})


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file")
    ap.add_argument("--records", type=int, default=2000)
    args = ap.parse_args()
    lines = []
    with open(args.file, "rb") as f:
        for line in f:
            line = line.strip()
            try:
                ok = isinstance(orjson.loads(line).get("output_ids"), list)
            except (orjson.JSONDecodeError, AttributeError):
                ok = False
            if ok and b'"output_ids":[' in line:
                lines.append(line)
            if len(lines) == args.records:
                break
    best = {}
    for _ in range(5):
        for i, line in enumerate(lines):
            for name, s in steps(line):
                key = (name, i)
                best[key] = min(best.get(key, s), s)
    names = list(dict.fromkeys(name for name, _ in best))
    size = sum(map(len, lines)) / len(lines)
    print(f"{len(lines)} records, {size / 1e3:.1f} KB each on average\n")
    print("| step | µs per record |\n|---|---|")
    for name in names:
        total = sum(v for (n, _), v in best.items() if n == name)
        print(f"| {name} | {total / len(lines) * 1e6:.1f} |")


if __name__ == "__main__":
    main()
