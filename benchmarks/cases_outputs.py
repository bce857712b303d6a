"""Collection, the merge command and its HTML page: what a run costs besides the audit.

collect   `pytest --tokaudit --collect-only` over a .zst of 200 records followed by many
          empty frames (the frame walk that decides whether a file splits into shards must
          give up after a bounded number of reads), against the same over its one-frame twin
merge     `python -m pytest_tokaudit merge` of a report whose file claims millions of ids as
          one packed run (the report loader and the merge's id index), against the merge of
          the real three-record report it was made from
html      `merge --html` of a real report of 10,000 files of 40 records, against the same
          merge without an output file (so the ratio is the page's cost)

Each input is made by the package's own commands (pytest --tokaudit-json) in the session's
scratch folder, never imported: the numbers are read through the command line.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from benchmarks.kit import Case, Context, Row, child_env

# How much of each input per size preset; a number (MB of the contract files) scales medium's.
SCALE = {"tiny": 0.01, "small": 0.1, "medium": 1.0, "large": 3.0}


def scaled(ctx: Context, medium: int, least: int) -> int:
    factor = SCALE.get(ctx.size)
    if factor is None:
        factor = float(ctx.size) / 300
    return max(least, int(medium * factor))


def merge_cmd(ctx: Context, *args: str) -> list[str]:
    return [ctx.python, "-m", "pytest_tokaudit", "merge", *args]


def run_pytest(ctx: Context, root: Path, *args: str) -> None:
    """An untimed pytest run that writes an input (a report), in this session's code."""
    from benchmarks.kit import PYTEST_OPTS, ROOT

    r = subprocess.run([ctx.python, "-m", "pytest", "--tokaudit", *args, *PYTEST_OPTS, "-p", "no:xdist"],
                       cwd=root, env=child_env(str(ROOT), {}), capture_output=True, text=True)
    if r.returncode not in (0, 1):
        raise RuntimeError(f"pytest {' '.join(args)} in {root}: exit {r.returncode}\n{r.stdout[-2000:]}{r.stderr[-2000:]}")


def records(n: int, start: int = 1) -> bytes:
    return b"".join(json.dumps({"sample_id": i, "completion_tokens": 10,
                                "output_ids": list(range(1000, 1010))}).encode() + b"\n"
                    for i in range(start, start + n))


def collect(ctx: Context) -> Case:
    import zstandard

    frames = scaled(ctx, 1_000_000, 10_000)
    root = ctx.work / "collect"
    data = records(200)
    zc = zstandard.ZstdCompressor()
    body = b"".join(zc.compress(data[i:i + 1500]) for i in range(0, len(data), 1500))
    for name, tail in (("one", b""), ("many", zc.compress(b"") * frames)):
        folder = root / name
        (folder / "data").mkdir(parents=True, exist_ok=True)
        (folder / "data" / "a.jsonl.zst").write_bytes(body + tail if name == "many" else zc.compress(data))
        (folder / "pytest.ini").write_text("[pytest]\ntokaudit_shard_size = 1048576\n")
    rows = [ctx.pytest_row("collect-only, one frame", root / "one" / "pytest.ini", "--tokaudit",
                           "--collect-only", "data"),
            ctx.pytest_row(f"collect-only, {frames:,} empty frames after the data", root / "many" / "pytest.ini",
                           "--tokaudit", "--collect-only", "data")]
    for row in rows:
        row.findings = "none"
        row.ok_codes = (0,)
    size = (root / "many" / "data" / "a.jsonl.zst").stat().st_size
    return Case("collect", rows, ref=rows[0].name, size=ctx.size,
                input={"file": "a.jsonl.zst", "mb": round(size / 1e6, 1), "records": 200}, repeat=3)


def merge(ctx: Context) -> Case:
    n = scaled(ctx, 5_000_000, 50_000)
    root = ctx.work / "merge"
    (root / "data").mkdir(parents=True, exist_ok=True)
    (root / "pytest.ini").write_text("[pytest]\ntokaudit_unique_ids = true\n")
    (root / "data" / "a.jsonl").write_bytes(records(3))
    run_pytest(ctx, root, "data", "--tokaudit-json=small.json")
    report = json.loads((root / "small.json").read_text())
    # The file then claims ids 1..n on lines 1..n, packed as one run (as a report of a
    # counter-id file of n records is written); unique_ids makes the merge index them.
    f = report["files"][0]
    f["channels"]["ids"] = [[None, [{"from": 1, "n": n}], [{"from": 1, "n": n}]]]
    for key in ("records", "lines", "audited", "checked"):
        f[key] = n
    (root / "big.json").write_text(json.dumps(report))
    rows = [Row("merge, the 3-record report", merge_cmd(ctx, "small.json"), cwd=root, plugin=True,
                findings="none", ok_codes=(0, 1)),
            Row(f"merge, {n:,} ids packed", merge_cmd(ctx, "big.json"), cwd=root, plugin=True,
                findings="none", ok_codes=(0, 1))]
    return Case("merge", rows, ref=rows[0].name, size=ctx.size,
                input={"file": "big.json", "mb": round((root / "big.json").stat().st_size / 1e6, 3),
                       "records": n}, repeat=3)


def html(ctx: Context) -> Case:
    n = scaled(ctx, 10_000, 50)
    root = ctx.work / "html"
    (root / "pytest.ini").parent.mkdir(parents=True, exist_ok=True)
    (root / "pytest.ini").write_text("[pytest]\ntokaudit_budget = 900000000\n")
    for k in range(n):
        lines = []
        for line in range(1, 41):
            billed = 200 + (k * 7 + line * 13) % 300
            counted = billed + (line * k) % 5 - 2
            lines.append(json.dumps({"sample_id": f"s-{k}-{line}", "completion_tokens": billed,
                                     "output_ids": [7] * counted}))
        path = root / "data" / f"part-{k // 500:03d}" / f"batch-{k:05d}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n")
    run_pytest(ctx, root, "data", "--tokaudit-no-cache", "--tokaudit-json=report.json")
    rows = [Row("merge", merge_cmd(ctx, "report.json"), cwd=root,
                plugin=True, findings="none", ok_codes=(0, 1)),
            Row("merge --html", merge_cmd(ctx, "report.json", "--html", "page.html"), cwd=root,
                plugin=True, findings="none", ok_codes=(0, 1))]
    return Case("html", rows, ref=rows[0].name, size=ctx.size,
                input={"file": f"report.json ({n:,} files)", "mb": round((root / "report.json").stat().st_size / 1e6, 1),
                       "records": 40 * n}, repeat=3)


CASES = {"collect": collect, "merge": merge, "html": html}
