"""Compressed files split across workers where the format allows (issue #12).

A .zst of several frames and a BGZF .gz are cut into runs of whole frames (members) at
collection, from their headers alone; each shard inflates its own frames and owns the
lines whose first byte they inflate to. The reference is the same data as plain JSONL
and as one zstd frame: every finding (line, id, check, message) and every figure of the
report must be the same, without xdist and with two workers. Files are written here as
the tools would: frames compressed apart and concatenated (pzstd, `zstd` per chunk), BGZF
members by the SAM/BAM spec (what `bgzip` writes).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import struct
from pathlib import Path
from typing import Any

import pytest

from pytest_tokaudit.sources.base import shard_count
import forkrun
from conftest import FAILED, Gate, assert_clean, bgzf_member, jsonl_bytes, rec, zst_frames

zstandard = pytest.importorskip("zstandard")

MODES = {"no-xdist": (), "xdist-2": ("-n", "2")}
# The reference comparison also under the schedulers that place shards differently.
ALL_MODES = {**MODES, "loadfile": ("-n", "2", "--dist", "loadfile"),
             "each": ("-n", "2", "--dist", "each")}
SHARD = 4000  # compressed bytes per shard: a few shards of files of ~10 KB
FRAME = 1500  # raw bytes per frame (zst_frames' default): frames end mid-line, so records straddle them


@pytest.fixture(params=list(MODES.values()), ids=list(MODES))
def mode(request: pytest.FixtureRequest) -> tuple[str, ...]:
    return request.param


def bgzf(data: bytes, size: int = FRAME) -> bytes:
    """BGZF members of `size` bytes of data each, and the empty member bgzip ends with."""
    members = [bgzf_member(data[i:i + size]) for i in range(0, len(data), size)]
    return b"".join(members) + bgzf_member(b"")


def records() -> list[Any]:
    """~200 records with findings spread over every shard, one line broken, one record
    long enough to straddle several frames."""
    out: list[Any] = []
    for i in range(1, 201):
        note = hashlib.sha256(str(i).encode()).hexdigest()  # so the files do not shrink to nothing
        if i % 23 == 0:
            out.append(rec(i, 10, 40, note=note))  # a count breach
        elif i == 77:
            out.append('{"sample_id": 77, "completion_tokens": 3, "output_ids": [1, 2')  # cut
        elif i == 170:
            out.append({**rec(i, 10), "output_ids": "none"})  # not a list: schema
        elif i == 120:
            out.append(rec(i, 10, pad="y" * 4000))  # spans three frames
        else:
            out.append(rec(i, 10, note=note))
    return out


def project(gate: Gate, **ini: Any) -> bytes:
    gate.ini(tokaudit_shard_size=SHARD, tokaudit_unique_ids="true", **ini)
    return jsonl_bytes(records())


def collected(gate: Gate, *args: str) -> list[str]:
    result = forkrun.runpytest(gate.pytester, 
        "--tokaudit", "data", "-p", "no:xdist", "--collect-only", "-q", *args)
    return [line for line in result.stdout.lines if "::tokaudit" in line]


def shards_of(ids: list[str], path: str) -> list[str]:
    return [n for n in ids if n.startswith(f"{path}::")]


def failures_of(path: Path) -> dict[str, set[tuple[Any, ...]]]:
    """The failures file by data file: {(line, id, check, message)}."""
    out: dict[str, set[tuple[Any, ...]]] = {}
    for line in path.read_text().splitlines():
        e = json.loads(line)
        out.setdefault(e["path"], set()).add((e["line"], e["id"], e["check"], e["message"]))
    return out


def expand(runs: list[Any]) -> list[Any]:
    """Packed runs of ids or lines ({from, n}) as the values they stand for."""
    out: list[Any] = []
    for r in runs:
        out += range(r["from"], r["from"] + r["n"]) if isinstance(r, dict) else [r]
    return out


def report_of(path: Path) -> dict[str, dict[str, Any]]:
    """The JSON report's files, without what names the file; channels as what they hold
    (each shard fills its own entries: their cut differs, not their content)."""
    out = {}
    for f in json.loads(path.read_text())["files"]:
        name = f.pop("path")
        for worst in f.get("worst_records", []):
            worst.pop("location")  # names the file
        channels = f.pop("channels")
        f["ids"] = [(i, line) for _, ids, lines in channels["ids"]
                    for i, line in zip(expand(ids), expand(lines))]
        f["budget"] = [sum(col) for col in zip(*channels["budget"])]
        out[name] = f
    return out


def test_multi_frame_zst_and_bgzf_split_into_shards_single_frame_and_plain_gzip_do_not(gate: Gate):
    data = project(gate)
    gate.write("data/multi.jsonl.zst", zst_frames(data))
    gate.write("data/bgzf.jsonl.gz", bgzf(data))
    gate.write("data/one.jsonl.zst", zstandard.ZstdCompressor().compress(data))
    gate.write("data/plain.jsonl.gz", gzip.compress(data, mtime=0))
    # pzstd's layout: a skippable frame before each frame.
    skip = struct.pack("<II", 0x184D2A53, 4) + b"pzst"
    c = zstandard.ZstdCompressor()
    gate.write("data/skippy.jsonl.zst", b"".join(
        skip + c.compress(data[i:i + FRAME]) for i in range(0, len(data), FRAME)))
    ids = collected(gate)
    for name in ("multi.jsonl.zst", "bgzf.jsonl.gz", "skippy.jsonl.zst"):
        size = (gate.path / "data" / name).stat().st_size
        n = shard_count(size, SHARD)  # an even number, as a plain file's
        assert n >= 2
        assert shards_of(ids, f"data/{name}") == [
            *(f"data/{name}::tokaudit[shard {i}]" for i in range(1, n + 1)),
            f"data/{name}::tokaudit[file]",
        ], ids
    assert shards_of(ids, "data/one.jsonl.zst") == ["data/one.jsonl.zst::tokaudit"]
    assert shards_of(ids, "data/plain.jsonl.gz") == ["data/plain.jsonl.gz::tokaudit"]
    # tokaudit_shard_size = 0 never shards, compressed or not.
    off = collected(gate, "-o", "tokaudit_shard_size=0")
    assert shards_of(off, "data/multi.jsonl.zst") == ["data/multi.jsonl.zst::tokaudit"]


@pytest.mark.parametrize("mode", list(ALL_MODES.values()), ids=list(ALL_MODES))
def test_split_findings_are_those_of_plain_jsonl_and_of_one_frame(gate: Gate, mode: tuple[str, ...]):
    data = project(gate, tokaudit_max_shown=3)
    gate.write("data/plain.jsonl", data)
    gate.write("data/one.jsonl.zst", zstandard.ZstdCompressor().compress(data))
    gate.write("data/multi.jsonl.zst", zst_frames(data))
    gate.write("data/tiny.jsonl.zst", zst_frames(data, 300))  # every record straddles
    gate.write("data/bgzf.jsonl.gz", bgzf(data))
    run = gate.run(*mode, "--tokaudit-no-cache", "--tokaudit-json=audit.json",
                   "--tokaudit-failures=bad.jsonl", "--junitxml=junit.xml")
    assert_clean(run)
    assert run.ret == FAILED
    found = failures_of(gate.path / "bad.jsonl")
    reference = found.pop("data/plain.jsonl")
    assert {(line, check) for line, _, check, _ in reference} == {
        *((i, "count") for i in range(23, 201, 23)), (77, "json"), (170, "schema")}
    assert sorted(found) == ["data/bgzf.jsonl.gz", "data/multi.jsonl.zst",
                             "data/one.jsonl.zst", "data/tiny.jsonl.zst"]
    for path, got in found.items():
        assert got == reference, path
    report = report_of(gate.path / "audit.json")
    plain = report.pop("data/plain.jsonl")
    assert plain["records"] == 200
    for path, entry in report.items():
        assert entry == plain, path
        # Record 120 spans three frames (tiny: many more), and is read once, at its line.
        assert [line for i, line in entry["ids"] if i == 120] == [120], path
    # Each shard and the whole-file verdict ran; unique_ids saw every record of each copy.
    outcomes = run.outcomes()
    for path in ("data/multi.jsonl.zst", "data/tiny.jsonl.zst", "data/bgzf.jsonl.gz"):
        shards = [n for n in outcomes if n.startswith(f"{path}::tokaudit[shard ")]
        assert len(shards) >= 2, (path, outcomes)
        assert outcomes[f"{path}::tokaudit[file]"] == "FAILED"  # count_outliers, file-wide
    # Every copy holds each id once: 199 ids (77's line is broken) seen five times.
    assert run.message("pytest.ini::tokaudit::unique_ids").startswith(
        "199 ids with more than one record (796 records counted twice)")
    # Every shard of the split files failed with its own, absolute, lines.
    text = run.out
    assert "data/multi.jsonl.zst:23: sample_id=23: count" in text
    for path in ("data/multi.jsonl.zst", "data/tiny.jsonl.zst", "data/bgzf.jsonl.gz"):
        assert f"{path}:77: json: invalid JSON" in text
        assert f"{path}:170: sample_id=170: schema: output_ids must be a list" in text
    junit = (gate.path / "junit.xml").read_text()
    assert 'classname="data" name="multi.jsonl.zst [shard 2]"' in junit
    assert 'classname="data" name="bgzf.jsonl.gz [whole file]"' in junit


def test_a_corrupt_middle_frame_fails_its_shard_and_the_others_still_audit(
    gate: Gate, mode: tuple[str, ...]
):
    from pytest_tokaudit.sources.frames import parts
    data = project(gate)
    frames = [zst_frames(data[i:i + FRAME]) for i in range(0, len(data), FRAME)]
    middle = len(frames) // 2
    bad = bytearray(frames[middle])
    bad[-2] ^= 0xFF  # its content checksum: all of it inflates, then the frame is refused
    frames[middle] = bytes(bad)
    gate.write("data/bad.jsonl.zst", b"".join(frames))
    gate.write("data/good.jsonl.zst", zst_frames(data))
    ranges = parts(gate.path / "data/bad.jsonl.zst", SHARD)
    assert ranges is not None and len(ranges) >= 3
    starts = [sum(map(len, frames[:j])) for j in range(len(frames) + 1)]
    k = next(i for i, (a, b) in enumerate(ranges) if a <= starts[middle] < b)
    # The lines shard k owns after the damage are lost (it stops there), no others.
    stop = min(starts.index(ranges[k][1]) * FRAME, len(data))
    last_owned = data[:stop].count(b"\n") + (data[stop - 1:stop] != b"\n")
    run = gate.run(*mode, "--tokaudit-no-cache", "--tokaudit-failures=bad.jsonl",
                   "--tokaudit-json=audit.json")
    assert_clean(run)
    n = len(ranges)
    assert run.outcome(f"data/bad.jsonl.zst::tokaudit[shard {k + 1}]") == "FAILED"
    assert run.outcome("data/bad.jsonl.zst::tokaudit[file]") == "FAILED"
    read = [line for line in run.lines if line.startswith("data/bad.jsonl.zst: read: ")]
    assert read and all("corrupt zstd data" in line for line in read), read
    # Where the damage was met, as a line of the file: in the damaged frame.
    after = {int(re.search(r"\(after line (\d+)\); the lines of the rest of the damaged "
                           r"frame cannot be counted", line).group(1)) for line in read}
    assert len(after) == 1, read
    end_line = after.pop()
    assert data[:middle * FRAME].count(b"\n") <= end_line <= data[:(middle + 1) * FRAME].count(b"\n")
    found = failures_of(gate.path / "bad.jsonl")
    good = found["data/good.jsonl.zst"]
    got = found["data/bad.jsonl.zst"]
    before = {f for f in good if f[0] <= end_line}
    assert before <= got, sorted(before - got)  # exact: nothing before the damage moved
    # After the shard of the damage, the same findings; numbered without the lines of the
    # damaged frame that could not be read (the read finding says so), all by one shift.
    after_ = {f for f in good if f[0] > last_owned}
    assert after_
    shift = {f[0] - g[0] for f in after_ for g in got if g[1:] == f[1:]}
    assert len(shift) == 1 and shift.pop() >= 0, (sorted(after_), sorted(got))
    # Beyond those: at most the line cut by the damage, seen by the next shard as a piece.
    rest = {g for g in got if g[1:] not in {f[1:] for f in before | after_}}
    assert {f[2] for f in rest} <= {"json"}, sorted(rest)
    report = {f["path"]: f for f in json.loads((gate.path / "audit.json").read_text())["files"]}
    assert report["data/bad.jsonl.zst"]["records"] == 200 - (last_owned - end_line)


def test_a_truncated_last_frame_leaves_the_file_whole_and_reports_where(gate: Gate):
    data = project(gate)
    whole = zst_frames(data)
    gate.write("data/cut.jsonl.zst", whole[:-50])
    ids = collected(gate)
    assert shards_of(ids, "data/cut.jsonl.zst") == ["data/cut.jsonl.zst::tokaudit"]
    run = gate.run("--tokaudit-no-cache", "--tokaudit-failures=bad.jsonl")
    assert_clean(run)
    assert run.outcome("data/cut.jsonl.zst::tokaudit") == "FAILED"
    assert any(line.startswith("data/cut.jsonl.zst: read: truncated compressed file")
               for line in run.lines), run
    found = failures_of(gate.path / "bad.jsonl")["data/cut.jsonl.zst"]
    assert {(23, "count"), (77, "json"), (170, "schema")} <= {(f[0], f[2]) for f in found}


def test_the_cache_reuses_the_shards_whose_frames_did_not_change(gate: Gate):
    from pytest_tokaudit.sources.frames import parts
    data = project(gate, tokaudit_cache_dir=".audit-cache")
    chunks = [data[i:i + FRAME] for i in range(0, len(data), FRAME)]
    gate.write("data/multi.jsonl.zst", zst_frames(data))
    gate.settle()
    first = gate.run("--tokaudit-json=a.json")
    assert_clean(first)
    again = gate.run("--tokaudit-json=b.json")
    cache = json.loads((gate.path / "b.json").read_text())["cache"]
    shards = [n for n in cache["items"] if "[shard " in n]
    assert len(shards) >= 3 and not cache["audited"], cache
    assert again.out.count("tokaudit cache: ") == 1
    # The last frame changes (a record's billed count): the shards are cut at the same
    # frames (as the test checks), and only the last shard reads the changed one.
    last = chunks[-1].replace(b'"completion_tokens": 10', b'"completion_tokens": 11', 1)
    assert last != chunks[-1]
    c = zstandard.ZstdCompressor(write_checksum=True)
    path = gate.path / "data/multi.jsonl.zst"
    cuts = parts(path, SHARD)
    gate.write("data/multi.jsonl.zst", b"".join(c.compress(ch) for ch in [*chunks[:-1], last]))
    assert (parts(path, SHARD) or [])[:-1] == (cuts or [])[:-1]
    gate.run("--tokaudit-json=c.json")
    cache = json.loads((gate.path / "c.json").read_text())["cache"]
    n = len(shards)
    assert cache["audited"] == [f"data/multi.jsonl.zst::tokaudit[shard {n}]"], cache


def test_progress_counts_the_compressed_bytes_of_the_shard(tmp_path: Path):
    from pytest_tokaudit.base.formats import source_of
    from pytest_tokaudit.sources.base import Part

    path = tmp_path / "a.jsonl.zst"
    path.write_bytes(zst_frames(jsonl_bytes(records())))
    size = path.stat().st_size
    source = source_of(path)  # what the progress line's share and ETA are of
    assert source.progress_total(Part((1000, 5000)), size) == 4000
    assert source.progress_total(Part(), size) == size


# -- the reader alone: every line once, whatever the cuts ---------------------------------------

def random_file(rnd: Any) -> bytes:
    """Records, blank and white-space lines, long lines, maybe no final newline."""
    parts = []
    for i in range(rnd.randint(0, 40)):
        k = rnd.random()
        if k < 0.15:
            parts.append(b"\n" * rnd.randint(1, 3))
        elif k < 0.2:
            parts.append(b"  \r\n")
        else:
            parts.append(b'{"sample_id": %d, "p": "%s"}\n' % (i, b"x" * rnd.randint(0, 600)))
    data = b"".join(parts)
    return data.rstrip(b"\n") if rnd.random() < 0.3 else data


def cut(rnd: Any, data: bytes) -> list[bytes]:
    points = sorted(rnd.sample(range(1, len(data)), min(rnd.randint(0, 25), len(data) - 1))) \
        if len(data) > 1 else []
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)])]


@pytest.mark.parametrize("suffix", [".zst", ".gz"])
def test_every_line_is_read_once_by_the_shard_its_first_byte_inflates_in(tmp_path: Path, suffix: str):
    import random

    from pytest_tokaudit.sources import frames
    from pytest_tokaudit.sources import jsonl as reader

    rnd = random.Random(12)
    c = zstandard.ZstdCompressor()
    for case in range(60):
        data = random_file(rnd)
        chunks = cut(rnd, data)
        packed = (b"".join(c.compress(ch) for ch in chunks) if suffix == ".zst"
                  else b"".join(bgzf_member(ch) for ch in chunks))
        path = tmp_path / f"{case}.jsonl{suffix}"
        path.write_bytes(packed)
        plain = tmp_path / f"{case}.jsonl"
        plain.write_bytes(data)
        whole = reader.Lines(plain)
        want = list(whole)
        for size in (60, 300, 2000):
            parts = frames.parts(path, size) or [(0, len(packed))]
            got, lines, blank = [], 0, 0
            for start, end in parts:
                assert frames.lines_before(path, start) == lines, (case, size, start)
                part = reader.Lines(path, start, end)
                got += [(line + lines, body) for line, body in part]
                lines, blank = lines + part.lines, blank + part.blank
            assert got == want, (case, size, parts)
            assert (lines, blank) == (whole.lines, whole.blank), (case, size)


def test_a_corrupt_bgzf_member_stops_its_shard_only(tmp_path: Path):
    from pytest_tokaudit.sources import frames
    from pytest_tokaudit.sources import jsonl as reader

    data = jsonl_bytes(records())
    members = [bgzf_member(data[i:i + FRAME]) for i in range(0, len(data), FRAME)]
    middle = len(members) // 2
    bad = bytearray(members[middle])
    bad[-8] ^= 0xFF  # its CRC-32
    members[middle] = bytes(bad)
    path = tmp_path / "a.jsonl.gz"
    path.write_bytes(b"".join(members))
    parts = frames.parts(path, SHARD)
    assert parts is not None and len(parts) >= 3
    at = sum(map(len, members[:middle]))
    for start, end in parts:
        part = reader.Lines(path, start, end)
        if start <= at < end:
            with pytest.raises(reader.ReadError, match="corrupt or unreadable file: CRC check failed"):
                list(part)
        else:
            assert len(list(part)) > 20


@pytest.mark.parametrize("damage", ["reserved block type", "bad magic", "cut short", "trailing bytes"])
def test_odd_headers_leave_the_file_whole(tmp_path: Path, damage: str):
    from pytest_tokaudit.sources import frames

    data = jsonl_bytes(records())
    packed = bytearray(zst_frames(data))
    second = len(zstandard.ZstdCompressor(write_checksum=True).compress(data[:FRAME]))
    if damage == "reserved block type":
        # The second frame's first block header, after its frame header (RFC 8878 3.1.1.1).
        fhd = packed[second + 4]
        single = fhd >> 5 & 1
        head = second + 5 + (1 - single) + (0, 1, 2, 4)[fhd & 3] + (single, 2, 4, 8)[fhd >> 6]
        packed[head] |= 0b110  # block type 3: reserved
    elif damage == "bad magic":
        packed[second] ^= 0xFF
    elif damage == "cut short":
        del packed[-3:]
    else:
        packed += b"\0\0"
    path = tmp_path / "a.jsonl.zst"
    path.write_bytes(bytes(packed))
    assert frames.parts(path, 1000) is None
    plain = tmp_path / "b.jsonl.gz"
    plain.write_bytes(gzip.compress(data) + gzip.compress(data))  # two plain members
    assert frames.parts(plain, 1000) is None
