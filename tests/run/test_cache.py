"""Incremental runs: an unchanged item reuses its last result, anything it depends on
changing makes it audited again, and a bad cache entry is never trusted.

Whether records were audited is counted by a conftest hook that logs every record it is
called with (never timed).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
import forkrun
from conftest import FULL, UNRELATED_PLUGINS, XDIST_MODES, Run, TokProject, assert_no_crash, failure_section, line_starts, rec, summary_section

from pytest_tokaudit.sources.base import shard_cuts
from pytest_tokaudit.sources.digest import RACY_NS, digest_range, file_state

ONCE, LAST = 7, 9

# Logs every record audited in any process (xdist workers append to the same file).
COUNTER = """
from pathlib import Path

LOG = Path(__file__).parent / "audited.log"


def pytest_tokaudit_check_record(record):
    with open(LOG, "a") as fh:
        fh.write(f"{record.line}\\n")
"""


def good(i: int, n: int = 10, billed: int | None = None) -> dict:
    return rec(i, n, billed, once=[ONCE], last=LAST)


def audited(project: TokProject) -> int:
    """Records audited since the last call."""
    log = project.path / "audited.log"
    if not log.exists():
        return 0
    n = len(log.read_text().splitlines())
    log.unlink()
    return n


def report(project: TokProject, name: str = "audit.json") -> dict:
    return json.loads((project.path / name).read_text())


def without_cache_marks(data: dict) -> dict:
    data = dict(data)
    data.pop("cache")
    # The first run's report is a .json file under the rootdir: "present, not matched".
    data["coverage"] = {k: v for k, v in data["coverage"].items() if k != "unmatched"}
    data["files"] = [{k: v for k, v in f.items() if k != "cached"} for f in data["files"]]
    return data


@pytest.fixture
def dataset(project: TokProject) -> TokProject:
    """Three files, one sharded, one failing, an id duplicated across two files, a budget
    and a manifest: every dataset check has something to judge."""
    project.ini(
        tokaudit_require_once=ONCE, tokaudit_require_last=LAST, tokaudit_count_abs=0,
        tokaudit_count_rel=0, tokaudit_unique_ids="true", tokaudit_budget=10_000,
        tokaudit_expected_ids="ids.txt", tokaudit_shard_size=700, tokaudit_count_mean_rel="",
    )
    project.write("ids.txt", "\n".join(str(i) for i in range(1, 40)) + "\n")
    project.write("conftest.py", COUNTER)
    project.jsonl("data/a.jsonl", [good(i) for i in range(1, 6)])
    project.jsonl("data/b.jsonl", [good(6), good(7, billed=12), good(1)])  # count; dup id 1
    project.jsonl("data/big.jsonl", [good(i) for i in range(10, 30)])  # ~2 KB: 4 shards
    project.jsonl("data/c.jsonl.gz", [good(i) for i in range(30, 35)])
    project.settle()  # the cold run stores every entry
    return project


# The key's parts and the flags are judged by the same code in a worker as in one process;
# xdist's part (workers writing and reading entries) is held by the second-run, changed-file,
# changed-shard and failures-file tests, which run in both modes. These run in one.
ONE_PROCESS = pytest.mark.parametrize("xdist_mode", [XDIST_MODES["no-xdist"]], ids=["no-xdist"])


def test_a_second_run_on_unchanged_data_audits_no_record(dataset: TokProject):
    cold = dataset.run("--tokaudit-json=audit.json")
    assert audited(dataset) == 33
    assert cold.ret == pytest.ExitCode.TESTS_FAILED
    cold_report = report(dataset)
    assert cold_report["cache"]["items"] == []
    assert not any(f["cached"] for f in cold_report["files"])

    warm = dataset.run("--tokaudit-json=audit.json")
    assert_no_crash(warm)
    assert audited(dataset) == 0
    assert warm.ret == cold.ret
    # The same verdicts, with the same failure text: a cached red file stays red.
    outcomes = warm.parseoutcomes()
    assert outcomes == cold.parseoutcomes()
    assert failure_section(warm, "data/b.jsonl") == failure_section(cold, "data/b.jsonl")
    for check in ("unique_ids", "expected_ids", "budget"):
        warm.stdout.fnmatch_lines([f"pytest.ini::tokaudit::{check}: *"])
    ds = lambda r: [l for l in r.stdout.lines if l.startswith("pytest.ini::tokaudit::")]  # noqa: E731
    assert ds(warm) == ds(cold) and len(ds(cold)) == 4
    # Dataset checks, totals and every file entry as a cold run has them.
    warm_report = report(dataset)
    assert without_cache_marks(warm_report) == without_cache_marks(cold_report)
    assert all(f["cached"] for f in warm_report["files"])
    items = warm_report["cache"]["items"]
    assert len(items) == 7 and warm_report["cache"]["audited"] == []  # 4 shards + 3 files
    assert "data/big.jsonl::tokaudit[shard 1]" in items
    # The table marks the reused files.
    table = summary_section(warm)
    assert table[0].split()[-1] == "cached"
    assert [l.split()[-1] for l in table[1:6]] == ["yes", "yes", "yes", "yes", "4"]
    warm.stdout.fnmatch_lines(["tokaudit cache: 7 of 7 audit items reused unchanged results "
                               "(.pytest_cache/d/tokaudit)"])

    # --lf reruns the failing file from the cache: still failing, nothing read.
    lf = dataset.run("--lf")
    assert audited(dataset) == 0
    lf.stdout.fnmatch_lines(["FAILED data/b.jsonl::tokaudit - 1 of 3 audited records*"])


def test_a_changed_file_or_shard_is_audited_again_alone(dataset: TokProject):
    """After a cold run, two edits in turn, a run after each: a file changed in place at the
    same size and modification time is audited again, alone; then a change in the last
    shard of a sharded file audits that shard alone, the file judged from the others' cached
    summaries and the new one."""
    dataset.run()
    assert audited(dataset) == 33
    path = dataset.path / "data/a.jsonl"
    st = path.stat()
    data = path.read_bytes()
    path.write_bytes(data.replace(b'"completion_tokens": 10', b'"completion_tokens": 11', 1))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns
    dataset.settle()  # this run stores a.jsonl's entry, the next reuses it

    result = dataset.run()
    assert audited(dataset) == 5  # a.jsonl only
    result.stdout.fnmatch_lines(["FAILED data/a.jsonl::tokaudit - 1 of 5 audited records*"])

    path = dataset.path / "data/big.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    lines[-1] = lines[-1].replace(b'"completion_tokens": 10', b'"completion_tokens": 99')
    path.write_bytes(b"".join(lines))

    result = dataset.run()
    start = shard_cuts(path.stat().st_size, 700)[-2]  # the last shard's records, alone
    assert audited(dataset) == sum(1 for line in line_starts(path.read_bytes()) if line >= start) == 3
    # Judged with the whole file, from three cached shards and the new one.
    result.stdout.fnmatch_lines(["FAILED data/big.jsonl::tokaudit[[]file[]] - 1 record breaks the count tolerance*"])


@ONE_PROCESS
def test_a_changed_contract_or_hook_invalidates(dataset: TokProject):
    dataset.run()
    assert audited(dataset) == 33
    # A folder's contract, as a conftest hook resolves it, is part of the key.
    # A new conftest.py is code the run loads (it could do anything): every item again.
    dataset.write("data/conftest.py", "")
    dataset.run()
    assert audited(dataset) == 33
    dataset.run()
    assert audited(dataset) == 0
    dataset.write("data/conftest.py", """
def pytest_tokaudit_contract(path, contract):
    if path.name == "a.jsonl":
        return contract.replace(count_abs=1)
""")
    dataset.run()
    assert audited(dataset) == 33
    # An ini key: every file.
    text = (dataset.path / "pytest.ini").read_text()
    (dataset.path / "pytest.ini").write_text(text.replace("tokaudit_count_abs = 0",
                                                         "tokaudit_count_abs = 2"))
    result = dataset.run()
    assert audited(dataset) == 33 - 5  # a.jsonl's count_abs is still its hook's
    result.stdout.no_fnmatch_line("FAILED data/b.jsonl::tokaudit *")  # 12 vs 10 is within 2
    # The record hooks' own code: the counter logs one more field.
    dataset.write("conftest.py", COUNTER + "\n# changed\n")
    dataset.run()
    assert audited(dataset) == 33


@ONE_PROCESS
def test_a_corrupt_or_foreign_entry_is_ignored(dataset: TokProject):
    dataset.run()
    assert audited(dataset) == 33
    entries = sorted((dataset.path / ".pytest_cache/d/tokaudit").rglob("*.json"))
    assert len(entries) == 7
    by_file = {}
    for entry in entries:
        data = json.loads(entry.read_bytes())
        path, shard = data["key"]["item"][:2]  # a shard by its place (0-based), else None
        by_file[(path, shard)] = (entry, data)
    b_entry, b_data = by_file[("data/b.jsonl", None)]
    a_entry, a_data = by_file[("data/a.jsonl", None)]
    c_entry, c_data = by_file[("data/c.jsonl.gz", None)]
    s_entry, s_data = by_file[("data/big.jsonl", 0)]

    # A lie about b.jsonl (no finding) without its digest; another version's a.jsonl;
    # a half-written c.jsonl.gz; garbage for the first shard.
    summary = json.loads(b_data["summary"])
    summary.update(findings=0, bad_records=0, shown=[], by_check={})
    b_data["summary"] = json.dumps(summary)
    b_entry.write_text(json.dumps(b_data))
    a_data["format"] = 99
    a_entry.write_text(json.dumps(a_data))
    c_entry.write_bytes(c_entry.read_bytes()[: c_entry.stat().st_size // 2])
    s_entry.write_bytes(b"\x00\xff not json")

    result = dataset.run()
    assert_no_crash(result)
    first = shard_cuts((dataset.path / "data/big.jsonl").stat().st_size, 700)[1]
    in_first = sum(1 for at in line_starts((dataset.path / "data/big.jsonl").read_bytes()) if at < first)
    assert audited(dataset) == 3 + 5 + 5 + in_first  # b, a, c and the first shard
    result.stdout.fnmatch_lines(["FAILED data/b.jsonl::tokaudit - 1 of 3 audited records*"])
    assert audited(dataset) == 0 and dataset.run().ret == result.ret  # rewritten, whole

    # An entry holding another item's key (a copy, or a hash collision) is not this one's.
    b_data = json.loads(b_entry.read_bytes())
    a_entry.write_text(json.dumps(b_data))
    dataset.run()
    assert audited(dataset) == 5


@ONE_PROCESS
def test_cache_clear_no_cache_and_no_cacheprovider(dataset: TokProject):
    dataset.run()
    assert audited(dataset) == 33
    folder = dataset.path / ".pytest_cache/d/tokaudit"
    dataset.run("--cache-clear")
    assert audited(dataset) == 33
    assert len(list(folder.rglob("*.json"))) == 7  # written again
    dataset.run()
    assert audited(dataset) == 0

    (dataset.path / "data/a.jsonl").write_bytes(b"")
    result = dataset.run("--tokaudit-no-cache")
    assert audited(dataset) == 33 - 5
    assert len(list(folder.rglob("*.json"))) == 7  # nothing stored
    result.stdout.no_fnmatch_line("tokaudit cache:*")
    dataset.run("-p", "no:cacheprovider")
    assert audited(dataset) == 33 - 5


@ONE_PROCESS
def test_tokaudit_cache_dir(dataset: TokProject):
    ini = dataset.path / "pytest.ini"
    ini.write_text(ini.read_text() + "tokaudit_cache_dir = ci-cache\n")
    dataset.run("-p", "no:cacheprovider", "--tokaudit-json=audit.json")
    assert audited(dataset) == 33
    assert len(list((dataset.path / "ci-cache").rglob("*.json"))) == 7
    assert not (dataset.path / ".pytest_cache").exists()
    assert "tokaudit_cache_dir" not in report(dataset)["contract"]  # not a rule of the data
    # Another checkout of the same data in another folder (a CI job) reuses the entries.
    other = dataset.path / "checkout"
    other.mkdir()
    for name in ("pytest.ini", "conftest.py", "ids.txt"):
        (other / name).write_bytes((dataset.path / name).read_bytes())
    (other / "data").mkdir()
    for f in (dataset.path / "data").iterdir():
        (other / "data" / f.name).write_bytes(f.read_bytes())
    ini = other / "pytest.ini"
    ini.write_text(ini.read_text().replace("ci-cache", str(dataset.path / "ci-cache")))
    result = forkrun.runpytest(dataset.pytester, 
        "--tokaudit", "--rootdir", str(other), "-c", str(ini), str(other / "data"),
        *dataset.mode, "-p", "no:cacheprovider", *UNRELATED_PLUGINS)  # the same command
    assert_no_crash(result)
    assert not (other / "audited.log").exists()  # its own conftest counted nothing
    result.stdout.fnmatch_lines(["tokaudit cache: 7 of 7 audit items reused*"])


def test_failures_file_lists_cached_bad_records(dataset: TokProject):
    dataset.run()
    assert audited(dataset) == 33
    dataset.run("--tokaudit-failures=bad.jsonl")
    assert audited(dataset) == 3  # b.jsonl, the one item with bad records, is read again
    bad = [json.loads(l) for l in (dataset.path / "bad.jsonl").read_text().splitlines()]
    assert [(b["path"], b["line"], b["check"]) for b in bad] == [("data/b.jsonl", 2, "count")]


def test_a_changed_tokenizer_invalidates(pytester: pytest.Pytester):
    from tokdata import qwen_dir

    project = TokProject(pytester, ("-p", "no:xdist"))
    tok = project.path / "tok"
    tok.mkdir()
    for f in qwen_dir().iterdir():
        if f.is_file():
            (tok / f.name).write_bytes(f.read_bytes())
    project.ini(tokaudit_tokenizer="tok", tokaudit_require_last="<|im_end|>",
                tokaudit_count_mean_rel="")
    project.write("conftest.py", COUNTER)
    project.jsonl("data/a.jsonl", [rec(i, 5, last=151645) for i in range(3)])
    project.settle()
    assert project.run().ret == pytest.ExitCode.OK
    assert audited(project) == 3
    project.run()
    assert audited(project) == 0
    config = tok / "tokenizer_config.json"
    config.write_text(config.read_text() + "\n")
    assert project.run().ret == pytest.ExitCode.OK
    assert audited(project) == 3


def test_digest_range_covers_what_a_shard_reads(tmp_path: Path):
    """A shard reads the byte before its range and its last line to the end."""
    path = tmp_path / "f.jsonl"
    data = b"aaaa\nbbbb\ncccc\ndddd\n"
    path.write_bytes(data)
    base = digest_range(path, 7, 12)  # the shard of "cccc" (starts in [7, 12))

    def changed_at(pos: int) -> bool:
        path.write_bytes(data[:pos] + b"X" + data[pos + 1:])
        return digest_range(path, 7, 12) != base

    assert [changed_at(i) for i in range(len(data))] == [
        False] * 6 + [True] * 9 + [False] * 5  # bytes 6..14: "\nbbbb"[from 6] .. "cccc\n"
    path.write_bytes(data)
    assert digest_range(path, 10, 15) != digest_range(path, 10, 16)
    assert digest_range(path) == digest_range(path, 0, None)


@ONE_PROCESS
def test_parquet_row_group_shards_are_cached(project: TokProject):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    project.ini(tokaudit_require_once=ONCE, tokaudit_require_last=LAST, tokaudit_shard_size=1,
                tokaudit_count_mean_rel="")
    project.write("conftest.py", COUNTER)
    path = project.path / "data/a.parquet"
    path.parent.mkdir()
    rows = [good(i) for i in range(6)] + [good(6, billed=40)]
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=2)  # 4 row-group shards
    project.settle()
    cold = project.run()
    assert audited(project) == 7
    warm = project.run()
    assert audited(project) == 0
    assert warm.parseoutcomes() == cold.parseoutcomes()
    warm.stdout.fnmatch_lines(["tokaudit cache: 4 of 4 audit items reused*",
                               "FAILED data/a.parquet::tokaudit[[]file[]] - 1 record breaks the count tolerance*"])


# -- the key covers what a check does, however it was built (issue #22, item 1) --------------

# Each variant: helper modules and a conftest.py, then the edit. The check fails a record
# with more than `n` ids only after the edit, so a reused PASS is a false green.
HELPERS = {
    "factory": {
        "helpers.py": """
def max_ids(n):
    def check(record):
        if record.n_ids > n:
            return f"{record.n_ids} ids > {n}"
    return check
""",
        "conftest.py": "from helpers import max_ids\npytest_tokaudit_check_record = max_ids(100)\n",
        "edit": ("conftest.py", "max_ids(100)", "max_ids(2)"),
    },
    "wraps-decorator": {
        "helpers.py": """
import functools

def logged(fn):
    @functools.wraps(fn)
    def wrapper(record):
        return fn(record)
    return wrapper
""",
        "conftest.py": """from helpers import logged

@logged
def pytest_tokaudit_check_record(record):
    return None
""",
        "edit": ("conftest.py", "return None", "return 'edited: every record fails'"),
    },
    "helper-function-edited": {
        "helpers.py": "def rule(record):\n    return None\n",
        "conftest.py": """import helpers

def pytest_tokaudit_check_record(record):
    return helpers.rule(record)
""",
        "edit": ("helpers.py", "return None", "return 'edited: every record fails'"),
    },
    "imported-constant-edited": {
        "settings.py": "LIMIT = 100\n",
        "conftest.py": """from settings import LIMIT

def pytest_tokaudit_check_record(record):
    if record.n_ids > LIMIT:
        return "too many ids"
""",
        "edit": ("settings.py", "LIMIT = 100", "LIMIT = 2"),
    },
    "set-constant": {  # a set of strings: its order follows the hash seed of each run
        "settings.py": "BANNED = {'a', 'b', 'c', 'd', 999}\n",
        "conftest.py": """from settings import BANNED

def pytest_tokaudit_check_record(record):
    if any(i in BANNED for i in record.ids):
        return "banned id"
""",
        "edit": ("settings.py", "999", "1002"),
    },
    "batch-factory": {
        "helpers.py": """
def max_ids(n):
    def check(records):
        return [r.finding("max_ids", "too many ids") for r in records if r.n_ids > n]
    return check
""",
        "conftest.py": "from helpers import max_ids\npytest_tokaudit_check_batch = max_ids(100)\n",
        "edit": ("conftest.py", "max_ids(100)", "max_ids(2)"),
    },
    "plugin-instance": {
        "helpers.py": """
class MaxIds:
    def __init__(self, n):
        self.n = n

    def pytest_tokaudit_check_record(self, record):
        if record.n_ids > self.n:
            return "too many ids"
""",
        "conftest.py": """from helpers import MaxIds

def pytest_configure(config):
    config.pluginmanager.register(MaxIds(100), "max-ids")
""",
        "edit": ("conftest.py", "MaxIds(100)", "MaxIds(2)"),
    },
    "default-argument": {
        "settings.py": "LIMIT = 100\n",
        "conftest.py": """import settings

def pytest_tokaudit_check_record(record, limit=settings.LIMIT):
    if record.n_ids > limit:
        return "too many ids"
""",
        "edit": ("settings.py", "LIMIT = 100", "LIMIT = 2"),
    },
}


def variant_files(variant: str) -> dict[str, str]:
    """A variant's files in data/VARIANT/ beside its data, its modules named after it (every
    variant is loaded in the same process): helpers -> helpers_VARIANT."""
    slug = variant.replace("-", "_")
    out = {}
    for name, text in HELPERS[variant].items():
        if name != "edit":
            out[name.replace("helpers", f"helpers_{slug}").replace("settings", f"settings_{slug}")] = \
                text.replace("helpers", f"helpers_{slug}").replace("settings", f"settings_{slug}")
    return out


# The plugin instance's check reaches every folder (pytest_configure registers it for the
# run): its edit comes last, when every other variant's has been made.
VARIANT_ORDER = sorted(HELPERS, key=lambda v: (v == "plugin-instance", v))


@ONE_PROCESS
def test_the_key_covers_a_check_however_it_was_built(project: TokProject):
    """A check made by a factory, a decorator, a plugin instance or a helper module is keyed
    by what it does: after an edit anywhere in it, a warm run's verdict is a cold run's.

    Every variant in a folder of its own (data/VARIANT/, its conftest.py and modules beside
    its a.jsonl), all reused by a warm run; then each variant's edit in turn, the others'
    already made, each followed by a run: its file fails with nothing reused (a reused PASS
    would be a false green), the files of the variants not yet edited still pass."""
    project.ini(tokaudit_count_mean_rel="")
    items = {v: f"data/{v}/a.jsonl::tokaudit" for v in VARIANT_ORDER}
    for variant in VARIANT_ORDER:
        project.jsonl(f"data/{variant}/a.jsonl", [rec(i, 5) for i in range(3)])
        for name, text in variant_files(variant).items():
            project.write(f"data/{variant}/{name}", text)
    project.settle()
    first = Run(project.run("--tokaudit-json=audit.json"))
    assert_no_crash(first.result)
    assert first.ret == pytest.ExitCode.OK, first
    assert report(project)["cache"]["audited"] == sorted(items.values())
    warm = Run(project.run("--tokaudit-json=audit.json"))
    assert warm.ret == pytest.ExitCode.OK, warm
    assert report(project)["cache"]["items"] == sorted(items.values())  # keyed, and reused

    for k, variant in enumerate(VARIANT_ORDER):
        name, old, new = HELPERS[variant]["edit"]
        slug = variant.replace("-", "_")
        path = project.path / "data" / variant / name.replace("helpers", f"helpers_{slug}").replace(
            "settings", f"settings_{slug}")
        assert old in path.read_text(), (variant, path)
        path.write_text(path.read_text().replace(old, new))
        for cached in [p for p in project.path.rglob("__pycache__")]:  # a same-second edit
            for pyc in cached.iterdir():
                pyc.unlink()
        after = Run(project.run("--tokaudit-json=audit.json", "-rA"))
        assert_no_crash(after.result)
        assert after.ret == pytest.ExitCode.TESTS_FAILED, (variant, after)
        assert report(project)["cache"]["items"] == [], (variant, after)
        assert after.outcome(items[variant]) == "FAILED", (variant, after)
        if variant != "plugin-instance":
            assert all(after.outcome(items[v]) == "PASSED" for v in VARIANT_ORDER[k + 1:]), (variant, after)
    cold = Run(project.run("--tokaudit-no-cache", "-rA"))
    assert cold.ret == pytest.ExitCode.TESTS_FAILED, cold
    assert after.outcomes() == cold.outcomes() and all(
        cold.outcome(i) == "FAILED" for i in items.values()), cold


@ONE_PROCESS
def test_a_check_holding_state_a_digest_could_not_follow_is_cached_by_its_module(project: TokProject):
    """A check with a lock in its closure (the old key refused it): the key is the source of
    the module that builds it, so it is cached like any other, and an edit re-audits."""
    project.ini(tokaudit_count_mean_rel="")
    project.jsonl("data/a.jsonl", [rec(i, 5) for i in range(3)])
    project.jsonl("data/b.jsonl", [rec(i, 5) for i in range(3, 6)])
    guarded = COUNTER + """
import threading

def guarded(lock):
    def pytest_tokaudit_check_batch(records):
        with lock:
            return None
    return pytest_tokaudit_check_batch

pytest_tokaudit_check_batch = guarded(threading.Lock())
"""
    project.write("conftest.py", guarded)
    project.settle()
    for expected in (6, 0):
        result = project.run("--tokaudit-json=audit.json", "-W", "default")
        assert_no_crash(result)
        assert result.ret == pytest.ExitCode.OK, result.stdout.str()
        assert audited(project) == expected
        result.stdout.no_fnmatch_line("*tokaudit cache: not used*")
    project.write("conftest.py", guarded.replace("return None", "return [r.finding('lock', 'x') for r in records]"))
    result = project.run("--tokaudit-json=audit.json")
    assert audited(project) == 6 and result.ret == pytest.ExitCode.TESTS_FAILED


# -- no verdict stored under bytes it did not judge (issue #22, item 2) -----------------------

# Applies the edits a test queued in edits.json at a moment inside the run: right after
# the plugin hashed the file for its cache key ("hash": no hook of a user's runs there, so
# the hashing functions are wrapped), or when its first batch of records is audited
# ("audit"). In place, with the modification time put back, or by os.replace.
RACER = """
import json, os
from pathlib import Path

import pytest_tokaudit.sources.jsonl as jsonl

ROOT = Path(__file__).parent
EDITS = ROOT / "edits.json"


def apply(when, name):
    if not EDITS.exists():
        return
    left = []
    for edit in json.loads(EDITS.read_text()):
        if edit["when"] != when or edit["file"] != name:
            left.append(edit)
            continue
        path = ROOT / "data" / name
        data = bytes.fromhex(edit["data"])
        if edit["how"] == "replace":
            tmp = path.with_name(name + ".tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)
        else:
            st = path.stat()
            with open(path, "r+b") as fh:
                fh.write(data)
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    EDITS.write_text(json.dumps(left))


def after_hashing(digest):
    def wrapped(path, *args):
        out = digest(path, *args)
        apply("hash", Path(path).name)
        return out
    return wrapped


jsonl.digest_file = after_hashing(jsonl.digest_file)
jsonl.digest_range = after_hashing(jsonl.digest_range)


def pytest_tokaudit_check_batch(records, summary):
    apply("audit", Path(summary.path).name)
"""

RACE_FILES = {"a.jsonl": 5, "big.jsonl": 16}  # big.jsonl (1,824 bytes): 4 shards at 700


def race_bytes(name: str, bad: frozenset[int]) -> bytes:
    """The file with records `bad` billed 99 instead of 10: every variant has the same size."""
    first = 0 if name == "a.jsonl" else 100
    lines = [json.dumps(good(first + i, billed=99 if i in bad else 10)).encode()
             for i in range(RACE_FILES[name])]
    return b"\n".join(lines) + b"\n"


def cold_figures(data: bytes, byte_range: list) -> tuple[int, int]:
    """(findings, billed) of the records a part reads: the lines starting in its range."""
    start, end = byte_range[0], byte_range[1] if byte_range[1] is not None else len(data)
    findings = billed = pos = 0
    for line in data.splitlines(keepends=True):
        if start <= pos < end:
            r = json.loads(line)
            billed += r["completion_tokens"]
            findings += r["completion_tokens"] != len(r["output_ids"])
        pos += len(line)
    return findings, billed


def assert_entries_hold_their_bytes(project: TokProject, seen: dict[str, set[bytes]]) -> None:
    """Every stored entry's verdict is what a cold audit gives for the bytes it is keyed by
    (among every version of the file the test wrote)."""
    scratch = project.path / "scratch"
    scratch.mkdir(exist_ok=True)
    for entry in (project.path / ".pytest_cache/d/tokaudit").rglob("*.json"):
        data = json.loads(entry.read_bytes())
        display, shard, byte_range, _ = data["key"]["item"]
        # A whole file is keyed by its digest and size; a shard by its bytes' digest alone
        # (appending to the file leaves it the same shard).
        key = data["key"]["data"][1:]
        name = display.rsplit("/", 1)[-1]
        matching = []
        for k, version in enumerate(sorted(seen[name])):
            if shard is None:
                mine = [hashlib.sha256(version).hexdigest(), len(version)]
            else:
                path = scratch / f"{entry.stem}.{k}"
                path.write_bytes(version)
                mine = [digest_range(path, *byte_range)]
            if mine == key:
                matching.append(version)
        assert matching, (display, shard)
        summary = json.loads(data["summary"])
        for version in matching:
            assert (summary["findings"], summary["billed"]) == cold_figures(version, byte_range), (
                f"{display} {shard}: stored a verdict its bytes do not give")


def outcomes_of(result: pytest.RunResult) -> tuple[Any, list[str]]:
    return result.ret, sorted(re.findall(r"^(?:FAILED|PASSED|SKIPPED) \S+", result.stdout.str(), re.M))


EDIT = st.tuples(
    st.sampled_from(sorted(RACE_FILES)),
    st.frozensets(st.integers(0, 4), max_size=2),
    st.sampled_from(["between", "hash", "audit"]),
    st.sampled_from(["inplace", "replace"]),
)


# A run's edits: one or two, of different files (the races of two files are each their own).
STEP = st.lists(EDIT, min_size=1, max_size=2, unique_by=lambda edit: edit[0])


# The suite runs the examples below (each a race once lost); the full matrix searches on.
@settings(max_examples=5, deadline=None, phases=tuple(Phase) if FULL else (Phase.explicit,),
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(steps=st.lists(STEP, min_size=1, max_size=3))
# The file replaced (same size) right after it was hashed: its new verdict must not be
# stored under the old bytes, in place or by rename, a whole file or a shard (the whole
# file and the shards in place race in the same runs).
@example(steps=[[("a.jsonl", frozenset(), "hash", "inplace"), ("big.jsonl", frozenset({3}), "hash", "inplace")],
                [("big.jsonl", frozenset(), "between", "inplace")]])
@example(steps=[[("a.jsonl", frozenset(), "hash", "replace")]])
@example(steps=[[("a.jsonl", frozenset({2}), "audit", "inplace")], [("a.jsonl", frozenset({0}), "between", "inplace")]])
def test_edits_interleaved_with_runs_never_store_a_verdict_under_other_bytes(
    pytester: pytest.Pytester, steps: list
):
    """Edits between runs, right after the file is hashed and while it is audited: every
    entry the cache holds after each run is the cold verdict of the bytes it is keyed by,
    and a warm run at the end gives the cold run's verdicts."""
    project = TokProject(pytester, XDIST_MODES["no-xdist"])
    for name in ("data", ".pytest_cache", "scratch"):
        shutil.rmtree(project.path / name, ignore_errors=True)
    project.ini(tokaudit_count_abs=0, tokaudit_count_rel=0, tokaudit_count_mean_rel="",
                tokaudit_shard_size=700, tokaudit_require_once=ONCE, tokaudit_require_last=LAST)
    project.write("conftest.py", RACER)
    start = {"a.jsonl": frozenset({1}), "big.jsonl": frozenset()}
    seen = {name: {race_bytes(name, bad)} for name, bad in start.items()}
    for name, bad in start.items():
        project.write(f"data/{name}", race_bytes(name, bad))
    for step in steps:
        queued = []
        for name, bad, when, how in step:
            data = race_bytes(name, bad)
            seen[name].add(data)
            if when == "between":
                project.write(f"data/{name}", data)
            else:
                queued.append({"file": name, "data": data.hex(), "when": when, "how": how})
        project.write("edits.json", json.dumps(queued))
        result = project.run()
        assert_no_crash(result)
        # the file is hashed on every run, reused or not: an edit after hashing landed
        left = json.loads((project.path / "edits.json").read_text())
        assert not [edit for edit in left if edit["when"] == "hash"], left
        assert_entries_hold_their_bytes(project, seen)
    project.write("edits.json", "[]")
    warm = project.run()
    cold = project.run("--tokaudit-no-cache")
    assert outcomes_of(warm) == outcomes_of(cold), warm.stdout.str()


def test_a_file_changed_too_recently_has_no_state_to_store_under(tmp_path: Path):
    """A stat taken within a tick of the file system's clock after a write could equal the
    stat after another write in that tick: such a file's state is None (never stored
    under) until the clock has moved on, and a write makes it None again."""
    path = tmp_path / "f.jsonl"
    path.write_bytes(b"a\n")
    assert file_state(path) is None
    time.sleep(RACY_NS / 1e9 * 1.5)
    before = file_state(path)
    assert before is not None and before == file_state(path)
    with open(path, "r+b") as fh:  # in place, same size, the modification time put back
        fh.write(b"b")
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, before[3]))
    assert file_state(path) is None
    time.sleep(RACY_NS / 1e9 * 1.5)
    assert file_state(path) not in (None, before)
