"""tokaudit_unique_ids (checks/dataset.py) and the index it judges by (model/idindex.py):
keys, repeats, their report order, memory. The manifest of tokaudit_expected_ids, judged by
the same index: test_expected_ids.py."""

from __future__ import annotations

import gc
import itertools
import random
import sys
import tracemalloc

import pytest

import forkrun
from conftest import UNRELATED_PLUGINS, TokProject
from pytest_tokaudit.model import idindex as ids_module
from pytest_tokaudit.model.contract import Contract
from pytest_tokaudit.checks.dataset import DUPLICATES_SHOWN, evaluate
from pytest_tokaudit.__main__ import standalone_hook
from pytest_tokaudit.model.idindex import IdIndex
from pytest_tokaudit.model.summary import IDS, FileSummary
FAILED = pytest.ExitCode.TESTS_FAILED
CONTRACT = Contract.from_json({"tokaudit_unique_ids": "true"})


def summary(path: str, ids: list, lines: list[int] | None = None, shard: int | None = None):
    lines = list(lines) if lines is not None else list(range(1, len(ids) + 1))
    return FileSummary(path=path, shard=shard, channels={IDS: [[shard, list(ids), lines]]})


def index_of(*summaries: FileSummary, **kw) -> IdIndex:
    index = IdIndex(**kw)
    for s in summaries:
        index.add(s)
    return index


def unique_ids(index: IdIndex):
    (outcome,) = evaluate(standalone_hook(), [], index, CONTRACT, None)
    return outcome


# -- distinct values are distinct ids ---------------------------------------------------------

LOOKALIKES = [2**63, "\x009223372036854775808", -1, "\x00-1", 1, "1", 2**53, "\x009007199254740992",
              "sample-1", "sample-01", "sample-001", "1.0", "", "x", -(2**70), 2**70]


def test_distinct_json_values_are_distinct_ids():
    index = index_of(summary("a.jsonl", LOOKALIKES[::2]), summary("b.jsonl", LOOKALIKES[1::2]))
    outcome = unique_ids(index)
    assert (outcome.outcome, outcome.message) == ("passed", f"{len(LOOKALIKES)} ids, each once")
    assert len(index) == len(LOOKALIKES)
    for value in LOOKALIKES:
        assert value in index
    for value in ["\x00" + str(2**70), 2, "2", "sample-0001", "sample-2", 2**63 + 1, -2, "y"]:
        assert value not in index


def test_repeats_of_every_kind_of_id_are_found_with_their_value():
    ids = [5, "sample-007", "a7", "", "opaque", -3, 2**64, "sample-7"]
    index = index_of(summary("a.jsonl", ids), summary("b.jsonl", ids[::-1][:4] + ["new"]),
                     summary("c.jsonl", ids[:4]))
    assert index.duplicates() == [
        (5, ["a.jsonl:1", "c.jsonl:1"]),
        ("sample-007", ["a.jsonl:2", "c.jsonl:2"]),
        ("a7", ["a.jsonl:3", "c.jsonl:3"]),
        ("", ["a.jsonl:4", "c.jsonl:4"]),
        ("opaque", ["a.jsonl:5", "b.jsonl:4"]),
        (-3, ["a.jsonl:6", "b.jsonl:3"]),
        (2**64, ["a.jsonl:7", "b.jsonl:2"]),
        ("sample-7", ["a.jsonl:8", "b.jsonl:1"]),
    ]
    assert (index.duplicate_count(), index.extra_records(), len(index)) == (8, 8, 9)


def test_repeats_within_one_summary_in_any_order():
    ids = ["k-3", 9, "zz", "k-3", 9, "zz", "k-3", 1, "zz"]
    index = index_of(summary("a.jsonl", ids, [2 * i + 1 for i in range(len(ids))]))
    assert index.duplicates() == [
        ("k-3", ["a.jsonl:1", "a.jsonl:7", "a.jsonl:13"]),
        (9, ["a.jsonl:3", "a.jsonl:9"]),
        ("zz", ["a.jsonl:5", "a.jsonl:11", "a.jsonl:17"]),
    ]
    assert (index.duplicate_count(), index.extra_records(), len(index)) == (3, 5, 4)


def test_strings_forced_onto_one_key_are_told_apart():
    """Every hashed string gets key 0: the check keeps distinct strings apart."""
    index = index_of(
        summary("a.jsonl", ["alpha", "beta", "alpha"]),
        summary("b.jsonl", ["gamma"]),
        summary("c.jsonl", ["beta", "delta"]),
        hash_str=lambda text: 0,
    )
    assert index.duplicates() == [("alpha", ["a.jsonl:1", "a.jsonl:3"]),
                                  ("beta", ["a.jsonl:2", "c.jsonl:1"])]
    assert len(index) == 4
    assert "gamma" in index and "delta" in index and "epsilon" not in index
    assert unique_ids(index).message == "2 ids with more than one record (2 records counted twice)"


def test_strings_forced_onto_one_key_and_check_are_compared_by_value():
    """Key and check both collide: where the values are at hand, they decide."""
    index = index_of(
        summary("a.jsonl", ["alpha", "beta", "alpha", "gamma"]),
        summary("b.jsonl", ["beta", "alpha"]),
        hash_str=lambda text: 0, check_str=lambda text: 0,
    )
    assert index.duplicates() == [("alpha", ["a.jsonl:1", "a.jsonl:3", "b.jsonl:2"]),
                                  ("beta", ["a.jsonl:2", "b.jsonl:1"])]
    assert (index.duplicate_count(), index.extra_records()) == (2, 3)


def test_values_decide_when_key_and_check_collide_across_summaries():
    """The first place's value came in an earlier summary: it is read back, not assumed."""
    index = index_of(
        summary("a.jsonl", ["alpha", "beta"]),
        summary("b.jsonl", ["gamma", "beta"]),
        summary("c.jsonl", [9223372036854775808, "\x009223372036854775808", "delta"]),
        hash_str=lambda text: 0, check_str=lambda text: 0,
    )
    assert index.duplicates() == [("beta", ["a.jsonl:2", "b.jsonl:2"])]
    assert (index.duplicate_count(), index.extra_records(), len(index)) == (1, 1, 6)
    assert index.missing(["alpha", "gamma", "epsilon", 9223372036854775808, "delta",
                          "9223372036854775808", -1]) == ["epsilon", "9223372036854775808", -1]
    assert "alpha" in index and "zeta" not in index


def test_a_collision_alone_is_not_a_duplicate():
    index = index_of(summary("a.jsonl", ["alpha"]), summary("b.jsonl", ["beta"]),
                     hash_str=lambda text: 0, check_str=lambda text: 0)
    assert index.duplicates() == [] and len(index) == 2
    assert unique_ids(index).message == "2 ids, each once"


def test_keys_from_one_summary_and_from_one_value_agree():
    rnd = random.Random(1)
    values = ([f"s-{i:05d}" for i in range(300)] + [f"u{rnd.getrandbits(40):x}" for _ in range(300)]
              + list(range(300)) + [-i for i in range(1, 50)] + ["007", "x" * 40 + "1" * 40])
    rnd.shuffle(values)
    for ids in (values, [v for v in values if type(v) is str], [v for v in values if type(v) is int]):
        index = index_of(summary("a.jsonl", ids))
        assert len(index) == len(ids)
        assert all(v in index for v in ids)
        stored = {index.key(v) for v in ids}
        assert len(stored) == len(ids)


def test_prefixes_past_the_limit_are_hashed_and_still_found(monkeypatch):
    monkeypatch.setattr(ids_module, "MAX_PREFIXES", 2)
    first = [f"p{n}-{i}" for n in range(5) for i in range(3)]
    index = index_of(summary("a.jsonl", first), summary("b.jsonl", ["p4-2", "p0-1", "p9-9"]))
    assert len(index._prefix_names) == 3  # "" and two prefixes
    assert index.duplicates() == [("p0-1", ["a.jsonl:2", "b.jsonl:2"]),
                                  ("p4-2", ["a.jsonl:15", "b.jsonl:1"])]
    assert all(v in index for v in first) and "p9-9" in index and "p9-8" not in index


# -- the report is a function of the data -----------------------------------------------------

def sharded(n_dups: int) -> list[FileSummary]:
    """Four shards of a.jsonl (lines relative to each shard) and b.jsonl; ids repeat across."""
    per = 50
    shards = []
    for k in range(4):
        ids = [k * per + i for i in range(per)]
        if k:  # each later shard repeats some ids of the shard before, out of order
            ids[5:5 + n_dups // 3] = [(k - 1) * per + 3 * j % per for j in range(n_dups // 3)]
        shards.append(summary("a.jsonl", ids, shard=k))
    shards.append(summary("b.jsonl", [f"s{i}" for i in range(20)] + [7, 199, 60]))
    return shards


@pytest.mark.parametrize("n_dups", [6, 45])
def test_duplicates_do_not_depend_on_the_order_summaries_arrive_in(n_dups):
    parts = sharded(n_dups)
    offsets = {("a.jsonl", k): 50 * k for k in range(4)}
    seen = set()
    for order in itertools.islice(itertools.permutations(parts), 0, None, 7):
        index = IdIndex()
        for s in order:
            index.add(s)
        index.offsets = offsets
        outcome = unique_ids(index)
        seen.add((outcome.message, tuple(outcome.lines)))
    assert len(seen) == 1, seen
    (message, lines), = seen
    assert lines[0] == "sample_id=0: 2 records: a.jsonl:1, a.jsonl:56"
    if n_dups > DUPLICATES_SHOWN:
        assert lines[-1].startswith("... and ")
        assert len(lines) == DUPLICATES_SHOWN + 1
    # ids by first place, places by line
    firsts = [l.split(": ")[2].split(", ")[0] for l in lines if not l.startswith("...")]
    assert firsts == sorted(firsts, key=lambda w: (w.split(":")[0], int(w.split(":")[1])))


def test_duplicates_order_paths_then_lines():
    index = index_of(summary("b.jsonl", [1, 2, 3], [10, 20, 30]), summary("a.jsonl", [3, 2], [9, 100]),
                     summary("a.jsonl", [2, 1], [1, 2], shard=1))
    index.offsets = {("a.jsonl", 1): 200}
    assert index.duplicates() == [
        (3, ["a.jsonl:9", "b.jsonl:30"]),
        (2, ["a.jsonl:100", "a.jsonl:201", "b.jsonl:20"]),
        (1, ["a.jsonl:202", "b.jsonl:10"]),
    ]
    assert index.duplicates(1) == index.duplicates()[:1]


MANY_SHARDS = """
import json
with open("data/big.jsonl", "w") as fh:
    for i in range(400):  # ids 0-369, then 29 down to 0 again
        fh.write(json.dumps({"sample_id": i if i < 370 else 399 - i, "completion_tokens": 3, "output_ids": [1, 2, 3]}) + "\\n")
"""


def test_duplicates_of_a_sharded_file_under_xdist_are_listed_in_file_order(pytester: pytest.Pytester):
    project = TokProject(pytester, ())
    project.ini(tokaudit_unique_ids="true", tokaudit_shard_size=3000)
    (pytester.path / "data").mkdir()
    pytester.run(sys.executable, "-c", MANY_SHARDS)
    outputs = set()
    for mode in (("-p", "no:xdist"), ("-n", "2"), ("-n", "2")):
        result = forkrun.runpytest(pytester, "--tokaudit", "data", *mode, *UNRELATED_PLUGINS,
                                               timeout=120)
        assert result.ret == FAILED
        lines = result.stdout.lines
        at = lines.index("30 ids with more than one record (30 records counted twice)")
        outputs.add(tuple(lines[at:at + DUPLICATES_SHOWN + 2]))
    assert len(outputs) == 1, outputs
    (shown,) = outputs
    assert shown[1:4] == ("sample_id=0: 2 records: data/big.jsonl:1, data/big.jsonl:400",
                          "sample_id=1: 2 records: data/big.jsonl:2, data/big.jsonl:399",
                          "sample_id=2: 2 records: data/big.jsonl:3, data/big.jsonl:398")
    assert shown[-1] == "... and 10 more duplicated ids"


# -- memory -----------------------------------------------------------------------------------

def traced(build):
    gc.collect()
    tracemalloc.start()
    try:
        result = build()
        return result, tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()


N = 60_000


# The suite measures integer ids; string ids, counted and hashed, cost seconds more each
# under tracemalloc and run in the full matrix (nox -s full).
@pytest.mark.parametrize("kind, limit", [
    ("int", 18),
    pytest.param("counter", 18, marks=pytest.mark.full),
    pytest.param("opaque", 24, marks=pytest.mark.full),
])
def test_memory_per_id_and_repeats(kind, limit):
    rnd = random.Random(2)
    if kind == "int":
        values = list(range(N))
    elif kind == "counter":
        values = [f"sample-{i:06d}" for i in range(N)]
    else:
        values = [f"{rnd.getrandbits(64):016x}-{i}x" for i in range(N)]
    rnd.shuffle(values)
    parts = [summary("a.jsonl", values[k::4], shard=k) for k in range(4)]
    index, once = traced(lambda: index_of(*parts))
    assert len(index) == N
    assert once / N <= limit, f"{once / N:.1f} bytes per id"
    # The same ids again: the index keeps its size; only the repeats' places are added.
    index, twice = traced(lambda: index_of(*parts, *parts))
    assert len(index) == N and index.extra_records() == N
    per_repeat = 24 if kind != "opaque" else 24 + 10  # hashed repeats keep their value
    assert (twice - once) / N <= per_repeat, f"{(twice - once) / N:.1f} bytes per repeat"


# -- folding in chunks ------------------------------------------------------------------------

def naive_duplicates(parts: list[FileSummary]) -> list[tuple[object, list[str]]]:
    """What unique_ids must report, from a plain dict of (type, value) -> places."""
    places: dict[tuple[str, object], list[tuple[str, int]]] = {}
    for s in parts:
        for _, ids, lines in s.channels[IDS]:
            for value, line in zip(ids, lines):
                places.setdefault((type(value).__name__, value), []).append((s.path, line))
    groups = [(value, sorted(where)) for (_, value), where in places.items() if len(where) > 1]
    groups.sort(key=lambda g: g[1][0])
    return [(value, [f"{p}:{line}" for p, line in where]) for value, where in groups]


def mixed_ids(rnd: random.Random, kind: str, n: int) -> list:
    pool = {  # ids drawn at random from a range: most come once, some twice or more
        "int": lambda: rnd.randrange(3 * n),
        "str": lambda: f"sample-{rnd.randrange(3 * n):06d}",
        "opaque": lambda: f"u{rnd.randrange(3 * n):x}z",
        "mixed": lambda: rnd.choice([rnd.randrange(3 * n), f"s-{rnd.randrange(3 * n)}",
                                     str(rnd.randrange(3 * n)), -rnd.randrange(1, n),
                                     2**64 + rnd.randrange(n), f"k{rnd.randrange(n)}"]),
    }
    if kind.endswith("runs"):  # counting up in runs that overlap: chunks in order, repeats across them
        out: list = []
        while len(out) < n:
            start = rnd.randrange(2 * n)
            out += [i if kind == "int runs" else f"sample-{i:06d}" for i in range(start, start + 40)]
        return out[:n]
    return [pool[kind]() for _ in range(n)]


HASHES = {  # hash_str, check_str: the defaults, and tiny ones that force collisions
    "default": {},
    "2-bit key": {"hash_str": lambda t: hash(t) & 3},
    "2-bit key and check": {"hash_str": lambda t: hash(t) & 3, "check_str": lambda t: len(t) & 1},
    "one key and check": {"hash_str": lambda t: 0, "check_str": lambda t: 0},
}


@pytest.mark.parametrize("hashes", HASHES)
@pytest.mark.parametrize("kind", ["int", "str", "opaque", "mixed", "int runs", "str runs"])
@pytest.mark.parametrize("chunk", [1, 7, 16, 1 << 16])
def test_chunked_folds_find_what_a_plain_dict_finds(monkeypatch, kind, hashes, chunk):
    """Summaries folded a chunk at a time (repeats within a chunk, across chunks of one summary
    and across summaries) report the same ids, places, counts and missing ids as a dict."""
    monkeypatch.setattr(ids_module, "CHUNK", chunk)
    rnd = random.Random(f"{kind}{hashes}{chunk}")
    n = 300
    parts = []
    for k in range(4):
        ids = mixed_ids(rnd, kind, n)
        lines = sorted(rnd.sample(range(1 + 5 * n * k, 5 * n * (k + 1)), n))  # distinct places
        if k == 2:  # shuffled lines within a summary: a summary need not be in line order
            order = list(range(n))
            rnd.shuffle(order)
            ids, lines = [ids[i] for i in order], [lines[i] for i in order]
        parts.append(summary(f"{'ab'[k % 2]}.jsonl", ids, lines, shard=k))
    index = index_of(*parts, **HASHES[hashes])
    expected = naive_duplicates(parts)
    assert expected, "the data must hold repeats"
    assert index.duplicates() == expected
    assert index.duplicate_count() == len(expected)
    assert index.extra_records() == sum(len(p) - 1 for _, p in expected)
    everything = {(type(v).__name__, v) for s in parts for v in s.channels[IDS][0][1]}
    assert len(index) == len(everything)
    probe = mixed_ids(rnd, kind, 200)
    assert index.missing(probe) == [v for v in probe if (type(v).__name__, v) not in everything]


def test_running_out_of_memory_fails_the_id_checks_instead_of_the_run(monkeypatch, tmp_path):
    parts = [summary("a.jsonl", [1, 2, 3]), summary("b.jsonl", [3, 4]), summary("c.jsonl", [5])]
    index = IdIndex()
    index.add(parts[0])
    monkeypatch.setattr(ids_module.Table, "merge", lambda *a: (_ for _ in ()).throw(MemoryError()))
    index.add(parts[1])
    monkeypatch.undo()
    index.add(parts[2])  # ignored: the index no longer holds every id
    assert index.overflow == "out of memory folding the record ids of b.jsonl (3 distinct ids were kept)"
    outcome = unique_ids(index)
    assert (outcome.outcome, outcome.message) == ("failed", f"not judged: {index.overflow}")
    manifest = tmp_path / "m.txt"
    manifest.write_text("1\n")
    contract = Contract.from_json({"tokaudit_expected_ids": str(manifest)})
    (outcome,) = evaluate(standalone_hook(), [], index, contract, None)
    assert (outcome.outcome, outcome.message) == ("failed", f"not judged: {index.overflow}")
