"""How fast can a data file be fingerprinted here? The cache's own SHA-256 (cache.digest_range)
against the other candidates, each reading the file from the page cache in 1 MiB chunks.

    python benchmarks/fingerprint.py /tmp/tokaudit-bench/large.jsonl [--repeat 3]

Prints a Markdown table (best of --repeat, GB = 10^9 bytes). xxhash and blake3 rows appear
only where they are installed: they are candidates, not dependencies.
"""

import argparse
import hashlib
import importlib.util
import os
import time
import zlib

CHUNK = 1 << 20


def stream(path, make, update, final):
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    h = make()
    with open(path, "rb", buffering=0) as fh:
        while n := fh.readinto(view):
            h = update(h, view[:n])
    return final(h)


def hashlib_candidate(name):
    return (lambda: hashlib.new(name), lambda h, b: (h.update(b), h)[1], lambda h: h.hexdigest())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("path")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    from pytest_tokaudit.sources.digest import digest_range
    size = os.path.getsize(args.path)
    candidates = {"cache.digest_range (sha256, the plugin's)": lambda: digest_range(args.path)}
    for name in ("sha256", "sha1", "md5", "blake2b"):
        candidates[f"hashlib.{name}"] = lambda n=name: stream(args.path, *hashlib_candidate(n))
    candidates["zlib.crc32"] = lambda: stream(args.path, lambda: 0, lambda h, b: zlib.crc32(b, h), lambda h: h)
    candidates["read only (no hash)"] = lambda: stream(args.path, lambda: 0, lambda h, b: h, lambda h: h)
    if importlib.util.find_spec("xxhash"):
        import xxhash

        candidates["xxhash.xxh3_128"] = lambda: stream(
            args.path, xxhash.xxh3_128, lambda h, b: (h.update(b), h)[1], lambda h: h.hexdigest())
    if importlib.util.find_spec("blake3"):
        import blake3

        candidates["blake3"] = lambda: stream(
            args.path, blake3.blake3, lambda h, b: (h.update(b), h)[1], lambda h: h.hexdigest())
    stream(args.path, lambda: 0, lambda h, b: h, lambda h: h)  # warm the page cache
    best = {name: float("inf") for name in candidates}
    for _ in range(args.repeat):  # interleaved, so drift hits every candidate alike
        for name, run in candidates.items():
            t = time.perf_counter()
            run()
            best[name] = min(best[name], time.perf_counter() - t)
    print(f"\n{os.path.basename(args.path)}: {size / 1e9:.2f} GB, best of {args.repeat}, "
          f"load average {os.getloadavg()[0]:.2f}\n")
    print("| fingerprint | s | GB/s |")
    print("|---|---|---|")
    for name, t in best.items():
        print(f"| {name} | {t:.3f} | {size / t / 1e9:.2f} |")


if __name__ == "__main__":
    main()
