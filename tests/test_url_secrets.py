"""Credentials in URLs (`user:password@`, presigned `X-Amz-*` parameters, Azure `sig=`) in
`tokaudit_expected_ids` and `--tokaudit-baseline` are used, never printed or stored: not in
usage errors, failure text, the JSON report's contract, nor the markdown summary."""

from __future__ import annotations

import functools
import http.server
import json
import threading
from pathlib import Path

import pytest

from conftest import TokProject, assert_no_crash, rec

pytest.importorskip("fsspec")
pytest.importorskip("aiohttp")

SECRETS = ("hunter2pw", "AKIAQWERTY", "deadbeef99", "sessiontok77", "azuresig55")
QUERY = ("X-Amz-Credential=AKIAQWERTY%2F20250101&X-Amz-Signature=deadbeef99&"
         "X-Amz-Security-Token=sessiontok77&sig=azuresig55")


@pytest.fixture
def server(tmp_path: Path):
    """A plain HTTP server on 127.0.0.1 serving tmp_path/www (queries and logins ignored)."""
    root = tmp_path / "www"
    root.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a: None  # type: ignore[attr-defined]
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    # Polled every 50 ms, not 0.5 s: shutdown() waits for the poll (each test's teardown).
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield root, f"127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def secret_url(host: str, name: str) -> str:
    return f"http://alice:hunter2pw@{host}/{name}?{QUERY}"


def assert_no_secret(*texts: str) -> None:
    for text in texts:
        leaked = [s for s in SECRETS if s in text]
        assert not leaked, (leaked, text)


def test_a_manifest_url_and_a_baseline_url_with_credentials_are_used_never_shown(
        project: TokProject, server):
    """The manifest's run writes the report that the baseline's run reads back at a URL
    (one run each: the baseline is that first run's report, the data made worse)."""
    root, host = server
    (root / "manifest.txt").write_text("\n".join(str(i) for i in range(1, 6)) + "\n")
    url = secret_url(host, "manifest.txt")
    project.ini(tokaudit_expected_ids=url, tokaudit_count_abs=0)
    project.jsonl("data/a.jsonl", [rec(1), rec(2), rec(3, billed=30)])  # 4, 5 missing
    result = project.run("-rA", "--tokaudit-json=report.json", "--tokaudit-markdown=summary.md")
    assert_no_crash(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    assert "pytest.ini::tokaudit::expected_ids: failed: 2 of 5 expected ids have no record" \
        in result.stdout.str()
    report = project.path.joinpath("report.json").read_text()
    assert_no_secret(result.stdout.str(), result.stderr.str(), report,
                     project.path.joinpath("summary.md").read_text())
    assert json.loads(report)["contract"]["tokaudit_expected_ids"] == (
        f"http://{host}/manifest.txt?X-Amz-Credential=***&X-Amz-Signature=***&"
        "X-Amz-Security-Token=***&sig=***")

    # A baseline URL with credentials: named without them.
    (root / "base.json").write_text(report)
    project.ini(tokaudit_count_abs=0)
    project.jsonl("data/a.jsonl", [rec(i, billed=30) for i in range(1, 4)])  # mean |diff| 6.7 -> 20
    result = project.run("-o", "tokaudit_count_outliers=100%", "-o", "tokaudit_count_mean_rel=",
                         f"--tokaudit-baseline={secret_url(host, 'base.json')}",
                         "--tokaudit-json=now.json")
    assert_no_crash(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    assert (f"worse than baseline http://{host}/base.json?X-Amz-Credential=***&"
            "X-Amz-Signature=***&X-Amz-Security-Token=***&sig=*** by more than 10%") \
        in result.stdout.str()
    assert_no_secret(result.stdout.str(), result.stderr.str(),
                     project.path.joinpath("now.json").read_text())


@pytest.mark.parametrize("scheme", ["http", "memory", "s3"])
@pytest.mark.parametrize("where", ["manifest", "baseline"])
def test_an_unreadable_url_with_credentials_is_a_usage_error_without_them(
    pytester: pytest.Pytester, scheme: str, where: str
):
    project = TokProject(pytester, ("-p", "no:xdist"))
    if scheme == "s3":
        pytest.importorskip("s3fs")
    url = {
        "http": f"http://alice:hunter2pw@127.0.0.1:9/m.jsonl?{QUERY}",
        "memory": f"memory://alice:hunter2pw@bucket/m.jsonl?{QUERY}",
        "s3": f"s3://alice:hunter2pw@no-such-bucket-tokaudit/m.jsonl?{QUERY}",
    }[scheme]
    project.jsonl("data/a.jsonl", [rec(1)])
    if where == "manifest":
        project.ini(tokaudit_expected_ids=url)
        result = project.run()
    else:
        project.ini()
        result = project.run(f"--tokaudit-baseline={url}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    name = "tokaudit_expected_ids" if where == "manifest" else "--tokaudit-baseline"
    assert name in result.stderr.str()
    assert_no_secret(result.stdout.str(), result.stderr.str())


PARAMS = ["X-Amz-Signature=deadbeef99", "sig=azuresig55", "X-Amz-Security-Token=sessiontok77"]


@pytest.mark.parametrize("param", PARAMS)
def test_a_credential_in_a_testpaths_url_is_refused_before_pytest_prints_it(
        project: TokProject, server, param: str):
    """pytest prints `testpaths` whole in its session header: a presigned URL there would
    show its signature. A usage error says how to pass it instead (issue #31, item 11); the
    same URL on the command line is used, and shown without it (the next test)."""
    root, host = server
    (root / "a.jsonl").write_text("".join(json.dumps(rec(i)) + "\n" for i in range(1, 4)))
    url = f"http://{host}/a.jsonl?versionId=1&{param}"
    project.ini(testpaths=url)
    result = project.run(paths=())
    assert_no_crash(result)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    name = param.split("=")[0]
    assert (f"testpaths: http://{host}/a.jsonl?versionId=1&{name}=*** carries a credential "
            f"({name}), and pytest prints testpaths whole") in result.stderr.str(), result.stderr.str()
    assert "on the command line" in result.stderr.str()
    assert_no_secret(result.stdout.str(), result.stderr.str())


def test_a_credential_in_a_url_on_the_command_line_is_used_never_shown(project: TokProject, server):
    """The previous test's URLs, each a file of its own, named on the command line in one run."""
    root, host = server
    urls = []
    for k, param in enumerate(PARAMS):
        (root / f"a{k}.jsonl").write_text("".join(json.dumps(rec(10 * k + i)) + "\n" for i in range(1, 4)))
        urls.append(f"http://{host}/a{k}.jsonl?versionId=1&{param}")
    project.ini()
    result = project.run("-rA", paths=tuple(urls))
    assert result.ret == pytest.ExitCode.OK, result.stdout.str() + result.stderr.str()
    assert_no_secret(result.stdout.str(), result.stderr.str())
    for k, param in enumerate(PARAMS):  # each used: its item passed
        shown = f"http://{host}/a{k}.jsonl?versionId=1&{param.split('=')[0]}=***"
        assert f"PASSED {shown}::tokaudit" in result.stdout.lines, result.stdout.str()
