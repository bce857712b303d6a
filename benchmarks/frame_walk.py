"""Time to walk the frame headers of a compressed JSONL file that is mostly empty frames.

    python benchmarks/frame_walk.py [--frames 1000000] [--repeat 3]

Writes `a.jsonl.zst` and `a.jsonl.gz` (BGZF) of 200 records in frames of 1,500 bytes
followed by `--frames` empty frames, and times `sources.frames` walking each (the walk
that decides whether a file can be split into shards), and `pytest --tokaudit
--collect-only` over the .zst one (collection stats files; it must not read them whole).
The suite asserts the behaviour (the walk gives up within a bounded number of reads, the
file is one item: tests/sources/test_shard_bounds.py), not the time.
"""

from __future__ import annotations

import argparse
import json
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import zstandard

from pytest_tokaudit.sources import frames


def bgzf_member(data: bytes) -> bytes:
    co = zlib.compressobj(6, zlib.DEFLATED, -15)
    body = co.compress(data) + co.flush()
    head = (b"\x1f\x8b\x08\x04" + b"\0\0\0\0" + b"\x00\xff" + struct.pack("<H", 6)
            + b"BC" + struct.pack("<HH", 2, 12 + 6 + len(body) + 8 - 1))
    return head + body + struct.pack("<II", zlib.crc32(data), len(data))


def records() -> bytes:
    return b"".join(json.dumps({"sample_id": i, "completion_tokens": 10,
                                "output_ids": list(range(1000, 1010))}).encode() + b"\n"
                    for i in range(1, 201))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    data = records()
    zc = zstandard.ZstdCompressor()
    with tempfile.TemporaryDirectory() as tmp:
        files = {
            "zst": b"".join(zc.compress(data[i:i + 1500]) for i in range(0, len(data), 1500))
            + zc.compress(b"") * args.frames,
            "gz": b"".join(bgzf_member(data[i:i + 1500]) for i in range(0, len(data), 1500))
            + bgzf_member(b"") * args.frames,
        }
        for kind, body in files.items():
            path = Path(tmp, "data", f"a.jsonl.{kind}")
            path.parent.mkdir(exist_ok=True)
            path.write_bytes(body)
            walk = frames._zstd_bounds if kind == "zst" else frames._bgzf_bounds
            times, reads = [], 0
            for _ in range(args.repeat):
                reads = 0
                with open(path, "rb") as fh:
                    def read_at(pos: int, n: int) -> bytes:
                        nonlocal reads
                        reads += 1
                        fh.seek(pos)
                        return fh.read(n)

                    started = time.perf_counter()
                    walk(read_at, len(body))
                    times.append(time.perf_counter() - started)
            print(f"walk {kind:3}  best {min(times) * 1000:8.1f} ms  reads {reads:,}  "
                  f"({len(body):,} bytes)")
        Path(tmp, "data", "a.jsonl.gz").unlink()
        Path(tmp, "pytest.ini").write_text("[pytest]\ntokaudit_shard_size = 1048576\n")
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "pytest", "--tokaudit", "data", "--collect-only",
                        "-q", "-p", "no:xdist"], cwd=tmp, check=True, capture_output=True)
        print(f"collect-only over the .zst file: {time.perf_counter() - started:.2f} s")


if __name__ == "__main__":
    main()
