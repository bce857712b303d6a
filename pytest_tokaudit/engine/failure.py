"""A failed item's text: the one-line verdict, a line per bad record, where tolerances came from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..base.findings import Finding
from ..base.formats import format_of, location
from ..base.text import plural, printable, record_label
from ..model.contract import Contract
from ..model.summary import FileSummary

# Which contract keys a check's verdict depends on, to say where the tolerance came from.
CHECK_KEYS = {
    "count": ("count_abs", "count_rel", "count_outliers"),
    "count_outliers": ("count_outliers",),
    "count_mean": ("count_mean_abs", "count_mean_rel"),
    "require_once": ("require_once",),
    "require_last": ("require_last",),
    "forbid": ("forbid",),
    "roundtrip": ("roundtrip_rel",),
    "empty": ("allow_empty",),
    "baseline": ("baseline_rel",),
    "ids_match_text": ("text_template",),
    "special_in_text": ("text_template",),
    "prompt_count": ("prompt_count_abs", "prompt_count_rel"),
    "prompt_count_outliers": ("prompt_count_outliers",),
    "prompt_count_mean": ("prompt_count_mean_rel", "prompt_count_mean_abs"),
}


def finding_line(path: str, f: Finding, id_field: tuple[str, ...], offset: int = 0,
                 note: str = "") -> str:
    """`path:LINE: id=...: check: message`; `id_field` from the file's summary (id_path)."""
    where = location(path, f.line + offset) if f.line is not None else path
    # Data values reach messages (a user's check quoting a field): one line, escaped.
    return printable(f"{where}: {record_label(id_field, f.record_id)}{f.check}: {f.message}{note}")


OUTLIER_NOTES = {True: " (allowed outlier)", False: "",
                 None: " (outlier: judged with the whole file)"}  # summary.forgiven()


def verdict(summary: FileSummary, contract: Contract) -> str:
    """The first line: reads on its own as pytest's one-line FAILED summary."""
    # Outlier records of checks over their allowance count too (findings of those checks,
    # at most every outlier record: exact when one check's allowance is exceeded).
    exceeded = sum(n for check, n in summary.outliers.items() if summary.forgiven(check) is False)
    bad_records = summary.bad_records + min(exceeded, summary.outlier_records)
    # Each unreadable line (row) is a bad record too, but not one of the audited: said apart.
    unreadable = summary.unreadable
    bad_audited = max(bad_records - unreadable, 0)
    where = f" in shard {summary.shard + 1} of {summary.shards}" if summary.shard is not None else ""
    parts = []
    if bad_audited:
        parts.append(
            f"{bad_audited:,} of {summary.audited:,} audited records{where} break the contract"
        )
    if unreadable:
        parts.append(f"{plural(unreadable, 'unreadable ' + format_of(summary.path).unit)}{where}")
    parts += [f.message for f in file_level(summary)]
    return printable("; ".join(parts)) or "the file breaks the contract"


def file_level(summary: FileSummary) -> list[Finding]:
    """The file's findings without a line: a field no record has first (said once, in
    place of one finding per record), then the per-file checks' and read errors."""
    return summary.absent_findings() + list(summary.file_findings)


def listed(summary: FileSummary) -> tuple[list[Finding], list[Finding], int]:
    """(shown findings, shown allowable ones, findings at records not shown): the
    "missing field" findings of a field no record has are left out, said by file_level."""
    errors = summary.shown_findings()
    hidden = sum(n for _, n in summary.absent_fields())
    more = summary.failing + summary.allowable - len(errors) - len(summary.shown_allowable) - hidden
    return errors, list(summary.shown_allowable), more


def failure_lines(
    summary: FileSummary, contract: Contract, offset: int = 0
) -> tuple[str, list[str]]:
    """(verdict, section lines) of one file's failure; the verdict is the first line."""
    text = failure_text(summary, contract, offset)
    return text.split("\n", 1)[0], text.split("\n")


def failure_text(summary: FileSummary, contract: Contract, offset: int = 0) -> str:
    """The failure section of one file: verdict, bad records, file-level findings, sources."""
    lines = [verdict(summary, contract)]
    errors, allowable, more = listed(summary)
    shown = [(f, "") for f in errors]
    shown += [(f, OUTLIER_NOTES[summary.forgiven(f.check)]) for f in allowable]
    shown.sort(key=lambda pair: pair[0].line or 0)  # shown findings all have a line
    id_field = summary.id_path(contract.id_field)
    lines += [finding_line(summary.path, f, id_field, offset, n) for f, n in shown]
    if more > 0:
        lines.append(f"... and {more:,} more (tokaudit_max_shown = {summary.max_shown})")
    for f in file_level(summary):
        lines.append(finding_line(summary.path, f, id_field))
    lines += _sources(summary.by_check, contract)
    return "\n".join(lines)


def _sources(checks: Any, contract: Contract) -> list[str]:
    """The `contract: ...` line: where the tolerances of these checks came from."""
    keys: list[str] = []
    for check in checks:
        # Every check's allowance is tokaudit_count_outliers (checks/record.py's are listed above).
        for attr in CHECK_KEYS.get(check, ("count_outliers",) if check.endswith("_outliers") else ()):
            if attr not in keys:
                keys.append(attr)
    return [f"contract: {contract.describe(tuple(keys))}"] if keys else []


def whole_file_lines(summary: FileSummary, findings: list[Finding], contract: Contract,
                     failing_shards: list[str]) -> tuple[str, list[str]]:
    """(verdict, section lines) of a sharded file's [file] item, which judges what no shard
    can: the allowances, the mean and the file checks (`findings`, its own), with the
    allowable records they weigh. A record with a finding no allowance forgives fails the
    shard that holds it, as a shard's read error does, and is listed there: one bad record
    is one failure, not repeated here."""
    path, id_field = summary.path, summary.id_path(contract.id_field)
    lines = ["; ".join(f.message for f in findings) or "the file breaks the contract"]
    lines += [finding_line(path, f, id_field, 0, OUTLIER_NOTES[summary.forgiven(f.check)])
              for f in summary.shown_allowable]
    more = summary.allowable - len(summary.shown_allowable)
    if more > 0:
        lines.append(f"... and {more:,} more (tokaudit_max_shown = {summary.max_shown})")
    lines += [finding_line(path, f, id_field) for f in findings]
    if failing_shards:
        what = (f"{plural(summary.bad_records, 'record')} with findings no allowance forgives"
                if summary.bad_records else "findings")
        lines.append(f"({what}: failures of {', '.join(failing_shards)}, listed there)")
    checks = [f.check for f in summary.shown_allowable] + [f.check for f in findings]
    lines += _sources(dict.fromkeys(checks), contract)
    return lines[0], lines


@dataclass
class Entry:
    """One finding as CI shows it."""

    level: str  # "error" or "warning" (an allowed outlier)
    check: str
    message: str
    line: int | None = None  # a JSONL line, or a Parquet row (None: the file)
    record_id: Any = None


def entries(s: FileSummary) -> tuple[list[Entry], int]:
    """(the shown findings in line order, then file-level ones; how many more not shown)."""
    errors, allowable, more = listed(s)
    shown: list[tuple[Finding, str]] = [(f, "error") for f in errors]
    shown += [(f, "warning" if s.complete and s.forgiven(f.check) is not False else "error")
              for f in allowable]
    shown.sort(key=lambda pair: pair[0].line or 0)
    out = [Entry(level, f.check, f.message, f.line, f.record_id) for f, level in shown]
    out += [Entry("error", f.check, f.message) for f in file_level(s)]
    return out, max(more, 0)
