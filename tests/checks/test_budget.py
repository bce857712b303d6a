"""tokaudit_budget (checks/dataset.py): the billed tokens of every file must not exceed it; a
subset that alone exceeds it fails even though the run is partial (xdist-2 and no-xdist
alike)."""

from __future__ import annotations

import pytest

from conftest import TokProject, rec

FAILED = pytest.ExitCode.TESTS_FAILED


def dataset(project: TokProject, budget: int = 1000) -> None:
    project.ini(
        tokaudit_budget=budget,
        tokaudit_price_per_mtok="2.50",
        tokaudit_unique_ids="true",
        tokaudit_expected_ids="manifest.txt",
        tokaudit_shard_size=700,  # big.jsonl is sharded, the others are not
    )
    project.jsonl("data/a.jsonl", [rec(i, 10) for i in range(1, 6)])
    project.jsonl("data/b.jsonl", [rec(i, 10) for i in range(6, 10)] + [rec(3, 10)])
    project.jsonl("data/big.jsonl", [rec(i, 12) for i in range(10, 40)])
    project.write("manifest.txt", "\n".join(str(i) for i in range(1, 45)) + "\n")


def verdicts(result: pytest.RunResult) -> list[str]:
    """Outcome lines of -rA, sorted: xdist reports in completion order."""
    return sorted(
        line for line in result.stdout.lines
        if line.split(" ")[0] in ("PASSED", "FAILED", "SKIPPED", "ERROR")
    )


def test_budget_fails_on_a_subset_that_alone_exceeds_it(project: TokProject):
    dataset(project, budget=40)
    result = project.run("-rA", paths=("data/a.jsonl",))
    assert result.ret == FAILED
    lines = verdicts(result)
    (budget,) = [l for l in lines if "budget" in l]
    assert budget.startswith("FAILED pytest.ini::tokaudit::budget - over budget: billed 50 of 40")
    assert any("partial run" in l for l in result.stdout.lines)
