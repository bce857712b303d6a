"""A sharded file's [file] item judges what no shard can (allowances, the mean, file
checks); a record no allowance forgives fails its shard alone. One bad record, one failure."""

from __future__ import annotations

import bisect
import re
from pathlib import Path

import pytest

from conftest import TokProject, assert_no_crash, failure_section, failure_sections, rec
from pytest_tokaudit.sources.base import shard_count, shard_cuts

SHARD = 1500


def big(bad: dict[int, dict]) -> list[dict]:
    rows = [rec(i, 10) for i in range(1, 121)]
    for line, row in bad.items():
        rows[line - 1] = row
    return rows


def shard_of_line(path: Path, line: int) -> int:
    """1-based shard holding the line's first byte, from the file's bytes and shard_cuts."""
    data = path.read_bytes()
    start = len(b"".join(data.splitlines(keepends=True)[: line - 1]))
    return bisect.bisect_right(shard_cuts(len(data), SHARD), start)


def failed(result: pytest.RunResult) -> list[str]:
    return sorted(re.findall(r"^FAILED (.+?)(?: - .*)?$", result.stdout.str(), re.M))


def test_one_bad_record_is_one_failure(project: TokProject):
    project.ini(tokaudit_shard_size=SHARD)
    path = project.jsonl("data/big.jsonl", big({70: {**rec(70, 10), "output_ids": [1, "x"]}}))
    n = shard_count(path.stat().st_size, SHARD)
    assert n >= 4
    result = project.run("-rA")
    assert_no_crash(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert failed(result) == [f"data/big.jsonl::tokaudit[shard {shard_of_line(path, 70)}]"]
    assert "PASSED data/big.jsonl::tokaudit[file]" in result.stdout.str()
    assert "data/big.jsonl:70: sample_id=70: schema: output_ids[1] must be an integer token id" \
        in result.stdout.str()


def test_the_file_verdict_lists_what_it_judged_not_the_shards_records(project: TokProject):
    project.ini(tokaudit_shard_size=SHARD, tokaudit_count_outliers=1)
    path = project.jsonl("data/big.jsonl", big({
        10: rec(10, 10, 90), 100: rec(100, 10, 80),  # two count breaches, one allowed
        70: {**rec(70, 10), "output_ids": [1, "x"]},  # no allowance forgives it: its shard's
    }))
    result = project.run()
    assert_no_crash(result)
    i, n = shard_of_line(path, 70), shard_count(path.stat().st_size, SHARD)
    assert failed(result) == ["data/big.jsonl::tokaudit[file]", f"data/big.jsonl::tokaudit[shard {i}]"]
    (section,) = failure_sections(result, "tokaudit: data/big.jsonl [whole file]")
    outliers = "2 records break the count tolerance, at most 1 allowed (1 of 120 audited)"
    shard = f"shard {i} of {n}"  # the human text says how many there are
    assert section == [
        outliers,
        "data/big.jsonl:10: sample_id=10: count: billed 90, counted 10 (+80, +88.9%) > max(8, 2%)",
        "data/big.jsonl:100: sample_id=100: count: billed 80, counted 10 (+70, +87.5%) > max(8, 2%)",
        f"data/big.jsonl: count_outliers: {outliers}",
        f"(1 record with findings no allowance forgives: failures of {shard}, listed there)",
        "contract: default [tokaudit_count_abs = 8, tokaudit_count_rel = 2%]; pytest.ini "
        "[tokaudit_count_outliers = 1]",
    ], section
    # The unsharded twin says all of it in one section.
    project.ini(tokaudit_shard_size=0, tokaudit_count_outliers=1)
    whole = failure_section(project.run(), "data/big.jsonl")
    assert whole[0] == f"3 of 120 audited records break the contract; {outliers}"
    assert len([line for line in whole if re.match(r"data/big\.jsonl:\d+: ", line)]) == 3
