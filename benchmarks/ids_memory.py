"""Memory and fold time of the record-id index, per id.

    python benchmarks/ids_memory.py [--ids 1000000] [--shards 4] [--kinds int,str,...]

Folds N ids, in `--shards` summaries as the controller receives them, into an IdIndex and
prints the bytes per id it keeps (tracemalloc: the index's own allocations, not the
summaries'), the peak while folding, and the best CPU time of three folds without
tracemalloc. Kinds of ids:

- int: 0..N-1 in order; intshuf: the same, shuffled within each summary
- str: "sample-000000".. in order; strshuf: the same, shuffled
- uuid: random UUIDs (no exact key: hashed)

Run it on an older checkout (PYTHONPATH=that/checkout) to compare: before ids.py the index
lived in dataset.py.
"""

from __future__ import annotations

import argparse
import gc
import random
import time
import tracemalloc
import uuid
from types import SimpleNamespace

try:
    from pytest_tokaudit.checks.ids import IdIndex
except ImportError:  # before the index had its own module
    from pytest_tokaudit.checks.ids import IdIndex
def summaries(kind: str, n: int, shards: int) -> list[SimpleNamespace]:
    rnd = random.Random(5)
    per = n // shards
    out = []
    for s in range(shards):
        r = range(s * per, (s + 1) * per)
        if kind.startswith("int"):
            ids = list(r)
        elif kind.startswith("str"):
            ids = [f"sample-{i:06d}" for i in r]
        elif kind == "uuid":
            ids = [str(uuid.UUID(int=rnd.getrandbits(128))) for _ in r]
        else:
            raise SystemExit(f"unknown kind {kind}")
        if kind.endswith("shuf"):
            rnd.shuffle(ids)
        lines = list(range(1, per + 1))
        # As the controller receives a shard's summary: its ids channel (summary.IDS).
        out.append(SimpleNamespace(path="data/x.jsonl", shard=s, ids=ids, id_lines=lines,
                                   channels={"ids": [[s, ids, lines]]}))
    return out


def fold(parts: list[SimpleNamespace]) -> IdIndex:
    index = IdIndex()
    for part in parts:
        index.add(part)
    len(index)
    return index


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ids", type=int, default=1_000_000)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--kinds", default="int,intshuf,str,strshuf,uuid")
    args = parser.parse_args()
    n = args.ids
    print(f"{'ids':8} {'B/id kept':>10} {'B/id peak':>10} {'fold CPU s':>11}  (best of 3)")
    for kind in args.kinds.split(","):
        parts = summaries(kind, n, args.shards)
        gc.collect()
        tracemalloc.start()
        index = fold(parts)
        kept, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert len(index) == n, (kind, len(index))
        del index
        best = float("inf")
        for _ in range(3):
            gc.collect()
            start = time.process_time()
            fold(parts)
            best = min(best, time.process_time() - start)
        print(f"{kind:8} {kept / n:10.1f} {peak / n:10.1f} {best:11.2f}", flush=True)


if __name__ == "__main__":
    main()
