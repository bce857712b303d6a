"""`python -m pytest` in a child process that starts with pytest already imported.

Most of the suite's time is pytest subprocesses, and a third of each one's CPU is Python
importing pytest (~0.13 s of ~0.25 s idle; twice that on a busy 2-core machine). A test
therefore asks a warm process (one per xdist worker, started once, holding pytest's own
modules and nothing of this package or of any plugin) to fork a child for each run; the child
takes the run's environment, working directory, umask, argv and sys.path as `python -m pytest` would,
then runs pytest's `__main__` as `-m` does and exits through the normal interpreter shutdown
(atexit handlers included). Its stdout and stderr go to files, its stdin is /dev/null, as in
`Pytester.runpytest_subprocess`, whose result this gives.

What a fresh interpreter reads from its environment at start-up only (`PYTHON*` variables
other than PYTHONPATH: hash seed, warnings, UTF-8 mode...) cannot change in a fork: a run
whose environment differs there from the warm process's goes to a real subprocess, and so
does every run when TOKAUDIT_TEST_FORK=0 (the default of the full matrix, `nox -s full`, so
that fresh processes are tested too). The plugin and every pytest11 plugin are imported
in the child, after pytest's assertion rewriter is installed, as in a fresh process.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

FULL = os.environ.get("TOKAUDIT_TEST_FULL") == "1"  # as conftest.py reads it

# The warm process: reads one JSON request per line on stdin, answers "pid N" when the child
# is forked and "exit N" when it is reaped (N as os.waitstatus_to_exitcode gives it).
_WARM = r"""
import json, os, runpy, sys
import pytest
base = [p for p in sys.path if p]
read = os.fdopen(0, "rb", buffering=0)
while True:
    line = read.readline()
    if not line:
        os._exit(0)
    req = json.loads(line)
    pid = os.fork()
    if pid == 0:
        os.environ.clear()
        os.environ.update(req["env"])
        os.chdir(req["cwd"])
        os.umask(req["umask"])
        null = os.open(os.devnull, os.O_RDONLY)
        out = os.open(req["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        err = os.open(req["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        for src, dst in ((null, 0), (out, 1), (err, 2)):
            os.dup2(src, dst)
            os.close(src)
        sys.dont_write_bytecode = bool(req["env"].get("PYTHONDONTWRITEBYTECODE"))
        extra = [p for p in req["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
        sys.path[:] = [req["cwd"], *extra, *[p for p in base if p not in extra]]
        sys.argv = ["-m", *req["argv"]]
        del read, line, req, null, out, err, extra
        runpy.run_module("pytest", run_name="__main__", alter_sys=True)  # python -m pytest
    os.write(1, b"pid %d\n" % pid)
    _, status = os.waitpid(pid, 0)
    os.write(1, b"exit %d\n" % os.waitstatus_to_exitcode(status))
"""


def _startup_env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith("PYTHON") and k != "PYTHONPATH"}


class _Warm:
    def __init__(self) -> None:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        self.startup = _startup_env(env)
        self.proc = subprocess.Popen([sys.executable, "-c", _WARM], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, env=env, cwd="/")
        self.pending = b""

    def _line(self, deadline: float | None) -> str | None:
        assert self.proc.stdout is not None
        while b"\n" not in self.pending:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self.proc.stdout], [], [], wait)[0]:
                return None
            chunk = os.read(self.proc.stdout.fileno(), 4096)
            if not chunk:
                raise RuntimeError("the warm pytest process died")
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        return line.decode()

    def run(self, request: dict[str, Any], timeout: float | None) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(request).encode() + b"\n")
        self.proc.stdin.flush()
        pid = int(self._line(None).split()[1])  # type: ignore[union-attr]
        deadline = None if timeout is None else time.monotonic() + timeout
        answer = self._line(deadline)
        if answer is None:
            os.kill(pid, signal.SIGKILL)  # the run this test started, by its id
            self._line(None)
            raise pytest.Pytester.TimeoutExpired(f"{timeout} second timeout expired running: {request['argv']}")
        return int(answer.split()[1])

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)


_warm: _Warm | None = None


def close() -> None:
    global _warm
    if _warm is not None:
        _warm.close()
        _warm = None


def runpytest(pytester: pytest.Pytester, *args: str, timeout: float | None = None,
              fork: bool | None = None) -> pytest.RunResult:
    """`pytester.runpytest_subprocess(*args, timeout=timeout)`, forked from a warm process
    (`fork`: whether to, by default TOKAUDIT_TEST_FORK's answer)."""
    global _warm
    env = os.environ.copy()
    if fork is None:
        fork = os.environ.get("TOKAUDIT_TEST_FORK", "0" if FULL else "1") != "0"
    if not fork or pytester.plugins:
        return pytester.runpytest_subprocess(*args, timeout=timeout)
    if _warm is None or _warm.proc.poll() is not None:
        _warm = _Warm()
    if _startup_env(env) != _warm.startup:
        return pytester.runpytest_subprocess(*args, timeout=timeout)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.getcwd(), env.get("PYTHONPATH", "")]))
    temp = pytester.mkdir(f"runpytest-{time.monotonic_ns()}")
    out, err = pytester.path / "stdout", pytester.path / "stderr"
    argv = [f"--basetemp={temp}", *map(os.fspath, args)]
    umask = os.umask(0o022)
    os.umask(umask)
    started = time.monotonic()
    ret = _warm.run({"argv": argv, "cwd": os.getcwd(), "env": env, "umask": umask,
                     "out": str(out), "err": str(err)}, timeout)
    lines = [Path(p).read_text(encoding="utf8").splitlines() for p in (out, err)]
    for text, stream in zip(lines, (sys.stdout, sys.stderr)):
        print("\n".join(text), file=stream)
    try:
        code: int | pytest.ExitCode = pytest.ExitCode(ret)
    except ValueError:
        code = ret
    return pytest.RunResult(code, lines[0], lines[1], time.monotonic() - started)
