"""Which native engine parses JSONL into checkable columns fastest here? Side by side.

    python benchmarks/engines.py FILE [FILE ...] [--repeat 3]

Each engine reads the whole file in ~1 MB chunks of whole lines and computes, per record,
what the built-in checks need (number of ids, last id, `</think>` count, `<think>` present,
negative ids), in its own subprocess, interleaved with the others. Give it clean files (no
broken lines: `--clean` writes FILE.clean.jsonl first): pyarrow and polars refuse a whole
chunk for one bad line, which would flatter them. Prints wall and CPU seconds per engine
(median) and the speed-up over the bare orjson loop of issue #13.
"""

import argparse
import io
import os
import statistics
import subprocess
import sys
import time

ONCE, LAST, FORBID = 163607, 163586, 163606
CHUNK = 1 << 20


def chunks(path):
    with open(path, "rb") as f:
        rest = b""
        while block := f.read(CHUNK):
            block = rest + block
            cut = block.rfind(b"\n") + 1
            rest = block[cut:]
            if cut:
                yield block[:cut]
        if rest:
            yield rest


def np_facts(flat, lens):
    """The checks' facts over a chunk's flat ids (numpy) and per-record lengths."""
    import numpy as np

    ends = np.cumsum(lens)
    rows = lambda mask: np.bincount(np.searchsorted(ends, np.flatnonzero(mask), side="right"),  # noqa: E731
                                    minlength=len(lens))
    last = flat[np.maximum(ends - 1, 0)] if len(flat) else None
    return rows(flat == ONCE), last, rows(flat == FORBID), (flat < 0).any()


def bare_orjson(path):
    import orjson

    n = 0
    with open(path, "rb") as f:
        for line in f:
            r = orjson.loads(line)
            ids, c = r["output_ids"], r["completion_tokens"]
            n += abs(c - len(ids)) > max(8, 0.02 * c) or ids.count(ONCE) != 1 or ids[-1] != LAST or FORBID in ids
    return n


def read_only(path):
    return sum(c.count(b"\n") for c in chunks(path))


def _arrow_facts(ids):
    import numpy as np

    offsets = ids.offsets.to_numpy()
    flat = ids.values.to_numpy(zero_copy_only=False)
    return np_facts(flat, np.diff(offsets))


def pyarrow_json(path, threads=False):
    import pyarrow as pa
    import pyarrow.json as pj

    schema = pa.schema([("provider", pa.string()), ("completion_tokens", pa.int64()),
                        ("output_ids", pa.list_(pa.int64())), ("sample_id", pa.int64())])
    parse = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    read = pj.ReadOptions(use_threads=threads, block_size=CHUNK * 2 if not threads else CHUNK // 2)
    for c in chunks(path):
        t = pj.read_json(io.BytesIO(c), read_options=read, parse_options=parse)
        _arrow_facts(t.column("output_ids").combine_chunks())


def polars_ndjson(path):
    import polars as pl

    schema = {"provider": pl.String, "completion_tokens": pl.Int64, "output_ids": pl.List(pl.Int64),
              "sample_id": pl.Int64}
    for c in chunks(path):
        df = pl.read_ndjson(io.BytesIO(c), schema=schema)
        df.select(n=pl.col("output_ids").list.len(), last=pl.col("output_ids").list.last(),
                  once=pl.col("output_ids").list.count_matches(ONCE),
                  forbid=pl.col("output_ids").list.count_matches(FORBID),
                  neg=pl.col("output_ids").list.min() < 0)


def duckdb_json(path):
    import duckdb

    con = duckdb.connect(config={"threads": 2})
    for c in chunks(path):
        t = con.read_json(io.BytesIO(c), format="newline_delimited", columns={
            "provider": "VARCHAR", "completion_tokens": "BIGINT", "output_ids": "BIGINT[]"}).to_arrow_table()
        _arrow_facts(t.column("output_ids").combine_chunks())


def msgspec_lines(path):
    import msgspec

    class R(msgspec.Struct):
        completion_tokens: int | None = None
        output_ids: list[int] | None = None
        provider: str | None = None

    dec = msgspec.json.Decoder(R)
    for c in chunks(path):
        for r in dec.decode_lines(c):
            ids = r.output_ids
            ids.count(ONCE), ids[-1], FORBID in ids, min(ids) < 0


def simdjson_lines(path):
    """What columnar.py does: simdjson per line, ids as an int64 buffer, numpy per chunk."""
    import numpy as np
    import simdjson

    p = simdjson.Parser()
    for c in chunks(path):
        bufs, lens = [], []
        for line in c.split(b"\n")[:-1]:
            doc = p.parse(line)
            doc.get("provider"), doc.get("completion_tokens"), doc.get("sample_id")
            ids = doc.get("output_ids")
            bufs.append(ids.as_buffer(of_type="i"))
            lens.append(len(ids))
            doc = ids = None
        np_facts(np.frombuffer(b"".join(bufs), dtype=np.int64), np.array(lens))


ENGINES = {f.__name__: f for f in (bare_orjson, read_only, pyarrow_json, polars_ndjson, duckdb_json,
                                   msgspec_lines, simdjson_lines)}


def clean(path):
    """FILE.clean.jsonl: the lines every engine can read (objects, int ids and count, provider)."""
    import orjson

    out = path.rsplit(".jsonl", 1)[0] + ".clean.jsonl"
    with open(path, "rb") as f, open(out, "wb") as o:
        for line in f:
            try:
                r = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if type(r) is not dict or not r.get("provider"):
                continue
            ids, c = r.get("output_ids"), r.get("completion_tokens")
            if type(c) is int and type(ids) is list and ids and set(map(type, ids)) == {int} and min(ids) >= 0:
                o.write(line)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--clean", action="store_true", help="write and measure FILE.clean.jsonl")
    ap.add_argument("--one", nargs=2, help=argparse.SUPPRESS)  # engine, file: a child run
    a = ap.parse_args()
    if a.one:
        t, c = time.perf_counter(), os.times()
        ENGINES[a.one[0]](a.one[1])
        c2 = os.times()
        print(time.perf_counter() - t, c2.user - c.user + c2.system - c.system)
        return
    print(f"load average {os.getloadavg()[0]:.2f}; medians of {a.repeat}, interleaved")
    for path in a.files:
        if a.clean:
            path = clean(path)
        times = {name: [] for name in ENGINES}
        for _ in range(a.repeat):
            for name in ENGINES:
                r = subprocess.run([sys.executable, __file__, "--one", name, path],
                                   capture_output=True, text=True)
                if r.returncode:
                    times[name].append(None)
                    print(name, "failed:", r.stderr.strip().splitlines()[-1:])
                    continue
                times[name].append(tuple(map(float, r.stdout.split())))
        size = os.path.getsize(path) / 1e6
        print(f"\n{os.path.basename(path)}: {size:.0f} MB\n")
        print("| engine | wall s | CPU s | MB/s | x bare (wall) |\n|---|---|---|---|---|")
        bare = statistics.median(w for w, _ in times["bare_orjson"])
        for name, runs in times.items():
            runs = [r for r in runs if r]
            if not runs:
                continue
            w, cpu = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
            print(f"| {name} | {w:.2f} | {cpu:.2f} | {size / w:.0f} | {bare / w:.2f} |")


if __name__ == "__main__":
    main()
