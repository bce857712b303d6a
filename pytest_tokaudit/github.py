"""GitHub Actions workflow commands: one annotation per finding, printed by the controller.

`::error file=PATH,line=N,title=tokaudit CHECK::message` per bad record (the bounded
`shown` list of each file's whole-file summary, so lines are absolute for shards), one
more per file for the findings past `tokaudit_max_shown`, one per file-level finding (at
the file) and one per failed dataset check (at the ini file). Allowed outliers of a file
whose allowance holds are `::warning`s: they do not fail the run.

Registered only on the controller (no `config.workerinput`), after the Controller; reads
its end-of-run data. Printed once, in the terminal summary, to stdout (the runner reads
workflow commands from both streams).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest

from .findings import Finding
from .summary import FileSummary


def escape_data(text: str) -> str:
    """A workflow command's message, as the runner unescapes it."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value (file, title): also `:` and `,`."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def command(level: str, message: str, file: str | None = None, line: int | None = None,
            title: str | None = None) -> str:
    props = []
    if file is not None:
        props.append(f"file={escape_property(file)}")
    if line is not None:
        props.append(f"line={line}")
    if title is not None:
        props.append(f"title={escape_property(title)}")
    head = f"::{level} {','.join(props)}" if props else f"::{level}"
    return f"{head}::{escape_data(message)}"


def enabled(config: pytest.Config) -> bool:
    """--tokaudit-annotations=github|none, else on inside GitHub Actions."""
    choice = config.getoption("tokaudit_annotations", "auto") or "auto"
    if choice == "auto":
        return os.environ.get("GITHUB_ACTIONS") == "true"
    return choice == "github"


def repo_path(config: pytest.Config, rel: str) -> str:
    """A rootdir-relative path as the runner wants it: relative to GITHUB_WORKSPACE (the
    repository) when set, else to the rootdir; always with `/`."""
    workspace = os.environ.get("GITHUB_WORKSPACE")
    if workspace:
        try:
            rel = os.path.relpath(Path(config.rootpath, rel), workspace)
        except ValueError:  # another drive
            rel = str(Path(config.rootpath, rel))
    return rel.replace(os.sep, "/")


# -- one file's findings, shared with the markdown summary ---------------------------------

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
    shown: list[tuple[Finding, str]] = [(f, "error") for f in s.shown]
    shown += [(f, "warning" if s.complete and s.forgiven(f.check) is not False else "error")
              for f in s.shown_allowable]
    shown.sort(key=lambda pair: pair[0].line or 0)
    out = [Entry(level, f.check, f.message, f.line, f.record_id) for f, level in shown]
    more = s.failing + s.allowable - len(shown)
    out += [Entry("error", f.check, f.message) for f in s.file_findings]
    return out, max(more, 0)


def record_label(id_field: tuple[str, ...], record_id: Any) -> str:
    if record_id is None or not id_field:
        return ""
    return f"{'.'.join(id_field)}={record_id!r}: "


def workflow_commands(config: pytest.Config, files: list[FileSummary], outcomes: list[Any],
                id_field: tuple[str, ...], anchor: str | None) -> Iterator[str]:
    """Every workflow command of the run, file by file, then the failed dataset checks."""
    for s in files:
        path = repo_path(config, s.path)
        parquet = s.path.endswith(".parquet")
        listed, more = entries(s)
        at_records = [e for e in listed if e.line is not None]
        for e in at_records:
            message = f"{record_label(id_field, e.record_id)}{e.message}"
            line = e.line
            if parquet:  # a binary file: the row goes in the message
                message, line = f"row {line}: {message}", None
            yield command(e.level, message, path, line, f"tokaudit {e.check}")
        if more:
            level = "error" if s.failing else "warning"
            yield command(
                level,
                f"{more:,} more finding{'s' if more != 1 else ''} in this file not annotated "
                f"(tokaudit_max_shown = {s.max_shown}; --tokaudit-failures=PATH lists every one)",
                path, None if parquet else 1, "tokaudit",
            )
        for e in listed[len(at_records):]:  # file-level verdicts: at the file
            yield command(e.level, e.message, path, None if parquet else 1, f"tokaudit {e.check}")
    for o in outcomes:
        if o.outcome != "failed":
            continue
        text = "\n".join([o.message, *o.lines])
        if anchor:
            yield command("error", text, repo_path(config, anchor), 1, f"tokaudit {o.name}")
        else:
            yield command("error", text, title=f"tokaudit {o.name}")


class Annotations:
    """Prints the annotations in the terminal summary, once, on the controller."""

    def __init__(self, config: pytest.Config):
        self.config = config

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        from .collect import MARKER, dataset_anchor
        from .controller import CONTROLLER

        config = self.config
        if config.option.collectonly:
            return
        controller = config.stash[CONTROLLER]
        anchor = dataset_anchor(config)
        anchor_path = None if anchor == MARKER else anchor.split("::")[0]
        lines = list(workflow_commands(config, controller.files(), list(controller.outcomes.values()),
                                 controller.contract.id_field, anchor_path))
        for line in lines:
            terminalreporter.write_line(line)
