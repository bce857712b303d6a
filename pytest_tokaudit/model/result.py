"""The run result every output consumes: what was audited, found and judged.

The controller builds one per session once every verdict is in and puts it in
`config.stash[run.keys.RESULT]`; outputs (terminal, JSON, GitHub, Markdown, failures file) read it
there, as pytest's reporters read reports, never the controller itself."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..base.text import plural
from .contract import Contract
from .outcome import Outcome
from .summary import FileSummary

MARKER = "tokaudit"  # the plugin's marker, and its items' node id word
SHOWN = 5  # file names shown in a coverage message


@dataclass
class Coverage:
    """Which data files the run audited to the end, against the dataset it is judged on."""

    roots: list[str]  # the dataset's paths (testpaths, or the rootdir)
    dataset: list[str]  # data files under them
    audited: list[str]  # files whose every item finished
    records: int = 0
    missing: dict[str, str] = field(default_factory=dict)  # file -> why not audited
    unmatched: list[str] = field(default_factory=list)  # present, not matching the glob
    errors: int = 0  # collection errors
    stopped: str = ""  # -x / --maxfail / interrupted
    named: list[str] = field(default_factory=list)  # paths on the command line
    empty_roots: list[str] = field(default_factory=list)  # URL roots listing no data file

    @property
    def partial(self) -> str | None:
        """Why the run did not audit the whole dataset, or None."""
        parts = []
        by_reason: dict[str, list[str]] = {}
        for path, why in sorted(self.missing.items()):
            by_reason.setdefault(why, []).append(path)
        for why, paths in by_reason.items():
            shown = ", ".join(paths[:SHOWN]) + (" ..." if len(paths) > SHOWN else "")
            parts.append(f"{plural(len(paths), 'data file')} {why}: {shown}")
        if self.errors:
            parts.append(plural(self.errors, "collection error"))
        if self.stopped:
            parts.append(self.stopped)
        return "; ".join(parts) or None

    @property
    def unjudgeable(self) -> str | None:
        """Why the dataset checks cannot pass: a partial run, or no record at all."""
        return self.partial or (None if self.records else "no record was audited")

    def to_json(self) -> dict[str, Any]:
        return {"roots": self.roots, "dataset": self.dataset, "audited": self.audited,
                "records": self.records, "missing": self.missing, "unmatched": self.unmatched,
                "errors": self.errors, "stopped": self.stopped, "partial": self.partial,
                "empty_roots": self.empty_roots}

    @classmethod
    def union(cls, parts: list[dict[str, Any]]) -> Coverage:
        """What several runs' reports covered together (the merge command's view): a file
        one job did not select is covered when another job audited it to the end."""
        audited = sorted({p for c in parts for p in c["audited"]})
        done = set(audited)
        reasons: dict[str, set[str]] = {}
        for c in parts:
            for path, why in c["missing"].items():
                # One part not selecting a file is how a split works: only a part that
                # selected it says why it was not audited (did not finish, say).
                if path not in done and not why.startswith("not selected"):
                    reasons.setdefault(path, set()).add(why)
            for path in [*c["dataset"], *c["missing"]]:
                if path not in done:
                    reasons.setdefault(path, set())
        # The same words in any order of the reports.
        missing = {path: min(why) if why else "audited by no report"
                   for path, why in sorted(reasons.items())}
        return cls(
            roots=sorted({r for c in parts for r in c["roots"]}),
            dataset=sorted({p for c in parts for p in c["dataset"]}),
            audited=audited,
            records=sum(c["records"] for c in parts),
            missing=missing,
            unmatched=sorted({p for c in parts for p in c["unmatched"]}),
            errors=sum(c["errors"] for c in parts),
            stopped="; ".join(c["stopped"] for c in parts if c["stopped"]),
            empty_roots=sorted({r for c in parts for r in c.get("empty_roots", [])}),
        )


@dataclass
class RunResult:
    contract: Contract
    items: dict[str, FileSummary]  # audit item node id -> the attempt kept
    files: list[FileSummary]  # one per file, shards merged, in path order
    outcomes: list[Outcome]  # coverage, then the dataset checks judged
    coverage: Coverage
    anchor: str  # the dataset checks' node id prefix: `pytest.ini::tokaudit`
    offsets: dict[str, dict[int | None, int]]  # sharded file -> lines before each shard
    baseline: dict[str, list[str]] | None = None  # what got worse, with --tokaudit-baseline
    # --tokaudit-baseline: the baseline report's files (the HTML report compares them) and name
    baseline_files: dict[str, FileSummary] | None = None
    baseline_name: str = ""
    cache: dict[str, Any] = field(default_factory=dict)  # the JSON report's "cache"
    cache_line: str | None = None  # the terminal's line on reused items
    # The verdicts this run did not give, and why: dataset checks (by name) and sharded
    # files' [file] items (by path) skipped as partial, and the checks not selected (-k,
    # --lf, --deselect): "skipped" or "not selected". `outcomes` holds the selected only.
    unjudged: dict[str, str] = field(default_factory=dict)

    @property
    def partial(self) -> bool:
        """Whether this run judged less than the whole dataset."""
        return bool(self.coverage.partial or self.unjudged)

