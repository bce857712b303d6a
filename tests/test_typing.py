"""The package type-checks (mypy, with pyproject.toml's [tool.mypy]), and what users touch is
typed and read-only to a type checker: the package ships py.typed, so a user's conftest.py
is checked against these annotations."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("mypy", reason="mypy is not installed (it is in the [test] extra)")

ROOT = Path(__file__).parent.parent
TIMEOUT = 300  # a cold check takes seconds; a hang fails the test instead of the suite


def mypy(*args: str) -> subprocess.CompletedProcess[str]:
    """`python -m mypy ARGS` from the repository root, with its pyproject.toml config."""
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", "pyproject.toml",
         "--no-color-output", "--no-error-summary", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT,
    )


def test_py_typed_is_shipped() -> None:
    assert (ROOT / "pytest_tokaudit" / "py.typed").is_file()


def test_the_package_and_user_code_type_check(tmp_path: Path) -> None:
    """The package checks clean; a conftest.py written against the public names checks
    clean, and assigning to what the hooks are handed (a record, a Finding) is an error.
    One mypy run for both (its own cache, never the repository's .mypy_cache): a second
    run would analyse the package again."""
    conftest = tmp_path / "conftest.py"
    conftest.write_text(textwrap.dedent("""\
        from __future__ import annotations

        from pytest_tokaudit import AuditedRecord, FileSummary, Finding, Record


        def pytest_tokaudit_check_record(record: AuditedRecord) -> Finding | None:
            if record.n_ids and record.last_id == 7 and record.data.get("done"):
                sevens = record.count_each((7,))[0] + record.occurrences(7)
                return record.finding("last", f"ends in 7 ({sevens}, line {record.line})")
            return None


        def pytest_tokaudit_check_file(summary: FileSummary) -> str | None:
            summary.channel("checked").append(summary.checked)
            return None if summary.mean_ratio < 0.1 else "too far off"


        def assign(record: AuditedRecord, jsonl: Record, finding: Finding) -> None:
            record.line = 1  # error: read-only
            jsonl.count = 2  # error: read-only
            finding.line = 3  # error: read-only
        """))
    expected = [n for n, line in enumerate(conftest.read_text().splitlines(), 1)
                if line.endswith("# error: read-only")]
    run = mypy("--cache-dir", str(tmp_path / "mypy_cache"), "pytest_tokaudit", str(conftest))
    errors = [line for line in run.stdout.splitlines() if ": error: " in line]
    theirs = [int(line.split(": error: ")[0].rsplit(":", 1)[1])
              for line in errors if line.startswith(str(conftest))]
    ours = [line for line in errors if not line.startswith(str(conftest))]
    assert not ours, f"mypy pytest_tokaudit failed:\n{run.stdout}{run.stderr}"
    assert theirs == expected, f"{run.stdout}{run.stderr}"
    assert run.returncode == 1 and not run.stderr, run.stderr
