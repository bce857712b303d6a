"""The Ray engine against -n 0 and -n 2, side by side in one run (issue #25).

    python -m benchmarks.ray_engine --size 1024 --repeat 3 --out /tmp/tokaudit-ray-bench

Generates a short-record and a long-record JSONL file of --size MB each (benchmarks/
generate.py, the Kimi contract of kit.py), shards of 32 MiB, and times `pytest --tokaudit`
with -n 0, -n 2 and --tokaudit-engine=ray on a 2-CPU `ray start --head` cluster on
127.0.0.1 that this script starts (its start-up timed apart) and stops (its own process
group only). Also: the per-task overhead (64 one-record files, Ray minus -n 0, per file)
and the summary bytes the tasks return per GB audited (the JSON each item receives).
Rows are interleaved across repeats (drift hits every mode alike); times are medians.
"""

from __future__ import annotations

import argparse
import os
import statistics
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from benchmarks.generate import write_contract_file  # noqa: E402
from benchmarks.kit import CONTRACT_INI, KIMI  # noqa: E402

RAY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "disabled",
           "RAY_USAGE_STATS_ENABLED": "0"}
# Sums the summary JSON each item received (what a Ray task returned), before the
# controller takes it off the report.
BYTES_CONFTEST = """
import os, pytest
TOTAL = [0]

@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if call.when == "call":
        TOTAL[0] += sum(len(v) for k, v in report.user_properties if k == "tokaudit")
    return report

def pytest_sessionfinish(session):
    open(os.path.join(str(session.config.rootpath), "bytes.txt"), "w").write(str(TOTAL[0]))
"""


def start_head() -> tuple[subprocess.Popen, str, float]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    temp = Path(tempfile.mkdtemp(prefix="tkrb", dir="/tmp"))
    log = temp / "head.log"
    t = time.perf_counter()
    head = subprocess.Popen(
        [str(Path(sys.executable).parent / "ray"), "start", "--head", "--block", "--num-cpus", "2",
         "--port", str(port), "--node-ip-address", "127.0.0.1", "--temp-dir", str(temp / "t"),
         "--include-dashboard=false", "--disable-usage-stats"],
        env={**os.environ, **RAY_ENV}, stdout=log.open("wb"), stderr=subprocess.STDOUT,
        start_new_session=True)
    while b"Ray runtime started" not in log.read_bytes():
        if head.poll() is not None:
            sys.exit(log.read_text())
        time.sleep(0.2)
    return head, f"127.0.0.1:{port}", time.perf_counter() - t


def stop_head(head: subprocess.Popen) -> None:
    os.killpg(head.pid, signal.SIGTERM)
    try:
        head.wait(timeout=20)
    except subprocess.TimeoutExpired:  # a loaded machine: the group is killed below
        pass
    time.sleep(1)
    try:
        os.killpg(head.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    head.wait(timeout=10)


def timed(root: Path, *args: str, env: dict | None = None) -> float:
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "pytest", "--tokaudit", "data", "-q", "-p",
                          "no:randomly", "--tokaudit-no-cache", "-p", "no:cacheprovider", *args],
                         cwd=root, env={**os.environ, **(env or {})}, capture_output=True, text=True)
    took = time.perf_counter() - t
    if out.returncode not in (0, 1):
        sys.exit(out.stdout[-3000:] + out.stderr[-3000:])
    return took


def per_item(tiny: Path, one: Path, ray: dict, repeat: int, base: str | None) -> None:
    """The per-item overhead, 64 one-record files against 1, interleaved, medians; with
    `base`, the package found there (PYTHONPATH) is timed too, in the same rounds."""
    codes = {"tree": {}} if base is None else {"tree": {}, "base": {"PYTHONPATH": base}}
    runs: dict[tuple[str, str], list[float]] = {}
    for _ in range(repeat):
        for code, env in codes.items():
            for label, root, args, extra in (("n0 1", one, ("-n", "0"), {}), ("n0 64", tiny, ("-n", "0"), {}),
                                             ("ray 1", one, ("--tokaudit-engine=ray",), ray),
                                             ("ray 64", tiny, ("--tokaudit-engine=ray",), ray)):
                runs.setdefault((code, label), []).append(timed(root, *args, env={**extra, **env}))
    for code in codes:
        m = {label: statistics.median(v) for (c, label), v in runs.items() if c == code}
        print(f"{code}: medians of {repeat}: " + ", ".join(f"{k} {v:.2f} s" for k, v in m.items()))
        print(f"{code}: per-item overhead (64 vs 1 one-record files): -n 0 "
              f"{(m['n0 64'] - m['n0 1']) / 63 * 1e3:.1f} ms, ray {(m['ray 64'] - m['ray 1']) / 63 * 1e3:.1f} ms per item")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=256, help="MB per file")
    parser.add_argument("--out", default="/tmp/tokaudit-ray-bench")
    parser.add_argument("--repeat", type=int, default=3, help="runs per row (median)")
    parser.add_argument("--per-item", action="store_true",
                        help="only the per-item overhead (64 one-record files against 1), no big files")
    parser.add_argument("--base", help="with --per-item: also time the package at this PYTHONPATH "
                        "(e.g. a `git archive REV pytest_tokaudit` extracted there), interleaved")
    args = parser.parse_args()
    out = Path(args.out)
    ini = CONTRACT_INI.format(**KIMI) + "tokaudit_shard_size = 33554432\n"
    for shape, name in (("short", "short"), ("seed", "long")) if not args.per_item else ():
        root = out / name
        data = root / "data" / f"{name}.jsonl"
        if not data.exists():
            data.parent.mkdir(parents=True, exist_ok=True)
            write_contract_file(str(data), n_bytes=args.size << 20, shape=shape)
        (root / "pytest.ini").write_text(ini)
        (root / "conftest.py").write_text(BYTES_CONFTEST)
    tiny, one = out / "tiny", out / "one"
    for root, n in ((tiny, 64), (one, 1)):
        (root / "data").mkdir(parents=True, exist_ok=True)
        (root / "pytest.ini").write_text("[pytest]\n")
        for i in range(n):
            (root / "data" / f"f{i:02d}.jsonl").write_text(
                '{"sample_id": %d, "completion_tokens": 3, "output_ids": [1, 2, 3]}\n' % i)

    head, address, startup = start_head()
    ray = {**RAY_ENV, "RAY_ADDRESS": address}
    try:
        print(f"cluster start-up (ray start --head, 2 CPUs): {startup:.1f} s")
        timed(tiny, "--tokaudit-engine=ray", env=ray)  # the job's first connect and upload
        if args.per_item:
            per_item(tiny, one, ray, args.repeat, args.base)
            return
        print("| file | MB | -n 0 | -n 2 | ray (2 CPUs) | ray vs -n 0 | ray vs -n 2 | summary bytes back per GB |")
        print("|---|---|---|---|---|---|---|---|")
        audit: dict[str, tuple[float, float, float]] = {}
        for name in ("short", "long"):
            root = out / name
            size = (root / "data" / f"{name}.jsonl").stat().st_size
            times: dict[str, list[float]] = {"n0": [], "n2": [], "ray": []}
            for _ in range(args.repeat):
                times["n0"].append(timed(root, "-n", "0"))
                times["n2"].append(timed(root, "-n", "2"))
                times["ray"].append(timed(root, "--tokaudit-engine=ray", env=ray))
            n0, n2, r = (statistics.median(times[k]) for k in ("n0", "n2", "ray"))
            audit[name] = (n0, n2, r)
            back = int((root / "bytes.txt").read_text())
            print(f"| {name} | {size >> 20} | {n0:.1f} s | {n2:.1f} s | {r:.1f} s | {n0 / r:.2f}x "
                  f"| {n2 / r:.2f}x | {back / (size / 1e9) / 1e3:.0f} KB |")
        n0_1, r1 = timed(one, "-n", "0"), timed(one, "--tokaudit-engine=ray", env=ray)
        n2_1 = timed(one, "-n", "2")
        n0_64, r64 = timed(tiny, "-n", "0"), timed(tiny, "--tokaudit-engine=ray", env=ray)
        print(f"per-run cost (1 one-record file): -n 0 {n0_1:.2f} s, -n 2 {n2_1:.2f} s, ray "
              f"{r1:.2f} s (+{r1 - n0_1:.2f} s: connect, ship the package, start and import the workers)")
        print("| file | -n 0 | -n 2 | ray | ray vs -n 0 | ray vs -n 2 |  (each minus its per-run cost)")
        print("|---|---|---|---|---|---|")
        for name, (n0, n2, r) in audit.items():
            a0, a2, ar = n0 - n0_1, n2 - n2_1, r - r1
            print(f"| {name} | {a0:.1f} s | {a2:.1f} s | {ar:.1f} s | {a0 / ar:.2f}x | {a2 / ar:.2f}x |")
        print(f"per-task overhead (64 vs 1 one-record files): -n 0 {(n0_64 - n0_1) / 63 * 1e3:.1f} ms, "
              f"ray {(r64 - r1) / 63 * 1e3:.1f} ms per item")
    finally:
        stop_head(head)
        shutil.rmtree(Path(head.args[head.args.index("--temp-dir") + 1]).parent, ignore_errors=True)


if __name__ == "__main__":
    main()
