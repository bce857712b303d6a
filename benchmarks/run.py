"""Time the benchmark cases side by side and write the results as JSON.

    python -m benchmarks.run                         # every case, --size medium, medians of 3
    python -m benchmarks.run --size small --cases short,long --repeat 5
    python -m benchmarks.run --compare main          # the working tree against a commit, same run
    nox -s bench -- --compare HEAD~3                 # the same in the lean environment

Every row is its own process (wall and CPU seconds of the whole process, its children
included: xdist's workers), rows interleaved (A B C, A B C, ...) so drift on a shared machine
hits them alike; a row's numbers are medians of its runs and its ratio is the speed-up of
the reference's median over its own (above 1: faster than the reference). Each row that runs
the package is primed by one untimed run (pytest caches the plugins' rewritten code), and
every data file is read once before timing (warm page cache).

--compare REV extracts the package of REV (`git archive REV pytest_tokaudit`) into a scratch
folder and runs every plugin row twice per round, once per code (PYTHONPATH), with the same
installed dependencies: `vs_base` is the base's median over the working tree's.

--dry: a check that the kit works, not a measurement: no priming run, and the JSON says
`"dry": true` (benchmarks/table.py will not put it in the docs).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from benchmarks import generate
from benchmarks.kit import HERE, ROOT, Case, Context, Row, Skip, child_env, findings, run_once

VERSIONS = ("pytest-tokaudit", "pytest", "pytest-xdist", "pluggy", "orjson", "pysimdjson", "numpy",
            "pyarrow", "duckdb", "tokenizers", "transformers", "zstandard")


def discover() -> dict:
    """name -> case function, from every benchmarks/cases_*.py module's CASES, in file order."""
    found: dict = {}
    for path in sorted(HERE.glob("cases_*.py")):
        module = importlib.import_module(f"benchmarks.{path.stem}")
        for name, make in getattr(module, "CASES", {}).items():
            if name in found:
                raise SystemExit(f"case {name!r} is defined twice ({path.name})")
            found[name] = make
    return found


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True,
                          check=True).stdout.strip()


def extract(rev: str, into: Path) -> str:
    """The package of `rev` under `into`; return the commit's full hash."""
    sha = git("rev-parse", "--verify", f"{rev}^{{commit}}")
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", sha, "pytest_tokaudit"],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return sha


def imported_from(python: str, pythonpath: str, cwd: Path) -> str:
    """Where this interpreter imports the package from with this PYTHONPATH, from a folder
    outside the repository as the rows run (a sanity check)."""
    r = subprocess.run([python, "-c", "import pytest_tokaudit; print(pytest_tokaudit.__file__)"],
                       capture_output=True, text=True, env=child_env(pythonpath, {}), cwd=cwd)
    return r.stdout.strip() or r.stderr.strip()[-300:]


def versions() -> dict:
    out = {}
    for name in VERSIONS:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            pass
    return out


def read_once(path: str) -> None:
    with open(path, "rb") as f:
        while f.read(16 << 20):
            pass


class Timed:
    """A row as run under one code (the working tree, or the --compare base)."""

    def __init__(self, case: Case, row: Row, code: str, pythonpath: str):
        self.case, self.row, self.code, self.pythonpath = case, row, code, pythonpath
        self.argv = [a.replace("{code}", code) for a in row.argv]
        self.runs: list[dict] = []
        self.error: str | None = None
        self.found: str | None = None

    @property
    def label(self) -> str:
        return self.row.name if self.code == "tree" else f"{self.row.name} @base"

    def run(self, timeout: float, record: bool = True) -> None:
        if self.error:
            return  # failed once: do not spend the other rounds on it
        r = run_once(self.argv, self.row.cwd, child_env(self.pythonpath, self.row.env), timeout)
        if r["rc"] not in self.row.ok_codes:
            tail = (r["err"].strip() or r["out"].strip())[-600:]
            self.error = f"exit {r['rc']}: {tail}"
            return
        if record:
            self.runs.append(r)
            self.found = findings(self.row.findings, r)

    def median(self, key: str) -> float | None:
        return statistics.median(r[key] for r in self.runs) if self.runs else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="medium",
                    help=f"data size: {', '.join(generate.SIZES)} or MB of the contract files (default medium)")
    ap.add_argument("--repeat", type=int, default=3, help="rounds; each row's numbers are medians (default 3)")
    ap.add_argument("--cases", help="comma list of cases (default: all; --list shows them)")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    ap.add_argument("--compare", metavar="REV", help="also time the package of this commit, interleaved")
    ap.add_argument("--data", default=generate.default_data_dir(), help="the generated data's cache folder")
    ap.add_argument("--json", help="results file (default: DATA/results/bench-DATE.json)")
    ap.add_argument("--tokenizer", help="tokenizer directory of the tokenizer cases (default: Qwen3's)")
    ap.add_argument("--seed", type=int, default=0, help="data generator seed")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per run before it is killed")
    ap.add_argument("--dry", action="store_true", help="check the kit: no priming, results marked dry")
    args = ap.parse_args(argv)

    known = discover()
    if args.list:
        for name, make in known.items():
            print(f"{name:12} {sys.modules[make.__module__].__name__}")
        return 0
    chosen = args.cases.split(",") if args.cases else list(known)
    unknown = [c for c in chosen if c not in known]
    if unknown:
        ap.error(f"unknown case(s) {', '.join(unknown)}: one of {', '.join(known)}")
    if args.size not in generate.SIZES:
        try:
            float(args.size)
        except ValueError:
            ap.error(f"--size: one of {', '.join(generate.SIZES)} or a number of MB")

    work = Path(tempfile.mkdtemp(prefix="tokaudit-bench-"))
    ctx = Context(size=args.size, data=Path(args.data), work=work, tokenizer=args.tokenizer, seed=args.seed)
    started = time.time()
    codes = {"tree": str(ROOT)}
    compare = None
    if args.compare:
        sha = extract(args.compare, work / "base")
        codes["base"] = str(work / "base")
        compare = {"rev": args.compare, "sha": sha}

    cases: list[Case] = []
    skipped = {}
    for name in chosen:
        try:
            print(f"preparing {name} ...", file=sys.stderr, flush=True)
            cases.append(known[name](ctx))
        except Skip as e:
            skipped[name] = str(e)
            print(f"  skipped: {e}", file=sys.stderr)
    timed: list[Timed] = []
    for case in cases:
        for row in case.rows:
            for code, path in codes.items():
                if code == "tree" or row.plugin:
                    timed.append(Timed(case, row, code, path))
    sources = {code: imported_from(ctx.python, path, work) for code, path in codes.items()}
    for code, path in codes.items():
        if not sources[code].startswith(path):
            print(f"WARNING: the {code} rows import pytest_tokaudit from {sources[code]}, not {path}",
                  file=sys.stderr)

    for case in cases:
        if "file" in case.input and (ctx.data / case.input["file"]).is_file():
            read_once(str(ctx.data / case.input["file"]))
    load_before = os.getloadavg()
    if not args.dry:
        for t in timed:
            if t.row.plugin:
                t.run(args.timeout, record=False)
    for round_ in range(args.repeat):
        print(f"round {round_ + 1} of {args.repeat} ...", file=sys.stderr, flush=True)
        for case in cases:
            rows = [t for t in timed if t.case is case]
            for _ in range(1 if args.dry else case.repeat):
                for t in rows:
                    t.run(args.timeout)
    load_after = os.getloadavg()

    results = []
    for t in timed:
        against_name = t.row.against or t.case.ref
        against = next((o for o in timed if o.case is t.case and o.row.name == against_name
                        and o.code == (t.code if o.row.plugin else "tree")), None)
        wall, cpu = t.median("wall"), t.median("cpu")
        row = {
            "name": t.row.name, "case": t.case.name, "size": t.case.size, "code": t.code,
            "wall_s": _round(wall), "cpu_s": _round(cpu),
            "walls": [_round(r["wall"]) for r in t.runs], "cpus": [_round(r["cpu"]) for r in t.runs],
            "rss_mib": _round(max((r["rss"] for r in t.runs), default=None), 0),
            "n": len(t.runs), "ref": against_name, "is_ref": against is t,
            "ratio": _ratio(against and against.median("wall"), wall),
            "ratio_cpu": _ratio(against and against.median("cpu"), cpu),
            "findings": t.found, "error": t.error, "input": t.case.input,
            "command": t.argv, "env": t.row.env,
        }
        if t.code == "tree" and compare and t.row.plugin:
            base = next(o for o in timed if o.case is t.case and o.row is t.row and o.code == "base")
            row["vs_base"] = _ratio(base.median("wall"), wall)
            row["vs_base_cpu"] = _ratio(base.median("cpu"), cpu)
        results.append(row)

    disagree = {}
    for case in cases:
        for kind in ("ref", "pytest"):  # the scripts count bad records, the plugin findings
            found = {t.label: t.found for t in timed if t.case is case and t.row.findings == kind and t.runs}
            if len(set(found.values())) > 1:
                disagree[f"{case.name} ({kind})"] = found
                print(f"WARNING: the rows of {case.name} disagree on the findings: {found}", file=sys.stderr)

    out = {
        "schema": 1,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started)),
        "dry": args.dry, "size": args.size, "repeat": args.repeat,
        "load_before": [round(x, 2) for x in load_before], "load_after": [round(x, 2) for x in load_after],
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "versions": versions(),
        "git": {"head": _try(lambda: git("rev-parse", "HEAD")),
                "dirty": bool(_try(lambda: git("status", "--porcelain", "--", "pytest_tokaudit")))},
        "imported_from": sources, "compare": compare,
        "skipped": skipped, "disagree": disagree, "rows": results,
        "seconds": round(time.time() - started, 1),
    }
    path = Path(args.json) if args.json else ctx.data / "results" / f"bench-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1) + "\n")
    from benchmarks.table import render

    print(render(out))
    print(f"\nresults: {path}", file=sys.stderr)
    shutil.rmtree(work, ignore_errors=True)
    return 1 if any(r["error"] for r in results) else 0


def _round(x: float | None, digits: int = 3) -> float | None:
    return None if x is None else round(x, digits)


def _ratio(ref: float | None, x: float | None) -> float | None:
    return round(ref / x, 3) if ref and x else None


def _try(fn):
    try:
        return fn()
    except (OSError, subprocess.CalledProcessError):
        return None


if __name__ == "__main__":
    sys.exit(main())
