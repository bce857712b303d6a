"""Where a big file is cut (sources.base.shard_cuts): the cuts cover the file, no shard is
over the shard size, two workers get the same bytes, and appending moves only the last
two cuts, so an incremental run re-audits the tail only."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pytest_tokaudit.sources.base import MAX_SHARDS, shard_count, shard_cuts

SIZES = st.integers(min_value=1, max_value=10**7)


def ranges(cuts: list[int]) -> list[tuple[int, int]]:
    return list(zip(cuts, cuts[1:]))


@given(shard=SIZES, extra=SIZES)
def test_the_cuts_cover_the_file_and_no_shard_is_over_the_size(shard: int, extra: int):
    size = shard + extra  # only a file over the shard size is cut
    cuts = shard_cuts(size, shard)
    assert cuts[0] == 0 and cuts[-1] == size
    assert all(a < b for a, b in ranges(cuts))
    assert all(b - a <= shard for a, b in ranges(cuts)) or len(cuts) - 1 > MAX_SHARDS // 2
    assert 2 <= shard_count(size, shard) <= MAX_SHARDS


@given(shard=SIZES, extra=SIZES)
def test_two_workers_get_the_same_bytes(shard: int, extra: int):
    """Dealt out in turn (as xdist's load scheduler deals equal items), each worker's share
    differs by one byte at most."""
    sizes = [b - a for a, b in ranges(shard_cuts(shard + extra, shard))]
    assert abs(sum(sizes[0::2]) - sum(sizes[1::2])) <= 1, sizes


@given(shard=SIZES, extra=SIZES, appended=st.integers(min_value=1, max_value=10**6))
def test_appending_keeps_every_shard_but_the_last_two(shard: int, extra: int, appended: int):
    size = shard + extra
    before, after = ranges(shard_cuts(size, shard)), ranges(shard_cuts(size + appended, shard))
    if len(after) > MAX_SHARDS // 2:
        return  # the cells may have doubled (below)
    # The same shards, in the same places: their node ids (shard i) and cache entries hold.
    assert after[:len(before) - 2] == before[:-2]
    # What is audited again is the tail: at most two shards' bytes beyond what was appended.
    redone = sum(b - a for a, b in after[max(len(before) - 2, 0):])
    assert redone <= 2 * shard + appended


def test_a_realistic_file_an_appended_line_re_audits_two_shards():
    """1 GB at the default 128 MiB: six whole shards, the rest halved; a line appended
    changes the two halves only."""
    shard, size = 128 * 2**20, 10**9
    before, after = ranges(shard_cuts(size, shard)), ranges(shard_cuts(size + 900, shard))
    assert len(before) == len(after) == 8
    assert before[:6] == after[:6] == [(i * shard, (i + 1) * shard) for i in range(6)]
    assert before[6:] != after[6:]


def test_past_max_shards_the_cells_double_and_keep_every_second_cut():
    shard = 2**20
    small = shard_cuts((MAX_SHARDS - 3) * shard, shard)
    big = shard_cuts((MAX_SHARDS + 5) * shard, shard)
    assert len(big) - 1 <= MAX_SHARDS and big[1] == 2 * shard
    # The file grew past the limit: every second cut of the smaller file stays a cut.
    kept = [c for c in small[:-2] if c % (2 * shard) == 0]
    assert kept == [c for c in big if c <= small[-3]] and len(kept) > MAX_SHARDS // 2 - 2
