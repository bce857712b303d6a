"""The order xdist workers collect the items in: it decides how the load scheduler spreads
them. Deferred items ([file], the dataset checks) come before the data items, which come
largest first, so the small shards are the last handed out and go to whichever worker is
free (a 300 MB file at 128 MiB: 128 + 15 MB on each of two workers, not 128 + 15 + 15 on
one while the other idles)."""

from __future__ import annotations

import re

import pytest

from conftest import Gate, assert_no_internal_error, jsonl_bytes, rec
from pytest_tokaudit.sources.base import shard_cuts

SHARD = 2000


def test_a_worker_runs_the_deferred_items_first_then_the_largest_items_first(gate: Gate):
    big = jsonl_bytes(rec(i, 10) for i in range(1, 42))
    cuts = shard_cuts(len(big), SHARD)
    sizes = [b - a for a, b in zip(cuts, cuts[1:])]
    # Two whole cells, then the rest halved: the layout of the benchmark's 300 MB file.
    assert len(sizes) == 4 and sizes[0] == sizes[1] == SHARD and sizes[2] < SHARD // 2, sizes
    # A file between a cell and a half, collected before the big one (its name sorts first).
    medium = jsonl_bytes(rec(i, 10) for i in range(1000, 1009))
    assert sizes[2] < len(medium) < sizes[0]
    gate.ini(tokaudit_shard_size=SHARD, tokaudit_count_mean_rel="")
    gate.write("data/a_medium.jsonl", medium)
    gate.write("data/big.jsonl", big)
    gate.write("data/c_small.jsonl", jsonl_bytes([rec(5000, 10)]))
    # One worker: it runs the items in the order it collected them (xdist hands them out
    # in that order), and -v prints each as it ends. Deferred items print nothing there
    # (the controller judges them).
    run = gate.run("-n", "1", "-v")
    assert_no_internal_error(run)
    assert run.ret == pytest.ExitCode.OK, run
    ran = re.findall(r"^\[gw0\] .*?PASSED ([^\s\[]+(?:\[shard \d+\])?)", run.out, re.M)
    assert ran == [
        "data/big.jsonl::tokaudit[shard 1]",
        "data/big.jsonl::tokaudit[shard 2]",
        "data/big.jsonl::tokaudit[shard 3]",
        "data/big.jsonl::tokaudit[shard 4]",
        "data/a_medium.jsonl::tokaudit",
        "data/c_small.jsonl::tokaudit",
    ], run
    # Judged by the controller after the data items, as in one process.
    assert run.outcome("data/big.jsonl::tokaudit[file]") == "PASSED", run
    assert run.outcome("pytest.ini::tokaudit::coverage") == "PASSED", run


def test_under_loadgroup_each_of_two_workers_gets_a_big_and_a_small_shard(gate: Gate):
    """`--dist loadgroup` hands out one item to each worker in turn (then again, before any
    has finished): with the deferred items between the data items, one worker got both
    whole cells and the other the deferred items and the two halves."""
    gate.ini(tokaudit_shard_size=SHARD, tokaudit_count_mean_rel="")
    big = jsonl_bytes(rec(i, 10) for i in range(1, 42))
    assert len(shard_cuts(len(big), SHARD)) == 5  # two whole cells, two halves
    gate.write("data/big.jsonl", big)
    run = gate.run("-n", "2", "--dist", "loadgroup", "-v")
    assert_no_internal_error(run)
    assert run.ret == pytest.ExitCode.OK, run
    worker = {shard: gw for gw, shard in re.findall(r"^\[(gw\d)\] .*?PASSED \S+\[shard (\d)\]",
                                                    run.out, re.M)}
    assert sorted(worker) == ["1", "2", "3", "4"], run
    assert worker["1"] != worker["2"] and worker["3"] != worker["4"], (worker, run)
