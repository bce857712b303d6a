"""Shared helpers for the pytest-tokaudit test suite.

Behaviour tests build a small project in a pytester directory (a ``pytest.ini`` and a
``data/`` tree of JSONL files), run pytest in a subprocess with ``--tokaudit`` and assert
on the exact output. Each such test runs twice through the ``xdist_mode`` fixture: once
without xdist and once with two workers, and must see the same outcome both times.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from pathlib import Path
from typing import Any, Iterable

import pytest

# Token ids used by the record factory: structure tokens are given by the caller; the
# filler never collides with them.
FILLER = 1000

# A subprocess run should take seconds; a hang fails the test instead of the suite.
RUN_TIMEOUT = 120

# Plugins of this venv that have nothing to do with the audit: loading them in every
# subprocess (and in every xdist worker) costs more than the audit itself. The last three
# (entry point names) change the output on a tty, with --instafail, or in GitHub Actions.
UNRELATED_PLUGINS = tuple(
    arg
    for name in ("hypothesispytest", "anyio", "html", "html_fixtures", "metadata",
                 "pytest_jsonreport", "benchmark", "rerunfailures", "timeout",
                 "sugar", "instafail", "pytest_github_actions_annotate_failures", "randomly")
    for arg in ("-p", f"no:{name}")
)

# Extra flags for every behaviour test: the same checks, without and with xdist.
XDIST_MODES = {
    "no-xdist": ("-p", "no:xdist"),
    "xdist-2": ("-n", "2"),
}

# The full matrix (`nox -s full`, or TOKAUDIT_TEST_FULL=1; docs/version-matrix.md): every
# behaviour test in both xdist modes, and the tests marked `full`. The suite CI runs keeps
# to its time budget: every behaviour test without xdist, and in both modes those of the
# modules whose subject is how a run is spread (below); the other modules' -n 2 variants
# are deselected (counted as such in pytest's summary line).
FULL = os.environ.get("TOKAUDIT_TEST_FULL") == "1"
BOTH_MODES = {
    "test_gate.py", "test_dataset.py", "test_collect_reliability.py", "test_controller.py",
    "test_cache.py", "test_whole_file.py", "test_partial_runs.py", "test_failures_targets.py",
    "test_jsonreport.py",
}


# Most tests run pytest in a subprocess, and each imports the plugin, whose modules pytest
# rewrites (assertion rewriting of a pytest11 plugin) and caches as .pyc: on a machine that
# sets PYTHONDONTWRITEBYTECODE=1 (this project's does, CI's too) nothing is cached and every
# subprocess rewrites and compiles every module again. As on a user's machine, cache them.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if FULL:
        return
    ids = {item.nodeid for item in items}
    keep, drop = [], []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        matrix = (params.get("xdist_mode") == XDIST_MODES["xdist-2"]
                  and item.path.name not in BOTH_MODES
                  and item.nodeid.replace("xdist-2", "no-xdist") in ids)
        (drop if matrix or item.get_closest_marker("full") else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


# -- records and files ---------------------------------------------------------------------

def rec(
    sample_id: Any,
    n: int = 10,
    billed: int | None = None,
    *,
    once: Iterable[int] = (),
    last: int | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A well-formed record with `n` token ids, billed `billed` tokens (default: `n`).

    `once` tokens open the ids (each exactly once), `last` closes them; filler ids
    (FILLER, FILLER+1, ...) make up the rest. `extra` fields are added to the record.
    """
    once = list(once)
    tail = [] if last is None else [last]
    filler = n - len(once) - len(tail)
    if filler < 0:
        raise ValueError(f"n={n} is too small for the structure tokens")
    ids = once + [FILLER + k for k in range(filler)] + tail
    return {
        "sample_id": sample_id,
        "completion_tokens": n if billed is None else billed,
        "output_ids": ids,
        **extra,
    }


def line_starts(data: bytes) -> list[int]:
    """Byte offset of each line (line k at index k - 1)."""
    starts, at = [], 0
    for line in data.splitlines(keepends=True):
        starts.append(at)
        at += len(line)
    return starts


def as_line(item: Any) -> bytes:
    """dict/list/number -> compact JSON; str -> its UTF-8 text as written; bytes -> as is."""
    if isinstance(item, bytes):
        return item
    if isinstance(item, str):
        return item.encode("utf-8")
    return json.dumps(item).encode("utf-8")


def jsonl_bytes(items: Iterable[Any], *, newline: bytes = b"\n", final_newline: bool = True) -> bytes:
    lines = [as_line(i) for i in items]
    body = newline.join(lines)
    if lines and final_newline:
        body += newline
    return body


def compress(data: bytes, name: str) -> bytes:
    """Compress by file suffix: .gz, .zst, or nothing."""
    if name.endswith(".gz"):
        return gzip.compress(data, mtime=0)
    if name.endswith(".zst"):
        import zstandard

        return zstandard.ZstdCompressor().compress(data)
    return data


class TokProject:
    """A pytester directory laid out for an audit run: pytest.ini, data files, conftests."""

    def __init__(self, pytester: pytest.Pytester, mode: tuple[str, ...]):
        self.pytester = pytester
        self.path: Path = pytester.path
        self.mode = mode

    def ini(self, **keys: Any) -> Path:
        """Write pytest.ini with these keys (`tokaudit_count_abs=2`); "" writes `key =`."""
        lines = ["[pytest]"]
        for name, value in keys.items():
            lines.append(f"{name} = {value}".rstrip())
        path = self.path / "pytest.ini"
        path.write_text("\n".join(lines) + "\n")
        return path

    def write(self, rel: str, data: bytes | str) -> Path:
        path = self.path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, str):
            data = data.encode("utf-8")
        path.write_bytes(data)
        return path

    def jsonl(self, rel: str, items: Iterable[Any], **kw: Any) -> Path:
        """A data file from records/lines, compressed by its suffix."""
        return self.write(rel, compress(jsonl_bytes(items, **kw), rel))

    def run(self, *args: str, paths: tuple[str, ...] = ("data",), tokaudit: bool = True):
        argv = [*(["--tokaudit"] if tokaudit else []), *paths, *self.mode, *UNRELATED_PLUGINS, *args]
        return self.pytester.runpytest_subprocess(*argv, timeout=RUN_TIMEOUT)


@pytest.fixture(autouse=True)
def _no_github_annotations(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same output inside GitHub Actions as outside: GITHUB_ACTIONS=true turns on
    pytest-github-actions-annotate-failures (`::error` lines on stderr) in every run a test
    makes, and test_gate.py's Gate does not block it. test_consumers.py sets it back."""
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    # Nor may a run append this plugin's Markdown job summary to the real CI job's.
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    # The suite runs on xdist workers (pyproject's addopts): a pytest they start must not
    # look like one (pytest-benchmark, for one, turns itself off on a worker).
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
    # The summary fits its paths to COLUMNS when set (some xdist workers of this suite
    # have COLUMNS=80): runs read whole paths unless a test sets a width itself.
    monkeypatch.delenv("COLUMNS", raising=False)
    # Shards of a few KB, below tokaudit_shard_size's minimum of 1 MiB: the suite shards
    # small files to test sharding (tests/sources/test_shard_bounds.py checks the minimum).
    monkeypatch.setenv("TOKAUDIT_MIN_SHARD_SIZE", "1")


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytest's, with pytest-randomly (installed for test_gate.py) off in the runs it makes,
    which keep the order they were written in unless a test passes `-p randomly`. (The
    variable is set here, after pytester has cleared it.)"""
    monkeypatch.setenv("PYTEST_ADDOPTS", "-p no:randomly")
    return pytester


@pytest.fixture(params=list(XDIST_MODES.values()), ids=list(XDIST_MODES))
def xdist_mode(request: pytest.FixtureRequest) -> tuple[str, ...]:
    """Command-line flags: run without xdist, or with two xdist workers."""
    return request.param


@pytest.fixture
def project(pytester: pytest.Pytester, xdist_mode: tuple[str, ...]) -> TokProject:
    """A pytester project whose runs use the current `xdist_mode`."""
    return TokProject(pytester, xdist_mode)


# -- reading results -------------------------------------------------------------------------

# A section line: '____ title ____', '==== title ====' (the two sides may differ by one).
_SEP = re.compile(r"^([=_-])\1{2,} (.*?) \1{2,}$")


def assert_no_crash(result: pytest.RunResult) -> None:
    """Bad data is a finding, never a crash of pytest or of the plugin."""
    for name in ("stdout", "stderr"):
        text = getattr(result, name).str()
        assert "INTERNALERROR" not in text, text
        assert "Traceback" not in text, text


def failure_sections(result: pytest.RunResult, title: str) -> list[list[str]]:
    """The body lines of every failure section titled `title` (e.g. 'tokaudit: data/x.jsonl')."""
    out: list[list[str]] = []
    current: list[str] | None = None
    for line in result.stdout.lines:
        m = _SEP.match(line)
        if m:
            if current is not None:
                out.append(current)
            current = [] if m.group(1) == "_" and m.group(2) == title else None
            continue
        if current is not None and not re.match(r"^\[gw\d+\] ", line):
            current.append(line)  # xdist opens a section with '[gw0] linux -- Python ...'
    if current is not None:
        out.append(current)
    for lines in out:
        while lines and not lines[-1].strip():
            lines.pop()
    return out


def failure_section(result: pytest.RunResult, path: str) -> list[str]:
    """The one failure section of data file `path`, without trailing blank lines."""
    sections = failure_sections(result, f"tokaudit: {path}")
    assert len(sections) == 1, (path, sections, result.stdout.str())
    return sections[0]


def summary_section(result: pytest.RunResult) -> list[str]:
    """The lines under '==== tokaudit summary ====' up to the next separator line."""
    lines = result.stdout.lines
    starts = [i for i, line in enumerate(lines) if re.match(r"^=+ tokaudit summary =+$", line)]
    assert len(starts) == 1, result.stdout.str()
    out = []
    for line in lines[starts[0] + 1:]:
        if _SEP.match(line):
            break
        out.append(line)
    while out and not out[-1].strip():
        out.pop()
    return out


def summary_rows(result: pytest.RunResult) -> dict[str, list[str]]:
    """The summary table as {file: [records, audited, skipped, mean billed, ...]}."""
    section = summary_section(result)
    rows: dict[str, list[str]] = {}
    width = None
    unreadable = None  # the column of a run with unreadable lines (test_one_truth.py checks it)
    for line in section:
        if not line.strip():
            break  # the worst-records table follows a blank line
        cells = re.split(r"\s{2,}", line.strip())
        if width is None:  # the header; a run that reused results has a "cached" column
            width = len(cells) if cells[-1] == "cached" else 0
            unreadable = cells.index("unreadable") if "unreadable" in cells else None
        if width and len(cells) == width:
            cells = cells[:-1]  # test_cache.py checks the column
        if unreadable is not None and len(cells) > unreadable:
            del cells[unreadable]
        rows[cells[0]] = cells[1:]
    assert rows.pop("file", None) == [
        "records", "audited", "skipped", "mean billed", "mean counted",
        "mean |diff|", "max |diff|", "findings",
    ], section
    return rows
