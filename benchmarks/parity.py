"""Verdict parity of two checkouts of the plugin on the benchmark data: the same JSON
report (findings, summaries, worst records, ids, dataset checks) and the same item
outcomes, in process and under xdist, on the plain, columnar, sharded, Parquet, round-trip
and text-template paths. For refactors that must not change a verdict (issue #21).

    git worktree add /tmp/old <rev>
    python -m benchmarks.parity /tmp/old .     # exit 0: every case the same

The data are the kit's generated files at size `small` ($TOKAUDIT_BENCH_PARITY_SIZE), written
into its cache on first use (benchmarks/generate.py), and the suite's bad-input corpus
(tests/corpus.py: BAD_LINES, NEW_BAD_LINES) with records
each built-in finding fails, repeated past a chunk: in process, under `-n 2`, and on Ray
(`--tokaudit-engine=ray`, a local cluster; TOKAUDIT_PARITY_RAY=0 leaves it out). Three
cases add a conftest.py whose checks read whole records (USER), one with a text template;
the last groups a Parquet file (its fields read as columns). TOKAUDIT_PARITY_CASES=12,13,14
runs the USER cases alone (0-based, in CASES' order).
"""
import gzip, json, os, subprocess, sys, tempfile, shutil, re
from pathlib import Path
PY = sys.executable
OLD, NEW = (str(Path(p).resolve()) for p in sys.argv[1:3])
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from benchmarks.generate import ensure  # noqa: E402
SIZE = os.environ.get("TOKAUDIT_BENCH_PARITY_SIZE", "small")
# The files of the cases below, by the names they had before the kit (seed: long records).
KINDS = {"seed.jsonl": "long", "short-seed.jsonl": "short", "seed.parquet": "parquet",
         "roundtrip.jsonl": "roundtrip", "raw.jsonl": "raw"}
QWEN_DIR = subprocess.run([PY, "-c", "import sys; sys.path.insert(0,'" + str(HERE.parent / "tests") + "'); from tokdata import qwen_dir; print(qwen_dir())"], capture_output=True, text=True).stdout.strip()
KIMI = "[pytest]\ntokaudit_where = provider\ntokaudit_count_abs = 8\ntokaudit_count_rel = 2%\ntokaudit_count_mean_rel = 0.5%\ntokaudit_require_once = 163607\ntokaudit_require_last = 163586\ntokaudit_forbid = 163606\ntokaudit_unique_ids = true\ntokaudit_budget = 100000000\n"
QW = "[pytest]\ntokaudit_tokenizer = {tok}\ntokaudit_count_abs = 8\ntokaudit_count_rel = 2%\ntokaudit_require_once = </think>\ntokaudit_require_last = <|im_end|>\ntokaudit_forbid = <think>\ntokaudit_roundtrip_rel = 5%\n"
RAW = "[pytest]\ntokaudit_tokenizer = {tok}\ntokaudit_id_field = id\ntokaudit_count_field = usage.completion_tokens\ntokaudit_text_template = {{choices.0.message.reasoning?}}</think>{{choices.0.message.content}}<|im_end|>\ntokaudit_finish_reason = stop\ntokaudit_count_abs = 8\ntokaudit_count_rel = 2%\ntokaudit_require_once = </think>\ntokaudit_require_last = <|im_end|>\ntokaudit_group_by = provider\n"
STRUCT = "[pytest]\ntokaudit_count_abs = 2\ntokaudit_count_rel = 10%\ntokaudit_require_once = 3\ntokaudit_require_last = 7 8\ntokaudit_forbid = 0\ntokaudit_unique_ids = true\ntokaudit_max_shown = 1000\ntokaudit_shard_size = 1048576\n"
PLAIN = "[pytest]\ntokaudit_unique_ids = true\ntokaudit_max_shown = 1000\n"
# A conftest.py's checks reading whole records (the kernel's full mode since 2026-12-06;
# the per-line path before): what they find must not depend on the path or on batches.
USER = """import pytest


@pytest.hookimpl
def pytest_tokaudit_check_record(record, contract):
    data = record.data
    if record.n_ids % 5 == 0 and data.get("provider", "p") != "":
        return record.finding("user_fifth", f"{record.n_ids} ids, last {record.last_id}")


@pytest.hookimpl
def pytest_tokaudit_check_batch(records, contract):
    return [r.finding("user_batch", f"billed {r.count}, {len(r.data)} keys")
            for r in records if r.count % 11 == 3]
"""


def corpus_bytes():
    """The bad-input corpus, and records each built-in finding fails, between clean ones."""
    sys.path.insert(0, str(HERE.parent / "tests"))
    from conftest import jsonl_bytes, rec
    from corpus import BAD_LINES, NEW_BAD_LINES
    findings = [rec("c1", 10, once=[3], last=7), rec("over", 10, billed=30, once=[3], last=7),
                rec("twice", 10, once=[3, 3], last=7), rec("last", 10, once=[3], last=9),
                rec("forbid", 10, once=[3, 0], last=7), rec("c2", 12, billed=11, once=[3], last=8),
                {"sample_id": "nested", "completion_tokens": 3, "output_ids": [3, [1], 7]}]
    return jsonl_bytes((BAD_LINES + NEW_BAD_LINES + findings) * 400)  # ~3 MB: shards, chunks


CORPUS = ("corpus.jsonl", "corpus.jsonl.gz")
CASES = [("corpus.jsonl", STRUCT, {"TOKAUDIT_COLUMNAR": "1"}), ("corpus.jsonl", STRUCT, {}),
         ("corpus.jsonl", PLAIN, {"TOKAUDIT_COLUMNAR": "1"}),
         ("corpus.jsonl.gz", STRUCT, {"TOKAUDIT_COLUMNAR": "1"}),
         ("seed.jsonl", KIMI, {}), ("seed.jsonl", KIMI, {"TOKAUDIT_COLUMNAR": "1"}),
         ("short-seed.jsonl", KIMI, {"TOKAUDIT_COLUMNAR": "1"}), ("seed.parquet", KIMI, {}),
         ("seed.jsonl", KIMI + "tokaudit_shard_size = 4000000\n", {}),
         ("roundtrip.jsonl", QW, {}), ("raw.jsonl", RAW, {}), ("raw.jsonl", RAW, {"TOKAUDIT_COLUMNAR": "1"}),
         ("corpus.jsonl", STRUCT, {"TOKAUDIT_COLUMNAR": "1"}, USER), ("seed.jsonl", KIMI, {}, USER),
         ("raw.jsonl", RAW, {"TOKAUDIT_COLUMNAR": "1"}, USER),
         ("seed.parquet", KIMI + "tokaudit_group_by = provider model\n", {})]
def run(code, data, ini, env_extra, nflag, conftest=None):
    d = Path(tempfile.mkdtemp(prefix="par-"))
    (d / "data").mkdir()
    if data in CORPUS:
        raw = corpus_bytes()
        (d / "data" / data).write_bytes(gzip.compress(raw, mtime=0) if data.endswith(".gz") else raw)
    else:
        os.symlink(ensure(KINDS[data], SIZE), d / "data" / data)
    (d / "pytest.ini").write_text(ini.format(tok=QWEN_DIR))
    if conftest:
        (d / "conftest.py").write_text(conftest)
    env = {**os.environ, "PYTHONPATH": code, **env_extra}
    r = subprocess.run([PY, "-m", "pytest", "--tokaudit", "-p", "no:randomly", "-p", "no:cacheprovider", "--tokaudit-no-cache",
                        "--tokaudit-json", "r.json", "-rA", "-q", *MODES[nflag], "data"], cwd=d, env=env, capture_output=True, text=True)
    rep = json.loads((d / "r.json").read_text()) if (d / "r.json").exists() else None
    lines = sorted(l for l in r.stdout.splitlines() if l.startswith(("FAILED", "PASSED", "SKIPPED", "ERROR")))
    shutil.rmtree(d)
    if rep:
        for k in ("tool_version", "version", "cache", "created"): rep.pop(k, None)
        rep.get("contract", {}).pop("tokaudit_glob", None)  # the new default adds *.arrow *.feather
    return r.returncode, lines, rep
MODES = {"in process": ("-p", "no:xdist"), "-n 2": ("-n", "2"), "ray": ("--tokaudit-engine=ray",)}
RAY = os.environ.get("TOKAUDIT_PARITY_RAY", "1") != "0"
ok = True
ONLY = os.environ.get("TOKAUDIT_PARITY_CASES")  # e.g. "12,13": those cases (0-based) alone
for at, (data, ini, env, *conftest) in enumerate(CASES):
    if ONLY and str(at) not in ONLY.split(","):
        continue
    for nflag in MODES:
        if nflag == "ray" and (not RAY or data not in CORPUS):
            continue
        a = run(OLD, data, ini, env, nflag, *conftest); b = run(NEW, data, ini, env, nflag, *conftest)
        same = a == b
        ok &= same
        print(f"{'SAME' if same else 'DIFF'} {data} {env or ''}{' conftest' if conftest else ''} {nflag} exit={a[0]}/{b[0]} items={len(a[1])} findings={(a[2] or {}).get('totals', {}).get('findings', '?')}", flush=True)
        if not same:
            if a[1] != b[1]: print("  lines differ:", set(a[1]) ^ set(b[1]))
            if a[2] != b[2]:
                for k in set(a[2] or {}) | set(b[2] or {}):
                    if (a[2] or {}).get(k) != (b[2] or {}).get(k): print("  report key differs:", k)
sys.exit(0 if ok else 1)
