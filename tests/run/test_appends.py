"""A big file that grows by appends (how generated data grows): each run re-audits its last
two shards only, the shards before keep their node ids and cached results, and the
verdicts are those of a cold run. The records audited are counted by a conftest hook that
logs their lines (never timed)."""

from __future__ import annotations

import json

import pytest

from conftest import XDIST_MODES, TokProject, assert_no_crash, jsonl_bytes, line_starts, rec

SHARD = 700
ONCE, LAST = 7, 9

COUNTER = """
from pathlib import Path

LOG = Path(__file__).parent / "audited.log"  # record ids


def pytest_tokaudit_check_record(record):
    with open(LOG, "a") as fh:
        fh.write(f"{record.id}\\n")
"""

ONE_PROCESS = pytest.mark.parametrize("xdist_mode", [XDIST_MODES["no-xdist"]], ids=["no-xdist"])


def good(i: int, billed: int | None = None, **extra) -> dict:
    return rec(i, 10, billed, once=[ONCE], last=LAST, **extra)


def audited_lines(project: TokProject) -> list[int]:
    """The file's lines audited since the last call (from their ids: a hook sees a shard's
    records numbered from the shard's start)."""
    log = project.path / "audited.log"
    if not log.exists():
        return []
    ids = [int(x) for x in log.read_text().split()]
    log.unlink()
    return sorted(i if i < 100 else 41 + i - 100 for i in ids)


@ONE_PROCESS
def test_appending_a_line_re_audits_the_last_two_shards_only(project: TokProject):
    project.ini(tokaudit_require_once=ONCE, tokaudit_require_last=LAST, tokaudit_count_abs=0,
                tokaudit_count_rel=0, tokaudit_shard_size=SHARD, tokaudit_count_mean_rel="")
    project.write("conftest.py", COUNTER)
    records = [good(i) for i in range(1, 41)]
    records[8] = rec(9, 10, once=[ONCE])  # line 9, in shard 2, no last token: it fails there
    path = project.path / "data/big.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(jsonl_bytes(records))
    project.settle()  # the cold run stores the shards the appends below reuse

    cold = project.run("--tokaudit-json=audit.json")
    assert_no_crash(cold)
    assert len(audited_lines(project)) == 40
    names = json.loads((project.path / "audit.json").read_text())["cache"]["audited"]
    # Lines of ~400 bytes: every second append crosses a multiple of the shard size, so the
    # appends below cross both kinds (the whole shards stay even, or two more are whole).
    for k in range(6):
        before = path.read_bytes()
        appended = jsonl_bytes([good(100 + k, note="x" * 280)])
        with open(path, "ab") as fh:
            fh.write(appended)
        data = before + appended
        result = project.run("--tokaudit-json=audit.json")
        assert_no_crash(result)
        result.stdout.fnmatch_lines(["FAILED data/big.jsonl::tokaudit[[]shard 2[]] - *"])
        cache = json.loads((project.path / "audit.json").read_text())["cache"]
        # Every shard before the last two of the previous run is reused, under its name.
        kept = [n for n in names if n.endswith("]") and "[shard" in n][:-2]
        assert set(kept) <= set(cache["items"]), (k, kept, cache)
        # What was audited again lies in the last two shards' bytes and what was appended.
        starts = line_starts(data)
        lines = audited_lines(project)
        assert starts[-1] == len(before) and len(starts) in lines  # the new line
        assert all(starts[i - 1] >= len(data) - 2 * SHARD - len(appended) for i in lines), (k, lines)
        names = sorted(cache["items"] + cache["audited"],
                       key=lambda n: int(n.rsplit(" ", 1)[-1][:-1]) if "[shard" in n else 0)

    # The cached run's verdicts are a cold run's.
    warm = result.parseoutcomes()
    cold = project.run("--tokaudit-no-cache")
    assert cold.parseoutcomes() == warm
    assert len(audited_lines(project)) == 46
    # --lf reruns the failing shard by the node id it had before the file grew.
    lf = project.run("--lf")
    lf.stdout.fnmatch_lines(["FAILED data/big.jsonl::tokaudit[[]shard 2[]] - *"])
    assert "1 failed" in lf.stdout.lines[-1] and audited_lines(project) == []
