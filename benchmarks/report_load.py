"""Time and memory to load a JSON report whose ids are packed runs (a baseline, merge).

    python benchmarks/report_load.py [--ids 5000000] [--repeat 5]

Writes a report of one file claiming `--ids` record ids as one packed run (a few KB), then
loads it `--repeat` times each way, `load(path, ids=False)` (a baseline) and
`load(path, ids=True)` (merge, the id index), in a fresh process each time, and prints the
best and median wall time and the peak RSS. The loader that expanded the runs took 3.5 s and
1 GB for 5M ids; packed, it is a moment. The suite asserts the behaviour (the run stays one
run, memory stays under 200 MB: tests/model/test_report.py), not the time: a shared CI
runner's time says little.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = '''
import re, sys, time
from pathlib import Path
from pytest_tokaudit.sources.reports import load
started = time.perf_counter()
load(sys.argv[1], ids=sys.argv[2] == "ids")
took = time.perf_counter() - started
peak = int(re.search(r"VmHWM:\\s+(\\d+) kB", Path("/proc/self/status").read_text())[1]) * 1024
print(took, peak)
'''


def report(n: int, tmp: Path) -> dict:
    """A real report (pytest --tokaudit-json over three records), its file then claiming `n`
    records with ids 1..n on lines 1..n, packed (as tests/model/test_report.py does)."""
    (tmp / "data").mkdir()
    (tmp / "pytest.ini").write_text("[pytest]\ntokaudit_unique_ids = true\n")
    (tmp / "data" / "a.jsonl").write_text("".join(
        json.dumps({"sample_id": i, "completion_tokens": 2, "output_ids": [5, 6]}) + "\n"
        for i in (1, 2, 3)))
    subprocess.run([sys.executable, "-m", "pytest", "--tokaudit", "data", "-p", "no:xdist", "-q",
                    "--tokaudit-json=r.json"], cwd=tmp, check=True, capture_output=True)
    data = json.loads((tmp / "r.json").read_text())
    f = data["files"][0]
    f["channels"]["ids"] = [[None, [{"from": 1, "n": n}], [{"from": 1, "n": n}]]]
    for key in ("records", "lines", "audited", "checked"):
        f[key] = n
    return dict(data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ids", type=int, default=5_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--report", type=Path, help="load this report instead of writing one")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.report or Path(tmp, "big.json")
        if args.report is None:
            path.write_text(json.dumps(report(args.ids, Path(tmp))))
        for mode in ("baseline", "ids"):
            runs = []
            for _ in range(args.repeat):
                out = subprocess.run([sys.executable, "-c", CHILD, str(path), mode], check=True,
                                     capture_output=True, text=True).stdout.split()
                runs.append((float(out[0]), int(out[1])))
            times = [t for t, _ in runs]
            print(f"{mode:8} best {min(times) * 1000:8.1f} ms  median {statistics.median(times) * 1000:8.1f} ms"
                  f"  peak RSS {max(p for _, p in runs) / 2**20:6.1f} MiB  ({path.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
