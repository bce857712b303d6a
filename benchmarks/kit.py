"""What the runner and the case modules share: rows, cases, the context, one timed process.

A case module (`benchmarks/cases_*.py`, see README.md) defines `cases(ctx)` returning
`Case`s; a `Case` is a few `Row`s timed side by side, one of them its reference. A row is
one command line, run as its own process; `plugin=True` marks a row that runs the package
(under `--compare REV` it is also run against that commit).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PAGE = os.sysconf("SC_PAGE_SIZE")

# The contract of the generated Kimi-vocabulary files (generate.py): count within
# max(8, 2%), per file mean within 0.5%, </think> once, <|im_end|> last, no <think>;
# records without a provider are local runs, skipped.
CONTRACT_INI = """[pytest]
tokaudit_where = provider
tokaudit_count_abs = 8
tokaudit_count_rel = 2%
tokaudit_count_mean_rel = 0.5%
tokaudit_require_once = {once}
tokaudit_require_last = {last}
tokaudit_forbid = {forbid}
"""
KIMI = dict(once=163607, last=163586, forbid=163606)
QWEN3 = dict(once=151668, last=151645, forbid=151667)  # </think>, <|im_end|>, <think>

# Every pytest row: pytest's own cache off (the plugin's cache is set per row), quiet.
# hypothesis and pytest-randomly are blocked where installed (the test extra): hypothesis's
# plugin costs ~1 s a process and randomly shuffles a file's shards. In the lean environment
# (nox -s bench) neither is installed and blocking them costs nothing.
PYTEST_OPTS = ["-p", "no:cacheprovider", "-q", "-p", "no:hypothesispytest", "-p", "no:randomly"]

# Not passed on to a row: stray options, and PYTHONDONTWRITEBYTECODE (some CI images set it):
# without bytecode pytest compiles every plugin's assertion-rewritten code in each process
# (~0.3 s). Rows run as on a user's machine, after one untimed run wrote that code.
UNSET = ("PYTEST_ADDOPTS", "PYTHONDONTWRITEBYTECODE", "PYTHONPATH", "TOKAUDIT_COLUMNAR")


@dataclass
class Row:
    """One command, timed as a whole process."""

    name: str
    argv: list[str]
    cwd: Path = ROOT
    env: dict[str, str] = field(default_factory=dict)
    ok_codes: tuple[int, ...] = (0,)
    plugin: bool = False  # runs the package: primed before timing, and timed against --compare
    against: str | None = None  # the row this one's ratio is taken against (default: the case's ref)
    findings: str = "ref"  # how to read its findings from stdout: "ref", "pytest" or "none"


@dataclass
class Case:
    """Rows timed side by side on the same input; `ref` names the reference row."""

    name: str
    rows: list[Row]
    ref: str
    size: str
    input: dict = field(default_factory=dict)  # what it runs on: file, MB, records
    repeat: int = 1  # runs per repeat of the session (cheap cases take more for a steadier median)
    setup: list[list[str]] = field(default_factory=list)  # untimed commands before the first run


class Skip(Exception):
    """A case that cannot run here (a missing optional dependency or tokenizer); the message says why."""


@dataclass
class Context:
    """What a case module gets: the data, the sizes, the interpreter, where to write."""

    size: str
    data: Path  # the cache of generated data (generate.py), outside the repository
    work: Path  # this session's scratch folder (ini files, caches of the warm runs)
    python: str = sys.executable
    tokenizer: str | None = None  # a directory holding tokenizer.json (Qwen3's by default)
    seed: int = 0

    def script(self, name: str) -> str:
        return str(HERE / name)

    def ini(self, name: str, text: str) -> Path:
        """Write a pytest.ini in its own folder under the scratch folder; return its path."""
        path = self.work / name / "pytest.ini"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    def pytest(self, ini: Path, *args: str) -> list[str]:
        return [self.python, "-m", "pytest", *args, "-c", str(ini), "--rootdir", str(ini.parent), *PYTEST_OPTS]

    def pytest_row(self, name: str, ini: Path, *args: str, **kw) -> Row:
        return Row(name, self.pytest(ini, *args), cwd=ini.parent, ok_codes=(0, 1), plugin=True,
                   findings="pytest", **kw)

    def file(self, kind: str) -> Path:
        """The data file of this kind at this session's size, generated on first use."""
        from benchmarks import generate

        return generate.ensure(kind, self.size, self.data, seed=self.seed, tokenizer=self.tokenizer)


def describe(path) -> dict:
    """A data file for the results: its name, MB and (JSONL) records."""
    info: dict = {"file": os.path.basename(path), "mb": round(os.path.getsize(path) / 1e6, 1)}
    if str(path).endswith(".jsonl"):
        with open(path, "rb") as f:
            info["records"] = sum(block.count(b"\n") for block in iter(lambda: f.read(1 << 24), b""))
    return info


def tree_rss(root: int) -> int:
    """Summed RSS in bytes of `root` and its descendants (0 once gone)."""
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        try:
            with open(f"/proc/{pid}/statm") as f:
                total += int(f.read().split()[1]) * PAGE
            for tid in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    stack += [int(c) for c in f.read().split()]
        except (OSError, ValueError):
            pass  # exited between listing and reading
    return total


def run_once(argv: list[str], cwd: Path, env: dict[str, str], timeout: float) -> dict:
    """Run one process to its end: wall and CPU seconds (user + system, the process and the
    children it reaped: xdist's workers), peak RSS of the tree, exit code, output."""
    with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
        t0 = time.perf_counter()
        p = subprocess.Popen(argv, cwd=cwd, env=env, stdout=fo, stderr=fe, start_new_session=True)
        peak, killed, done = [0], [], threading.Event()

        def sample() -> None:
            while not done.wait(0.05):
                peak[0] = max(peak[0], tree_rss(p.pid))

        def kill() -> None:
            try:
                os.killpg(p.pid, signal.SIGKILL)  # its own session: the process and its workers
                killed.append(True)
            except ProcessLookupError:
                pass

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        timer = threading.Timer(timeout, kill)
        timer.start()
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        timer.cancel()
        done.set()
        sampler.join()
        p.returncode = os.waitstatus_to_exitcode(status)  # reaped here: tell Popen
        fo.seek(0)
        fe.seek(0)
        return dict(
            wall=wall,
            cpu=usage.ru_utime + usage.ru_stime,
            # Not ru_maxrss where the tree was sampled: a forked child keeps its parent's
            # high-water mark through exec (a runner that generated data in process made
            # every row read ~600 MiB).
            rss=peak[0] / 2**20 if peak[0] else usage.ru_maxrss / 1024,
            rc=-9 if killed else p.returncode,
            out=fo.read().decode(errors="replace"),
            err=fe.read().decode(errors="replace"),
        )


def child_env(pythonpath: str | None, extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    env.update(extra)
    return env


def findings(kind: str, result: dict) -> str | None:
    """The records a row found breaking the contract, read from its output."""
    out = result["out"]
    if kind == "ref":
        m = re.search(r"findings=(\d+)", out)
        return m.group(1) if m else None
    if kind == "pytest":
        # The findings column of the tokaudit summary table (a record can have several
        # findings, so this is not the scripts' count of bad records: compared among the
        # plugin's rows only, -n 0 against -n 2 and against the --compare base).
        lines = out.splitlines()
        for i, line in enumerate(lines):
            head = re.split(r"\s{2,}", line.strip())
            if head[:1] == ["file"] and "findings" in head and i + 1 < len(lines):
                cells = re.split(r"\s{2,}", lines[i + 1].strip())
                if len(cells) == len(head):
                    return cells[head.index("findings")].replace(",", "")
        return None
    return None
