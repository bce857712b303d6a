"""Collection and sharding at their edges: shards that did not run, file names that are not
UTF-8, a file deleted mid-run, symlink loops; each case once went wrong, pinned here.

Each test builds a small project, runs pytest in a subprocess with ``--tokaudit`` (through
conftest.py's ``Gate``, which blocks the real plugins a test is not about) and asserts on
outcomes per node id, on the failure text, the summary tables and the JSON report.

- a shard that did not run (deselected, or its worker killed) shifts no line number of
  the shards that did, anywhere a line is shown; and a partially audited file's count
  breaches are never listed as the allowed outliers of a file that passed.
- a file name that is not valid UTF-8 is audited like any other.
- a sharded file deleted mid-run is reported, never a crash, never a green run.
- failing shards number their lines without re-reading the file from byte 0 each.
- a directory symlink loop audits each real file once, and warns naming the duplicate.

No assertion depends on xdist's scheduling: outcomes are read per node id, places and
lines as sets, whichever worker ran (or crashed on) an item. The deleted file's case needs shard 1 to run
before the others, so under xdist it uses --dist loadfile, whose documented grouping (a
file's items on one worker, in collection order) makes that certain, not the timing.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any, Iterable

import pytest

from conftest import (
    FAILED,
    OK,
    Gate,
    Run,
    assert_clean,
    assert_no_internal_error,
    ds,
    failure_sections,
    ids_text,
    is_check,
    is_data,
    jsonl_bytes,
    rec,
    summary_section,
)
from pytest_tokaudit.sources.base import shard_cuts

MODES = {"no-xdist": (), "xdist-2": ("-n", "2")}


@pytest.fixture(params=list(MODES.values()), ids=list(MODES))
def mode(request: pytest.FixtureRequest) -> tuple[str, ...]:
    """Extra arguments: none (Gate adds -p no:xdist), or two xdist workers."""
    return request.param


class Problems:
    """Soft checks: every broken property of one (costly) run is reported together."""

    def __init__(self) -> None:
        self.found: list[str] = []

    def check(self, ok: bool, what: str) -> None:
        if not ok:
            self.found.append(what)

    def done(self, run: Run) -> None:
        assert not self.found, "\n".join(self.found) + f"\n{run!r}"


# -- fixed-width lines: shard boundaries fall exactly between known lines --------------------

WIDTH = 200  # bytes per line, without the newline


def fixed(item: Any) -> bytes:
    """One line of exactly WIDTH bytes: a record padded in a "pad" field, or text padded."""
    if isinstance(item, dict):
        head = json.dumps({**item, "pad": ""})[:-2]  # ... "pad": "
        body = head + "x" * (WIDTH - len(head) - 2) + '"}'
    else:
        body = item + " " + "x" * (WIDTH - len(item) - 1)
    assert len(body) == WIDTH, body
    return body.encode() + b"\n"


def shard_size(lines_per_shard: int) -> int:
    """A shard size that cuts a file of k * lines_per_shard fixed lines (k even) into k
    shards starting exactly at lines 1, lines_per_shard + 1, ...: shard_cuts cuts at its
    multiples, here line boundaries, and with k even no rest is left to halve."""
    return lines_per_shard * (WIDTH + 1)


def line_cuts(lines_per_shard: int, shards: int) -> list[int]:
    """The byte offsets of lines 1, lines_per_shard + 1, ... and the end."""
    return [i * lines_per_shard * (WIDTH + 1) for i in range(shards + 1)]


# -- a missing shard shifts no line ----------------------------------------------------

BIG_LINES = 160  # 4 shards of 40 lines: 1-40, 41-80, 81-120, 121-160
PER_SHARD = 40
MISSING = range(41, 81)  # shard 2 of 4
BIG_SHARD2 = "data/big.jsonl::tokaudit[shard 2]"
CNT_SHARD2 = "data/cnt.jsonl::tokaudit[shard 2]"

# line -> billed (10 ids each): count breaches of -20, -50, -30, -40 tokens
BIG_BILLED = {7: 30, 50: 60, 95: 40, 130: 50}
BIG_INVALID = (20, 60, 100, 140)  # "json" findings
BIG_NO_IDS = 110  # a "schema" finding: no output_ids
BIG_DUPS = {90: 5, 150: 105}  # line -> the sample_id it repeats (lines 5 and 105)
BIG_CRASH = 55  # in shard 2

# Findings (line, check) of the whole file, and its records with a count difference.
BIG_FINDINGS = (
    {(n, "count") for n in BIG_BILLED} | {(n, "json") for n in BIG_INVALID}
    | {(BIG_NO_IDS, "schema")}
)
BIG_WORST = {(n, billed, 10) for n, billed in BIG_BILLED.items()}
BIG_DUP_LINES = {5, 90, 105, 150}

TWIN_CONFTEST = """
def pytest_tokaudit_contract(path, contract):
    # The same bytes, one item, its own ids (so no id repeats one of data/big.jsonl).
    return contract.replace(shard_size=0, id_field=("twin_id",))
"""

CRASH_SHARDS = """
import os

def pytest_tokaudit_check_record(record, contract):
    if record.data.get("crash") and contract.shard_size:  # not in the unsharded twin
        os._exit(3)  # the worker dies mid-shard, as by the out-of-memory killer
"""


def big_file() -> bytes:
    out = []
    for n in range(1, BIG_LINES + 1):
        sid = BIG_DUPS.get(n, n)
        if n in BIG_INVALID:
            out.append(fixed("not json"))
        elif n == BIG_NO_IDS:
            out.append(fixed({"sample_id": sid, "completion_tokens": 10, "twin_id": 10000 + sid}))
        else:
            extra = {"crash": True} if n == BIG_CRASH else {}
            out.append(fixed(rec(sid, 10, BIG_BILLED.get(n), twin_id=10000 + sid, **extra)))
    return b"".join(out)


def cnt_file() -> bytes:
    """2 shards, nothing wrong but a count breach in each (lines 10 and 60)."""
    out = []
    for n in range(1, 2 * PER_SHARD + 1):
        extra = {"crash": True} if n == 50 else {}
        out.append(fixed(rec(1000 + n, 10, 30 if n in (10, 60) else None, **extra)))
    return b"".join(out)


def missing_shard_project(gate: Gate) -> None:
    gate.ini(tokaudit_shard_size=shard_size(PER_SHARD), tokaudit_unique_ids="true")
    data = big_file()
    # As shard_cuts cuts it: 4 shards, each starting at a line (1, 41, 81, 121).
    assert shard_cuts(len(data), shard_size(PER_SHARD)) == line_cuts(PER_SHARD, 4)
    assert shard_cuts(len(cnt_file()), shard_size(PER_SHARD)) == line_cuts(PER_SHARD, 2)
    gate.write("data/big.jsonl", data)
    gate.write("data/twin/big.jsonl", data)
    gate.write("data/twin/conftest.py", TWIN_CONFTEST)
    gate.write("data/cnt.jsonl", cnt_file())


def parse_places(lines: Iterable[str], path: str) -> set[tuple[int, str]]:
    """(line, check) of every `path:LINE: [id=..: ]check: ...` line."""
    pat = re.compile(rf"^{re.escape(path)}:(\d+): (?:\w+=\S+: )?(\w+): ")
    return {(int(m.group(1)), m.group(2)) for m in map(pat.match, lines) if m}


def worst_rows(run: Run) -> dict[str, set[tuple[int, int, int]]]:
    """The worst-records table of the terminal summary: {path: {(line, billed, counted)}}."""
    section = summary_section(run.result)
    out: dict[str, set[tuple[int, int, int]]] = {}
    try:
        start = section.index("worst records by |billed - counted|:") + 2  # past the header
    except ValueError:
        return out
    for line in section[start:]:
        if not line.strip():
            break
        record, _id, billed, counted, _diff = line.split()
        path, _, n = record.rpartition(":")
        out.setdefault(path, set()).add((int(n), int(billed.replace(",", "")),
                                         int(counted.replace(",", ""))))
    return out


def allowed_block(run: Run) -> list[str]:
    """The lines under 'allowed outliers (tokaudit_count_outliers) in files that passed:'."""
    section = summary_section(run.result)
    title = "allowed outliers (tokaudit_count_outliers) in files that passed:"
    if title not in section:
        return []
    block = []
    for line in section[section.index(title) + 1:]:
        if not line.strip():
            break
        block.append(line)
    return block


def dup_places(lines: Iterable[str]) -> dict[str, set[int]]:
    """unique_ids places ('...: 2 records: data/a.jsonl:5, data/b.jsonl:9'): {path: {line}}."""
    out: dict[str, set[int]] = {}
    for line in lines:
        if " records: " not in line:
            continue
        for path, n in re.findall(r"(data/[\w/]+\.jsonl):(\d+)", line.split(" records: ", 1)[1]):
            out.setdefault(path, set()).add(int(n))
    return out


VARIANTS = {
    "deselect-no-xdist": ("--deselect", BIG_SHARD2, "--deselect", CNT_SHARD2),
    "deselect-xdist-2": ("-n", "2", "--deselect", BIG_SHARD2, "--deselect", CNT_SHARD2),
    "worker-killed-xdist-2": ("-n", "2"),
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_a_missing_shard_shifts_no_line_number(gate: Gate, variant: str):
    missing_shard_project(gate)
    if variant.startswith("worker-killed"):
        gate.write("conftest.py", CRASH_SHARDS)
    run = gate.run(*VARIANTS[variant], "--tokaudit-json=audit.json")
    assert_no_internal_error(run)
    if variant.startswith("deselect"):
        assert_clean(run)
    assert run.ret == FAILED, run
    problems = Problems()
    check = problems.check

    # Outcomes: the shard that did not run is not judged, the file's verdict waits for it.
    want = {
        "data/big.jsonl::tokaudit[shard 1]": "FAILED",
        BIG_SHARD2: None if variant.startswith("deselect") else "FAILED",
        "data/big.jsonl::tokaudit[shard 3]": "FAILED",
        "data/big.jsonl::tokaudit[shard 4]": "FAILED",
        "data/big.jsonl::tokaudit[file]": "SKIPPED",
        "data/twin/big.jsonl::tokaudit": "FAILED",
        "data/cnt.jsonl::tokaudit[shard 1]": "PASSED",
        CNT_SHARD2: None if variant.startswith("deselect") else "FAILED",
        "data/cnt.jsonl::tokaudit[file]": "SKIPPED",
        ds("unique_ids"): "FAILED",
        ds("coverage"): "SKIPPED",
    }
    got = {n: run.outcome(n) for n in want}
    assert got == want, run

    # The unsharded twin sees every line: the reference the sharded file must agree with.
    twin_text = [l for s in failure_sections(run.result, "tokaudit: data/twin/big.jsonl") for l in s]
    twin = parse_places(twin_text, "data/twin/big.jsonl")
    assert twin == BIG_FINDINGS, (twin, run)
    expected = {(n, c) for n, c in twin if n not in MISSING}

    # 1. The failure text of the shards that ran.
    big: set[tuple[int, str]] = set()
    for k in (1, 3, 4):
        for section in failure_sections(run.result, f"tokaudit: data/big.jsonl [shard {k} of 4]"):
            big |= parse_places(section, "data/big.jsonl")
    check(big == expected,
          f"failure text of the shards that ran: lines {sorted(big)}, want {sorted(expected)}")

    # 2. The worst-records table of the terminal summary.
    rows = worst_rows(run)
    check(rows.get("data/twin/big.jsonl") == BIG_WORST,
          f"worst records of the twin: {rows.get('data/twin/big.jsonl')}, want {BIG_WORST}")
    want_worst = {r for r in BIG_WORST if r[0] not in MISSING}
    check(rows.get("data/big.jsonl") == want_worst,
          f"worst records table: data/big.jsonl rows {rows.get('data/big.jsonl')}, want {want_worst}")

    # 3. The --tokaudit-json report: shown findings and worst records per file.
    report = json.loads((gate.path / "audit.json").read_text())
    files = {f["path"]: f for f in report["files"]}

    def shown(entry: dict[str, Any]) -> set[tuple[int, str]]:
        return {(f["line"], f["check"]) for f in entry["shown"] + entry["shown_allowable"]}

    check(shown(files["data/twin/big.jsonl"]) == BIG_FINDINGS,
          f"JSON shown lines of the twin: {sorted(shown(files['data/twin/big.jsonl']))}")
    check(shown(files["data/big.jsonl"]) == expected,
          f"JSON files[data/big.jsonl].shown lines {sorted(shown(files['data/big.jsonl']))}, "
          f"want {sorted(expected)}")
    json_worst = {(w["line"], w["billed"], w["counted"]) for w in files["data/big.jsonl"]["worst_records"]}
    check(json_worst == want_worst,
          f"JSON files[data/big.jsonl].worst_records {sorted(json_worst)}, want {sorted(want_worst)}")

    # 4. unique_ids places, in the JSON report and in the terminal.
    (uniq,) = [d for d in report["dataset"] if d["name"] == "unique_ids"]
    places = dup_places(uniq["lines"])
    want_places = {"data/big.jsonl": BIG_DUP_LINES, "data/twin/big.jsonl": BIG_DUP_LINES}
    check(places == want_places, f"JSON unique_ids places {places}, want {want_places}")
    (section,) = failure_sections(run.result, "tokaudit::unique_ids")
    places = dup_places(section)
    check(places == want_places, f"terminal unique_ids places {places}, want {want_places}")

    # 5. A partially audited file never passed: its count breaches are no allowed outliers.
    block = allowed_block(run)
    listed = [l for l in block if l.startswith(("data/cnt.jsonl", "data/big.jsonl"))]
    check(not listed,
          "a count breach of a partially audited file is listed under 'allowed outliers "
          f"(tokaudit_count_outliers) in files that passed': {listed}")

    problems.done(run)


# -- a file name that is not UTF-8 ------------------------------------------------------

def test_a_non_utf8_file_name_is_audited(gate: Gate, mode: tuple[str, ...]):
    gate.ini(tokaudit_budget=1000, tokaudit_unique_ids="true", tokaudit_expected_ids="manifest.txt")
    gate.jsonl("data/a.jsonl", [rec(i, 10) for i in range(1, 4)])
    name = os.fsencode(gate.path / "data") + b"/\xff.jsonl"
    try:
        with open(name, "wb") as fh:
            fh.write(jsonl_bytes([rec(i, 10) for i in range(4, 8)]))
    except (OSError, UnicodeError) as exc:  # a file system that only takes UTF-8 names
        pytest.skip(f"cannot create a non-UTF-8 file name here: {exc}")
    gate.write("manifest.txt", ids_text(range(1, 8)))
    run = gate.run(*mode)
    problems = Problems()
    text = run.out + run.err
    for word in ("INTERNALERROR", "TypeError", "Traceback"):
        problems.check(word not in text, f"{word} in the output")
    problems.check(run.ret == OK, f"exit status {run.ret!r}, want {OK!r}")

    data = {n: o for n, o in run.outcomes().items() if is_data(n)}
    other = [n for n in data if n != "data/a.jsonl::tokaudit"]
    problems.check(data.get("data/a.jsonl::tokaudit") == "PASSED", f"data items: {data}")
    problems.check(len(other) == 1 and re.fullmatch(r"data/.+\.jsonl::tokaudit", other[0])
                   and data[other[0]] == "PASSED",
                   f"the non-UTF-8 file is not one passed item: data items {data}")

    rows = summary_rows_of(run)
    named = [n for n in rows if n.startswith("data/") and n != "data/a.jsonl"]
    problems.check(len(named) == 1 and named[0].endswith(".jsonl") and rows[named[0]][0] == "4",
                   f"the non-UTF-8 file has no row of 4 records in the summary table: {rows}")
    problems.check("all 2 files" in rows, f"the summary table does not total 2 files: {rows}")

    # The dataset checks count it: 2 files, 7 records, 70 tokens, 7 ids, all expected ids.
    verdicts = verdict_lines(run)
    for name, words in (
        ("coverage", "2 data files (7 records)"),
        ("budget", "billed 70 of 1,000"),
        ("unique_ids", "7 ids, each once"),
        ("expected_ids", "all 7 expected ids"),
    ):
        problems.check(run.outcome(ds(name)) == "PASSED" and any(words in v for v in verdicts),
                       f"{ds(name)} {run.outcome(ds(name))}, want PASSED with {words!r}: "
                       f"{[v for v in verdicts if ds(name) + ':' in v]}")
    problems.done(run)


def summary_rows_of(run: Run) -> dict[str, list[str]]:
    rows: dict[str, list[str]] = {}
    for line in summary_section(run.result):
        if not line.strip():
            break
        cells = re.split(r"\s{2,}", line.strip())
        rows[cells[0]] = cells[1:]
    return rows


# -- a sharded file deleted mid-run --------------------------------------------------

DELETE = """
from pathlib import Path

BIG = Path(__file__).parent / "data" / "big.jsonl"

def pytest_tokaudit_check_record(record):
    if record.data.get("delete") and BIG.exists():
        BIG.unlink()
"""

CLEAR = re.compile(
    r"no such file|deleted|cannot (?:open|read|stat)|no longer|not found|vanished|removed|"
    r"needs every shard|missing",
    re.I,
)


# Under xdist, --dist loadfile keeps every shard of a file on one worker, in collection
# order, so shards 2-4 always run after shard 1 deleted the file. With --dist load a
# worker may read a shard before the file goes, and the test would check less (and pass
# or fail) depending on the schedule.
DELETE_MODES = {"no-xdist": (), "xdist-2-loadfile": ("-n", "2", "--dist", "loadfile")}


@pytest.mark.parametrize("mode", list(DELETE_MODES.values()), ids=list(DELETE_MODES))
def test_a_sharded_file_deleted_mid_run(gate: Gate, mode: tuple[str, ...]):
    # The manifest names only the ids of a.jsonl and of shard 1 (read before the file
    # goes): a run that took the deleted shards for audited would pass every check.
    gate.ini(
        tokaudit_shard_size=shard_size(PER_SHARD),
        tokaudit_budget=100000,
        tokaudit_unique_ids="true",
        tokaudit_expected_ids="manifest.txt",
    )
    gate.jsonl("data/a.jsonl", [rec(i, 10) for i in range(1, 6)])
    lines = []
    for n in range(1, 4 * PER_SHARD + 1):  # 4 clean shards; line 3 (shard 1) deletes the file
        lines.append(fixed(rec(100 + n, 10, **({"delete": True} if n == 3 else {}))))
    gate.write("data/big.jsonl", b"".join(lines))
    gate.write("manifest.txt", ids_text([*range(1, 6), *range(101, 101 + PER_SHARD)]))
    gate.write("conftest.py", DELETE)
    run = gate.run(*mode)
    assert_no_internal_error(run)
    assert not (gate.path / "data/big.jsonl").exists(), run
    problems = Problems()

    for word in ("FileNotFoundError", "Traceback"):
        problems.check(word not in run.out + run.err, f"{word} in the output")
    problems.check(run.ret == FAILED, f"exit status {run.ret!r}, want {FAILED!r}")

    shards = [f"data/big.jsonl::tokaudit[shard {k}]" for k in range(1, 5)]
    assert run.outcome("data/a.jsonl::tokaudit") == "PASSED", run
    problems.check(run.outcome(shards[0]) in ("PASSED", "FAILED"),
                   f"{shards[0]}: {run.outcome(shards[0])}")
    # Shards 2-4 run after shard 1 deleted the file: none of them can pass.
    hit = [n for n in shards[1:] if run.outcome(n) != "PASSED"]
    problems.check(len(hit) == 3, f"shards that passed after the file was deleted: "
                                  f"{sorted(set(shards[1:]) - set(hit))}")
    for nodeid in hit:
        outcome = run.outcome(nodeid)
        why = run.message(nodeid)
        title = "tokaudit: data/big.jsonl [shard {} of 4]".format(nodeid[-7])
        why += "\n" + "\n".join(l for s in failure_sections(run.result, title) for l in s)
        problems.check(outcome in ("FAILED", "SKIPPED"), f"{nodeid}: {outcome}")
        problems.check(bool(CLEAR.search(why)) and "FileNotFoundError" not in why,
                       f"{nodeid} {outcome} without a clear message: {run.message(nodeid)!r}")

    whole = "data/big.jsonl::tokaudit[file]"
    problems.check(run.outcome(whole) in ("SKIPPED", "FAILED"), f"{whole}: {run.outcome(whole)}")
    problems.check(bool(CLEAR.search(run.message(whole))),
                   f"{whole} does not say why: {run.message(whole)!r}")

    checks = {n: o for n, o in run.outcomes().items() if is_check(n)}
    want = {ds(c) for c in ("coverage", "budget", "unique_ids", "expected_ids")}
    problems.check(set(checks) == want, f"dataset checks reported: {sorted(checks)}")
    if hit:  # part of the file was never read: the run is partial, or fails
        problems.check(set(checks.values()) != {"PASSED"},
                       "every dataset check passed: " + " | ".join(verdict_lines(run)))
        cov = ds("coverage")
        problems.check(checks.get(cov) in ("SKIPPED", "FAILED"),
                       f"{cov} {checks.get(cov)} although {len(hit)} shards of data/big.jsonl "
                       f"were never read: {[l for l in verdict_lines(run) if cov in l]}")
    problems.done(run)


def verdict_lines(run: Run) -> list[str]:
    """The dataset verdicts as the terminal summary words them ('...::coverage: passed: ...')."""
    return [l for l in run.lines if re.match(r"^\S*::tokaudit::\w+: (passed|failed|skipped): ", l)]


# -- line numbering is linear in the file size -------------------------------------------

COUNT_READS = """
import json
from pathlib import Path

import pytest_tokaudit.sources.lines as c

STATS = {"calls": 0, "offsets": [], "bytes": 0}


class Counted:
    \"\"\"A file object that adds every byte it hands out to STATS["bytes"].\"\"\"

    def __init__(self, fh):
        self._fh = fh

    def _count(self, data):
        STATS["bytes"] += len(data or b"")
        return data

    def read(self, *args):
        return self._count(self._fh.read(*args))

    def read1(self, *args):
        return self._count(self._fh.read1(*args))

    def readline(self, *args):
        return self._count(self._fh.readline(*args))

    def readinto(self, buf):
        n = self._fh.readinto(buf)
        STATS["bytes"] += n or 0
        return n

    def __iter__(self):
        for line in self._fh:
            yield self._count(line)

    def __getattr__(self, name):
        return getattr(self._fh, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._fh.close()


def counted_open(*args, **kwargs):
    return Counted(open(*args, **kwargs))


# collect.py opens files only to number lines (lines_before): count what those opens read.
c.open = counted_open
_lines_before = c.lines_before


def lines_before(path, offset):
    STATS["calls"] += 1
    STATS["offsets"].append(offset)
    return _lines_before(path, offset)


c.lines_before = lines_before


def pytest_sessionfinish(session):
    Path(session.config.rootpath, "line_reads.json").write_text(json.dumps(STATS))
"""


def test_failing_shards_do_not_reread_their_file_from_byte_0(gate: Gate):
    per_shard, shards = 10, 30
    gate.ini(
        tokaudit_shard_size=shard_size(per_shard),
        tokaudit_require_last="7",  # no record ends with token 7: every shard fails
        tokaudit_max_shown=1,
    )
    data = b"".join(fixed(rec(i, 10)) for i in range(1, per_shard * shards + 1))
    gate.write("data/big.jsonl", data)
    gate.write("conftest.py", COUNT_READS)
    run = gate.run("--tb=line")  # one process: every shard numbers its lines here
    assert_no_internal_error(run)
    failed = [n for n, o in run.outcomes().items() if "[shard " in n and o == "FAILED"]
    assert len(failed) == shards, run
    stats = json.loads((gate.path / "line_reads.json").read_text())
    assert stats["calls"] >= shards - 1, (stats["calls"], run)  # every shard after the first
    # In file order in one process, each shard's line count gives the next shard's first
    # line: nothing is read to number them (collect.shard_lines). Out of order (xdist, or
    # a cache miss mid-file) the prefix is counted once per process (test_reader.py).
    assert stats["bytes"] == 0, (
        f"{stats['bytes']:,} bytes read to number the lines of a {len(data):,}-byte file "
        f"in {shards} failing shards; lines_before offsets: {stats['offsets']}"
    )


def test_the_two_shards_of_a_file_run_on_two_workers(gate: Gate):
    """xdist's load scheduler starts each worker with two consecutive items; with the
    deferred items ([file], the dataset checks) last, both shards of a two-shard file went
    to one worker and the other idled. Deferred items are interleaved on the workers."""
    per_shard = 50
    gate.ini(tokaudit_shard_size=shard_size(per_shard), tokaudit_unique_ids="true")
    data = b"".join(fixed(rec(i, 10)) for i in range(1, 2 * per_shard + 1))
    assert len(shard_cuts(len(data), shard_size(per_shard))) == 3  # two shards
    gate.write("data/big.jsonl", data)
    run = gate.run("-n", "2", "-v")
    assert_no_internal_error(run)
    assert run.ret == pytest.ExitCode.OK, run
    workers = {nodeid: gw for gw, nodeid in
               re.findall(r"^\[(gw\d)\] .*PASSED (\S+\[shard \d\])", run.out, re.M)}
    assert len(workers) == 2 and len(set(workers.values())) == 2, (workers, run)


# -- a directory symlink loop -------------------------------------------------------

def test_a_symlink_loop_audits_each_real_file_once(gate: Gate, mode: tuple[str, ...]):
    gate.ini()
    gate.jsonl("data/a.jsonl", [rec(i, 10) for i in range(1, 4)])
    gate.jsonl("data/sub/b.jsonl", [rec(i, 10) for i in range(4, 6)])
    try:
        os.symlink("..", gate.path / "data" / "up", target_is_directory=True)
    except (OSError, NotImplementedError) as exc:
        pytest.skip(f"cannot make a symlink here: {exc}")
    run = gate.run(*mode)
    assert_clean(run)
    assert run.ret == OK, run

    data = [n for n in run.outcomes() if is_data(n)]
    assert len(data) == 2, (data, run)  # the real files, not one per level of the loop
    assert sorted(Path(n.split("::")[0]).name for n in data) == ["a.jsonl", "b.jsonl"], run
    # 2 files + coverage: "collected 3 items", or xdist's "2 workers [3 items]"
    assert re.search(r"^collected 3 items|^\d+ workers \[3 items\]", run.out, re.M), run
    assert run.outcome(ds("coverage")) == "PASSED", run
    assert "2 data files (5 records)" in run.out, run

    warned = [l for l in run.lines if "is the same file as" in l]
    assert warned, ("no warning names the duplicate path", run)
    assert any(re.search(r"data/up/\S*(a|b)\.jsonl", l) for l in warned), (warned, run)


def test_a_shard_counts_only_the_lines_since_the_last_shard_that_ran_here(gate: Gate):
    """xdist hands a worker every other shard: each numbers its lines from the end of the
    worker's previous shard, reading the one shard between, never the prefix again."""
    per_shard, shards = 10, 12
    size = shard_size(per_shard)
    gate.ini(tokaudit_shard_size=size, tokaudit_require_last="7", tokaudit_max_shown=1)
    data = b"".join(fixed(rec(i, 10)) for i in range(1, per_shard * shards + 1))
    # shards (even) whole cells of per_shard lines: shard k starts at line (k - 1) * per_shard + 1.
    cuts = shard_cuts(len(data), size)
    assert cuts == line_cuts(per_shard, shards)
    gate.write("data/big.jsonl", data)
    gate.write("conftest.py", COUNT_READS)
    skip = [a for k in range(2, shards + 1, 2)
            for a in ("--deselect", f"data/big.jsonl::tokaudit[shard {k}]")]
    run = gate.run("--tb=line", *skip)  # one process runs shards 1, 3, 5...: a worker's share
    assert_no_internal_error(run)
    ran = {n: o for n, o in run.outcomes().items() if "[shard " in n}
    assert len(ran) == shards // 2 and set(ran.values()) == {"FAILED"}, run
    for k in range(1, shards + 1, 2):  # each shard's first record is its first bad line
        assert f"data/big.jsonl:{(k - 1) * per_shard + 1}:" in run.out, (k, run)
    stats = json.loads((gate.path / "line_reads.json").read_text())
    # The deselected shards between those that ran (2, 4, ..., shards - 2).
    gaps = sum(cuts[k] - cuts[k - 1] for k in range(2, shards, 2))
    assert stats["bytes"] <= gaps + 2 * shards, (
        f"{stats['bytes']:,} bytes read to number lines; the shards between are {gaps:,} bytes; "
        f"lines_before offsets: {stats['offsets']}")


@pytest.mark.parametrize("numpy", [True, False], ids=["numpy", "bytes.count"])
def test_count_newlines_matches_bytes_count_across_its_buffer(tmp_path: Path, monkeypatch, numpy):
    from pytest_tokaudit.sources.lines import count_newlines
    if numpy:
        pytest.importorskip("numpy")
    else:
        monkeypatch.setitem(sys.modules, "numpy", None)  # as where the columnar path never ran
    data = b"".join(b"x" * (i % 97) + b"\n" for i in range(30_000)) + b"tail"  # > 1 MiB
    path = tmp_path / "f.jsonl"
    path.write_bytes(data)
    with open(path, "rb") as fh:
        for start, stop in [(0, len(data)), (0, 0), (5, 1 << 20), ((1 << 20) - 3, (1 << 20) + 5),
                            (17, len(data) - 2), (len(data) - 4, len(data) + 100)]:
            assert count_newlines(fh, start, stop) == data[start:stop].count(b"\n"), (start, stop)
