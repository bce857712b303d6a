"""What one appended line costs an incremental run, side by side with a cold run.

    python benchmarks/appends.py /tmp/tokaudit-bench/large.jsonl [--repeat 3]

The file is copied into a scratch folder (the original is never written). A priming run
fills the cache (tokaudit_cache_dir); then each repeat appends one line (a copy of the
file's last line) and times a run with the cache, `-n 0` and `-n 2`, reading from the
run's JSON report how many audit items were audited again and how many reused. The
reference is a cold run (`--tokaudit-no-cache`): what every append cost while the shard
boundaries moved with the file's size. Rows are interleaved; times are medians.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import run as bench  # noqa: E402  (the shared runner: run_once, pytest_cmd, tables)


def last_line(path: str) -> bytes:
    with open(path, "rb") as fh:
        fh.seek(max(os.path.getsize(path) - (1 << 20), 0))
        return fh.read().rstrip(b"\n").rsplit(b"\n", 1)[-1] + b"\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file", help="a JSONL file (generate.py --size large)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--shard-size", type=int, default=128 * 2**20)
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--work", help="scratch folder (default: a temporary one next to the file)")
    args = ap.parse_args()
    bench.PYTEST_OPTS.extend(["-p", "no:hypothesispytest", "-p", "no:randomly"])

    work = args.work or tempfile.mkdtemp(prefix="appends-", dir=os.path.dirname(os.path.abspath(args.file)))
    data = os.path.join(work, "data", os.path.basename(args.file))
    os.makedirs(os.path.dirname(data), exist_ok=True)
    shutil.copyfile(args.file, data)
    line = last_line(data)
    contract = bench.CONTRACT_INI.format(**bench.KIMI) + f"tokaudit_shard_size = {args.shard_size}\n"
    ini = bench.write(os.path.join(work, "pytest.ini"),
                      contract + f"tokaudit_cache_dir = {os.path.join(work, 'cache')}\n")
    env = bench.child_env()

    def run(*extra: str) -> dict:
        report = os.path.join(work, "audit.json")
        r = bench.run_once(bench.pytest_cmd(ini, "--tokaudit", data, f"--tokaudit-json={report}", *extra),
                           work, env, args.timeout)
        if r["rc"] not in (0, 1):
            sys.exit(f"pytest exited {r['rc']}: {r['err'][-2000:] or r['out'][-2000:]}")
        cache = json.load(open(report))["cache"]
        r["audited"], r["reused"] = len(cache["audited"]), len(cache["items"])
        return r

    def append() -> None:
        with open(data, "ab") as fh:
            fh.write(line)

    run("-n", "0")  # prime: every item's result stored
    rows: dict[str, list[dict]] = {k: [] for k in (
        "cold -n 0 (--tokaudit-no-cache, ref)", "warm -n 0, unchanged",
        "warm -n 0, one line appended", "warm -n 2, one line appended")}
    for _ in range(args.repeat):
        rows["cold -n 0 (--tokaudit-no-cache, ref)"].append(run("-n", "0", "--tokaudit-no-cache"))
        rows["warm -n 0, unchanged"].append(run("-n", "0"))
        append()
        rows["warm -n 0, one line appended"].append(run("-n", "0"))
        append()
        rows["warm -n 2, one line appended"].append(run("-n", "2"))

    size = os.path.getsize(data)
    ref = statistics.median(r["wall"] for r in rows["cold -n 0 (--tokaudit-no-cache, ref)"])
    out = []
    for name, rs in rows.items():
        wall = statistics.median(r["wall"] for r in rs)
        cpu = statistics.median(r["cpu"] for r in rs)
        audited = max(r["audited"] for r in rs)
        items = rs[-1]["audited"] + rs[-1]["reused"]
        out.append([name, f"{wall:.2f}", f"{cpu:.2f}", f"{wall / ref:.2f}", f"{audited} of {items}"])
    bench.table(f"appends: {os.path.basename(args.file)}, {size / 1e6:,.1f} MB, shard size "
                f"{args.shard_size / 2**20:g} MiB, medians of {args.repeat}",
                ["row", "median s", "CPU s", "time ÷ cold", "items audited (most of any repeat)"], out)
    if not args.work:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
