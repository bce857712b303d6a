"""A multi-frame .zst split across xdist workers, against the same data as one frame.

    python benchmarks/compressed_split.py /tmp/tokaudit-bench/500mb.jsonl [--out DIR]
        [--frame-mib 16] [--shard-mib 128] [--repeat 3]

Writes, once, beside nothing of the source (under --out): `multi/NAME.zst`, the file
compressed in --frame-mib chunks, one zstd frame each (as pzstd or `split` + `zstd` do),
and `one/NAME.zst`, the same bytes as one frame (the zstd CLI's default, `-T` included).
Then times whole `pytest --tokaudit` processes, `-n 0` and `-n 2` on each, interleaved
(every repetition runs all four), medians of --repeat runs; wall and CPU (the process
and its xdist workers). The contract is benchmarks/run.py's, with
`tokaudit_shard_size = --shard-mib` so that the multi-frame file splits. Each run's
records and findings come from its --tokaudit-json report: all four must agree.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from run import CONTRACT_INI, KIMI, pytest_cmd, run_once, write  # noqa: E402


def compress(source: str, target: str, frame: int | None) -> None:
    """`source` as zstd (level 3): one frame per `frame` bytes, or one frame."""
    import zstandard

    if os.path.exists(target):
        return
    os.makedirs(os.path.dirname(target), exist_ok=True)
    c = zstandard.ZstdCompressor(level=3)
    tmp = target + ".tmp"
    with open(source, "rb") as src, open(tmp, "wb") as out:
        if frame is None:
            with c.stream_writer(out, closefd=False) as w:
                while block := src.read(1 << 24):
                    w.write(block)
        else:
            while block := src.read(frame):
                out.write(c.compress(block))
    os.replace(tmp, target)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("source", help="a JSONL file (benchmarks/generate.py)")
    ap.add_argument("--out", default="/tmp/tokaudit-bench/split")
    ap.add_argument("--frame-mib", type=int, default=16)
    ap.add_argument("--shard-mib", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=900)
    args = ap.parse_args()

    name = os.path.basename(args.source) + ".zst"
    multi = os.path.join(args.out, "multi", name)
    one = os.path.join(args.out, "one", name)
    compress(args.source, multi, args.frame_mib << 20)
    compress(args.source, one, None)
    ini = write(os.path.join(args.out, "pytest.ini"),
                CONTRACT_INI.format(**KIMI) + f"tokaudit_shard_size = {args.shard_mib << 20}\n")

    from pytest_tokaudit.sources.frames import boundaries, parts
    for path in (multi, one):
        from pathlib import Path

        frames = boundaries(Path(path))
        split = parts(Path(path), args.shard_mib << 20)
        print(f"{path}: {os.path.getsize(path) / 1e6:,.1f} MB, "
              f"{'?' if frames is None else len(frames) - 1} frames, "
              f"{1 if split is None else len(split)} items")
    cases = [(label, path, n) for label, path in (("multi-frame", multi), ("one frame", one))
             for n in ("0", "2")]
    times: dict[tuple[str, str], list[tuple[float, float]]] = {}
    seen = {}
    for rep in range(args.repeat):
        for label, path, n in cases:
            report = os.path.join(args.out, f"report-{label.replace(' ', '-')}-{n}.json")
            cmd = pytest_cmd(ini, "--tokaudit", path, "-n", n, "--tokaudit-no-cache",
                             f"--tokaudit-json={report}")
            r = run_once(cmd, args.out, dict(os.environ), args.timeout, sample=False)
            if r["rc"] not in (0, 1):
                sys.exit(f"{' '.join(cmd)}: exit {r['rc']}\n{r['out'][-2000:]}{r['err'][-2000:]}")
            times.setdefault((label, n), []).append((r["wall"], r["cpu"]))
            with open(report) as fh:
                files = json.load(fh)["files"]
            seen[(label, n)] = [(f["records"], f["audited"], f["findings"]) for f in files]
            print(f"  run {rep + 1}: {label} -n {n}: {r['wall']:.1f} s wall, {r['cpu']:.1f} s CPU",
                  flush=True)
    print(f"\nload: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    size = os.path.getsize(args.source) / 1e6
    print(f"\n| file ({size:,.0f} MB JSONL) | -n | median wall s | median CPU s | MB/s (JSONL) |")
    print("|---|---|---|---|---|")
    for label, _, n in cases:
        wall = statistics.median(w for w, _ in times[(label, n)])
        cpu = statistics.median(c for _, c in times[(label, n)])
        print(f"| {label} | {n} | {wall:.1f} | {cpu:.1f} | {size / wall:.0f} |")
    agree = len({json.dumps(v) for v in seen.values()}) == 1
    print(f"\nrecords, audited, findings: {next(iter(seen.values()))} "
          f"({'the same in every run' if agree else 'DIFFER: ' + repr(seen)})")


if __name__ == "__main__":
    main()
