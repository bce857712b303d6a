"""What sharding may cost: a shard size too small to be worth an item is a usage error,
a file is never cut into more than MAX_SHARDS items, and a compressed file whose frames
are far too many for its size (millions of empty frames) is not split, after a bounded
walk of its headers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import TokProject, bgzf_member, jsonl_bytes, rec, zst_frames
from pytest_tokaudit.sources import frames
from pytest_tokaudit.model.values import MIN_SHARD_SIZE
from pytest_tokaudit.sources.base import MAX_SHARDS
from pytest_tokaudit.sources.jsonl import SOURCE as JSONL

zstandard = pytest.importorskip("zstandard")


# -- the key -----------------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["1", "4096", str(MIN_SHARD_SIZE - 1)])
@pytest.mark.parametrize("where", ["ini", "-o"])
def test_a_shard_size_below_the_minimum_is_a_usage_error(pytester: pytest.Pytester,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          value: str, where: str):
    monkeypatch.delenv("TOKAUDIT_MIN_SHARD_SIZE", raising=False)
    project = TokProject(pytester, ("-p", "no:xdist"))
    project.ini(**({"tokaudit_shard_size": value} if where == "ini" else {}))
    project.jsonl("data/a.jsonl", [rec(1)])
    result = project.run(*(["-o", f"tokaudit_shard_size={value}"] if where == "-o" else []))
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    origin = "pytest.ini" if where == "ini" else "-o"
    assert (f"ERROR: tokaudit_shard_size ({origin}): {int(value):,} is below the minimum of 1 MiB"
            in result.stderr.str()), result.stderr.str()


@pytest.mark.parametrize("value", ["0", str(MIN_SHARD_SIZE), "134217728"])
def test_zero_and_sizes_from_the_minimum_are_accepted(pytester: pytest.Pytester,
                                                      monkeypatch: pytest.MonkeyPatch, value: str):
    monkeypatch.delenv("TOKAUDIT_MIN_SHARD_SIZE", raising=False)
    project = TokProject(pytester, ("-p", "no:xdist"))
    project.ini(tokaudit_shard_size=value)
    project.jsonl("data/a.jsonl", [rec(1)])
    assert project.run().ret == pytest.ExitCode.OK


def test_a_conftest_cannot_set_a_tiny_shard_size_either(monkeypatch: pytest.MonkeyPatch):
    from pytest_tokaudit.model.contract import KEYS, Contract, ContractError

    monkeypatch.delenv("TOKAUDIT_MIN_SHARD_SIZE", raising=False)
    contract = Contract(**{k.attr: k.parse(k.default) for k in KEYS})
    with pytest.raises(ContractError, match="below the minimum of 1 MiB"):
        contract.replace(shard_size=1)
    monkeypatch.setenv("TOKAUDIT_MIN_SHARD_SIZE", "1")  # what the suite itself sets
    assert contract.replace(shard_size=1).shard_size == 1


# -- the count per file ------------------------------------------------------------------------

def test_a_huge_jsonl_file_is_cut_into_at_most_max_shards():
    parts = JSONL.parts(Path("x.jsonl"), 10**13, MIN_SHARD_SIZE)  # 10 TB: stat only
    assert parts is not None and MAX_SHARDS // 2 < len(parts) <= MAX_SHARDS
    assert parts[0].byte_range[0] == 0 and parts[-1].byte_range[1] == 10**13
    assert all(a.byte_range[1] == b.byte_range[0] for a, b in zip(parts, parts[1:]))


def test_tiny_shards_of_every_format_stop_at_max_shards(tmp_path: Path):
    """With the minimum lifted (as the suite lifts it), a file of thousands of frames or row
    groups and a shard size of one byte: at most MAX_SHARDS parts, covering the file."""
    data = jsonl_bytes([rec(i) for i in range(1, 3001)])
    plain = tmp_path / "a.jsonl"
    plain.write_bytes(data)
    zst = tmp_path / "a.jsonl.zst"
    zst.write_bytes(zst_frames(data, 500))  # about 540 frames
    out = {"jsonl": JSONL.parts(plain, len(data), 1), "zst": JSONL.parts(zst, zst.stat().st_size, 1)}
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    from pytest_tokaudit.sources.parquet import SOURCE as PARQUET

    pqfile = tmp_path / "a.parquet"
    pq.write_table(pa.Table.from_pylist([rec(i) for i in range(1, 3001)]), pqfile, row_group_size=1)
    out["parquet"] = PARQUET.parts(pqfile, pqfile.stat().st_size, 1)
    for name, parts in out.items():
        assert parts is not None and 500 <= len(parts) <= MAX_SHARDS, (name, len(parts or []))
    assert len(out["jsonl"]) > MAX_SHARDS // 2 and out["jsonl"][-1].byte_range[1] == len(data)
    assert out["zst"][-1].byte_range[1] == zst.stat().st_size
    assert out["parquet"][-1].groups[1] == 3000


# -- the header walk ---------------------------------------------------------------------------

def empty_frames(kind: str, n: int) -> bytes:
    one = zstandard.ZstdCompressor().compress(b"") if kind == "zst" else bgzf_member(b"")
    return one * n


@pytest.mark.parametrize("kind", ["zst", "gz"])
def test_a_file_of_a_million_empty_frames_is_walked_briefly_and_not_split(tmp_path: Path, kind: str):
    data = jsonl_bytes([rec(i) for i in range(1, 201)])
    body = zst_frames(data, 1500) if kind == "zst" else b"".join(
        bgzf_member(data[i:i + 1500]) for i in range(0, len(data), 1500))
    path = tmp_path / f"a.jsonl.{kind}"
    path.write_bytes(body + empty_frames(kind, 1_000_000))
    size = path.stat().st_size
    reads = 0
    with open(path, "rb") as fh:
        def read_at(pos: int, n: int) -> bytes:
            nonlocal reads
            reads += 1
            fh.seek(pos)
            return fh.read(n)

        walk = frames._zstd_bounds if kind == "zst" else frames._bgzf_bounds
        assert walk(read_at, size) is None
    # Brief as a number of reads, not of seconds (how fast: the kit's `collect` case).
    assert reads <= 3 * (frames.MAX_FRAMES + size // frames.MIN_FRAME_BYTES), reads
    assert JSONL.parts(path, size, 1 << 20) is None  # one item, which reads it all


def test_more_frames_than_walked_freely_still_split_when_of_a_sane_size(tmp_path: Path):
    """More frames than MAX_FRAMES, of a few KB each (as per-chunk frames are): split."""
    import hashlib

    n = frames.MAX_FRAMES + 904
    c = zstandard.ZstdCompressor()
    body = []
    for f in range(n):
        notes = [hashlib.sha256(f"{f}.{k}".encode()).hexdigest() * 2 for k in range(16)]
        body.append(c.compress(jsonl_bytes([rec(f * 16 + k, note=note) for k, note in enumerate(notes)])))
    path = tmp_path / "a.jsonl.zst"
    path.write_bytes(b"".join(body))
    size = path.stat().st_size
    bounds = frames.boundaries(path)
    assert bounds is not None and len(bounds) == n + 1, size
    parts = JSONL.parts(path, size, 1 << 20)
    assert parts is not None and len(parts) >= size // (1 << 20)


def test_a_run_over_many_empty_frames_audits_the_file_as_one_item(pytester: pytest.Pytester):
    project = TokProject(pytester, ("-p", "no:xdist"))
    project.ini(tokaudit_shard_size=1 << 20)
    data = jsonl_bytes([rec(i, billed=99 if i == 150 else None) for i in range(1, 201)])
    path = project.path / "data/a.jsonl.zst"
    path.parent.mkdir()
    path.write_bytes(empty_frames("zst", 500_000) + zst_frames(data, 1500) + empty_frames("zst", 500_000))
    assert path.stat().st_size > 1 << 20
    listed = project.run("--collect-only", "-q")  # stats, walks a bounded number of frames
    assert [line for line in listed.stdout.lines if line.startswith("data/")] == ["data/a.jsonl.zst::tokaudit"], \
        listed.stdout.str()
    result = project.run("-rA")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    assert "data/a.jsonl.zst:150: sample_id=150: count: billed 99, counted 10" in result.stdout.str()
