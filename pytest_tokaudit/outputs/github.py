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
from typing import Any, Iterator

import pytest

from ..base.formats import has_lines, place
from ..base.text import plural, printable, record_label, workspace_path
from ..engine.failure import entries
from ..model.result import MARKER
from ..model.summary import FileSummary
from ..run.keys import RESULT


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
    """A rootdir-relative path as the runner wants it (base.text.workspace_path)."""
    return workspace_path(config.rootpath, rel, os.environ.get("GITHUB_WORKSPACE"))


def workflow_commands(config: pytest.Config, files: list[FileSummary], outcomes: list[Any],
                id_field: tuple[str, ...], anchor: str | None) -> Iterator[str]:
    """Every workflow command of the run, file by file, then the failed dataset checks."""
    for s in files:
        path = repo_path(config, s.path)
        rows = not has_lines(s.path)  # a binary file (Parquet, Arrow): no line to open
        listed, more = entries(s)
        at_records = [e for e in listed if e.line is not None]
        for e in at_records:
            # Line breaks become %0A (escape_data): one annotation, never a command of its own.
            message = printable(f"{record_label(s.id_path(id_field), e.record_id)}{e.message}",
                                breaks=True)
            line = e.line
            assert line is not None  # at_records
            if rows:  # the row goes in the message, worded as every output words it
                message, line = f"{place(s.path, line)}: {message}", None
            yield command(e.level, message, path, line, f"tokaudit {e.check}")
        if more:
            level = "error" if s.failing else "warning"
            yield command(
                level,
                f"{plural(more, 'more finding')} in this file not annotated "
                f"(tokaudit_max_shown = {s.max_shown}; --tokaudit-failures=PATH lists every one)",
                path, None if rows else 1, "tokaudit",
            )
        for e in listed[len(at_records):]:  # file-level verdicts: at the file
            yield command(e.level, printable(e.message, breaks=True), path, None if rows else 1,
                          f"tokaudit {e.check}")
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
        config = self.config
        result = config.stash.get(RESULT, None)
        if result is None:  # --collect-only
            return
        anchor = result.anchor
        anchor_path = None if anchor == MARKER else anchor.removesuffix(f"::{MARKER}")
        lines = list(workflow_commands(config, result.files, result.outcomes,
                                       result.contract.id_field, anchor_path))
        for line in lines:
            terminalreporter.write_line(line)


def add_options(parser: pytest.Parser, group: pytest.OptionGroup) -> None:
    group.addoption(
        "--tokaudit-annotations", choices=("auto", "github", "none"), default="auto",
        help="GitHub Actions annotations, one per finding: github (always), none, "
             "auto (default: when GITHUB_ACTIONS=true)",
    )


def configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput") and enabled(config):
        config.pluginmanager.register(Annotations(config), "tokaudit.annotations")
