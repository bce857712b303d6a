"""Views of summaries: the failure section of a file and the terminal summary table."""

from __future__ import annotations

from typing import Any

from .contract import Contract
from .findings import Finding, location
from .summary import WORST, FileSummary

# Which contract keys a check's verdict depends on, to say where the tolerance came from.
CHECK_KEYS = {
    "count": ("count_abs", "count_rel", "count_outliers"),
    "count_outliers": ("count_outliers",),
    "count_mean": ("count_mean_rel",),
    "require_once": ("require_once",),
    "require_last": ("require_last",),
    "forbid": ("forbid",),
    "roundtrip": ("roundtrip_rel",),
    "empty": ("allow_empty",),
    "baseline": ("baseline_rel",),
    "ids_match_text": ("text_template",),
    "special_in_text": ("text_template",),
}


def record_label(contract: Contract, record_id: Any) -> str:
    if record_id is None or not contract.id_field:
        return ""
    return f"{'.'.join(contract.id_field)}={record_id!r}: "


def finding_line(path: str, f: Finding, contract: Contract, offset: int = 0, note: str = "") -> str:
    where = location(path, f.line + offset) if f.line is not None else path
    return f"{where}: {record_label(contract, f.record_id)}{f.check}: {f.message}{note}"


OUTLIER_NOTES = {True: " (allowed outlier)", False: "",
                 None: " (outlier: judged with the whole file)"}  # summary.forgiven()


def verdict(summary: FileSummary, contract: Contract) -> str:
    """The first line: reads on its own as pytest's one-line FAILED summary."""
    # Outlier records of checks over their allowance count too (findings of those checks,
    # at most every outlier record: exact when one check's allowance is exceeded).
    exceeded = sum(n for check, n in summary.outliers.items() if summary.forgiven(check) is False)
    bad_records = summary.bad_records + min(exceeded, summary.outlier_records)
    parts = []
    if bad_records:
        where = f" in shard {summary.shard + 1} of {summary.shards}" if summary.shard is not None else ""
        parts.append(
            f"{bad_records:,} of {summary.audited:,} audited records{where} break the contract"
        )
    parts += [f.message for f in summary.file_findings]
    return "; ".join(parts) or "the file breaks the contract"


def failure_lines(
    summary: FileSummary, contract: Contract, offset: int = 0
) -> tuple[str, list[str]]:
    """(verdict, section lines) of one file's failure; the verdict is the first line."""
    text = failure_text(summary, contract, offset)
    return text.split("\n", 1)[0], text.split("\n")


def failure_text(summary: FileSummary, contract: Contract, offset: int = 0) -> str:
    """The failure section of one file: verdict, bad records, file-level findings, sources."""
    lines = [verdict(summary, contract)]
    shown = [(f, "") for f in summary.shown]
    shown += [(f, OUTLIER_NOTES[summary.forgiven(f.check)]) for f in summary.shown_allowable]
    shown.sort(key=lambda pair: pair[0].line or 0)  # shown findings all have a line
    lines += [finding_line(summary.path, f, contract, offset, n) for f, n in shown]
    more = summary.failing + summary.allowable - len(shown)
    if more > 0:
        lines.append(f"... and {more:,} more (tokaudit_max_shown = {summary.max_shown})")
    for f in summary.file_findings:
        lines.append(finding_line(summary.path, f, contract))
    keys: list[str] = []
    for check in summary.by_check:
        # Every check's allowance is tokaudit_count_outliers (checks.py's are listed above).
        for attr in CHECK_KEYS.get(check, ("count_outliers",) if check.endswith("_outliers") else ()):
            if attr not in keys:
                keys.append(attr)
    if keys:
        lines.append(f"contract: {contract.describe(tuple(keys))}")
    return "\n".join(lines)


# -- terminal summary ---------------------------------------------------------------------

def _table(header: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]

    def fmt(row: list[str]) -> str:
        cells = [str(c).rjust(w) if i in right else str(c).ljust(w)
                 for i, (c, w) in enumerate(zip(row, widths))]
        return "  ".join(cells).rstrip()

    return [fmt(header)] + [fmt(r) for r in rows]


ROWS = 20  # files in the summary table without -v


def bounded(summaries: list[FileSummary], limit: int | None) -> tuple[list[FileSummary], int]:
    """(the files the table lists, how many passing files it leaves out). Past `limit`
    files: every failing file first, then passing ones up to `limit` rows in all."""
    if limit is None or len(summaries) <= limit:
        return summaries, 0
    bad = [s for s in summaries if s.failed]
    good = [s for s in summaries if not s.failed]
    keep = good[: max(limit - len(bad), 0)]
    return bad + keep, len(good) - len(keep)


def summary_lines(
    summaries: list[FileSummary], contract: Contract, limit: int | None = None
) -> list[str]:
    """The per-file table, then the worst records and the allowed outliers. With `limit`
    (without -v), a long table lists the failing files first and counts the rest."""
    lines = summary_table(summaries, limit)
    overall = WORST if bounded(summaries, limit)[1] else None  # not 5 rows per file
    worst = f"worst {overall} records of all files" if overall else "worst records"
    for title, block in (
        (f"{worst} by |billed - counted|:", worst_table(summaries, contract, overall)),
        ("allowed outliers (tokaudit_count_outliers) in files that passed:",
         allowed_outliers(summaries, contract)),
        ("by group (tokaudit_group_by):", _group_table(summaries, contract)),
    ):
        if block:
            lines += ["", title, *block]
    return lines


def _group_table(summaries: list[FileSummary], contract: Contract) -> list[str]:
    from .groups import group_table

    return group_table(summaries, contract)


def summary_table(summaries: list[FileSummary], limit: int | None = None) -> list[str]:
    """One row per file: the audit people read every run."""
    listed, hidden = bounded(summaries, limit)
    with_rt = any(s.rt_checked for s in summaries)
    header = ["file", "records", "audited", "skipped", "mean billed", "mean counted",
              "mean |diff|", "max |diff|", "findings"]
    if with_rt:
        header += ["rt changed", "rt mean", "rt max"]
    rows = [_row(s, with_rt) for s in listed]
    if len(summaries) > 1:
        total = FileSummary(path=f"all {len(summaries)} files")
        for s in summaries:
            total.merge(s)
        rows.append(_row(total, with_rt))
    table = _table(header, rows, right=set(range(1, len(header))))
    if hidden:
        table.append(f"... and {hidden:,} more file{'s' if hidden != 1 else ''} passed "
                     "(-v lists every file)")
    return table


def _row(s: FileSummary, with_rt: bool) -> list[str]:
    row = [
        s.path, f"{s.records:,}", f"{s.audited:,}", f"{s.skipped:,}",
        f"{s.mean_billed:,.1f}", f"{s.mean_counted:,.1f}",
        f"{s.mean_absdiff:.2f} ({s.mean_ratio:.2%})", f"{s.max_absdiff:,}", f"{s.findings:,}",
    ]
    if with_rt:
        row += [f"{s.rt_changed:,}", f"{s.rt_ratio_mean:.2%}", f"{s.rt_ratio_max:.2%}"]
    return row


def allowed_outliers(summaries: list[FileSummary], contract: Contract) -> list[str]:
    """Records forgiven by tokaudit_count_outliers in files that passed: named, not hidden."""
    out = []
    for s in summaries:
        # Only a file audited to the end and judged whole has passed; a partly audited
        # sharded file's outliers were never weighed against its allowance.
        if s.complete and s.allowable and not s.failed:
            out += [finding_line(s.path, f, contract) for f in s.shown_allowable]
            if s.allowable > len(s.shown_allowable):
                out.append(f"... and {s.allowable - len(s.shown_allowable):,} more in {s.path}")
    return out


def worst_table(summaries: list[FileSummary], contract: Contract,
                overall: int | None = None) -> list[str]:
    """The worst 5 records of each file by |billed - counted| (or the worst `overall`)."""
    found = [(diff, s.path, line, rid, billed, counted)
             for s in summaries for diff, line, rid, billed, counted in s.worst_records()]
    if overall is not None:
        found = sorted(found, key=lambda r: -r[0])[:overall]
    rows = []
    for diff, path, line, rid, billed, counted in found:
        rows.append([location(path, line), "" if rid is None else repr(rid),
                     f"{billed:,}", f"{counted:,}", f"{counted - billed:+,}"])
    if not rows:
        return []
    id_name = ".".join(contract.id_field) or "id"
    return _table(["record", id_name, "billed", "counted", "diff"], rows, right={2, 3, 4})
