"""Where the wall time of `pytest --tokaudit -n N` goes: one timeline per process.

    python -m benchmarks.xdist_profile FILE [-n 0,2] [--ini PATH]
    python -m benchmarks.xdist_profile "$(python benchmarks/generate.py --kind short --size medium)"

Each run loads a small timing plugin (through PYTEST_PLUGINS, so xdist workers load it
too) that notes, per process, when it started, when pytest was configured, when its test
loop began and ended, when it exited, and its CPU time. Seconds are relative to the
start of the pytest command. The contract is the kit's (benchmarks/kit.py: that of the
generated files), unless --ini names another pytest.ini.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

PLUGIN = '''
import json, os, time
import pytest

_marks = {}


def _started():
    """This process's start, in epoch seconds (from /proc, 10 ms resolution)."""
    with open("/proc/self/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as f:
        uptime = float(f.read().split()[0])
    return time.time() - (uptime - ticks / os.sysconf("SC_CLK_TCK"))


def pytest_configure(config):
    _marks["role"] = "worker " + config.workerinput["workerid"] if hasattr(config, "workerinput") else "controller"
    _marks["configured"] = time.time()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    start, cpu = time.time(), time.process_time()
    try:
        return (yield)
    finally:
        _marks.setdefault("items", []).append(
            [item.nodeid.rsplit("::", 1)[-1], start, time.time(), time.process_time() - cpu])


@pytest.hookimpl(wrapper=True)
def pytest_runtest_logreport(report):
    # The controller's share of each report (summary read, ids folded): on its critical path.
    cpu = time.process_time()
    try:
        return (yield)
    finally:
        _marks["reports cpu"] = _marks.get("reports cpu", 0.0) + time.process_time() - cpu


@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session):
    _marks["loop start"] = time.time()
    try:
        return (yield)
    finally:
        _marks["loop end"] = time.time()


def pytest_unconfigure(config):
    t = os.times()
    _marks.update(start=_started(), exit=time.time(), cpu=t.user + t.system)
    with open(os.environ["TOKAUDIT_TIMING_LOG"], "a") as f:
        f.write(json.dumps(_marks) + "\\n")
'''


def run(path, n, ini, work):
    log = os.path.join(work, f"n{n}.jsonl")
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    env.update(PYTHONPATH=os.pathsep.join(filter(None, [work, env.get("PYTHONPATH")])),
               PYTEST_PLUGINS="tokaudit_timing", TOKAUDIT_TIMING_LOG=log)
    cmd = [sys.executable, "-m", "pytest", "--tokaudit", path, "-n", n, "-c", ini,
           "--rootdir", os.path.dirname(ini), "-q", "-p", "no:cacheprovider",
           "-p", "no:hypothesispytest", "-p", "no:randomly"]
    t0 = time.time()
    rc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE).returncode
    wall = time.time() - t0
    if rc not in (0, 1):
        sys.exit(f"-n {n}: pytest exited {rc}")
    with open(log) as f:
        procs = sorted((json.loads(l) for l in f), key=lambda p: p["role"])
    print(f"\n### -n {n}: {wall:.2f} s wall, {sum(p['cpu'] for p in procs):.2f} s CPU\n")
    cols = ["start", "configured", "loop start", "loop end", "exit"]
    print("| process | " + " | ".join(cols) + " | CPU s |")
    print("|---|" + "---|" * len(cols) + "---|")
    for p in procs:
        at = " | ".join(f"{p[c] - t0:.2f}" for c in cols)
        print(f"| {p['role']} | {at} | {p['cpu']:.2f} |")
    print("\nitems (seconds from the start; CPU s of the item):\n")
    for p in procs:
        items = p.get("items", [])
        busy = sum(end - start for _, start, end, _ in items)
        span = p["loop end"] - p["loop start"]
        print(f"- {p['role']}: {len(items)} items, busy {busy:.2f} s of its loop's "
              f"{span:.2f} s (idle {span - busy:.2f} s)"
              + (f"; reports handled in {p['reports cpu']:.2f} s CPU" if "reports cpu" in p else ""))
        for name, start, end, cpu in items:
            print(f"    {start - t0:6.2f} - {end - t0:6.2f}  {cpu:5.2f}  {name}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file")
    ap.add_argument("-n", default="0,2", help="comma list of -n values")
    ap.add_argument("--ini", help="pytest.ini with the contract (default: the kit's)")
    args = ap.parse_args()
    path = os.path.abspath(args.file)
    with tempfile.TemporaryDirectory() as work:
        ini = args.ini
        if not ini:
            from benchmarks.kit import CONTRACT_INI, KIMI

            os.makedirs(os.path.join(work, "contract"))
            ini = os.path.join(work, "contract", "pytest.ini")
            with open(ini, "w") as f:
                f.write(CONTRACT_INI.format(**KIMI))
        with open(os.path.join(work, "tokaudit_timing.py"), "w") as f:
            f.write(PLUGIN)
        for n in args.n.split(","):
            run(path, n, ini, work)


if __name__ == "__main__":
    main()
