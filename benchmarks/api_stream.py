"""The public API's streaming audit of in-memory records vs a bare loop over the same records.

    python benchmarks/api_stream.py [--records 20000] [--repeat 5]

Issue #32's target: `api.audit_records` over dicts already in memory (what a generation loop
holds) at least as fast as the loop a user would write instead, dicts in, findings out: the
count rule (`abs(billed - len(ids)) > max(abs, rel * billed)`) plus the structure checks (one
`</think>`, the last token `<|im_end|>`, no `<think>`). Short records (~220 ids) and long
ones (~2,600 ids), 2% of them off by 40 tokens and 1% without their last token. The API runs
with every built-in check the contract turns on (the same contract as the bare loop's) and
`batch=1` over an iterator (each record checked as it comes, as a generation loop needs) and
over the list itself (the default for records in memory: api.AUTO_BATCH at a time).
Each variant runs in this process, interleaved with the others `--repeat` times; medians of
CPU seconds (process_time) and of wall seconds. Prints one JSON object per row, and the
ratio `bare / api` (>= 1.0 means the target is met).
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import time
from typing import Any, Callable

from pytest_tokaudit import api

ONCE, LAST, FORBID = 151668, 151645, 151667  # </think>, <|im_end|>, <think> (Qwen3)
ABS, REL = 8, 0.02


def make_records(n: int, mean_ids: int, seed: int = 32) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        k = max(4, int(rng.gauss(mean_ids, mean_ids / 5)))
        body = [rng.randrange(1000, 150000) for _ in range(k - 2)]
        cut = rng.randrange(len(body))
        ids = body[:cut] + [ONCE] + body[cut:] + [LAST]
        billed = len(ids)
        r = rng.random()
        if r < 0.02:
            billed += 40
        elif r < 0.03:
            ids.pop()
        out.append({"sample_id": f"s{i}", "completion_tokens": billed, "output_ids": ids})
    return out


def bare(records: list[dict[str, Any]]) -> int:
    """What a user would write: the count rule and the structure checks, findings as tuples."""
    found = []
    for r in records:
        ids, billed = r["output_ids"], r["completion_tokens"]
        n = len(ids)
        if abs(billed - n) > max(ABS, REL * billed):
            found.append((r["sample_id"], "count", billed, n))
        if ids.count(ONCE) != 1:
            found.append((r["sample_id"], "require_once", billed, n))
        if not ids or ids[-1] != LAST:
            found.append((r["sample_id"], "require_last", billed, n))
        if FORBID in ids:
            found.append((r["sample_id"], "forbid", billed, n))
    return len(found)


CONTRACT = api.Contract.from_dict({
    "tokaudit_count_abs": ABS, "tokaudit_count_rel": REL, "tokaudit_require_once": str(ONCE),
    "tokaudit_require_last": str(LAST), "tokaudit_forbid": str(FORBID),
    "tokaudit_count_outliers": "100%", "tokaudit_count_mean_rel": "",
})


def through_api(batch: int | None) -> Callable[[list[dict[str, Any]]], int]:
    """The API over the list as given (batch None: its default for a list), or, with a
    batch, over an iterator of it (a stream: the default for one is batch=1)."""
    def run(records: list[dict[str, Any]]) -> int:
        given: Any = records if batch is None else iter(records)
        return sum(f.line is not None for f in api.audit_records(CONTRACT, given, batch=batch))
    return run


def timed(fn: Callable[[list[dict[str, Any]]], int], records: list[dict[str, Any]]) -> tuple[float, float, int]:
    gc.collect()
    cpu, wall = time.process_time(), time.perf_counter()
    found = fn(records)
    return time.process_time() - cpu, time.perf_counter() - wall, found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    variants = {"bare loop": bare, "api stream batch=1": through_api(1),
                "api list (default batch)": through_api(None)}
    for label, mean_ids in (("short", 220), ("long", 2600)):
        n = args.records if mean_ids < 1000 else max(1, args.records // 10)
        records = make_records(n, mean_ids)
        times: dict[str, list[tuple[float, float]]] = {v: [] for v in variants}
        counts: dict[str, int] = {}
        for _ in range(args.repeat):  # interleaved: drift of the machine hits all alike
            for name, fn in variants.items():
                cpu, wall, found = timed(fn, records)
                times[name].append((cpu, wall))
                counts[name] = found
        assert len(set(counts.values())) == 1, counts  # the same findings, or no comparison
        base = statistics.median(c for c, _ in times["bare loop"])
        for name, runs in times.items():
            cpu = statistics.median(c for c, _ in runs)
            print(json.dumps({
                "records": label, "n": n, "variant": name, "findings": counts[name],
                "cpu_s": round(cpu, 4), "wall_s": round(statistics.median(w for _, w in runs), 4),
                "us_per_record": round(cpu / n * 1e6, 2), "bare_over_this": round(base / cpu, 3),
            }))


if __name__ == "__main__":
    main()
