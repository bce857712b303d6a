"""The benchmark kit runs end to end (benchmarks/README.md); its speed is not asserted here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def kit(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def test_the_runner_times_a_case_and_writes_its_rows_as_json(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    r = kit("benchmarks.run", "--size", "tiny", "--repeat", "1", "--dry", "--cases", "short",
            "--data", str(tmp_path / "data"), "--json", str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    results = json.loads(out.read_text())
    assert results["dry"] is True and results["size"] == "tiny"
    assert results["imported_from"]["tree"].startswith(str(ROOT))
    rows = {row["name"]: row for row in results["rows"]}
    assert {"bare orjson loop", "orjson loop, the contract's checks", "pytest --tokaudit -n 0",
            "pytest --tokaudit -n 2"} <= set(rows)
    for row in rows.values():
        assert row["case"] == "short" and row["error"] is None and row["n"] == 1
        assert row["wall_s"] > 0 and row["cpu_s"] > 0 and row["ratio"] > 0
    assert rows["bare orjson loop"]["is_ref"] and rows["bare orjson loop"]["ratio"] == 1.0
    assert rows["pytest --tokaudit -n 2"]["ref"] == "pytest --tokaudit -n 0"
    # The generated file has broken records; the plugin finds the same in and out of xdist.
    assert int(rows["orjson loop, the contract's checks"]["findings"]) > 0
    assert rows["pytest --tokaudit -n 0"]["findings"] == rows["pytest --tokaudit -n 2"]["findings"]
    assert int(rows["pytest --tokaudit -n 0"]["findings"]) > 0
    assert results["disagree"] == {}
    # The data went to the cache folder, not into the repository.
    assert list((tmp_path / "data").glob("short-*.jsonl"))
    assert "| **short** (short-" in r.stdout

    # table.py refuses a dry run for the docs, and writes a measured one between the markers.
    assert kit("benchmarks.table", str(out), "--doc", str(tmp_path / "x.md")).returncode == 2
    results["dry"] = False
    out.write_text(json.dumps(results))
    doc = tmp_path / "performance.md"
    doc.write_text("# P\n\nbefore\n<!-- bench-table:start -->\nold\n<!-- bench-table:end -->\nafter\n")
    r = kit("benchmarks.table", str(out), "--doc", str(doc))
    assert r.returncode == 0, r.stderr
    text = doc.read_text()
    assert "old" not in text and text.startswith("# P\n\nbefore\n<!-- bench-table:start -->\nMeasured ")
    assert text.endswith("<!-- bench-table:end -->\nafter\n")
    assert "| `-n 0` vs the bare orjson loop, short records | >= 1.5x |" in text


def test_no_benchmark_script_imports_a_private_name_of_the_package() -> None:
    # The plugin is benchmarked through pytest command lines (or its public API): a script
    # importing internals breaks with every refactor the benchmarks are meant to judge.
    for script in sorted((ROOT / "benchmarks").glob("*.py")):
        for line in script.read_text().splitlines():
            words = line.split()
            if words[:1] in (["import"], ["from"]) and len(words) > 1 and words[1].startswith("pytest_tokaudit"):
                public = (words[1] == "pytest_tokaudit.api"
                          or (words[:2] == ["from", "pytest_tokaudit"] and words[2:] == ["import", "api"]))
                assert public, f"{script.name}: {line.strip()}"


def test_the_cases_of_outputs_and_the_whole_bill_run_through_public_commands(tmp_path: Path) -> None:
    # Collection over a many-frame .zst, merge of a report of packed ids, merge --html of
    # many files, the request join: each a command line (no private import), each row run.
    out = tmp_path / "results.json"
    r = kit("benchmarks.run", "--size", "tiny", "--repeat", "1", "--dry", "--cases", "collect,merge,html,join",
            "--data", str(tmp_path / "data"), "--json", str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    results = json.loads(out.read_text())
    rows = {(row["case"], row["name"]): row for row in results["rows"]}
    assert {case for case, _ in rows} == {"collect", "merge", "html", "join"}
    for row in rows.values():
        assert row["error"] is None and row["n"] == 1 and row["rss_mib"] > 0, row
    assert rows["collect", "collect-only, 10,000 empty frames after the data"]["ratio"] > 0
    assert rows["merge", "merge, 50,000 ids packed"]["command"][-1] == "big.json"
    assert rows["join", "pytest --tokaudit -n 0, joined to 10,000 requests"]["findings"] == "0"
    assert "peak RSS MiB" in r.stdout


def test_a_rows_peak_memory_is_its_own_not_the_runners(tmp_path: Path) -> None:
    # A forked child keeps its parent's RSS high-water mark through exec: a runner that
    # had generated data in process made every row read its size.
    from benchmarks.kit import run_once

    ballast = bytearray(300 << 20)
    ballast[::4096] = b"\x01" * len(range(0, len(ballast), 4096))  # touch every page
    row = run_once([sys.executable, "-c", "import time; time.sleep(0.3)"], tmp_path, dict(os.environ), 60)
    assert row["rc"] == 0 and 0 < row["rss"] < 150, row["rss"]
    del ballast
