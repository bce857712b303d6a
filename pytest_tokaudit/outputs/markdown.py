"""The Markdown job summary: appended to $GITHUB_STEP_SUMMARY (or --tokaudit-markdown).

Verdict, dataset checks, money, failing files first with their first findings, passing
files collapsed in a <details>. Written by the controller at the end of the session;
a file that cannot be written never fails the run: the terminal summary says why.
"""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Any, Callable

import pytest

from ..base.formats import place
from ..base.text import plural, printable, record_label, workspace_path
from ..engine.failure import entries
from ..model.contract import money
from ..model.result import RunResult
from ..model.spend import of_run
from ..model.spend import lines as spend_text
from ..model.summary import FileSummary
from .session import SessionFile

SHOWN = 10  # findings listed per failing file


ROWS = 500  # passing files listed (GitHub keeps 1 MiB of summary per step)


ICON = {"passed": "✅", "failed": "❌", "skipped": "⏭️"}


def cell(text: Any) -> str:
    """Text in a table cell or a list item: no HTML, no cell break, one line."""
    text = html.escape(str(text), quote=False).replace("|", "&#124;")
    return printable(text.replace("\r\n", "<br>").replace("\n", "<br>").replace("\r", "<br>"))


def code(text: str) -> str:
    """A path or node id as a code span in a table cell."""
    return "`" + printable(str(text)).replace("`", "'").replace("|", "\\|") + "`"


def target(config: pytest.Config) -> Path | None:
    path = config.getoption("tokaudit_markdown", None)
    if path:
        return Path(config.invocation_params.dir, path)
    env = os.environ.get("GITHUB_STEP_SUMMARY")
    return Path(env) if env else None


def build(files: list[FileSummary], outcomes: list[Any], id_field: tuple[str, ...],
          exitstatus: int, partial: str | None, price: float | None,
          anchor: str, money: Any, shown: Callable[[str], str] = str) -> str:
    """The summary's Markdown. `id_field` labels the ids of files whose summary does not
    name their own; `shown` turns a rootdir-relative path into the one the annotations
    use (relative to $GITHUB_WORKSPACE when set)."""
    bad = [s for s in files if s.failed]
    good = [s for s in files if not s.failed]
    ok = exitstatus == 0
    out = [f"## {'✅' if ok else '❌'} tokaudit: {'passed' if ok else 'failed'}", ""]
    records = sum(s.audited for s in files)
    findings = sum(s.findings for s in files)
    billed = sum(s.billed_total for s in files)
    unreadable = sum(s.unreadable for s in files)
    errors = sum(s.errors for s in files)  # an API's error lines (tokaudit_requests)
    apart = ([f"{unreadable:,} unreadable"] if unreadable else []) \
        + ([plural(errors, "error line")] if errors else [])
    line = (f"{plural(len(files), 'data file')}, "
            f"{plural(records, 'record')} audited"
            + (f" ({' and '.join(apart)} not among them)" if apart else "")
            + f", {len(bad):,} failing, {plural(findings, 'finding')}; "
            f"billed {billed:,} tokens")
    if price is not None:
        line += f" = {money(billed)}"
    out += [line, ""]
    if partial:
        out += [f"**Partial run**: {cell(partial)}", ""]
    if exitstatus not in (0, 1):
        out += [f"pytest exit status {exitstatus}", ""]
    if outcomes:
        out += ["### Dataset checks", "", "| check | outcome | message |", "|---|---|---|"]
        for o in outcomes:
            message = "\n".join([o.message, *o.lines[:SHOWN]])
            out.append(f"| {code(anchor + '::' + o.name)} | {ICON.get(o.outcome, '')} {o.outcome} "
                       f"| {cell(message)} |")
        out.append("")
    if bad:
        out += ["### Failing files", ""]
        out += table(bad, shown)
        for s in bad:
            listed, more = entries(s)
            listed.sort(key=lambda e: e.line is not None)  # the file's verdicts first
            out += ["", f"#### {code(shown(s.path))}", ""]
            for e in listed[:SHOWN]:
                where = "" if e.line is None else f"{place(s.path, e.line)}: "
                note = " (allowed outlier)" if e.level == "warning" else ""
                out.append(f"- {where}{cell(record_label(s.id_path(id_field), e.record_id))}"
                           f"**{cell(e.check)}**: {cell(e.message)}{note}")
            rest = more + max(len(listed) - SHOWN, 0)
            if rest:
                out.append(f"- ... and {rest:,} more")
        out.append("")
    if good:
        out += [f"<details><summary>{plural(len(good), 'file')} passed</summary>", ""]
        out += table(good[:ROWS], shown)
        if len(good) > ROWS:
            out += ["", f"... and {len(good) - ROWS:,} more"]
        out += ["", "</details>", ""]
    return "\n".join(out) + "\n"


def table(files: list[FileSummary], shown: Callable[[str], str] = str) -> list[str]:
    # records = audited + skipped + unreadable: the column is there when a file has some
    unreadable = any(s.unreadable for s in files)
    errors = any(s.errors for s in files)  # an API's error lines, as the terminal's table
    out = ["| file | records | audited | " + ("unreadable | " if unreadable else "")
           + ("errors | " if errors else "")
           + "mean billed | mean counted | mean \\|diff\\| | max \\|diff\\| | findings |",
           "|---|--:|--:|" + ("--:|" if unreadable else "") + ("--:|" if errors else "")
           + "--:|--:|--:|--:|--:|"]
    for s in files:
        status = "" if s.complete else " (not audited to the end)"
        out.append(
            f"| {code(shown(s.path))}{status} | {s.records:,} | {s.audited:,} | "
            + (f"{s.unreadable:,} | " if unreadable else "")
            + (f"{s.errors:,} | " if errors else "") + f"{s.mean_billed:,.1f} "
            f"| {s.mean_counted:,.1f} | {s.mean_absdiff:.2f} ({s.mean_ratio:.2%}) "
            f"| {s.max_absdiff:,} | {s.findings:,} |"
        )
    return out


def append(path: Path, text: str) -> str | None:
    """Append; None, or why it could not be written (never raises for that)."""
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        return f"cannot write {path}: {exc.strerror or exc}"
    return None


class JobSummary(SessionFile):
    """The job summary: a file that cannot be written never fails the run."""

    what = "Markdown summary"
    fails_run = False
    colour = "yellow"

    def write(self, result: RunResult, exitstatus: int) -> str | None:
        contract = result.contract
        text = build(
            result.files, result.outcomes, contract.id_field,
            exitstatus, result.coverage.partial, contract.price_per_mtok,
            result.anchor, lambda n: money(n, contract),
            lambda rel: workspace_path(self.config.rootpath, rel, os.environ.get("GITHUB_WORKSPACE")),
        )
        spent = of_run(result.files, contract)  # money by component and by group (model/spend.py)
        if spent is not None:
            text += "\n### Spend\n\n" + "".join(f"- {cell(line.strip())}\n"
                                                for line in spend_text(spent)) + "\n"
        return append(self.path, text)


PATH_OPTIONS = (("--tokaudit-markdown", "tokaudit_markdown"),)  # files written (run/targets.py)


def add_options(parser: pytest.Parser, group: pytest.OptionGroup) -> None:
    group.addoption(
        "--tokaudit-markdown", metavar="PATH", default=None,
        help="append a Markdown summary of the audit to PATH "
             "(default: $GITHUB_STEP_SUMMARY when set)",
    )


def configure(config: pytest.Config) -> None:
    path = target(config)
    if not hasattr(config, "workerinput") and path is not None:
        config.pluginmanager.register(JobSummary(config, path), "tokaudit.markdown")
