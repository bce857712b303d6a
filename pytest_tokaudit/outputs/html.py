"""--tokaudit-html=PATH: the audit as one self-contained HTML page with plots.

Everything is inline (charts as static SVG drawn by base/svg.py, a small script that
pages and filters the tables, the numbers as one JSON blob that script and tests read), and
a Content-Security-Policy allows only those: the page makes no request and runs no other
script, whatever the data holds. Bounded for any number of files: plots are over the
dataset, its groups and the few files worth a look; every file is a row of a paged table.

Also, with pytest-html and --html, each data item's report gets its own plots (extras).
"""

from __future__ import annotations

import base64
import hashlib
import heapq
import json
import os
import zlib
from importlib.resources import files
from pathlib import Path
from typing import Any, Iterable, Sequence, cast

import pytest

from .. import __version__
from ..base import svg
from ..base.atomic import check_writable, put
from ..base.formats import location
from ..base.text import plural, record_label
from ..model.contract import KEYS, Contract, money
from ..model.figures import (
    MASK,
    OFFSET,
    RT_EDGES,
    Figures,
    diff_bin,
    diff_range,
    length_range,
    quantile,
    rt_bin,
)
from ..model.outcome import Outcome
from ..model.report import METRICS, regressions
from ..model.result import RunResult
from ..model.rules import (
    count_tolerance,
    count_within,
    mean_tolerance,
    mean_within,
    signed_difference,
    tolerance_text,
)
from ..model.spend import of_run
from ..model.spend import lines as spend_text
from ..model.summary import GROUPS, PROPERTY, FileSummary, label, sums, totals
from ..run.keys import RESULT
from .session import SessionFile

POINTS = 1500  # scatter points on the page (the dataset's sample), plus OUTLIERS
OUTLIERS = 200  # records of largest |diff| (the worst table, the scatter's outliers)
FOCUS = 12  # files drawn one by one: the failing ones first, then the largest mean |diff|
BARS = 25  # files in the mean |diff| chart
FINDINGS = 5000  # findings rows on the page (each file's shown ones, failing files first)
GROUP_PLOTS = 8  # groups drawn one by one (all groups are in the mean and finish charts)
TOLERANCE_KEYS = ("count_abs", "count_rel", "count_outliers", "count_outlier_max",
                  "count_mean_rel", "roundtrip_rel", "baseline_rel", "budget")


# -- the figures a page is drawn from -------------------------------------------------------
class Own:
    """Each file's own contract and id field, by path: a folder's pytest_tokaudit_contract
    may change them, and the page judges and labels every record by its file's."""

    def __init__(self, files: Iterable[FileSummary], contract: Contract):
        self.base = contract
        self.contracts: dict[str, Contract] = {}
        self.ids: dict[str, tuple[str, ...]] = {}
        made: dict[tuple[tuple[str, str], ...], Contract] = {}
        for s in files:
            key = tuple(sorted(s.contract.items()))
            if key not in made:
                try:
                    made[key] = contract.own_contract(s.contract)
                except ValueError:  # a report's bad key: the run's contract, as before
                    made[key] = contract
            self.contracts[s.path] = made[key]
            self.ids[s.path] = s.id_path(contract.id_field)

    def contract(self, path: str) -> Contract:
        return self.contracts.get(path, self.base)

    def label(self, path: str, rid: Any) -> str:
        """`custom_id='x'`: the id as the file's own contract names it ("" without one)."""
        return record_label(self.ids.get(path, self.base.id_field), rid).removesuffix(": ")


def combined(parts: Iterable[tuple[str, Figures]]) -> tuple[Figures, list[list[Any]]]:
    """The figures of many files added up, and their samples' least POINTS with paths."""
    total = Figures(0)
    pool: list[list[Any]] = []
    for path, fig in parts:
        total.merge_counts(fig)
        # files share priorities (a hash of the line): mixed with the path's, so the page
        # draws different lines of different files
        mix = zlib.crc32(path.encode("utf-8", "surrogatepass"))
        pool.extend([((e[0] ^ mix) * 0x2C1B3C6D) & MASK, *e[1:], path] for e in fig.sample)
    return total, heapq.nsmallest(POINTS, pool, key=lambda e: (e[0], e[3], e[5]))


def worst(files: Sequence[FileSummary], n: int = OUTLIERS) -> list[list[Any]]:
    """[path, line, id, billed, counted] of the largest |billed - counted| over all files."""
    pool = ([s.path, -e[1], e[2], e[3], e[4], e[0]] for s in files for e in s.figures.tail)
    return [e[:5] for e in heapq.nsmallest(n, pool, key=lambda e: (-e[5], e[0], e[1]))]


def worst_rows(outliers: list[list[Any]], own: Own) -> list[list[Any]]:
    """The worst table's rows: [path, line, id, billed, counted, billed - counted, place,
    id label], each worded as every output words it."""
    return [[path, line, rid, billed, counted, signed_difference(billed, counted),
             location(path, line), own.label(path, rid)]
            for path, line, rid, billed, counted in outliers]


def diff_bins(fig: Figures, tolerance: float, other: Figures | None = None
              ) -> tuple[list[tuple[str, int]], tuple[int, int], list[int], int]:
    """The signed histogram cut to its non-empty range (and the band's), with the band's
    bins and the other histogram over the same bins; also the first bin's index."""
    t = int(tolerance)
    band = (diff_bin(-t), diff_bin(t))
    used = [i for i, n in enumerate(fig.diff) if n]
    if other is not None:
        used += [i for i, n in enumerate(other.diff) if n]
    lo = min(used + [band[0] - 1, OFFSET - 2])
    hi = max(used + [band[1] + 1, OFFSET + 2])
    bins = []
    for i in range(lo, hi + 1):
        a, b = diff_range(i)
        bins.append((f"{a:+d}" if a == b else f"{a:+d}..{b:+d}", fig.diff[i]))
    overlay = other.diff[lo:hi + 1] if other is not None else []
    return bins, (band[0] - lo, band[1] - lo), overlay, lo


def diff_chart(fig: Figures, contract: Contract, mean_billed: float, title: str,
               other: Figures | None = None, other_label: str = "", width: int = 420) -> str:
    tol = count_tolerance(contract, mean_billed)
    bins, band, overlay, _ = diff_bins(fig, tol, other)
    return svg.histogram(
        bins, title, band=band, overlay=overlay or None, overlay_label=other_label,
        band_label=(f"within the count tolerance at the mean billed count {mean_billed:,.0f}: "
                    f"|billed - counted| <= {tolerance_text(contract, f'{mean_billed:,.0f}')}"
                    f" = {tol:,.1f}"),
        xlabel="billed - counted (tokens); shaded: within the tolerance at the mean billed count",
        width=width)


def length_chart(fig: Figures, title: str, width: int = 420) -> str:
    used = [i for i, n in enumerate(fig.length) if n] or [0]
    bins = []
    for i in range(min(used), max(used) + 1):
        a, b = length_range(i)
        bins.append((f"{a}" if a == b else f"{a}-{b}", fig.length[i]))
    med = quantile(fig.length, 0.5, length_range)
    return svg.histogram(bins, title, xlabel=f"counted tokens per response (median bin ~{med:,.0f})",
                         width=width)


def rt_chart(fig: Figures, limit: float | None, title: str, width: int = 420) -> str:
    names = ["0"] + [f"<={e:.1%}" for e in RT_EDGES[1:]] + [f">{RT_EDGES[-1]:.0%}"]
    used = [i for i, n in enumerate(fig.rt) if n] or [0]
    top = max(used + ([rt_bin(limit)] if limit is not None else []))
    bins = [(names[i], fig.rt[i]) for i in range(top + 1)]
    band = (0, rt_bin(limit)) if limit is not None else None
    return svg.histogram(bins, title, band=band, band_label=f"<= tokaudit_roundtrip_rel {limit}",
                         xlabel="tokens changed by decode -> encode, share of the record's tokens",
                         width=width)


def scatter_chart(points: list[list[Any]], outliers: list[list[Any]], own: Own,
                  title: str, groups: dict[str, str] | None = None, width: int = 420) -> str:
    """points: [priority, billed, counted, line, id, path(, group)]; outliers: worst(), of
    which those outside their file's count tolerance are drawn (in red, on top)."""
    outside = [o for o in outliers if not count_within(own.contract(o[0]), o[3], o[4])]
    keys = {(o[0], o[1]) for o in outside}
    out = []
    for p in points:
        if (p[5], p[3]) in keys:
            continue
        color = groups.get(p[6], svg.GREY) if groups and len(p) > 6 else svg.GOOD
        out.append((p[1], p[2], color, _tip(p[5], p[3], p[4], p[1], p[2], own)))
    for path, line, rid, billed, counted in outside:
        out.append((billed, counted, svg.BAD, _tip(path, line, rid, billed, counted, own)))
    legend = [*(groups or {}).items(), ("outside the count tolerance", svg.BAD)]
    base = own.base
    return svg.scatter(out, title, tolerance=lambda b: count_tolerance(base, b),
                       xlabel="billed tokens", ylabel="counted tokens", legend=legend, width=width)


def _tip(path: str, line: int, rid: Any, billed: int, counted: int, own: Own) -> str:
    """A record's tooltip: its place, id, counts and billed - counted, as the terminal says."""
    label = own.label(path, rid)
    return (f"{location(path, line)}: {label + ': ' if label else ''}billed {billed:,}, "
            f"counted {counted:,} (billed - counted {signed_difference(billed, counted):+,})")


def finish_chart(rows: list[tuple[str, dict[str, int]]], title: str, width: int = 420) -> str:
    keys = sorted({k for _, counts in rows for k in counts},
                  key=lambda k: (-sum(c.get(k, 0) for _, c in rows), k))
    colors = {k: svg.PALETTE[i % len(svg.PALETTE)] for i, k in enumerate(keys)}
    for bad in ("length", "content_filter", "error"):
        if bad in colors:
            colors[bad] = svg.BAD
    return svg.stacked(rows, keys, title, colors=colors, width=width)


def item_plots(summary: FileSummary, contract: Contract) -> str:
    """One audit item's plots (pytest-html's extras): its histograms, sample and outliers."""
    fig = summary.figures
    if not fig.records:
        return ""
    parts = [diff_chart(fig, contract, summary.mean_billed, "billed - counted, records"),
             length_chart(fig, "response length (counted tokens)")]
    points = [[*e, summary.path] for e in fig.sample]
    tail = [[summary.path, -e[1], e[2], e[3], e[4]] for e in reversed(fig.tail)]
    own = Own([], contract)  # the item's contract is its file's own
    own.ids[summary.path] = summary.id_path(contract.id_field)
    parts.append(scatter_chart(points, tail, own, "billed vs counted (a sample, and the "
                                                  "largest |diff|)"))
    if summary.rt_checked:
        parts.append(rt_chart(fig, contract.roundtrip_rel, "round trip: tokens changed"))
    if fig.finish:
        parts.append(finish_chart([("this item", fig.finish)], "finish reasons"))
    return ('<div class="tokaudit-plots" style="display:flex;flex-wrap:wrap;gap:8px">'
            + "".join(parts) + "</div>")


# -- the page ---------------------------------------------------------------------------------
def verdict(exitstatus: int, partial: str | None) -> tuple[str, str]:
    """(class, words) of the banner: the exit status's verdict, a partial run said so."""
    if exitstatus == 0:
        return ("partial", "passed, on part of the dataset: " + partial) if partial else \
            ("passed", "passed")
    if exitstatus == 1:
        return "failed", "failed" + (f" (partial run: {partial})" if partial else "")
    return "error", f"not judged: pytest exit status {exitstatus}" + (
        f" (partial run: {partial})" if partial else "")


def contract_rows(contract: Contract) -> list[list[str]]:
    attrs = {k.name: k.attr for k in KEYS}
    rows = []
    for key, text in contract.to_json().items():
        origin = contract.sources.get(key, (text, "default"))[1]
        rows.append([key, str(text), origin, "tolerance" if attrs[key] in TOLERANCE_KEYS else ""])
    rows.sort(key=lambda r: (r[3] != "tolerance", r[2] == "default", r[0]))
    return rows


def findings(files: Sequence[FileSummary], own: Own) -> tuple[list[Any], int]:
    """[path, line, id, check, message, level, place, id label] of each file's listed
    findings, failing files first, at most FINDINGS; and how many findings the run had
    that are not listed."""
    rows: list[Any] = []
    for s in sorted(files, key=lambda s: (not s.failed, s.path)):
        for f in s.file_findings:
            rows.append([s.path, None, None, f.check, f.message, "file", s.path, ""])
        for f in s.shown:
            rows.append([s.path, f.line, f.record_id, f.check, f.message, "error",
                         _where(s.path, f.line), own.label(s.path, f.record_id)])
        for f in s.shown_allowable:
            level = "allowed outlier" if s.forgiven(f.check) else "error"
            rows.append([s.path, f.line, f.record_id, f.check, f.message, level,
                         _where(s.path, f.line), own.label(s.path, f.record_id)])
    total = sum(s.findings for s in files)
    return rows[:FINDINGS], total - min(len(rows), FINDINGS)


def focus(files: Sequence[FileSummary]) -> list[FileSummary]:
    ranked = sorted((s for s in files if s.figures.records),
                    key=lambda s: (not s.failed, -s.mean_ratio, s.path))
    return ranked[:FOCUS]


FILE_COLUMNS = ["path", "records", "audited", "checked", "failed", "findings", "billed",
                "counted", "absdiff", "max_absdiff", "mean_ratio", "rt_checked", "rt_mean",
                "complete", "cached", "unreadable", "skipped"]


def _where(path: str, line: int | None) -> str:
    return path if line is None else location(path, line)


def folder_contracts(files: Sequence[FileSummary]) -> list[list[str]]:
    """[folder, key, value] of each contract of its own (a folder's pytest_tokaudit_contract):
    the files that share one, under the folder they have in common."""
    by_own: dict[tuple[tuple[str, str], ...], list[str]] = {}
    for s in files:
        if s.contract:
            by_own.setdefault(tuple(sorted(s.contract.items())), []).append(s.path)
    rows = []
    for own, paths in by_own.items():
        common = os.path.commonprefix([p.split("/")[:-1] for p in paths])  # of folder names
        folder = "/".join(common) + "/" if common else (paths[0] if len(paths) == 1 else "./")
        rows += [[folder, key, value] for key, value in own]
    return sorted(rows)


def build(files: list[FileSummary], outcomes: Sequence[Outcome], contract: Contract,
          exitstatus: int, partial: str | None, *, anchor: str = "tokaudit",
          baseline: dict[str, FileSummary] | None = None, baseline_name: str = "",
          changes: dict[str, list[str]] | None = None, title: str = "") -> str:
    """The whole page (a str of HTML)."""
    kind, words = verdict(exitstatus, partial)
    checked = sum(s.checked for s in files)
    billed = sum(s.billed for s in files)
    mean_billed = billed / checked if checked else 0.0
    total, points = combined((s.path, s.figures) for s in files)
    outliers = worst(files)
    own = Own(files, contract)
    base_total = None
    if baseline:
        base_total, _ = combined((p, s.figures) for p, s in baseline.items())
        base_total = base_total if base_total.records else None

    # groups (tokaudit_group_by): their figures over all files, and their totals
    group_figs: dict[tuple[str, ...], list[tuple[str, Figures]]] = {}
    for s in files:
        for key, fig in s.group_figures.groups.items():
            group_figs.setdefault(key, []).append((s.path, fig))
    group_totals = totals([e for s in files for e in s.channels.get(GROUPS, [])])
    names = {key: label(contract.group_by, key) for key in group_figs}
    colors = {names[k]: svg.PALETTE[i % len(svg.PALETTE)] for i, k in enumerate(sorted(group_figs))}

    plots: list[tuple[str, str, str]] = []  # (id, question, svg): the dataset's first
    by_group: list[tuple[str, str, str]] = []  # then each group's
    plots.append(("diff", "Does a provider bill systematically more or less than we count "
                  "(a shifted histogram), or is it noise around 0?",
                  diff_chart(total, contract, mean_billed,
                             f"billed - counted over {plural(total.records, 'record')}", base_total,
                             f"baseline {baseline_name}" if base_total else "")))
    per_group: dict[tuple[str, ...], tuple[Figures, list[list[Any]]]] = {}
    if group_figs:
        scatter_points = []
        for key in sorted(group_figs):
            per_group[key] = combined(group_figs[key])
            share = max(POINTS // len(group_figs), 50)
            scatter_points += [[*p, names[key]] for p in per_group[key][1][:share]]
        plots.append(("scatter", "A systematic offset or slope (points off the diagonal, by "
                      "group), or a few outliers (red)?",
                      scatter_chart(scatter_points, outliers, own,
                                    "billed vs counted, a sample by group and the largest |diff|",
                                    colors)))
        biggest = sorted(group_figs, key=lambda k: (-per_group[k][0].records, k))[:GROUP_PLOTS]
        for key in biggest:
            fig = per_group[key][0]
            n, spent = group_totals.get(key, [0, 0, 0, 0])[:2]
            by_group.append((f"diff-{len(by_group)}", f"billed - counted for {names[key]}.",
                             diff_chart(fig, contract, spent / n if n else mean_billed,
                                        f"[{names[key]}] billed - counted, {fig.records:,} "
                                        "records")))
            by_group.append((f"length-{len(by_group)}", f"Response lengths of {names[key]}.",
                             length_chart(fig, f"[{names[key]}] response length")))
    else:
        plots.append(("scatter", "A systematic offset or slope (points off the diagonal), or "
                      "a few outliers (red)?",
                      scatter_chart(points, outliers, own,
                                    f"billed vs counted, a sample of {len(points):,} and the "
                                    "largest |diff|")))
    bars = _mean_bars(files, own, group_totals, names)
    if bars:
        plots.append(("mean", "Are the misses a tail of a few records or a whole file (or "
                      "group) drifting? Each bar's mark is its own mean tolerance; red: the "
                      "mean check fails.", bars))
    spend = _spend(files, contract, group_totals, names, outcomes)
    if spend:
        plots.append(("spend", "How close is the spend to the budget?", spend))
    finish_rows = [(names[k], per_group[k][0].finish) for k in sorted(per_group)
                   if per_group[k][0].finish]
    if total.finish:
        finish_rows = [("all records", total.finish)] + finish_rows
    if finish_rows:
        plots.append(("finish", "Are responses cut at max_tokens (length) clustered in one "
                      "provider?", finish_chart(finish_rows, "finish reasons")))
    plots.append(("length", "How long are the responses (counted tokens)?",
                  length_chart(total, f"response length, {plural(total.records, 'record')}")))
    if sum(total.rt):
        plots.append(("roundtrip", "Do decode -> encode round trips change tokens (a wrong "
                      "tokenizer, text cut mid-character)?",
                      rt_chart(total, contract.roundtrip_rel,
                               f"round trip, {plural(sum(total.rt), 'record')}")))
    if baseline:
        chart = _baseline_chart(files, baseline, contract)
        if chart:
            plots.append(("baseline", f"Which files got worse than the baseline "
                          f"{baseline_name}?", chart))
    plots += by_group
    focus_plots = [(s.path, s.failed, diff_chart(s.figures, own.contract(s.path), s.mean_billed,
                                                 f"{plural(s.figures.records, 'record')}", width=360))
                   for s in focus(files)]

    rows, unlisted = findings(files, own)
    base_rows = []
    if baseline:
        for s in files:
            b = baseline.get(s.path)
            if b is None:
                continue
            before = {name: get(b) for name, _, get, _ in METRICS}
            worse = regressions(s, before, contract.baseline_rel)
            base_rows.append([s.path] + [v for name, _, get, _ in METRICS
                                         for v in (before[name], get(s))] + ["; ".join(worse)])
    data = {
        "tool": "pytest-tokaudit", "version": __version__, "verdict": kind, "exitstatus": exitstatus,
        "partial": partial,
        "contract": contract_rows(contract),
        "folders": folder_contracts(files),
        "dataset": [o.to_json() for o in outcomes],
        "totals": {"files": len(files), "failed": sum(s.failed for s in files),
                   **sums(files, "records", "audited", "checked", "skipped", "unreadable",
                          "errors"), "billed": sum(s.billed_total for s in files),
                   **sums(files, "counted", "findings"), "unlisted_findings": unlisted},
        "columns": FILE_COLUMNS,
        "files": [[s.path, s.records, s.audited, s.checked, s.failed, s.findings, s.billed_total,
                   s.counted, s.absdiff, s.max_absdiff, round(s.mean_ratio, 6), s.rt_checked,
                   round(s.rt_ratio_mean, 6), s.complete, s.cached, s.unreadable, s.skipped]
                  for s in files],
        "histograms": {"all": total.to_json(),
                       "groups": [[list(k), per_group[k][0].to_json()] for k in sorted(per_group)]},
        "sample": [[p[5], p[3], p[4], p[1], p[2]] for p in points],
        "worst": worst_rows(outliers, own),
        "findings": rows,
        "baseline": {"name": baseline_name, "changes": changes or {},
                     "columns": ["path"] + [f"{name} {when}" for name, *_ in METRICS
                                            for when in ("before", "now")] + ["worse"],
                     "rows": base_rows} if baseline is not None else None,
        "plots": [pid for pid, _, _ in plots],
        "focus": [p for p, _, _ in focus_plots],
    }
    money_spent = of_run(files, contract)  # by component and by group (model/spend.py)
    if money_spent is not None:
        data["spend"] = money_spent
    return _page(data, plots, focus_plots, words, kind, contract, outcomes, title)


def _mean_bars(files: Sequence[FileSummary], own: Own, groups: dict[Any, list[int]],
               names: dict[Any, str]) -> str:
    """mean |diff| / mean billed by group and file, each bar coloured by the mean check's
    own verdict (model.rules.mean_within, under the file's own contract) and marked at its
    own tolerance, max(tokaudit_count_mean_abs, tokaudit_count_mean_rel x mean billed)."""
    contract = own.base
    rows, marks = [], []

    def mark(c: Contract, mean_billed: float) -> float | None:
        tol = mean_tolerance(c, mean_billed)
        return None if tol is None or not mean_billed else tol / mean_billed

    for key, (n, billed, _, absdiff) in sorted(groups.items()):
        ratio = absdiff / billed if billed else 0.0
        ok = mean_within(contract, n, billed, absdiff)
        name = label(contract.group_by, key)
        rows.append((f"[{name}]", ratio, svg.GOOD if ok else svg.BAD,
                     f"{name}: mean |diff| {ratio:.3%} over {plural(n, 'record')}"
                     f"{'' if ok else ', over its mean tolerance'}"))
        marks.append(mark(contract, billed / n if n else 0.0))
    ranked = sorted((s for s in files if s.checked), key=lambda s: (-s.mean_ratio, s.path))
    for s in ranked[:BARS]:
        mine = own.contract(s.path)
        ok = mean_within(mine, s.checked, s.billed, s.absdiff)
        tol = mark(mine, s.mean_billed)
        limit = f"; its mean tolerance {tol:.3%}" if tol is not None else "; no mean check"
        rows.append((s.path, s.mean_ratio, svg.GOOD if ok else svg.BAD,
                     f"{s.path}: mean |diff| {s.mean_ratio:.3%} ({plural(s.checked, 'record')}, "
                     f"max |diff| {s.max_absdiff:,}){limit}: mean check "
                     f"{'passes' if ok else 'FAILS'}"
                     + (" (the file fails for another reason)" if ok and s.failed else "")))
        marks.append(tol)
    if not rows:
        return ""
    more = f" (the {BARS} largest of {plural(len(ranked), 'file')})" if len(ranked) > BARS else ""
    return svg.hbars(rows, "mean |diff| / mean billed, by group and file" + more, marks=marks,
                     marks_label="each bar's mean tolerance: max(tokaudit_count_mean_abs, "
                                 "tokaudit_count_mean_rel x mean billed) / mean billed")


def _spend(files: Sequence[FileSummary], contract: Contract, groups: dict[Any, list[int]],
           names: dict[Any, str], outcomes: Sequence[Outcome]) -> str:
    spent = sum(s.billed_total for s in files)
    if contract.budget is None and contract.price_per_mtok is None:
        return ""

    def words(n: float) -> str:
        cash = money(int(n), contract)
        return f"{n:,.0f} tokens" + (f" = {cash}" if cash else "")

    budget = contract.budget
    over = budget is not None and spent > budget
    rows = [("spent, all files", float(spent), svg.BAD if over else svg.GOOD, words(spent))]
    for key, (_, billed, _, _) in sorted(groups.items()):
        rows.append((f"[{names.get(key, label(contract.group_by, key))}]", float(billed),
                     svg.PALETTE[1], words(billed)))
    share = f" ({spent / budget:.1%} of the budget)" if budget else ""
    return svg.hbars(rows, f"billed tokens: {words(spent)}{share}", line=budget,
                     line_label=f"budget {words(budget)}" if budget is not None else "",
                     fmt="{:,.0f}")


def _baseline_chart(files: Sequence[FileSummary], baseline: dict[str, FileSummary],
                    contract: Contract) -> str:
    rows = []
    for s in files:
        b = baseline.get(s.path)
        if b is None or not s.checked:
            continue
        rows.append((s.mean_ratio - b.mean_ratio, s, b))
    rows.sort(key=lambda r: (-r[0], r[1].path))
    out = []
    for delta, s, b in rows[:BARS // 2]:
        worse = regressions(s, {n: g(b) for n, _, g, _ in METRICS}, contract.baseline_rel)
        out.append((f"{s.path} (before)", b.mean_ratio, svg.GREY, f"{s.path} in the baseline: "
                    f"{b.mean_ratio:.3%}"))
        out.append((f"{s.path} (now)", s.mean_ratio, svg.BAD if worse else svg.GOOD,
                    f"{s.path} now: {s.mean_ratio:.3%}" + (f"; worse: {'; '.join(worse)}"
                                                           if worse else "")))
    if not out:
        return ""
    return svg.hbars(out, "mean |diff| / mean billed: baseline (grey) and now, largest rise first",
                     line=contract.count_mean_rel, line_label="tokaudit_count_mean_rel")


_ASSETS = files(__package__).joinpath("assets")  # package data: in the wheel and the sdist


def asset(name: str) -> str:
    """A file of the page (assets/page.css, assets/page.js) as the package ships it."""
    return _ASSETS.joinpath(name).read_text(encoding="utf-8")


def _csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def _blob(data: dict[str, Any]) -> str:
    """JSON inside <script type="application/json">: no `<`, `>` or `&` can end it early."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False,
                      default=str)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _page(data: dict[str, Any], plots: list[tuple[str, str, str]],
          focus_plots: list[tuple[str, bool, str]], words: str, kind: str, contract: Contract,
          outcomes: Sequence[Outcome], title: str) -> str:
    e = svg.esc
    css, script = asset("page.css"), asset("page.js")
    t = data["totals"]
    spent = money(t["billed"], contract)
    head = (f"{plural(t['files'], 'file')} ({t['failed']:,} failing), {plural(t['audited'], 'record')} audited, "
            f"{plural(t['findings'], 'finding')}, {t['billed']:,} billed tokens"
            + (f" = {spent}" if spent else ""))
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f'<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
           f"script-src {_csp_hash(script)}; style-src {_csp_hash(css)}; img-src data:\">",
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>tokaudit: {e(words)}{' - ' + e(title) if title else ''}</title>",
           f"<style>{css}</style></head><body>",
           f'<header class="{kind}" id="verdict"><h1>tokaudit: {e(words)}</h1>'
           f"<p>{e(head)}</p></header><main>"]
    stats = [("files", t["files"]), ("failing files", t["failed"]), ("records", t["records"]),
             ("records audited", t["audited"]),
             *([("skipped (tokaudit_where)", t["skipped"])] if t["skipped"] else []),
             *([("unreadable", t["unreadable"])] if t["unreadable"] else []),
             *([("error lines (not records)", t["errors"])] if t.get("errors") else []),
             ("records checked", t["checked"]), ("findings", t["findings"]),
             ("billed tokens", t["billed"]), ("counted tokens", t["counted"])]
    out.append('<section><div class="stats">' + "".join(
        f"<div><b>{v:,}</b><br>{e(k)}</div>" for k, v in stats) + "</div></section>")
    if data.get("spend") and "error" not in data["spend"]:
        out.append('<section id="spend"><h2>Spend by component</h2><ul>' + "".join(
            f"<li>{e(line.strip())}</li>" for line in spend_text(data["spend"])) + "</ul></section>")
    if outcomes:
        out.append('<section id="dataset"><h2>Dataset checks</h2><table><thead><tr><th>check</th>'
                   "<th>outcome</th><th>message</th></tr></thead><tbody>")
        for o in outcomes:
            cls = {"passed": "pass", "failed": "fail"}.get(o.outcome, "skip")
            more = "".join(f"<pre>{e(line)}</pre>" for line in o.lines[:20])
            if len(o.lines) > 20:
                more += f"<pre>... and {len(o.lines) - 20:,} more</pre>"
            out.append(f"<tr><td>{e(o.name)}</td><td class=\"{cls}\">{e(o.outcome)}</td>"
                       f"<td>{e(o.message)}{more}</td></tr>")
        out.append("</tbody></table></section>")
    out.append('<section id="plots"><h2>Plots</h2><div class="grid">')
    for pid, question, chart in plots:
        out.append(f'<figure id="plot-{e(pid)}"><figcaption>{e(question)}</figcaption>{chart}</figure>')
    out.append("</div></section>")
    if focus_plots:
        out.append(f'<section id="focus"><h2>Files worth a look ({len(focus_plots)} of '
                   f"{t['files']:,}: failing first, then the largest mean |diff|)</h2>"
                   '<div class="grid">')
        for path, failed, chart in focus_plots:
            mark = ' class="fail"' if failed else ""
            out.append(f"<figure><figcaption{mark}>{e(path)}{' (failed)' if failed else ''}"
                       f"</figcaption>{chart}</figure>")
        out.append("</div></section>")
    if data["baseline"] is not None:
        b = data["baseline"]
        ch = b["changes"]
        out.append(f'<section id="baseline"><h2>Against the baseline {e(b["name"])}</h2>'
                   f"<p>{len(ch.get('new', [])):,} new files, {len(ch.get('vanished', [])):,} "
                   "vanished; per file, before and now (worse: by more than "
                   f"tokaudit_baseline_rel = {contract.baseline_rel:.0%})</p>"
                   '<div id="baseline-table"></div></section>')
    out.append('<section id="files"><h2>Files</h2><div id="files-table"></div>'
               '<h2>Folders</h2><div id="folders-table"></div></section>')
    out.append(f'<section id="worst"><h2>Worst records by |billed - counted| (the {OUTLIERS} '
               'largest)</h2><div id="worst-table"></div></section>')
    more = (f" ({t['unlisted_findings']:,} more not listed: each file keeps its first "
            f"tokaudit_max_shown; --tokaudit-failures has every one)") if t["unlisted_findings"] else ""
    out.append(f'<section id="findings"><h2>Findings{e(more)}</h2><div id="findings-table"></div>'
               "</section>")
    out.append('<section id="contract"><h2>Contract</h2><p>Each key of the run\'s contract and '
               "where it came from (a folder's conftest.py may change it for the files below "
               "it).</p><table><thead><tr><th>key</th><th>value</th><th>from</th><th></th></tr>"
               "</thead><tbody>")
    for key, value, origin, kind_ in data["contract"]:
        out.append(f"<tr><td>{e(key)}</td><td>{e(value)}</td><td>{e(origin)}</td><td>{e(kind_)}</td></tr>")
    out.append("</tbody></table>")
    if data["folders"]:
        out.append('<h2 id="folder-contracts">Folders with a contract of their own</h2><p>What '
                   "a folder's pytest_tokaudit_contract hook changed: its files are judged and "
                   "their ids named by these values.</p><table><thead><tr><th>folder</th>"
                   "<th>key</th><th>value</th></tr></thead><tbody>")
        for folder, key, value in data["folders"]:
            out.append(f"<tr><td>{e(folder)}</td><td>{e(key)}</td><td>{e(value)}</td></tr>")
        out.append("</tbody></table>")
    out.append("</section></main>")
    out.append(f"<footer>pytest-tokaudit {e(__version__)}. Plots from bounded histograms and "
               f"samples kept per file; the numbers are in the JSON below.</footer>")
    out.append(f'<script type="application/json" id="tokaudit-data">{_blob(data)}</script>')
    out.append(f"<script>{script}</script></body></html>")
    return "\n".join(out)


# -- the pytest side --------------------------------------------------------------------------
def write_page(path: Path, text: str) -> str | None:
    """Write atomically; None, or why it could not be written (never raises for that)."""
    return put(path, text.encode("utf-8", "surrogatepass"), "the HTML report")


class HtmlReport(SessionFile):
    what = "HTML report"

    def write(self, result: RunResult, exitstatus: int) -> str | None:
        page = build(result.files, result.outcomes, result.contract, exitstatus,
                     result.coverage.partial, anchor=result.anchor,
                     baseline=result.baseline_files, baseline_name=result.baseline_name,
                     changes=result.baseline, title=self.config.rootpath.name)
        return write_page(Path(self.config.invocation_params.dir, self.path), page)


class PytestHtmlExtras:
    """With pytest-html and --html: each data item's plots as extras of its report, and the
    dataset's in the report's summary."""

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: Any):
        outcome = yield
        report = outcome.get_result()
        contract = getattr(item, "contract", None)
        if report.when != "call" or contract is None:
            return
        summary = next((v for k, v in item.user_properties if k == PROPERTY), None)
        if summary is None:
            return
        try:
            plots = item_plots(FileSummary.from_json(cast(str, summary)), contract)
        except Exception as exc:  # noqa: BLE001 - plots never change a verdict
            plots = f"<p>tokaudit: no plots: {svg.esc(type(exc).__name__)}: {svg.esc(exc)}</p>"
        if plots:
            from pytest_html import (
                extras,  # present: this plugin is registered only then
            )

            report.extras = [*getattr(report, "extras", []), extras.html(plots)]

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_summary(self, prefix: list[str], summary: list[str],
                                    postfix: list[str], session: pytest.Session) -> None:
        result = session.config.stash.get(RESULT, None)
        if result is None or not result.files:
            return
        files = result.files
        total, points = combined((s.path, s.figures) for s in files)
        checked = sum(s.checked for s in files)
        mean = sum(s.billed for s in files) / checked if checked else 0.0
        charts = [diff_chart(total, result.contract, mean,
                             f"tokaudit: billed - counted over {plural(total.records, 'record')}"),
                  scatter_chart(points, worst(files), Own(files, result.contract),
                                "tokaudit: billed vs counted (a sample, and the largest |diff|)")]
        spend = _spend(files, result.contract, {}, {}, result.outcomes)
        if spend:
            charts.append(spend)
        postfix.append('<div class="tokaudit-plots" style="display:flex;flex-wrap:wrap;gap:8px">'
                       + "".join(charts) + "</div>")


PATH_OPTIONS = (("--tokaudit-html", "tokaudit_html"),)  # files written (run/targets.py)


def add_options(parser: pytest.Parser, group: pytest.OptionGroup) -> None:
    group.addoption(
        "--tokaudit-html", metavar="PATH", default=None,
        help="write the audit as one self-contained HTML page with plots to PATH",
    )


def draws(config: pytest.Config) -> bool:
    """Whether this run draws plots: the page, or pytest-html's report."""
    return bool(config.getoption("tokaudit_html") or (
        config.pluginmanager.hasplugin("html") and config.getoption("htmlpath", None)))


def configure(config: pytest.Config) -> None:
    path = config.getoption("tokaudit_html")
    if path and not hasattr(config, "workerinput"):
        check_writable(config.invocation_params.dir / path, "--tokaudit-html")  # now, not after
        config.pluginmanager.register(HtmlReport(config, path), "tokaudit.html")
    # pytest-html's report: its extras are made where the item runs (an xdist worker too)
    if config.pluginmanager.hasplugin("html") and config.getoption("htmlpath", None):
        config.pluginmanager.register(PytestHtmlExtras(), "tokaudit.pytest_html")

