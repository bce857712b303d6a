"""The machine-readable audit (--tokaudit-json) and comparison with a baseline report."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
import pytest

from . import __version__
from .contract import Contract
from .findings import Finding
from .summary import FileSummary

FORMAT = 1


def file_entry(s: FileSummary) -> dict[str, Any]:
    """The summary as it travels, plus the derived figures people read."""
    entry = orjson.loads(s.to_json())
    entry.update(
        mean_billed=s.mean_billed,
        mean_counted=s.mean_counted,
        mean_absdiff=s.mean_absdiff,
        mean_ratio=s.mean_ratio,
        rt_ratio_mean=s.rt_ratio_mean,
        records_with_findings=s.bad_records + s.outlier_records,
        worst_records=[
            {"line": line, "id": rid, "billed": billed, "counted": counted, "diff": counted - billed}
            for _, line, rid, billed, counted in s.worst_records()
        ],
    )
    return entry


def build(
    files: list[FileSummary], outcomes: list[Any], contract: Contract, partial: str | None,
    baseline: dict[str, Any] | None = None,
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "tool": "pytest-tokaudit",
        "version": __version__,
        "format": FORMAT,
        "contract": contract.to_json(),
        "partial": partial,
        "totals": {
            "files": len(files),
            "records": sum(s.records for s in files),
            "audited": sum(s.audited for s in files),
            "billed": sum(s.billed for s in files),
            "counted": sum(s.counted for s in files),
            "findings": sum(s.findings for s in files),
        },
        "files": [file_entry(s) for s in files],
        "dataset": [o.to_json() for o in outcomes],
    }
    if baseline is not None:
        data["baseline"] = baseline
    return data


def write(path: str | os.PathLike, data: dict[str, Any]) -> None:
    """Write atomically, so a reader (or a later --tokaudit-baseline) never sees half a file."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2))
    tmp.replace(path)


def load(path: str | os.PathLike) -> dict[str, Any]:
    """A report written by --tokaudit-json; ValueError says what is wrong with it."""
    try:
        data = orjson.loads(Path(path).read_bytes())
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror}") from None
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"{path} is not JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("tool") != "pytest-tokaudit":
        raise ValueError(f"{path} is not a pytest-tokaudit JSON report (--tokaudit-json)")
    return data


def summaries(data: dict[str, Any]) -> list[FileSummary]:
    return [FileSummary.from_json(orjson.dumps(f)) for f in data.get("files", [])]


# -- baseline -------------------------------------------------------------------------------

METRICS = (
    ("mean_ratio", "mean |diff| / mean billed", lambda s: s.mean_ratio, "{:.3%}"),
    ("records_with_findings", "records with findings",
     lambda s: s.bad_records + s.outlier_records, "{:,}"),
    ("rt_ratio_mean", "mean round-trip ratio", lambda s: s.rt_ratio_mean, "{:.3%}"),
)


def regressions(current: FileSummary, base: dict[str, Any], rel: float) -> list[str]:
    """What got worse than the baseline by more than `rel`."""
    out = []
    for name, label, get, fmt in METRICS:
        now, before = get(current), base.get(name, 0) or 0
        if now > before and now > before * (1 + rel) + 1e-12:
            out.append(f"{label} {fmt.format(before)} -> {fmt.format(now)}")
    return out


class BaselineCheck:
    """Fails a file that got worse than in an earlier --tokaudit-json report."""

    def __init__(self, path: str):
        try:
            data = load(path)
        except ValueError as exc:
            raise pytest.UsageError(f"--tokaudit-baseline: {exc}") from None
        self.path = path
        self.files = {f["path"]: f for f in data.get("files", [])}

    @pytest.hookimpl
    def pytest_tokaudit_check_file(self, summary, contract):
        base = self.files.get(summary.path)
        if base is None:
            return None
        worse = regressions(summary, base, contract.baseline_rel)
        if not worse:
            return None
        return Finding(
            "baseline",
            f"worse than baseline {self.path} by more than {contract.baseline_rel:.0%}: "
            + "; ".join(worse),
        )

    def compare(self, files: list[FileSummary]) -> dict[str, list[str]]:
        now = {s.path for s in files}
        return {
            "new": sorted(now - self.files.keys()),
            "vanished": sorted(self.files.keys() - now),
        }
