"""--tokaudit-failures and --tokaudit-json to what is not a plain new file: a FIFO is
written in place (never replaced by a regular file) and its working files are not put
next to it; an existing file keeps its mode. Every FIFO here is the test's own, made in
its temporary directory (os.mkfifo), with a reader thread: never a system path."""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import pytest

from conftest import TokProject, assert_no_crash, rec

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")


class FifoReader:
    """Reads a FIFO to its end in a thread; notes what its directory held when a writer
    came (the working files of the run are there then, if next to it)."""

    def __init__(self, fifo: Path):
        self.fifo, self.data, self.seen = fifo, b"", []
        self.thread = threading.Thread(target=self.read, daemon=True)
        self.thread.start()

    def read(self) -> None:
        with open(self.fifo, "rb") as fh:  # blocks until the run opens it to write
            self.seen = sorted(os.listdir(self.fifo.parent))
            self.data = fh.read()

    def result(self) -> bytes:
        self.thread.join(60)
        assert not self.thread.is_alive(), "nothing wrote to the FIFO"
        return self.data


def bad_project(project: TokProject) -> None:
    project.ini(tokaudit_count_abs=0)
    project.jsonl("data/a.jsonl", [rec(1), rec(2, billed=20), rec(3), rec(4, billed=30)])


@pytest.mark.parametrize("via", ["fifo", "symlink"])
def test_the_failures_file_into_a_fifo_is_written_in_place(project: TokProject, via: str):
    bad_project(project)
    out = project.path / "out"
    out.mkdir()
    fifo = out / "failures.fifo"
    os.mkfifo(fifo, 0o600)
    target = fifo
    if via == "symlink":
        target = project.path / "failures.jsonl"
        target.symlink_to(fifo)
    reader = FifoReader(fifo)
    result = project.run(f"--tokaudit-failures={target}")
    data = reader.result()
    assert_no_crash(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    found = [json.loads(line) for line in data.splitlines()]
    assert [(f["line"], f["check"]) for f in found] == [(2, "count"), (4, "count")]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)  # still the FIFO, not a regular file
    if via == "symlink":
        assert target.is_symlink() and os.readlink(target) == str(fifo)
    # The run's part files were never next to the FIFO (a device's folder is /dev).
    assert [n for n in reader.seen if n.endswith(".part")] == [], reader.seen
    assert sorted(os.listdir(out)) == ["failures.fifo"]
    assert "tokaudit failures file: " in result.stdout.str()


def test_the_json_report_into_a_fifo_is_written_in_place(project: TokProject):
    bad_project(project)
    fifo = project.path / "report.fifo"
    os.mkfifo(fifo, 0o600)
    reader = FifoReader(fifo)
    result = project.run(f"--tokaudit-json={fifo}")
    report = json.loads(reader.result())
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    assert report["files"][0]["path"] == "data/a.jsonl"
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert [n for n in reader.seen if n.endswith(".tmp")] == []


@pytest.mark.parametrize("mode", [0o640, 0o600, 0o644, 0o664])
@pytest.mark.parametrize("option", ["--tokaudit-failures", "--tokaudit-json"])
def test_an_existing_file_keeps_its_mode(pytester: pytest.Pytester, mode: int, option: str):
    project = TokProject(pytester, ("-p", "no:xdist"))
    bad_project(project)
    target = project.path / "out.json"
    target.write_text("old")
    os.chmod(target, mode)
    result = project.run(f"{option}={target}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    assert stat.S_IMODE(os.stat(target).st_mode) == mode
    assert target.read_text() != "old"


def test_a_new_file_takes_the_umask(pytester: pytest.Pytester):
    project = TokProject(pytester, ("-p", "no:xdist"))
    bad_project(project)
    target = project.path / "new.jsonl"
    old = os.umask(0o027)
    try:
        result = project.run(f"--tokaudit-failures={target}")
    finally:
        os.umask(old)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640
