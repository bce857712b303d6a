"""--tokaudit-engine=ray (run/engines/ray.py) against a real Ray cluster.

The cluster is `ray start --head` run as its own process group, once per test module
(these tests share one xdist group, so one worker runs them all), on 127.0.0.1 only, with
its Ray Client server, reached through RAY_ADDRESS (`host:port`, or `ray://host:port`), and
stopped by signalling that group: never `ray stop`, which ends every Ray process on the
machine. Its workers see TOKAUDIT_TEST_ON_RAY=1 (the pytest runs do not), so a conftest.py
hook can tell it runs on the cluster; and the endpoint and keys of a moto S3 server that
the module starts, as a cluster's workers have their storage credentials.

The suite compares a representative project (a sharded file, the bad-input corpus's lines,
a folder's conftest.py, a dataset check, small files sharing a task, s3:// data, every form
of hook registration: each case its own folder, read per node id) with an in-process run; the full parity set (the
whole corpus, compressed and truncated files, Parquet, other contracts, the whole bill,
Ray Client addresses) is marked `full` and runs in `nox -s full` (docs/version-matrix.md),
with the cluster killed mid-run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from conftest import (UNRELATED_PLUGINS, assert_no_crash, compress, failure_section, failure_sections,
                      jsonl_bytes, rec, summary_rows)
from corpus import BAD_LINES, NEW_BAD_LINES, SHARD_SIZE, complete_lines, shard_records

pytest.importorskip("ray", reason="the [ray] extra is not installed (pip install -e '.[test]')")

pytestmark = pytest.mark.xdist_group("ray")  # one cluster for the session, on one worker

# Ray swaps 127.0.0.1 for the host's address unless told it is not joining other machines;
# token authentication is for clusters other users can reach, not a loopback one; a test
# cluster stops without the 30 s drain.
RAY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "disabled",
           "RAY_USAGE_STATS_ENABLED": "0", "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0"}
START_TIMEOUT = 120
S3_KEYS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# The module's servers live as long as its tests: the module runs on one xdist worker (its
# group), and an idle Ray head still costs the other tests' CPU (~3% of a core).
@pytest.fixture(scope="module")
def s3_endpoint():
    """A moto S3 server on 127.0.0.1 for the module (None without moto)."""
    try:
        from moto.server import ThreadedMotoServer
    except ImportError:
        yield None
        return
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


def start_head(temp: Path, env: dict[str, str], *extra: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    ray = Path(sys.executable).parent / "ray"
    with open(temp / "head.log", "wb") as log:
        head = subprocess.Popen(
            [str(ray), "start", "--head", "--block", "--num-cpus", "2", "--port", str(port),
             "--node-ip-address", "127.0.0.1", "--temp-dir", str(temp / "t"),
             "--include-dashboard=false", "--disable-usage-stats",
             "--object-store-memory", str(100 << 20), *extra],
            env={**os.environ, **RAY_ENV, **env}, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True)
    deadline = time.monotonic() + START_TIMEOUT
    while b"Ray runtime started" not in (temp / "head.log").read_bytes():
        if head.poll() is not None or time.monotonic() > deadline:
            stop_group(head)
            pytest.fail("ray start --head did not start:\n"
                        + (temp / "head.log").read_text(errors="replace")[-3000:])
        time.sleep(0.5)
    return head, port


def stop_group(head: subprocess.Popen) -> None:
    """SIGTERM the head's process group (the fixture's own), then SIGKILL what is left."""
    for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        try:
            os.killpg(head.pid, sig)
        except ProcessLookupError:
            return
        try:
            head.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        # The raylet's workers leave after the head: up to a second, done when none is left.
        deadline = time.monotonic() + 1
        while time.monotonic() < deadline:
            try:
                os.killpg(head.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)


@pytest.fixture(scope="module")
def ray_cluster(s3_endpoint):
    """A 2-CPU Ray head for the module: its GCS address and its Ray Client address."""
    temp = Path(tempfile.mkdtemp(prefix="tkray", dir="/tmp"))  # Ray's socket paths are short
    client_port = free_port()
    # A Ray Client connection starts a server process for the client on the head, which can
    # take longer than Ray's 30 s on a loaded 2-core machine.
    env = {"TOKAUDIT_TEST_ON_RAY": "1", "TOKAUDIT_MIN_SHARD_SIZE": "1",
           "RAY_CLIENT_SERVER_CHECK_CHANNEL_TIMEOUT_S": "120"}
    if s3_endpoint:
        env.update(S3_KEYS, FSSPEC_S3_ENDPOINT_URL=s3_endpoint)
    head, port = start_head(temp, env, "--ray-client-server-port", str(client_port))
    try:
        yield SimpleNamespace(address=f"127.0.0.1:{port}", client=f"ray://127.0.0.1:{client_port}")
    finally:
        stop_group(head)
        shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture
def on_ray(ray_cluster, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("RAY_ADDRESS", ray_cluster.address)
    for name, value in RAY_ENV.items():
        monkeypatch.setenv(name, value)
    return ray_cluster.address


def run(pytester: pytest.Pytester, *args: str, paths: tuple[str, ...] = ("data",),
        cache: bool = False) -> tuple[pytest.RunResult, dict]:
    """A run read with its JSON report; without the cache unless `cache` (a cold cache says
    nothing in the output, so such a run compares with an uncached one)."""
    report = pytester.path / "report.json"
    # No progress lines: whether a run shows one depends on how long its items took.
    result = pytester.runpytest_subprocess(
        "--tokaudit", *paths, "-p", "no:xdist", *UNRELATED_PLUGINS, "-rA",
        *([] if cache else ["--tokaudit-no-cache"]), f"--tokaudit-json={report}",
        "-o", "tokaudit_progress_interval=0",
        *args, timeout=300)
    data = json.loads(report.read_text()) if report.exists() else {}
    report.unlink(missing_ok=True)  # not a file the next run's coverage check should see
    return result, data


# The lines a Ray notice may run on to after its '(raylet)' line: its detail's traceback.
NOTICE_GOES_ON = re.compile(
    r"^($|\s|Traceback |During handling|The above exception|\[repeated |[\w.]+(Error|Exception|Exit)\b)")


def uncaptured(lines: list[str]) -> list[str]:
    """`lines` as pytest and the plugin wrote them: without pytest's 'Captured stdout/stderr'
    sections, and without Ray's own notices. Ray's driver prints a raylet notice (a dead
    worker's, whose detail may hold a traceback) whenever it arrives, inside a capture or
    outside it (after the summary line, say): its '(raylet)' line and the traceback lines
    that follow it."""
    out: list[str] = []
    captured = notice = False
    for line in lines:
        if re.match(r"^([=_-])\1{2,} .* \1{2,}$", line):
            captured, notice = " Captured " in line, False
        elif "(raylet)" in line:
            notice = True
        elif notice:
            notice = bool(NOTICE_GOES_ON.match(line))
        if not (captured or notice):
            out.append(line)
    return out


def item_sections(result: pytest.RunResult) -> list[tuple[str, list[str]]]:
    """The report sections pytest writes for its items ('___ title ___' under ERRORS and
    FAILURES, with their 'Captured' parts), as (title, lines); at least one."""
    out: list[tuple[str, list[str]]] = []
    current: list[str] | None = None
    for line in result.stdout.lines:
        m = re.match(r"^([=_])\1{2,} (.*?) \1{2,}$", line)
        if m:
            current = None
            if m.group(1) == "_":
                current = []
                out.append((m.group(2), current))
        elif current is not None and not re.match(r"^\[gw\d+\] ", line):
            current.append(line)
    for _, section in out:
        while section and not section[-1].strip():
            section.pop()
    assert out, result.stdout.str()
    return out


def lines(result: pytest.RunResult) -> list[str]:
    """The output but what differs between two identical runs (times, and with them the
    summary line's padding: a run of 10 s or more has one '=' fewer; the reports' names)."""
    return [re.sub(r" in \d+\.\d+s( \(\d+:\d\d:\d\d\))?", " in Ns", line).strip("= ")
            for line in result.stdout.lines
            if "tokaudit JSON report:" not in line and "tokaudit failures file:" not in line]


def assert_same(ray: pytest.RunResult, ray_report: dict, local: pytest.RunResult,
                local_report: dict) -> None:
    assert_no_crash(ray)
    assert ray.ret == local.ret
    assert ray.parseoutcomes() == local.parseoutcomes()
    assert lines(ray) == lines(local)
    assert ray_report == local_report


SHIPPED_CONFTEST = """
import os

def pytest_tokaudit_check_record(record, contract):
    if os.environ.get("TOKAUDIT_TEST_ON_RAY"):  # proof that the hook ran on the cluster
        open(os.path.join(%r, "on-ray-%%d" %% os.getpid()), "w").close()
    if record.id == "s2":
        return "odd: sample s2"
"""


def parity_project(pytester: pytest.Pytester) -> Path:
    """A sharded file, a folder whose conftest.py adds a finding (it must not reach the
    other folders' files), a broken line and a duplicated id (a dataset check)."""
    pytester.makeini(f"[pytest]\ntokaudit_shard_size = {SHARD_SIZE}\ntokaudit_unique_ids = true\n")
    marks = pytester.path / "marks"
    marks.mkdir()
    data = pytester.path / "data"
    (data / "sub").mkdir(parents=True)
    (data / "good.jsonl").write_text("".join(json.dumps(rec(f"s{i}")) + "\n" for i in range(5)))
    (data / "sub" / "conftest.py").write_text(SHIPPED_CONFTEST % str(marks))
    (data / "sub" / "b.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in (rec("t1"), rec("s2", billed=30), rec("g1"))) + "{bad\n")
    (data / "big.jsonl").write_text(
        "".join((json.dumps(r) if not isinstance(r, str) else r) + "\n" for r in shard_records()))
    (data / "lines.jsonl").write_bytes(jsonl_bytes(BAD_LINES))  # the bad-input corpus
    return marks


FORMS_ROOT = """
pytest_plugins = ["tokplug"]
"""

FORMS_PLUGIN = """
def pytest_tokaudit_check_record(record):
    if record.id == "s5":
        return "pytest_plugins: s5"
"""

FORMS_PARENT = '''
import os

import pytest

MARKS = %r


def mark(tag):
    if os.environ.get("TOKAUDIT_TEST_ON_RAY"):  # proof that this form ran on the cluster
        open(os.path.join(MARKS, tag), "w").close()


@pytest.hookimpl(specname="pytest_tokaudit_check_record")
def pytest_odd_ids(record):  # pytest registers only names starting pytest_
    mark("specname")
    if record.id == "s2":
        return "specname: s2"


@pytest.hookimpl(trylast=True, specname="pytest_tokaudit_check_record")
def pytest_last_word(record):
    mark("trylast")
    if record.id == "s2":
        return "trylast: s2"


@pytest.hookimpl(tryfirst=True)
def pytest_tokaudit_check_batch(records):
    mark("tryfirst")
    return [r.finding("first", "tryfirst: s3") for r in records if r.id == "s3"]
'''

FORMS_CHILD = '''
import os

import pytest

MARKS = %r


def mark(tag):
    if os.environ.get("TOKAUDIT_TEST_ON_RAY"):
        open(os.path.join(MARKS, tag), "w").close()


@pytest.hookimpl(wrapper=True, specname="pytest_tokaudit_check_record")
def pytest_wrapped(record):
    mark("wrapper")
    answers = yield
    if record.id == "s4":
        answers = [*answers, "wrapper: s4"]
    return answers


@pytest.hookimpl(hookwrapper=True)
def pytest_tokaudit_check_batch(records):
    mark("hookwrapper")
    yield
'''


TASK_CONFTEST = """
import os

def pytest_tokaudit_check_record(record):
    if os.environ.get("TOKAUDIT_TEST_ON_RAY"):  # which Ray task audited the record
        import ray
        open(os.path.join(%r, "task-" + ray.get_runtime_context().get_task_id()), "w").close()
    if record.id == "f3-1":
        return "odd: f3-1"
"""


def hook_forms(pytester: pytest.Pytester, folder: str) -> Path:
    """A file under two conftest.py files holding every form of hook registration, and a
    `pytest_plugins` module of the root conftest.py (its finding is for id s5, which only
    this file has); the folder their marks go to."""
    marks = pytester.path / "form-marks"
    marks.mkdir()
    (pytester.path / "conftest.py").write_text(FORMS_ROOT)
    (pytester.path / "tokplug.py").write_text(FORMS_PLUGIN)
    data = pytester.path / folder
    (data / "sub").mkdir(parents=True)
    (data / "conftest.py").write_text(FORMS_PARENT % str(marks))
    (data / "sub" / "conftest.py").write_text(FORMS_CHILD % str(marks))
    (data / "sub" / "a.jsonl").write_text("".join(json.dumps(rec(f"s{i}")) + "\n" for i in range(1, 7)))
    return marks


def small_files(pytester: pytest.Pytester, folder: str) -> Path:
    """Six small files (a count finding, a hook's finding, a broken line and an id another
    file has too) under a conftest.py that marks which Ray task audited each record."""
    marks = pytester.path / "task-marks"
    marks.mkdir()
    data = pytester.path / folder
    data.mkdir(parents=True)
    (data / "conftest.py").write_text(TASK_CONFTEST % str(marks))
    for k in range(6):
        (data / f"f{k}.jsonl").write_text("".join(
            json.dumps(rec(f"f{k}-{i}", billed=10 + 30 * (k == 2 and i == 0))) + "\n" for i in range(3)))
    (data / "f5.jsonl").write_text((data / "f5.jsonl").read_text() + json.dumps(rec("f0-0")) + "\n{bad\n")
    return marks


def s3_files(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A bucket holding a sharded file and a small one (ids of their own): their folder's URL."""
    boto3 = pytest.importorskip("boto3")
    for name, value in {**S3_KEYS, "FSSPEC_S3_ENDPOINT_URL": s3_endpoint}.items():
        monkeypatch.setenv(name, value)
    client = boto3.client("s3", endpoint_url=s3_endpoint)
    bucket = f"ray-{os.getpid()}-{free_port()}"
    client.create_bucket(Bucket=bucket)
    big = "".join((json.dumps(r) if not isinstance(r, str) else r) + "\n" for r in shard_records())
    big = big.replace('"sample_id": "s', '"sample_id": "u')
    client.put_object(Bucket=bucket, Key="data/big.jsonl", Body=big.encode())
    client.put_object(Bucket=bucket, Key="data/a.jsonl",
                      Body="".join(json.dumps(rec(f"a{i}")) + "\n" for i in range(4)).encode())
    return f"s3://{bucket}/data/"


def test_the_ray_engine_gives_the_same_verdicts_as_in_process(pytester: pytest.Pytester, on_ray,
                                                              s3_endpoint, monkeypatch: pytest.MonkeyPatch):
    """The parity project, with two more cases audited in the same two runs (each its own
    files, hooks and verdicts): small files sharing a Ray task (data/small: a task's round
    trip costs more than auditing a small file, so they go to the cluster several to a task,
    each with its own summary, finding and verdict), and s3:// URLs (listed by pytest, read
    by the Ray workers with their own credentials; without moto, left out). And data/forms
    (issue #31 item 5): the workers' hooks are pytest's registrations, not module attributes
    named like hooks: a specname'd function, tryfirst/trylast, wrapper and hookwrapper, a
    parent folder's conftest.py and a `pytest_plugins` module (the root conftest's) all run
    there, in pytest's order."""
    marks = parity_project(pytester)
    task_marks = small_files(pytester, "data/small")
    form_marks = hook_forms(pytester, "data/forms")
    url = s3_files(s3_endpoint, monkeypatch) if s3_endpoint else None
    paths = ("data", url) if url else ("data",)
    failures = {mode: pytester.path.parent / f"{pytester.path.name}-{mode}-failures.jsonl"
                for mode in ("local", "ray")}
    local, local_report = run(pytester, f"--tokaudit-failures={failures['local']}", paths=paths)
    assert not list(marks.iterdir())  # the runs of the test itself are not on the cluster
    assert not list(task_marks.iterdir()) and not list(form_marks.iterdir())
    # The Ray run stores its verdicts in the cache (a cold one, so its output is an uncached
    # run's); the in-process run did not use it.
    ray, ray_report = run(pytester, "--tokaudit-engine=ray", f"--tokaudit-failures={failures['ray']}",
                          paths=paths, cache=True)
    # The reports differ in their cache only: on and cold (nothing reused), and off.
    assert ray_report.pop("cache")["items"] == local_report.pop("cache")["items"] == []
    assert_same(ray, ray_report, local, local_report)
    # Every bad record, uncapped: the same file (the tasks send their findings back).
    assert failures["ray"].read_bytes() == failures["local"].read_bytes()
    assert failures["ray"].read_text().count("\n") > 20
    assert ray.ret == pytest.ExitCode.TESTS_FAILED
    # What makes the comparison worth something: the conftest hook ran on Ray workers, for
    # its folder only (good.jsonl's s2 is no finding); the sharded file's shards and [file]
    # verdict, the shipped hook's finding, the dataset check.
    assert list(marks.iterdir())
    assert summary_rows(ray)["data/big.jsonl"] == summary_rows(local)["data/big.jsonl"]
    ray.stdout.fnmatch_lines(["PASSED data/good.jsonl::tokaudit",
                              "FAILED data/big.jsonl::tokaudit[[]file[]] - *",
                              "FAILED tox.ini::tokaudit::unique_ids - *"])
    assert len(re.findall(r"^\w+ data/big\.jsonl::tokaudit\[shard \d+\]", ray.stdout.str(), re.M)) > 2
    assert any("odd: sample s2" in line for line in failure_section(ray, "data/sub/b.jsonl"))
    # The small files: one task audited the six, each with its own verdict (f2's count, f3's
    # hook finding, f5's broken line; f5's f0-0 is a second f0-0 for unique_ids).
    assert len(list(task_marks.iterdir())) == 1
    out = ray.stdout.str()
    for k, word in enumerate(["PASSED", "PASSED", "FAILED", "FAILED", "PASSED", "FAILED"]):
        assert re.search(rf"^{word} data/small/f{k}\.jsonl::tokaudit( - |$)", out, re.M), (k, out)
    assert any("odd: f3-1" in line for line in failure_section(ray, "data/small/f3.jsonl"))
    unique = failure_sections(ray, "tokaudit::unique_ids")
    assert len(unique) == 1 and any(line.startswith("sample_id='f0-0': 2 records: data/small/f0.jsonl:1, "
                                                    "data/small/f5.jsonl:4") for line in unique[0]), unique
    if url:
        ray.stdout.fnmatch_lines([f"PASSED {url}a.jsonl::tokaudit",
                                  f"FAILED {url}big.jsonl::tokaudit[[]file[]] - *"])
        # No bytes of the data were read in the pytest process: the items' tasks read them.
        assert "s3://" in json.dumps(ray_report["files"])
    # The hook forms: each one's finding, each one ran on the cluster.
    section = failure_section(ray, "data/forms/sub/a.jsonl")
    for finding in ("specname: s2", "trylast: s2", "tryfirst: s3", "wrapper: s4", "pytest_plugins: s5"):
        assert any(finding in line for line in section), (finding, section)
    assert sorted(p.name for p in form_marks.iterdir()) == [
        "hookwrapper", "specname", "tryfirst", "trylast", "wrapper"]
    # With the cache: the Ray run's verdict is stored, and an in-process run reusing it is red
    # as an uncached one (its green used to be stored, then served).
    again, again_report = run(pytester, paths=paths, cache=True)
    assert "data/forms/sub/a.jsonl::tokaudit" in again_report["cache"]["items"]
    assert again_report["cache"]["audited"] == []  # every item reused
    assert again.ret == pytest.ExitCode.TESTS_FAILED
    again.stdout.fnmatch_lines(["FAILED data/forms/sub/a.jsonl::tokaudit - *"])

    def verdicts(result: pytest.RunResult) -> list[str]:
        return sorted(re.findall(r"^(?:PASSED|FAILED|ERROR|SKIPPED) \S+", result.stdout.str(), re.M))

    assert verdicts(again) == verdicts(local)  # every verdict as the uncached run's


@pytest.mark.full  # the parity above, through Ray Client's transport (ray's, not ours)
def test_ray_client_addresses_give_the_same_verdicts(pytester: pytest.Pytester, ray_cluster,
                                                     monkeypatch: pytest.MonkeyPatch):
    """RAY_ADDRESS=ray://host:port (Ray Client, what a CI runner outside the cluster uses)."""
    pytest.importorskip("grpc", reason="Ray Client needs ray[client] (the [ray] extra)")
    for name, value in RAY_ENV.items():
        monkeypatch.setenv(name, value)
    parity_project(pytester)
    local, local_report = run(pytester)
    monkeypatch.setenv("RAY_ADDRESS", ray_cluster.client)
    ray, ray_report = run(pytester, "--tokaudit-engine=ray")
    assert_same(ray, ray_report, local, local_report)


KILLING_CONFTEST = """
import os, signal

def pytest_tokaudit_check_batch(records, summary):
    # The first attempt's worker dies mid-task, on the cluster only.
    flag = os.path.join(%r, "killed")
    if os.environ.get("TOKAUDIT_TEST_ON_RAY") and %s:
        open(flag, "a").write("%%d\\n" %% os.getpid())
        os.kill(os.getpid(), signal.SIGKILL)
"""


def test_small_items_of_one_hook_set_are_grouped_in_run_order_and_big_ones_go_alone(tmp_path: Path):
    from pytest_tokaudit.run.engines import Task
    from pytest_tokaudit.run.engines.ray import GROUP_BYTES, GROUP_ITEMS, grouped
    from pytest_tokaudit.sources.base import WHOLE, Part
    from pytest_tokaudit.sources.remote import RemoteFile

    def task(key: str, size: int | None, part: Part = WHOLE) -> Task:
        if size is None:
            source: Any = RemoteFile("s3://bucket/" + key)  # listed without a size
        else:
            source = tmp_path / key
            source.write_bytes(b"x" * size)
        return Task(key, source, key, None, part, None, None)  # type: ignore[arg-type]

    small = GROUP_BYTES // 8
    tasks = [task(f"s{i}", small) for i in range(6)] + [
        task("big", GROUP_BYTES), task("t0", small), task("unknown", None), task("t1", small),
        task("t2", small), task("other", small), task("t3", small),
        task("shard", 0, Part((0, GROUP_BYTES * 2))),  # a byte range of a file: its length
    ]
    digests = {t.key: "h" for t in tasks} | {"other": "h2"}
    assert grouped(tasks, digests, cpus=2) == [
        ["s0", "s1", "s2", "s3", "s4", "s5"], ["big"], ["t0"], ["unknown"], ["t1", "t2"], ["other"],
        ["t3"], ["shard"]]
    # Never more than GROUP_BYTES (here) nor GROUP_ITEMS to a task.
    many = [task(f"m{i}", 1) for i in range(GROUP_ITEMS + 1)] + [task(f"n{i}", small) for i in range(9)]
    cut = grouped(many, dict.fromkeys((t.key for t in many), "h"), cpus=2)
    assert [len(g) for g in cut] == [GROUP_ITEMS, 1 + 7, 2]
    # A larger run spreads its bytes over twice the cluster's CPUs (at least GROUP_BYTES a task).
    wide = [task(f"w{i}", GROUP_BYTES // 2) for i in range(32)]
    assert [len(g) for g in grouped(wide, dict.fromkeys((t.key for t in wide), "h"), cpus=2)] == [8] * 4


RERUN_CONFTEST = """
import os

def pytest_tokaudit_check_record(record):
    if not os.environ.get("TOKAUDIT_TEST_ON_RAY"):
        return None
    attempts = os.path.join(%r, "attempts")
    with open(attempts, "a") as fh:
        fh.write("x")
    if len(open(attempts).read()) == 1:
        return "flaky on the first attempt"
"""


REPEAT_PLUGIN = """
from _pytest.runner import runtestprotocol


def pytest_runtest_protocol(item, nextitem):
    # What a repeating plugin does (pytest-flakefinder, a --count): the same item twice.
    if "data/twice/" not in item.nodeid:
        return None
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    runtestprotocol(item, nextitem=None, log=True)  # torn down between the two, as a rerun is
    runtestprotocol(item, nextitem=nextitem, log=True)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True
"""


def test_workers_that_die_or_hooks_that_raise_affect_only_their_items(pytester: pytest.Pytester, on_ray):
    """Each case a folder of one project, its own hook set (so its own Ray tasks):
    - data/killed: the worker of the first attempt dies mid-task; its two small files
      shared that task, so each was audited again, says so, and has the verdict, the
      failure text and the report entry of an in-process run;
    - data/dies: a task whose worker dies every time errors its item, and the run is red;
    - data/raises: a hook raising on the cluster fails its item;
    - data/twice: a plugin that runs an item again (data items are never rerun by
      pytest-rerunfailures, but a repeating plugin may run one twice): its audit goes to
      the cluster again (its hooks, the workers' credentials), not into the pytest process,
      and each verdict is its own audit's."""
    pytester.makeini("[pytest]\n")
    pytester.makeconftest(REPEAT_PLUGIN)
    flags = pytester.path / "flags"
    flags.mkdir()
    data = pytester.path / "data"
    for where in ("killed", "dies", "raises", "twice"):
        (data / where).mkdir(parents=True)
    (data / "killed" / "conftest.py").write_text(KILLING_CONFTEST % (str(flags), "not os.path.exists(flag)"))
    (data / "killed" / "a.jsonl").write_text("".join(
        json.dumps(rec(f"a{i}", billed=10 + 9 * (i == 3))) + "\n" for i in range(6)))
    (data / "killed" / "b.jsonl").write_text("".join(json.dumps(rec(f"b{i}")) + "\n" for i in range(6)))
    (data / "dies" / "conftest.py").write_text(KILLING_CONFTEST % (str(pytester.path), "True"))
    (data / "raises" / "conftest.py").write_text(
        "import os\n\ndef pytest_tokaudit_check_record(record):\n"
        "    if os.environ.get('TOKAUDIT_TEST_ON_RAY'):\n"
        "        raise RuntimeError('no such service on the cluster')\n")
    (data / "twice" / "conftest.py").write_text(RERUN_CONFTEST % str(pytester.path))
    for where in ("dies", "raises", "twice"):
        (data / where / "a.jsonl").write_text(json.dumps(rec("x1")) + "\n")
    local, local_report = run(pytester)
    result, report = run(pytester, "--tokaudit-engine=ray")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    # killed: a failed, b passed; dies: an error; raises: failed; twice: failed, then passed;
    # coverage: skipped. The two files of the task the worker died in were audited again.
    assert result.parseoutcomes() == {"errors": 1, "failed": 3, "passed": 2, "skipped": 1, "warnings": 2}
    result.stdout.fnmatch_lines([
        "tokaudit: data/dies/a.jsonl: not audited: the task was lost 3 times (retried 2 times); "
        "last: WorkerCrashedError: The worker died unexpectedly*",
        "*RuntimeError: no such service on the cluster (on the Ray worker, pid *)",
        "*::tokaudit::coverage: skipped: partial run: 2 data files did not finish*",
        "SKIPPED [[]1[]] tox.ini: partial run*",
        "ERROR data/dies/a.jsonl::tokaudit - *",
        "FAILED data/raises/a.jsonl::tokaudit - *",
    ])
    assert (pytester.path / "killed").read_text().count("\n") == 3
    assert report["partial"]
    # No crash of pytest or of the plugin (that would be an INTERNALERROR), and the one
    # traceback in the items' sections is the raising hook's. Outside those sections only Ray
    # writes tracebacks: its driver prints a raylet notice (a dead worker's, whose detail may
    # run on for lines, a traceback among them) whenever it arrives, at the end of the run
    # too, so the whole output is not counted (CI once saw a second traceback there).
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    assert "Traceback" not in "\n".join(uncaptured(result.stderr.lines))
    for title, section in item_sections(result):
        shown = uncaptured(section)
        if title == "tokaudit: data/raises/a.jsonl":
            assert shown[0].startswith("data/raises/a.jsonl::tokaudit: RuntimeError: no such service")
            assert shown[1] == "Traceback (most recent call last):", shown
            assert shown[-1] == "RuntimeError: no such service on the cluster", shown
            assert sum(line.startswith("Traceback ") for line in shown) == 1, shown
        else:
            assert not any("Traceback" in line for line in shown), (title, shown)
    assert sorted(title for title, _ in item_sections(result)) == [
        "ERROR at setup of tokaudit: data/dies/a.jsonl", "tokaudit: data/killed/a.jsonl",
        "tokaudit: data/raises/a.jsonl", "tokaudit: data/twice/a.jsonl"]
    # killed: one worker died; its files' verdicts, failure text and report entries are an
    # in-process run's, and only they were audited again.
    assert (flags / "killed").read_text().count("\n") == 1
    killed = ("data/killed/a.jsonl", "data/killed/b.jsonl")
    ray_outcomes, local_outcomes = outcomes_of(result), outcomes_of(local)
    assert {n: ray_outcomes[n] for n in killed} == {n: local_outcomes[n] for n in killed} == {
        "data/killed/a.jsonl": ["FAILED"], "data/killed/b.jsonl": ["PASSED"]}
    entries = [f for f in report["files"] if f["path"] in killed]
    assert len(entries) == 2 and entries == [f for f in local_report["files"] if f["path"] in killed]
    # ... and they finished: the run is partial for dies and raises only.
    assert sorted(report["coverage"]["missing"]) == ["data/dies/a.jsonl", "data/raises/a.jsonl"], report
    assert uncaptured(failure_section(result, killed[0])) == failure_section(local, killed[0])
    again = re.findall(r"tokaudit: (\S+) was audited again after: WorkerCrashedError", result.stdout.str())
    assert sorted(again) == list(killed), result.stdout.str()
    # twice: both runs on the cluster. The first run's finding fails it; the second run
    # passes: each verdict its own audit's.
    assert (pytester.path / "attempts").read_text() == "xx"
    assert sorted(ray_outcomes["data/twice/a.jsonl"]) == ["FAILED", "PASSED"]
    result.stdout.fnmatch_lines(["*data/twice/a.jsonl:1:*flaky on the first attempt*"])


def outcomes_of(result: pytest.RunResult) -> dict[str, list[str]]:
    """The -rA words of each data file's item, in the order of the summary."""
    out: dict[str, list[str]] = {}
    for m in re.finditer(r"^(PASSED|FAILED|ERROR) (data/\S+?)::tokaudit(?: - |$)", result.stdout.str(), re.M):
        out.setdefault(m[2], []).append(m[1])
    return out


def test_an_unreachable_cluster_or_n_is_a_usage_error(pytester: pytest.Pytester,
                                                       monkeypatch: pytest.MonkeyPatch):
    pytester.makeini("[pytest]\ntokaudit_engine = ray\n")
    (pytester.path / "data").mkdir()
    (pytester.path / "data" / "a.jsonl").write_text(json.dumps(rec("x1")) + "\n")
    for name, value in RAY_ENV.items():
        monkeypatch.setenv(name, value)
    for address in (f"127.0.0.1:{free_port()}", f"ray://127.0.0.1:{free_port()}"):  # stopped
        monkeypatch.setenv("RAY_ADDRESS", address)
        result = pytester.runpytest_subprocess("--tokaudit", "data", "-p", "no:xdist", timeout=120)
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        assert "Traceback" not in result.stderr.str() + result.stdout.str()
        result.stderr.fnmatch_lines([f"ERROR: tokaudit_engine = ray: the Ray cluster at {address} "
                                     "is not reachable (*); set RAY_ADDRESS to a running cluster*"])
    result = pytester.runpytest_subprocess("--tokaudit", "data", "-n", "2", timeout=120)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: tokaudit_engine=ray with -n/--dist: pick one*"])
    result = pytester.runpytest_subprocess("--tokaudit", "data", "-p", "no:xdist",
                                           "--tokaudit-engine=dask", timeout=120)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: tokaudit_engine (--tokaudit-engine): expected one of local, ray, got 'dask'"])


def test_without_ray_or_with_a_hook_that_cannot_travel_is_a_usage_error(pytester: pytest.Pytester):
    pytester.makeini("[pytest]\ntokaudit_engine = ray\n")
    (pytester.path / "data").mkdir()
    (pytester.path / "data" / "a.jsonl").write_text(json.dumps(rec("x1")) + "\n")
    # A plugin object holding a lock: it cannot be pickled, so it cannot run on the cluster.
    (pytester.path / "conftest.py").write_text(
        "import threading\n\n"
        "class Locked:\n"
        "    def __init__(self):\n"
        "        self.lock = threading.Lock()\n\n"
        "    def pytest_tokaudit_check_batch(self, records):\n"
        "        return None\n\n"
        "def pytest_configure(config):\n"
        "    config.pluginmanager.register(Locked(), 'locked')\n")
    result = pytester.runpytest_subprocess("--tokaudit", "data", "-p", "no:xdist", timeout=120)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: tokaudit_engine = ray: the hooks of locked cannot be "
                                 "sent to the Ray cluster (TypeError: *lock*)*"])
    # Ray not installed (here: not importable): say which extra to install.
    (pytester.path / "conftest.py").write_text("import sys\n\nsys.modules['ray'] = None\n")
    result = pytester.runpytest_subprocess("--tokaudit", "data", "-p", "no:xdist", timeout=120)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    result.stderr.fnmatch_lines(["ERROR: tokaudit_engine = ray needs Ray on this machine: "
                                 "pip install 'pytest-tokaudit[ray]'"])


def background_run(pytester: pytest.Pytester, conftest: str, files: int, *args: str
                   ) -> tuple[subprocess.Popen, Path]:
    """A project of one-record files under a conftest.py, audited on Ray by a pytest process
    of its own (started, not waited for), and the file its output goes to. Each file is
    just over GROUP_BYTES (a padded record), so each is a task of its own: smaller files
    would share one."""
    from pytest_tokaudit.run.engines.ray import GROUP_BYTES

    pytester.makeini("[pytest]\n")
    data = pytester.path / "data"
    data.mkdir()
    (data / "conftest.py").write_text(conftest % str(pytester.path))
    for k in range(files):
        (data / f"f{k}.jsonl").write_text(json.dumps(rec(f"f{k}", pad="x" * GROUP_BYTES)) + "\n")
    out = pytester.path.parent / f"{pytester.path.name}-out.txt"
    with open(out, "wb") as fh:
        run = subprocess.Popen(
            [sys.executable, "-m", "pytest", "--tokaudit", "data", "-p", "no:xdist",
             *UNRELATED_PLUGINS, "--tokaudit-engine=ray", "-p", "no:cacheprovider", *args],
            cwd=pytester.path, stdout=fh, stderr=subprocess.STDOUT)
    return run, out


SLOW_CONFTEST = """
import os, time

def pytest_tokaudit_check_batch(records, summary):
    if os.environ.get("TOKAUDIT_TEST_ON_RAY"):
        open(os.path.join(%r, "started"), "a").close()
        time.sleep(30)  # the cluster is stopped meanwhile
"""


@pytest.mark.full
def test_a_cluster_that_stops_mid_run_errors_the_items_left_and_the_run_ends(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    """The head dies while tasks run: the items waiting error naming it within seconds, the
    run is red and partial, and pytest ends with its reports (Ray would end the process a
    minute later, with none)."""
    temp = Path(tempfile.mkdtemp(prefix="tkray", dir="/tmp"))
    head, port = start_head(temp, {"TOKAUDIT_TEST_ON_RAY": "1"})
    try:
        for name, value in RAY_ENV.items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{port}")
        report = pytester.path.parent / f"{pytester.path.name}-report.json"
        run, out = background_run(pytester, SLOW_CONFTEST, 4, f"--tokaudit-json={report}")
        deadline = time.monotonic() + 60
        while not (pytester.path / "started").exists():
            assert time.monotonic() < deadline and run.poll() is None, out.read_text()
            time.sleep(0.2)
        stop_group(head)
        stopped = time.monotonic()
        rc = run.wait(timeout=50)
        text = out.read_text()
        assert time.monotonic() - stopped < 40, text
        assert rc == pytest.ExitCode.TESTS_FAILED, text
        assert "stopped answering during the run" in text and "Traceback" not in text, text
        assert json.loads(report.read_text())["partial"]
    finally:
        stop_group(head)
        shutil.rmtree(temp, ignore_errors=True)


CONTRACTS = {
    "default": "tokaudit_max_shown = 50\n",
    "where": "tokaudit_max_shown = 50\ntokaudit_where = provider\n",
    "structure": "tokaudit_max_shown = 50\ntokaudit_require_once = 1\ntokaudit_require_last = 3\n"
                 "tokaudit_forbid = 2\ntokaudit_unique_ids = true\n",
}


@pytest.mark.full
@pytest.mark.parametrize("contract", list(CONTRACTS))
def test_the_whole_corpus_audits_the_same_on_ray(pytester: pytest.Pytester, on_ray, contract: str):
    """Every file of the bad-input corpus, compressed and cut files, a sharded file and a
    Parquet twin, under three contracts: the same output and JSON report as in process."""
    pytester.makeini(f"[pytest]\ntokaudit_shard_size = {SHARD_SIZE}\n" + CONTRACTS[contract])
    data = pytester.path / "data"
    data.mkdir()
    (data / "lines.jsonl").write_bytes(jsonl_bytes(BAD_LINES + NEW_BAD_LINES))
    (data / "crlf.jsonl").write_bytes(jsonl_bytes([rec("c1"), rec("c2", 12)], newline=b"\r\n"))
    (data / "tail.jsonl").write_bytes(jsonl_bytes([rec("n1"), rec("n3", 40)], final_newline=False))
    (data / "empty.jsonl").write_bytes(b"")
    big = [rec(f"t{i}", 200) for i in range(400)]
    big[1] = rec("t1", 200, billed=1)
    for suffix in (".gz", ".zst"):
        packed = compress(jsonl_bytes(big), suffix)
        (data / f"truncated.jsonl{suffix}").write_bytes(packed[: len(packed) // 2])
        assert complete_lines(packed[: len(packed) // 2], suffix) > 2
    (data / "garbage.jsonl.zst").write_bytes(b"this is not zstd data\n" * 10)
    (data / "big.jsonl").write_bytes(jsonl_bytes(shard_records()))
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    rows = [rec(f"p{i}", 10, billed=10 + (i == 7) * 30, provider="a") for i in range(40)]
    pq.write_table(pa.Table.from_pylist(rows), data / "rows.parquet", row_group_size=7)
    local, local_report = run(pytester)
    ray, ray_report = run(pytester, "--tokaudit-engine=ray")
    assert_same(ray, ray_report, local, local_report)
    assert local.ret == pytest.ExitCode.TESTS_FAILED


def test_without_ray_address_a_local_instance_is_started_and_shut_down(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    """No RAY_ADDRESS: a Ray instance of this machine's CPUs for the run, the same verdicts,
    and none of its processes left after it."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    for name, value in RAY_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("TOKAUDIT_TEST_ON_RAY", "1")  # the instance's workers inherit it
    pytester.makeini("[pytest]\n")
    marks = pytester.path / "marks"
    marks.mkdir()
    data = pytester.path / "data"
    data.mkdir()
    (data / "conftest.py").write_text(SHIPPED_CONFTEST % str(marks))
    (data / "a.jsonl").write_text("".join(json.dumps(rec(f"s{i}", billed=10 + (i == 3) * 20)) + "\n"
                                          for i in range(5)))
    ray, ray_report = run(pytester, "--tokaudit-engine=ray")
    pids = {int(p.name.split("-")[-1]) for p in marks.iterdir()}
    monkeypatch.delenv("TOKAUDIT_TEST_ON_RAY")
    local, local_report = run(pytester)
    assert_same(ray, ray_report, local, local_report)
    assert pids  # the hook ran in the instance's workers (the run's own process: no engine)
    for pid in pids:  # shut down with the run
        deadline = time.monotonic() + 30
        while running(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not running(pid), f"Ray worker {pid} outlived the run"


def running(pid: int) -> bool:
    """Whether process `pid` runs: an exited one not yet reaped (a zombie) does not."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


HANGING_CONFTEST = """
import os, time

def pytest_tokaudit_check_batch(records, summary):
    if os.environ.get("TOKAUDIT_TEST_ON_RAY"):
        open(os.path.join(%r, "running-%%d" %% os.getpid()), "w").close()
        time.sleep(120)
"""


@pytest.mark.full
def test_ctrl_c_cancels_the_tasks_in_flight(pytester: pytest.Pytester, on_ray):
    """SIGINT to pytest while tasks run: pytest ends as interrupted within seconds (a wait
    on a task gives way to it), and the workers running its tasks stop, not left auditing
    for nobody (the engine cancels them, and Ray ends a job's tasks when its driver leaves:
    this holds the outcome, not which of the two did it)."""
    run, out = background_run(pytester, HANGING_CONFTEST, 3)
    deadline = time.monotonic() + 90
    while len(list(pytester.path.glob("running-*"))) < 2:  # both CPUs busy with its tasks
        assert time.monotonic() < deadline and run.poll() is None, out.read_text()
        time.sleep(0.2)
    run.send_signal(signal.SIGINT)
    assert run.wait(timeout=60) == pytest.ExitCode.INTERRUPTED, out.read_text()
    pids = [int(p.name.split("-")[1]) for p in pytester.path.glob("running-*")]
    deadline = time.monotonic() + 30
    while any(map(running, pids)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [pid for pid in pids if running(pid)], out.read_text()






@pytest.mark.full  # the parity of the whole corpus (full too) for the whole bill's contract
def test_the_whole_bill_audits_the_same_on_ray(pytester: pytest.Pytester, on_ray):
    """Prompt counts through the chat template, the request join and the money by component
    (issue #33): the same verdicts, failure text and report on the cluster."""
    sys.path.insert(0, str(Path(__file__).parents[1] / "checks"))
    from wholebill import batch_pair, error_line, tokenizer_copy, write_jsonl

    requests, responses = batch_pair(5)
    responses[0]["response"]["body"]["usage"]["prompt_tokens"] += 30
    write_jsonl(pytester.path / "batches/job_input.jsonl", requests)
    write_jsonl(pytester.path / "data/out.jsonl", responses[:4] + [responses[1]])
    write_jsonl(pytester.path / "data/errors.jsonl", [error_line("request-9")])
    tok = tokenizer_copy(pytester.path)
    pytester.makeini(
        "[pytest]\ntestpaths = data\n"
        f"tokaudit_tokenizer = {tok}\ntokaudit_id_field = custom_id\n"
        "tokaudit_count_field = response.body.usage.completion_tokens\n"
        "tokaudit_text_template = {response.body.choices.0.message.content}<|im_end|>\n"
        "tokaudit_prompt_count_field = response.body.usage.prompt_tokens\n"
        "tokaudit_requests = batches/*_input.jsonl\n"
        "tokaudit_price_input_per_mtok = 0.15\ntokaudit_price_output_per_mtok = 0.60\n"
        "tokaudit_budget_money = 0.01\n")
    local, local_report = run(pytester)
    ray, ray_report = run(pytester, "--tokaudit-engine=ray")
    assert_same(ray, ray_report, local, local_report)
    out = ray.stdout.str()
    assert "prompt_count: prompt billed" in out and "(request batches/job_input.jsonl:" in out
    assert "FAILED tox.ini::tokaudit::requests" in out
    assert ray_report["spend"]["components"]["input"]["tokens"] > 0
