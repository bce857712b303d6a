"""The count and structure audit against the scripts a user writes instead.

short, long   JSONL of ~220 and ~2,600 ids per record: the bare orjson loop (issue #13's
              reference, ratio 1.00), the orjson loop that checks what the contract checks
              (types of every id, local runs skipped), DuckDB, `pytest --tokaudit -n 0` and
              `-n 2` (its ratio against `-n 0`)
startup       a 3-record file: the bare loop (ref), pytest on one trivial test without the
              plugin, `pytest --tokaudit`
warm          the long file again with the plugin's cache filled: a cold run
              (`--tokaudit-no-cache`, ref) against a warm one
parquet       the long file's Parquet twin: DuckDB's `read_parquet` (ref), the plugin on the
              twin and on its Arrow IPC twin (.arrow)
"""

from __future__ import annotations

import importlib.util
import json

from benchmarks.kit import CONTRACT_INI, describe, KIMI, Case, Context, Row, Skip

N0 = "pytest --tokaudit -n 0"
N2 = "pytest --tokaudit -n 2"


def _contract(ctx: Context, name: str = "contract", extra: str = ""):
    return ctx.ini(name, CONTRACT_INI.format(**KIMI) + extra)


def _ref(ctx: Context, name: str, script: str, path, *args: str, findings: str = "ref") -> Row:
    return Row(name, [ctx.python, ctx.script(script), str(path), *args], findings=findings)


def _duckdb(what: str) -> None:
    if importlib.util.find_spec("duckdb") is None:
        raise Skip(f"{what}: duckdb is not installed (pip install duckdb)")


def jsonl(ctx: Context, kind: str) -> Case:
    path = ctx.file(kind)
    ini = _contract(ctx)
    rows = [
        # Its count of bad records is not the contract's (no type checks, no skipping): no findings.
        _ref(ctx, "bare orjson loop", "ref_bare_loop.py", path, findings="none"),
        _ref(ctx, "orjson loop, the contract's checks", "ref_orjson_loop.py", path),
    ]
    if importlib.util.find_spec("duckdb") is not None:
        rows.append(_ref(ctx, "DuckDB read_ndjson_objects", "ref_duckdb.py", path))
    rows += [
        ctx.pytest_row(N0, ini, "--tokaudit", "--tokaudit-no-cache", str(path), "-n", "0"),
        ctx.pytest_row(N2, ini, "--tokaudit", "--tokaudit-no-cache", str(path), "-n", "2", against=N0),
    ]
    return Case(kind, rows, ref="bare orjson loop", size=ctx.size, input=describe(path))


def startup(ctx: Context) -> Case:
    tiny = ctx.work / "startup" / "tiny.jsonl"
    tiny.parent.mkdir(parents=True, exist_ok=True)
    tiny.write_text("".join(
        json.dumps({"sample_id": i, "provider": "openrouter", "completion_tokens": 4,
                    "output_ids": [11, KIMI["once"], 12, KIMI["last"]]}) + "\n" for i in range(3)))
    trivial = ctx.ini("startup-trivial", "[pytest]\n")
    (trivial.parent / "test_trivial.py").write_text("def test_ok():\n    assert True\n")
    ini = _contract(ctx, "startup")
    rows = [
        _ref(ctx, "bare orjson loop", "ref_bare_loop.py", tiny, findings="none"),
        Row("pytest, one trivial test, -p no:tokaudit",
            ctx.pytest(trivial, "-p", "no:tokaudit", "test_trivial.py"), cwd=trivial.parent,
            findings="none"),
        ctx.pytest_row(N0, ini, "--tokaudit", "--tokaudit-no-cache", str(tiny), "-n", "0"),
    ]
    return Case("startup", rows, ref="bare orjson loop", size="3 records",
                input={"file": tiny.name, "records": 3}, repeat=5)


def warm(ctx: Context) -> Case:
    path = ctx.file("long")
    ini = _contract(ctx, "warm")
    cold = ctx.pytest_row("cold -n 0 (--tokaudit-no-cache)", ini, "--tokaudit", "--tokaudit-no-cache",
                          str(path), "-n", "0")
    # The untimed run before the first timed one fills the cache (the runner primes every
    # plugin row, once per code under test); {code} keeps each code's cache apart.
    folder = ctx.work / "warm" / "cache-{code}"
    warm = ctx.pytest_row("warm -n 0 (cache filled)", ini, "--tokaudit", "-o", f"tokaudit_cache_dir={folder}",
                          str(path), "-n", "0")
    warm.findings = "none"  # a run served from the cache prints no summary table to read them from
    return Case("warm", [cold, warm], ref=cold.name, size=ctx.size, input=describe(path))


def parquet(ctx: Context) -> Case:
    if importlib.util.find_spec("pyarrow") is None:
        raise Skip("parquet: pyarrow is not installed (the [parquet] extra)")
    _duckdb("parquet")
    path, arrow = ctx.file("parquet"), ctx.file("arrow")
    ini = _contract(ctx)
    rows = [
        _ref(ctx, "DuckDB read_parquet", "ref_duckdb_parquet.py", path),
        ctx.pytest_row(N0, ini, "--tokaudit", "--tokaudit-no-cache", str(path), "-n", "0"),
        ctx.pytest_row(f"{N0}, Arrow IPC twin", ini, "--tokaudit", "--tokaudit-no-cache", str(arrow),
                       "-n", "0"),
    ]
    return Case("parquet", rows, ref="DuckDB read_parquet", size=ctx.size, input=describe(path))


CASES = {
    "short": lambda ctx: jsonl(ctx, "short"),
    "long": lambda ctx: jsonl(ctx, "long"),
    "startup": startup,
    "warm": warm,
    "parquet": parquet,
}
