"""Views of summaries: the failure section of a file and the terminal summary table."""

from __future__ import annotations

from typing import Any

import pytest

from ..base.formats import location
from ..base.text import columns, plural, printable
from ..engine.failure import finding_line
from ..model.contract import Contract, money
from ..model.result import RunResult
from ..model.rules import count_within, signed_difference
from ..model.spend import of_run
from ..model.spend import lines as spend_text
from ..model.summary import GROUPS, WORST, FileSummary, label, totals
from ..run.keys import RESULT

PROMPT = "prompt"  # checks/prompt.py's channel: [values, records, billed, counted, |diff|, uncountable]


def group_table(summaries: list[Any], contract: Any) -> list[str]:
    """Rows by group over every file: records, mean billed, mean counted, mean |diff| (%)."""
    if not contract.group_by:
        return []
    groups = totals([e for s in summaries for e in s.channels.get(GROUPS, [])])
    rows = []
    for key, (n, billed, counted, absdiff) in sorted(groups.items()):
        pct = f" ({absdiff / billed:.2%})" if billed else ""
        rows.append([label(contract.group_by, key), f"{n:,}", f"{billed / n:,.1f}",
                     f"{counted / n:,.1f}", f"{absdiff / n:.2f}{pct}"])
    header = ["group", "records", "mean billed", "mean counted", "mean |diff|"]
    return columns(header, rows, {1, 2, 3, 4}) if rows else []


def prompt_table(summaries: list[Any], contract: Any) -> list[str]:
    """The prompt audit by group over every file: records counted, mean billed and counted
    prompt tokens, mean |diff|, and the records the template cannot count (images, audio)."""
    acc = totals([e for s in summaries for e in s.channels.get(PROMPT, [])])
    rows = []
    for key, (n, billed, counted, absdiff, uncountable) in sorted(acc.items()):
        pct = f" ({absdiff / billed:.2%})" if billed else ""
        name = label(contract.group_by, key) if contract.group_by else "all"
        rows.append([name, f"{n:,}", f"{billed / n:,.1f}" if n else "-", f"{counted / n:,.1f}" if n else "-",
                     f"{absdiff / n:.2f}{pct}" if n else "-", f"{uncountable:,}"])
    header = ["group", "records", "mean billed", "mean counted", "mean |diff|", "uncountable"]
    return columns(header, rows, {1, 2, 3, 4, 5}) if rows else []


def spend_lines(summaries: list[Any], contract: Any) -> list[str]:
    """Spend by component and by group (model/spend.py), when prices are set."""
    spent = of_run(summaries, contract)
    return [] if spent is None else ["", *spend_text(spent)]


RED: dict[str, bool] = {"red": True}


PLAIN: dict[str, bool] = {}


# A line of the summary and its markup for the terminal writer (`red=True`): the writer
# decides whether to colour (--color, NO_COLOR, FORCE_COLOR, a tty).
Styled = tuple[str, dict[str, bool]]


OUTCOME_MARKUP = {"failed": RED, "passed": {"green": True}, "skipped": {"yellow": True}}


MIN_PATH = 24  # a path column narrower than this says too little to be worth fitting


def terminal_width(config: Any) -> int | None:
    """The width to fit the summary to: pytest's own (COLUMNS, else the terminal's) when
    COLUMNS is set or the output is a terminal; None in a log (CI), where whole paths
    are worth more than a width nobody reads at."""
    import os
    import sys

    out = sys.__stdout__
    if os.environ.get("COLUMNS") or (out is not None and out.isatty()):
        return int(config.get_terminal_writer().fullwidth)
    return None


def shorten(path: str, width: int) -> str:
    """`path` in at most `width` characters: leading folders become `...`, then the
    middle of the name goes (`data/a/b/c.jsonl` -> `.../b/c.jsonl`)."""
    if len(path) <= width:
        return path
    parts = path.split("/")
    for k in range(1, len(parts)):
        tail = ".../" + "/".join(parts[k:])
        if len(tail) <= width:
            return tail
    name = parts[-1]
    keep = max(width - 3, 2)
    return name[: keep - keep // 2] + "..." + name[len(name) - keep // 2:]


def _fit_first(header: list[str], rows: list[list[str]], width: int | None) -> None:
    """Shorten the first column's cells so the table fits `width` (in place)."""
    if width is None or not rows:
        return
    others = [max(len(str(c)) for c in col) for col in zip(header[1:], *(r[1:] for r in rows))]
    room = max(width - sum(others) - 2 * len(others), MIN_PATH, len(header[0]))
    for row in rows:
        row[0] = shorten(row[0], room)


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


def summary_lines(summaries: list[FileSummary], contract: Contract) -> list[str]:
    """The summary as plain lines (the merge command prints these)."""
    return [text for text, _ in styled_summary(summaries, contract)]


def styled_summary(
    summaries: list[FileSummary], contract: Contract, limit: int | None = None,
    width: int | None = None,
) -> list[Styled]:
    """The per-file table, then the worst records and the allowed outliers, each line with
    its markup. With `limit` (without -v) a long table lists the failing files first and
    counts the rest, and the worst records outside the tolerance are bounded as well;
    with `width` paths are shortened to fit it."""
    lines = summary_table(summaries, limit, width)
    for title, block in (
        ("worst records by |billed - counted|:", worst_table(summaries, contract, limit, width)),
        ("allowed outliers (tokaudit_count_outliers) in files that passed:",
         [(line, PLAIN) for line in allowed_outliers(summaries, contract)]),
        ("by group (tokaudit_group_by):",
         [(line, PLAIN) for line in group_table(summaries, contract)]),
        ("prompt tokens through the chat template:",
         [(line, PLAIN) for line in prompt_table(summaries, contract)]),
    ):
        if block:
            lines += [("", PLAIN), (title, PLAIN), *block]
    return lines


def summary_table(
    summaries: list[FileSummary], limit: int | None = None, width: int | None = None
) -> list[Styled]:
    """One row per file: the audit people read every run. Failing files in red."""
    listed, hidden = bounded(summaries, limit)
    with_rt = any(s.rt_checked for s in summaries)
    # records = audited + skipped + unreadable: the column is there when a file has some
    with_unreadable = any(s.unreadable for s in summaries)
    with_errors = any(s.errors for s in summaries)  # an API's error lines (tokaudit_requests)
    header = ["file", "records", "audited", "skipped", *(["unreadable"] if with_unreadable else []),
              *(["errors"] if with_errors else []), "mean billed", "mean counted", "mean |diff|", "max |diff|", "findings"]
    if with_rt:
        header += ["rt changed", "rt mean", "rt max"]
    rows = [_row(s, with_rt, with_unreadable, with_errors) for s in listed]
    marks = [RED if s.failed else PLAIN for s in listed]
    if len(summaries) > 1:
        total = FileSummary(path=f"all {len(summaries)} files")
        for s in summaries:
            total.merge(s)
        rows.append(_row(total, with_rt, with_unreadable, with_errors))
        marks.append({"bold": True})
    if any(s.cached for s in summaries):  # reused from the cache (tokaudit_cache_dir)
        header.append("cached")
        cells = ["yes" if s.cached else "" for s in listed]
        if len(summaries) > 1:
            cells.append(f"{sum(s.cached for s in summaries):,}")
        rows = [row + [cell] for row, cell in zip(rows, cells)]
    _fit_first(header, rows, width)
    table = columns(header, rows, right=set(range(1, len(header))))
    out: list[Styled] = [(table[0], PLAIN), *zip(table[1:], marks)]
    if hidden:
        out.append((f"... and {plural(hidden, 'more file')} passed (-v lists every file)", PLAIN))
    return out


def _row(s: FileSummary, with_rt: bool, with_unreadable: bool = False,
         with_errors: bool = False) -> list[str]:
    row = [
        printable(s.path), f"{s.records:,}", f"{s.audited:,}", f"{s.skipped:,}",
        *([f"{s.unreadable:,}"] if with_unreadable else []),
        *([f"{s.errors:,}"] if with_errors else []),
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
            out += [finding_line(s.path, f, s.id_path(contract.id_field)) for f in s.shown_allowable]
            if s.allowable > len(s.shown_allowable):
                out.append(f"... and {s.allowable - len(s.shown_allowable):,} more in {printable(s.path)}")
    return out


def _outside(s: FileSummary, contract: Contract) -> Any:
    """A test of (line, billed, counted): is that record of `s` outside the count tolerance?

    Exact from the file's count findings (which its own contract judged); only when more
    count findings were made than are kept does the run's contract decide the rest.
    """
    lines = {f.line for f in s.shown + s.shown_allowable if f.check == "count"}
    complete = s.by_check.get("count", 0) <= len(lines)

    def test(line: int, billed: int, counted: int) -> bool:
        if line in lines:
            return True
        return not complete and not count_within(contract, billed, counted)

    return test


def worst_table(summaries: list[FileSummary], contract: Contract,
                limit: int | None = None, width: int | None = None) -> list[Styled]:
    """The worst records by |billed - counted| across every file: those outside the count
    tolerance first (red; at most `limit` of them), then the worst WORST of the rest."""
    outside: list[tuple[Any, ...]] = []
    inside: list[tuple[Any, ...]] = []
    for s in summaries:
        test = _outside(s, contract)
        for diff, line, rid, billed, counted in s.worst_records():
            entry = (diff, s.path, line, rid, billed, counted)
            (outside if test(line, billed, counted) else inside).append(entry)
    order = lambda r: (-r[0], r[1], r[2])  # noqa: E731 - worst first, then by place
    outside.sort(key=order)
    inside.sort(key=order)
    more = 0
    if limit is not None and len(outside) > limit:
        outside, more = outside[:limit], len(outside) - limit
    found = outside + inside[:WORST]
    if not found:
        return []
    rows = [[printable(location(path, line)), "" if rid is None else repr(rid),
             f"{billed:,}", f"{counted:,}", f"{signed_difference(billed, counted):+,}"]
            for diff, path, line, rid, billed, counted in found]
    # Each file's own id field (a folder's contract may name another): one name if they agree.
    names = {".".join(s.id_path(contract.id_field)) for s in summaries}
    id_name = (names.pop() if len(names) == 1 else "") or "id"
    header = ["record", id_name, "billed", "counted", "billed - counted"]
    _fit_first(header, rows, width)
    table = columns(header, rows, right={2, 3, 4})
    marks = [RED] * len(outside) + [PLAIN] * (len(found) - len(outside))
    out: list[Styled] = [(table[0], PLAIN), *zip(table[1:], marks)]
    if more:
        out.append((f"... and {more:,} more outside the count tolerance among the files' "
                    "worst records (-v lists them; the failure sections name each)", PLAIN))
    return out


class TerminalSummary:
    """The `tokaudit summary` section: the table, the worst records, the dataset checks."""

    def __init__(self, config: pytest.Config):
        self.config = config

    @pytest.hookimpl(tryfirst=True)  # the other outputs' lines follow the table
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        result = self.config.stash.get(RESULT, None)
        if result is None or not result.files and not result.outcomes:
            return
        files, contract = result.files, result.contract
        tr = terminalreporter
        tr.write_sep("=", "tokaudit summary")
        # A long table: failing files first, the rest counted; paths fitted to the terminal.
        limit = None if self.config.option.verbose > 0 else ROWS
        for line, markup in styled_summary(files, contract, limit, terminal_width(self.config)):
            tr.write_line(line, **markup)
        if result.cache_line:
            tr.write_line("")
            tr.write_line(result.cache_line)
        for line in spend_lines(files, contract):
            tr.write_line(line)
        if contract.price_per_mtok is not None and contract.budget is None:
            spent = sum(s.billed_total for s in files)
            tr.write_line(f"\nbilled {spent:,} tokens = {money(spent, contract)}")
        if result.outcomes:
            tr.write_line("")
        for outcome in result.outcomes:
            tr.write_line(f"{result.anchor}::{outcome.name}: {outcome.outcome}: "
                          f"{printable(outcome.message)}",
                          **OUTCOME_MARKUP.get(outcome.outcome, {}))
        for kind, paths in (result.baseline or {}).items():
            if paths:
                tr.write_line(f"{kind} since the baseline: {printable(', '.join(paths))}")
        for line in partial_lines(result):
            tr.write_line(line, yellow=True)


def partial_lines(result: RunResult) -> list[str]:
    """What a partial run did not judge, said last: green there is no verdict on the dataset."""
    if not result.partial:
        return []
    out = ["", "tokaudit: PARTIAL RUN: a green result covers the part audited only, not the dataset"]
    if result.coverage.partial:
        out.append(f"  not audited: {result.coverage.partial}")
    by_why: dict[str, list[str]] = {}
    for name, why in result.unjudged.items():
        by_why.setdefault(why, []).append(name)
    for why, names in by_why.items():
        out.append(f"  not judged ({why}): {', '.join(names)}")
    return out


def add_options(parser: pytest.Parser, group: pytest.OptionGroup) -> None:
    """No option: the summary is always shown."""


def configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(TerminalSummary(config), "tokaudit.terminal")
