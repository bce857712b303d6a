"""Start-up without a tokenizer: pytest with the plugin against pytest without it.

    python benchmarks/startup.py [--repeat 15]

Two commands, each with and without the plugin (`-p no:tokaudit`), interleaved, every run
a fresh process: `pytest --version` (plugins loaded, nothing else) and `pytest
--collect-only -q` of a small tests directory (3 files, 30 tests; the audit is off). The
environment is taken as installed: every other plugin loads in both columns. Besides wall
time it reports CPU time (user + system of the child), which a loaded machine disturbs less.
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=15)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="tokaudit-startup-")
    with open(os.path.join(work, "pytest.ini"), "w") as f:
        f.write("[pytest]\naddopts = -p no:cacheprovider\n")
    for k in range(3):
        with open(os.path.join(work, f"test_small_{k}.py"), "w") as f:
            f.write("".join(f"def test_{i}():\n    assert {i} + 1 > {i}\n\n" for i in range(10)))
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    commands = {"pytest --version": ["--version"], "pytest --collect-only -q (30 tests)": ["--collect-only", "-q"]}
    times = {(name, off): [] for name in commands for off in (False, True)}
    cpu = {key: [] for key in times}
    for _ in range(a.repeat):
        for (name, off), runs in times.items():
            cmd = [sys.executable, "-m", "pytest", *commands[name], *(["-p", "no:tokaudit"] if off else [])]
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            subprocess.run(cmd, cwd=work, env=env, check=True, capture_output=True)
            runs.append(time.perf_counter() - t0)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[name, off].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    print(f"load average {os.getloadavg()[0]:.2f}; medians of {a.repeat}\n")
    print("| command | with tokaudit s | -p no:tokaudit s | ratio | CPU with s | CPU without s | CPU ratio |")
    print("|---|---|---|---|---|---|---|")
    for name in commands:
        on, off = statistics.median(times[name, False]), statistics.median(times[name, True])
        con, coff = statistics.median(cpu[name, False]), statistics.median(cpu[name, True])
        print(f"| {name} | {on:.3f} | {off:.3f} | {on / off:.3f} | {con:.3f} | {coff:.3f} | {con / coff:.3f} |")


if __name__ == "__main__":
    main()
