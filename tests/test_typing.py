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


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One mypy cache for this module's runs, never the repository's .mypy_cache."""
    return tmp_path_factory.mktemp("mypy_cache")


def mypy(cache_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m mypy ARGS` from the repository root, with its pyproject.toml config."""
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", "pyproject.toml",
         "--cache-dir", str(cache_dir), "--no-color-output", "--no-error-summary", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT,
    )


def test_package_type_checks(cache_dir: Path) -> None:
    run = mypy(cache_dir, "pytest_tokaudit")
    assert run.returncode == 0, f"mypy pytest_tokaudit failed:\n{run.stdout}{run.stderr}"


def test_py_typed_is_shipped() -> None:
    assert (ROOT / "pytest_tokaudit" / "py.typed").is_file()


def test_user_code_sees_the_public_types(cache_dir: Path, tmp_path: Path) -> None:
    """A conftest.py written against the public names checks clean, and assigning to what
    the hooks are handed (a record, a Finding) is an error."""
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
    run = mypy(cache_dir, str(conftest))
    errors = [int(line.split(": error: ")[0].rsplit(":", 1)[1])
              for line in run.stdout.splitlines() if ": error: " in line]
    assert errors == expected, f"{run.stdout}{run.stderr}"
