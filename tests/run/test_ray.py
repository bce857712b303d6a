"""The Ray engine against a real Ray cluster: a head started as its own processes with
`ray start` for this module, reached through RAY_ADDRESS, on 127.0.0.1 only, and stopped by
signalling the process group the fixture started (never `ray stop`)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import assert_no_crash, failure_section, rec

ray = pytest.importorskip("ray")

# A single machine here: the sandbox refuses connections to the machine's own non-loopback
# address, so Ray keeps 127.0.0.1 instead of the host's IP (ray_constants.ENABLE_RAY_CLUSTER)
# and runs without token authentication (a test cluster on loopback).
ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "disabled",
       "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0",
       "RAY_USAGE_STATS_ENABLED": "0"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    temp = Path(f"/tmp/rt-{os.getpid()}-{port}")  # short: Ray's socket paths are limited
    log = tmp_path_factory.mktemp("ray") / "head.log"
    # TOKAUDIT_MIN_SHARD_SIZE: what the suite sets for every run (tests/conftest.py), so the
    # workers read the contract's small shard sizes as the pytest process does.
    env = {**os.environ, **ENV, "TOKAUDIT_TEST_RAY_NODE": "1", "TOKAUDIT_MIN_SHARD_SIZE": "1"}
    ray_bin = Path(sys.executable).with_name("ray")
    with open(log, "wb") as out:
        head = subprocess.Popen(
            [str(ray_bin), "start", "--head", "--block", "--num-cpus", "2", "--port", str(port),
             "--node-ip-address", "127.0.0.1", "--temp-dir", str(temp),
             "--include-dashboard=false", "--disable-usage-stats"],
            stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while b"block forever" not in log.read_bytes():
            if head.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"ray start failed:\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.5)
        yield f"127.0.0.1:{port}"
    finally:  # only the processes this fixture started: its session's group
        for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 5)):
            try:
                os.killpg(head.pid, sig)
            except ProcessLookupError:
                break
            try:
                head.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        subprocess.run(["rm", "-rf", str(temp)], check=False)


@pytest.fixture
def on_ray(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, cluster: str):
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("RAY_ADDRESS", cluster)
    return pytester


def dataset(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ntokaudit_unique_ids = true\ntokaudit_shard_size = 2000\ntokaudit_count_abs = 1\n"
                     "tokaudit_count_outliers = 0\n")
    data = pytester.path / "data"
    data.mkdir()
    good = [rec(i) for i in range(1, 21)]
    bad = [rec(100 + i) for i in range(10)]
    bad[3] = rec(103, 10, 14)
    bad[6] = rec(101)  # an id twice
    big = [rec(1000 + i) for i in range(200)]
    big[150] = rec(1150, 10, 30)
    for name, rows in (("good.jsonl", good), ("bad.jsonl", bad), ("big.jsonl", big)):
        (data / name).write_text("".join(json.dumps(r) + "\n" for r in rows))


def run(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, dict]:
    # Outside the project: a .json file there would be named by the coverage check.
    report = pytester.path.parent / f"{pytester.path.name}-r{len(list(pytester.path.parent.glob(pytester.path.name + '-r*.json')))}.json"
    result = pytester.runpytest_subprocess("--tokaudit", "data", "-rA", "-p", "no:cacheprovider",
                                           f"--tokaudit-json={report}", *args, timeout=300)
    data = json.loads(report.read_text())
    data.pop("cache", None)
    return result, data


def outcomes(result: pytest.RunResult) -> list[str]:
    return sorted(re.findall(r"^(?:PASSED|FAILED|ERROR|SKIPPED) \S+", result.stdout.str(), re.M))


def test_the_ray_engine_gives_the_verdicts_of_an_in_process_run(on_ray: pytest.Pytester):
    dataset(on_ray)
    local, local_report = run(on_ray, "-p", "no:xdist")
    remote, remote_report = run(on_ray, "--tokaudit-engine=ray", "-p", "no:xdist")
    assert_no_crash(remote)
    assert remote.ret == local.ret == pytest.ExitCode.TESTS_FAILED
    assert outcomes(remote) == outcomes(local)
    assert len([o for o in outcomes(remote) if "big.jsonl::tokaudit[shard" in o]) > 2
    assert remote_report == local_report
    assert failure_section(remote, "data/bad.jsonl") == failure_section(local, "data/bad.jsonl")
    summary = lambda r: r.stdout.str()[r.stdout.str().index("tokaudit summary"):]  # noqa: E731
    assert summary(remote).splitlines()[:12] == summary(local).splitlines()[:12]


def test_a_task_that_keeps_failing_errors_its_item_and_the_run_is_red(on_ray: pytest.Pytester):
    dataset(on_ray)
    on_ray.makeconftest("""
        import os

        def pytest_tokaudit_check_record(record):
            if os.environ.get("TOKAUDIT_TEST_RAY_NODE") and record.id == 103:
                raise RuntimeError("this hook fails on the cluster")
    """)
    result, report = run(on_ray, "--tokaudit-engine=ray", "-p", "no:xdist")
    assert_no_crash(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    assert re.search(r"^FAILED data/bad\.jsonl::tokaudit - ", out, re.M), out
    assert ("data/bad.jsonl::tokaudit: its Ray task failed after 2 retries: RuntimeError: "
            "this hook fails on the cluster") in out
    assert "partial run" in out and report["partial"]


def test_a_worker_killed_mid_task_is_retried_to_the_same_verdict(on_ray: pytest.Pytester):
    dataset(on_ray)
    flag = on_ray.path / "killed-once"
    on_ray.makeconftest(f"""
        import os, signal
        from pathlib import Path

        def pytest_tokaudit_check_record(record):
            flag = Path({str(flag)!r})
            if os.environ.get("TOKAUDIT_TEST_RAY_NODE") and record.id == 105 and not flag.exists():
                flag.touch()
                os.kill(os.getpid(), signal.SIGKILL)  # the worker dies inside the task
    """)
    local, local_report = run(on_ray, "-p", "no:xdist")
    remote, remote_report = run(on_ray, "--tokaudit-engine=ray", "-p", "no:xdist")
    assert flag.exists()  # it was killed once, and the retry ran to the end
    assert outcomes(remote) == outcomes(local) and remote_report == local_report


def test_an_unreachable_cluster_or_xdist_is_a_usage_error(pytester: pytest.Pytester,
                                                            monkeypatch: pytest.MonkeyPatch):
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{dead}")
    monkeypatch.setenv("RAY_gcs_rpc_server_connect_timeout_s", "2")
    dataset(pytester)
    result = pytester.runpytest_subprocess("--tokaudit", "data", "--tokaudit-engine=ray", "-p", "no:xdist",
                                           timeout=120)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"cannot reach the Ray cluster at 127.0.0.1:{dead}" in result.stderr.str()
    assert "Traceback" not in result.stderr.str()
    result = pytester.runpytest_subprocess("--tokaudit", "data", "--tokaudit-engine=ray", "-n", "2",
                                           timeout=120)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "pick one" in result.stderr.str()
