"""Remote storage: data roots, manifests and baselines at fsspec URLs, read from a real S3
API (moto's server, on a free port of 127.0.0.1) through s3fs.

The subprocess runs reach the server the way a user's runs reach S3: s3fs takes its
endpoint from fsspec's configuration (``FSSPEC_S3_ENDPOINT_URL``) and its credentials from
the AWS variables. The same corpus audited from a local folder and from the bucket must
give the same verdicts, failure text (the path prefix aside) and summary rows; storage
failures are findings or usage errors, never tracebacks, and no credential is printed.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import logging
import re
import shutil
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from conftest import (
    XDIST_MODES,
    TokProject,
    assert_no_crash,
    failure_section,
    failure_sections,
    rec,
    summary_rows,
    summary_section,
)
from pytest_tokaudit.sources.base import shard_count, shard_cuts
boto3 = pytest.importorskip("boto3")
moto_server = pytest.importorskip("moto.server")
pytest.importorskip("s3fs")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
# pytester restores sys.modules after each test: a module the server imports lazily during
# one test would be imported afresh in the next, with new state (an IAM user created in
# one copy, its access key checked in another). Import what the server uses now.
import moto.core.authorization  # noqa: E402
import moto.iam.access_control  # noqa: E402
import moto.iam.models  # noqa: E402
import moto.moto_api._internal.responses  # noqa: E402
import moto.s3.models  # noqa: E402
import moto.s3.responses  # noqa: E402
import moto.sts.models  # noqa: E402
from moto.backends import get_backend  # noqa: E402

for _service in ("s3", "iam", "sts", "moto_api"):
    get_backend(_service)

FAILED = pytest.ExitCode.TESTS_FAILED
OK = pytest.ExitCode.OK
USAGE = pytest.ExitCode.USAGE_ERROR
KEY_ID = "AKIATOKAUDITDUMMYKEY"
SECRET = "tokaudit-dummy-secret-5f3a9c"  # must never appear in any output
THINK, END, OPEN = 7, 8, 9
INI = dict(
    tokaudit_require_once=THINK, tokaudit_require_last=END, tokaudit_forbid=OPEN,
    tokaudit_count_abs=0, tokaudit_count_rel="0%", tokaudit_where="provider",
    tokaudit_unique_ids="true",
)


class S3:
    """The moto server and a boto3 client of it."""

    def __init__(self, endpoint: str):
        self.endpoint = endpoint
        self.client = boto3.client(
            "s3", endpoint_url=endpoint, region_name="us-east-1",
            aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET,
        )

    def bucket(self, name: str) -> str:
        self.client.create_bucket(Bucket=name)
        return name

    def put(self, bucket: str, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=bucket, Key=key, Body=data)

    def upload(self, local: Path, bucket: str, prefix: str) -> None:
        for path in sorted(local.rglob("*")):
            if path.is_file():
                self.put(bucket, f"{prefix}/{path.relative_to(local).as_posix()}", path.read_bytes())


@pytest.fixture(scope="session")
def s3_server():
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no request log in the output
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def s3(s3_server: str, monkeypatch: pytest.MonkeyPatch, tmp_path_factory) -> S3:
    """The server, with the environment every subprocess run reads its configuration from:
    fsspec's endpoint setting, dummy AWS credentials, nothing from this machine's files."""
    empty = tmp_path_factory.mktemp("fsspec-config")
    monkeypatch.setenv("FSSPEC_CONFIG_DIR", str(empty))
    monkeypatch.setenv("FSSPEC_S3_ENDPOINT_URL", s3_server)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(empty / "aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(empty / "aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL", "FSSPEC_S3"):
        monkeypatch.delenv(name, raising=False)
    return S3(s3_server)


@pytest.fixture
def one(pytester: pytest.Pytester) -> TokProject:
    """A project run without xdist only: for failures of the storage, which do not depend
    on how items are spread (each run against the server costs seconds)."""
    return TokProject(pytester, XDIST_MODES["no-xdist"])


@pytest.fixture
def bucket(s3: S3, request: pytest.FixtureRequest) -> str:
    """A fresh bucket per test (and per xdist mode), with a short name: a failure section's
    title must fit the terminal's width to be found."""
    return s3.bucket("t-" + hashlib.sha1(request.node.nodeid.encode()).hexdigest()[:10])


def assert_clean(result: pytest.RunResult) -> None:
    """No traceback, and no credential anywhere in the output."""
    assert_no_crash(result)
    for name in ("stdout", "stderr"):
        text = getattr(result, name).str()
        assert SECRET not in text, text
        assert KEY_ID not in text, text


# -- the corpus ----------------------------------------------------------------------------

def good(i: int, **kw: Any) -> dict:
    return rec(i, 12, once=[THINK], last=END, provider="api", **kw)


def rows() -> list[dict]:
    out = [good(i) for i in range(1, 41)]
    out[2] = rec(3, 12, 15, once=[THINK], last=END, provider="api")  # count
    out[5] = rec(6, 12, once=[THINK, THINK], last=END, provider="api")  # require_once
    out[9] = rec(10, 12, once=[THINK], provider="api")  # require_last
    out[11] = {**good(12), "output_ids": None}  # unusable
    out[19] = {**good(20), "provider": None}  # skipped by tokaudit_where
    return out


def write_corpus(project: TokProject) -> None:
    """JSONL (one with a broken line), .gz, a big JSONL that shards, and a Parquet file."""
    project.jsonl("data/a.jsonl", [*rows(), "{broken"])
    project.jsonl("data/sub/b.jsonl.gz", [good(100 + i) for i in range(30)] + [good(5)])
    big = [good(200 + i) for i in range(120)]
    big[77] = rec(277, 12, 30, once=[THINK], last=END, provider="api")
    big[99] = "{broken"  # fails its shard: the line is counted from the file's start
    project.jsonl("data/big.jsonl", big)
    table = pa.Table.from_pylist([{**r, "sample_id": r["sample_id"] + 1000} for r in rows()])
    pq.write_table(table, project.path / "data/c.parquet", row_group_size=10)
    project.write("data/notes.csv", "not data\n")


SHARD = "6000"  # big.jsonl (~7 KiB) shards, and c.parquet splits by row groups


def outcome_lines(result: pytest.RunResult) -> list[str]:
    """'OUTCOME node id' of each -rA line (messages are cut to the terminal's width)."""
    return sorted(" ".join(m) for m in re.findall(r"^(PASSED|FAILED|ERROR) (\S+)", result.stdout.str(), re.M))


def test_the_same_corpus_gives_the_same_audit_locally_and_from_a_bucket(
    project: TokProject, s3: S3, bucket: str
):
    write_corpus(project)
    s3.upload(project.path / "data", bucket, "data")
    url = f"s3://{bucket}/data"
    project.ini(**INI, tokaudit_shard_size=SHARD)
    local = project.run("-rA")
    big = (project.path / "data/big.jsonl").read_bytes()
    shutil.rmtree(project.path / "data")  # the remote run has nothing local to fall back on
    remote = project.run("-rA", paths=(url + "/",))
    for result in (local, remote):
        assert_clean(result)
        assert result.ret == FAILED, result.stdout.str()

    def same(text: str) -> str:
        return text.replace(url + "/", "data/")

    # Every failure section (files, shards, whole files, dataset checks), line for line.
    titles = sorted(set(re.findall(r"^_+ (.+?) _+$", local.stdout.str(), re.M)))
    assert sorted(same(t) for t in set(re.findall(r"^_+ (.+?) _+$", remote.stdout.str(), re.M))) \
        == titles
    assert any("[shard" in t for t in titles), titles
    for title in titles:
        remote_title = title.replace("data/", url + "/", 1) if "data/" in title else title
        assert [[same(line) for line in s] for s in failure_sections(remote, remote_title)] \
            == failure_sections(local, title), title
    assert {same(k): v for k, v in summary_rows(remote).items()} == summary_rows(local)
    assert sorted(same(line) for line in outcome_lines(remote)) == outcome_lines(local)
    text = remote.stdout.str()
    # Node ids, findings and reports name the URL.
    assert f"FAILED {url}/a.jsonl::tokaudit - " in text
    assert f"{url}/a.jsonl:3: sample_id=3: count: billed 15, counted 12" in text
    assert f"{url}/c.parquet:row 3: sample_id=1003: count: billed 15, counted 12" in text
    assert f"{url}/big.jsonl:78: sample_id=277: count: billed 30, counted 12" in text
    # A failing shard's lines come from ranged reads of the part of the file before it.
    assert f"{url}/big.jsonl:100: json: invalid JSON" in text
    start = len(b"".join(big.splitlines(keepends=True)[:99]))  # line 100's first byte
    k = bisect.bisect_right(shard_cuts(len(big), int(SHARD)), start)  # the shard holding it
    assert k > 1 and f"FAILED {url}/big.jsonl::tokaudit[shard {k}] - " in text, text
    assert f"PASSED {url}/big.jsonl::tokaudit[shard 1]" in text, text
    assert f"sample_id=5: 2 records: {url}/a.jsonl:5, {url}/sub/b.jsonl.gz:31" in text
    # The remote root is the dataset: complete, so the dataset checks are judged.
    assert "pytest.ini::tokaudit::coverage: passed: 4 data files (" in text
    assert f"audited to the end under the rootdir, {url}/" in text


# Under xdist what differs is how workers get the listing (workerinput): "testpaths" holds
# that; "both" (a URL on the command line too) is the same listing, in one process.
@pytest.mark.parametrize("where, xdist_mode", [
    ("testpaths", XDIST_MODES["no-xdist"]), ("testpaths", XDIST_MODES["xdist-2"]),
    ("both", XDIST_MODES["no-xdist"]),
], ids=["testpaths-no-xdist", "testpaths-xdist-2", "both-no-xdist"])
def test_a_url_in_testpaths_is_the_dataset(project: TokProject, s3: S3, bucket: str, where: str):
    s3.put(bucket, "data/a.jsonl", b"\n".join(json.dumps(rec(i)).encode() for i in range(1, 6)))
    testpaths = f"s3://{bucket}/data" if where == "testpaths" else f"local s3://{bucket}/data"
    if where == "both":
        project.jsonl("local/l.jsonl", [rec(10)])
    project.jsonl("elsewhere/not_in_dataset.jsonl", [rec(99)])  # the rootdir is not searched
    project.ini(testpaths=testpaths, tokaudit_unique_ids="true")
    result = project.run("-rA", paths=())
    assert_clean(result)
    assert result.ret == OK, result.stdout.str()
    text = result.stdout.str()
    assert f"PASSED s3://{bucket}/data/a.jsonl::tokaudit" in text
    assert "not_in_dataset" not in text
    assert "No files were found in testpaths" not in text
    n = 2 if where == "both" else 1
    assert f"pytest.ini::tokaudit::coverage: passed: {n} data file" in text
    assert f"testpaths: {testpaths.replace(' ', ', ')}" in text
    if where == "both":
        # The two runs below, with a local entry in testpaths too, would assert the same as
        # for "testpaths" on the same code: the ini switch is read before testpaths' entries
        # are looked at (run/remote.testpath_urls_as_args), and a run naming a path does not
        # collect testpaths (its partial-run line names the same URL).
        return
    # The same with the ini switch instead of --tokaudit.
    project.ini(testpaths=testpaths, tokaudit_unique_ids="true", tokaudit="true")
    switched = project.run("-rA", paths=(), tokaudit=False)
    assert_clean(switched)
    assert switched.ret == OK, switched.stdout.str()
    assert f"PASSED s3://{bucket}/data/a.jsonl::tokaudit" in switched.stdout.str()
    # Naming one file of it on the command line is a partial run, as for a local folder.
    s3.put(bucket, "data/b.jsonl", json.dumps(rec(7)).encode())
    result = project.run("-rA", paths=(f"s3://{bucket}/data/b.jsonl",))
    assert_clean(result)
    result.stdout.fnmatch_lines([f"SKIPPED [[]1[]] pytest.ini: partial run: *not selected*s3://{bucket}/data/a.jsonl*"])


def test_an_empty_prefix_fails_coverage_naming_it(one: TokProject, s3: S3, bucket: str):
    """Alone, it fails like an empty local folder: no data audited. (Beside a prefix with
    data, it fails coverage naming it and what is there: the second run of
    test_an_object_changed_after_listing_fails_saying_so.)"""
    one.ini()
    result = one.run("-rA", paths=(f"s3://{bucket}/nothing-here/",))
    assert_clean(result)
    assert result.ret == FAILED, result.stdout.str()
    assert (f"pytest.ini::tokaudit::coverage: failed: no data file under s3://{bucket}/nothing-here/"
            in result.stdout.str()), result.stdout.str()


def test_manifest_and_baseline_at_urls(one: TokProject, s3: S3, bucket: str):
    s3.put(bucket, "data/a.jsonl", b"\n".join(json.dumps(rec(i)).encode() for i in (1, 2, 4)))
    s3.put(bucket, "meta/manifest.txt", b"1\n2\n3\n4\n")
    one.ini(tokaudit_expected_ids=f"s3://{bucket}/meta/manifest.txt")
    data = f"s3://{bucket}/data/"
    first = one.run("-rA", "--tokaudit-json=audit.json", paths=(data,))
    assert_clean(first)
    assert first.ret == FAILED, first.stdout.str()
    first.stdout.fnmatch_lines(["FAILED pytest.ini::tokaudit::expected_ids - 1 of 4 expected ids have no record"])
    report = json.loads((one.path / "audit.json").read_text())
    assert [f["path"] for f in report["files"]] == [f"{data}a.jsonl"]
    s3.put(bucket, "reports/base.json", (one.path / "audit.json").read_bytes())
    # The file gets worse: the baseline at a URL catches it.
    s3.put(bucket, "data/a.jsonl", b"\n".join(json.dumps(rec(i, billed=14 if i == 2 else None)).encode()
                                               for i in (1, 2, 3, 4)))
    result = one.run("-rA", f"--tokaudit-baseline=s3://{bucket}/reports/base.json",
                         "-o", "tokaudit_count_abs=8", paths=(data,))
    assert_clean(result)
    assert result.ret == FAILED, result.stdout.str()
    text = result.stdout.str()
    assert f"baseline: worse than baseline s3://{bucket}/reports/base.json by more than 10%" in text
    assert "PASSED pytest.ini::tokaudit::expected_ids" in text
    # Missing ones are usage errors, as for local paths.
    one.ini(tokaudit_expected_ids=f"s3://{bucket}/meta/nope.txt")
    result = one.run(paths=(data,))
    assert_clean(result)
    assert result.ret == USAGE
    assert f"manifest s3://{bucket}/meta/nope.txt does not exist" in result.stderr.str()
    one.ini()
    result = one.run(f"--tokaudit-baseline=s3://{bucket}/reports/nope.json", paths=(data,))
    assert_clean(result)
    assert result.ret == USAGE
    assert f"--tokaudit-baseline: cannot read s3://{bucket}/reports/nope.json: " in result.stderr.str()


# Without xdist: a key of test_an_object_changed_after_listing_fails_saying_so's run (the same
# conftest deletes it there). With two workers in the full matrix only, as every -n 2 variant
# of this module.
@pytest.mark.full
@pytest.mark.parametrize("xdist_mode", [XDIST_MODES["xdist-2"]], ids=["xdist-2"])
def test_a_key_that_vanishes_after_listing_is_a_read_finding(project: TokProject, s3: S3, bucket: str):
    s3.put(bucket, "data/a.jsonl", json.dumps(rec(1)).encode())
    s3.put(bucket, "data/gone.jsonl", json.dumps(rec(2)).encode())
    # After the controller listed the bucket (a tryfirst sessionstart), before any read.
    project.write("conftest.py", change_after_listing(bucket, {}, gone=("data/gone.jsonl",)))
    project.ini()
    result = project.run("-rA", paths=(f"s3://{bucket}/data/",))
    assert_clean(result)
    assert result.ret == FAILED, result.stdout.str()
    assert failure_section(result, f"s3://{bucket}/data/gone.jsonl")[0].startswith(
        "cannot open: no such file or bucket"), result.stdout.str()
    assert f"PASSED s3://{bucket}/data/a.jsonl::tokaudit" in result.stdout.str()
    result.stdout.fnmatch_lines([f"SKIPPED [[]1[]] pytest.ini: partial run: 1 data file did not finish*gone.jsonl"])


def test_without_s3fs_a_url_is_a_usage_error_naming_the_extra(one: TokProject, s3: S3, bucket: str):
    blocker = one.path / "nos3fs"
    (blocker / "s3fs").mkdir(parents=True)
    (blocker / "s3fs/__init__.py").write_text("raise ImportError('No module named s3fs')\n")
    one.pytester._monkeypatch.setenv("PYTHONPATH", str(blocker))
    one.ini()
    result = one.run(paths=(f"s3://{bucket}/data/",))
    assert_clean(result)
    assert result.ret == USAGE, result.stdout.str()
    assert ("reading s3:// URLs needs fsspec and s3fs: pip install 'pytest-tokaudit[s3]'"
            in result.stderr.str())
    (blocker / "fsspec").mkdir()
    (blocker / "fsspec/__init__.py").write_text("raise ImportError('No module named fsspec')\n")
    one.ini(tokaudit_expected_ids="gs://bucket/manifest.txt")
    result = one.run(paths=())
    assert result.ret == USAGE, result.stdout.str()
    assert "reading gs:// URLs needs fsspec and gcsfs: pip install 'pytest-tokaudit[gcs]'" in result.stderr.str()


# -- a connection dropped mid-file ------------------------------------------------------------

class DroppingProxy:
    """An HTTP proxy to the S3 server that cuts every ranged GET starting past byte 0 of
    `key` after `keep` bytes of its response, then closes the connection: the network
    failing in the middle of a file. One request per connection (it asks for close)."""

    def __init__(self, upstream: str, key: str, keep: int = 2048):
        host, port = upstream.removeprefix("http://").split(":")
        self.upstream = (host, int(port))
        self.key, self.keep = key, keep
        self.cuts = 0
        self.server = socket.create_server(("127.0.0.1", 0))
        self.endpoint = "http://127.0.0.1:%d" % self.server.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(client,), daemon=True).start()

    def _handle(self, client: socket.socket) -> None:
        with client, socket.create_connection(self.upstream) as up:
            head = b""
            while b"\r\n\r\n" not in head:
                piece = client.recv(65536)
                if not piece:
                    return
                head += piece
            head, body = head.split(b"\r\n\r\n", 1)
            lines = head.split(b"\r\n")
            length = 0
            kept = [lines[0]]
            for line in lines[1:]:
                name = line.split(b":", 1)[0].strip().lower()
                if name == b"content-length":
                    length = int(line.split(b":", 1)[1])
                if name not in (b"connection", b"keep-alive"):
                    kept.append(line)
            while len(body) < length:
                body += client.recv(65536)
            kept.append(b"Connection: close")
            up.sendall(b"\r\n".join(kept) + b"\r\n\r\n" + body)
            method, target = lines[0].split(b" ")[:2]
            ranged = re.search(rb"(?im)^range: *bytes=(\d+)-", head)
            cut = (method == b"GET" and self.key.encode() in target
                   and ranged is not None and int(ranged.group(1)) > 0)
            sent = 0
            while True:
                data = up.recv(65536)
                if not data:
                    return
                if cut and sent + len(data) > self.keep:
                    client.sendall(data[: self.keep - sent])
                    self.cuts += 1
                    client.shutdown(socket.SHUT_RDWR)
                    return
                client.sendall(data)
                sent += len(data)

    def close(self) -> None:
        self.server.close()


def test_a_connection_dropped_mid_file_is_a_read_finding(
    one: TokProject, s3: S3, bucket: str, monkeypatch: pytest.MonkeyPatch
):
    pad = "x" * 4000
    records = [rec(i, pad=pad) for i in range(1, 1601)]  # ~6.5 MB: a second ranged read
    data = b"".join(json.dumps(r).encode() + b"\n" for r in records)
    s3.put(bucket, "data/big.jsonl", data)
    s3.put(bucket, "data/small.jsonl", json.dumps(rec(1)).encode())
    proxy = DroppingProxy(s3.endpoint, f"/{bucket}/data/big.jsonl")
    monkeypatch.setenv("FSSPEC_S3_ENDPOINT_URL", proxy.endpoint)
    # s3fs tries a failed request 5 times, sleeping 0.1 s, 0.17 s, ... (~1.9 s) between: the
    # proxy cuts every try the same way, so the first cut is the run's answer.
    one.write("conftest.py", "import s3fs\n\ns3fs.S3FileSystem.retries = 1\n")
    one.ini(tokaudit_max_line_bytes=8192)
    try:
        result = one.run("-rA", paths=(f"s3://{bucket}/data/",))
    finally:
        proxy.close()
    assert_clean(result)
    assert proxy.cuts >= 1
    assert result.ret == FAILED, result.stdout.str()
    section = failure_section(result, f"s3://{bucket}/data/big.jsonl")
    # The lines before the failure were audited; the finding says where it stopped.
    assert re.match(r"read failed at byte [\d,]+: \w+.*\(after line \d+\)$", section[0]), section
    after = int(re.search(r"after line (\d+)", section[0]).group(1))
    assert 900 < after < 1600, section
    assert f"PASSED s3://{bucket}/data/small.jsonl::tokaudit" in result.stdout.str()
    rows_seen = summary_rows(result)[f"s3://{bucket}/data/big.jsonl"]
    assert rows_seen[:2] == [f"{after:,}", f"{after:,}"], rows_seen
    # Not read to the end: the run is partial, so no dataset check passes on it.
    result.stdout.fnmatch_lines([
        f"SKIPPED [[]1[]] pytest.ini: partial run: 1 data file did not finish*s3://{bucket}/data/big.jsonl"])


# -- access denied ------------------------------------------------------------------------------

@pytest.fixture
def auditor(s3: S3, bucket: str, monkeypatch: pytest.MonkeyPatch):
    """An IAM user that may read the bucket except data/secret.jsonl, and may do nothing in
    the bucket named like it with -p; moto checks its every request while the fixture lasts.

    The denials name no single action (``s3:*`` on the resource): which action name an S3
    server checks for a request is its own business (moto 5.2.6 authorises a listing as
    ``s3:ListObjectsV2`` where 5.2.5 and AWS say ``s3:ListBucket``), and what this test
    holds our code to is what it does with a denial, whichever request is denied."""
    import requests

    iam = boto3.client("iam", endpoint_url=s3.endpoint, region_name="us-east-1",
                       aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET)
    name = f"auditor-{bucket}"
    iam.create_user(UserName=name)
    iam.put_user_policy(UserName=name, PolicyName="read", PolicyDocument=json.dumps({
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": "s3:*", "Resource": "*"},
            {"Effect": "Deny", "Action": "s3:*",
             "Resource": f"arn:aws:s3:::{bucket}/data/secret.jsonl"},
            {"Effect": "Deny", "Action": "s3:*",
             "Resource": [f"arn:aws:s3:::{bucket}-p", f"arn:aws:s3:::{bucket}-p/*"]},
        ],
    }))
    key = iam.create_access_key(UserName=name)["AccessKey"]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", key["SecretAccessKey"])
    requests.post(f"{s3.endpoint}/moto-api/reset-auth", data=b"0").raise_for_status()
    try:
        yield key
    finally:
        requests.post(f"{s3.endpoint}/moto-api/reset-auth", data=b"inf").raise_for_status()


def test_a_denied_object_is_a_read_finding_and_no_credential_is_printed(
    one: TokProject, s3: S3, bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
):
    s3.put(bucket, "data/a.jsonl", json.dumps(rec(1)).encode())
    s3.put(bucket, "data/secret.jsonl", json.dumps(rec(2)).encode())
    s3.put(bucket, "data/c.parquet", b"")  # replaced below
    table = pa.Table.from_pylist([rec(3)])
    pq.write_table(table, tmp_path / "c.parquet")
    s3.put(bucket, "data/c.parquet", (tmp_path / "c.parquet").read_bytes())
    s3.put(s3.bucket(f"{bucket}-p"), "data/p.jsonl", json.dumps(rec(4)).encode())
    key = request.getfixturevalue("auditor")
    one.ini()
    result = one.run("-rA", paths=(f"s3://{bucket}/data/",))
    assert_clean(result)
    for name in ("stdout", "stderr"):
        assert key["SecretAccessKey"] not in getattr(result, name).str()
        assert key["AccessKeyId"] not in getattr(result, name).str()
    assert result.ret == FAILED, result.stdout.str()
    assert failure_section(result, f"s3://{bucket}/data/secret.jsonl")[0].startswith(
        "cannot open: access denied"), result.stdout.str()
    text = result.stdout.str()
    assert f"PASSED s3://{bucket}/data/a.jsonl::tokaudit" in text
    assert f"PASSED s3://{bucket}/data/c.parquet::tokaudit" in text
    # A root that cannot be listed at all is a usage error naming it.
    result = one.run(paths=(f"s3://{bucket}-p/data/",))
    assert_clean(result)
    assert result.ret == USAGE, result.stdout.str()
    assert f"cannot list s3://{bucket}-p/data/: access denied" in result.stderr.str()


def test_credentials_in_fsspec_configuration_are_never_printed(
    one: TokProject, s3: S3, bucket: str, monkeypatch: pytest.MonkeyPatch
):
    """Storage options given to fsspec (here its FSSPEC_S3 JSON) are used and never shown,
    whatever fails: a missing key, a broken file, a missing bucket (a usage error naming
    the URL)."""
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.setenv("FSSPEC_S3", json.dumps({"key": KEY_ID, "secret": SECRET}))
    s3.put(bucket, "data/a.jsonl.gz", b"\x1f\x8b" + b"broken gzip")
    s3.put(bucket, "data/b.jsonl", json.dumps(rec(1)).encode())
    one.ini()
    result = one.run("-rA", "-vv", "--tb=long", paths=(f"s3://{bucket}/data/",))
    assert_clean(result)
    assert result.ret == FAILED, result.stdout.str()
    assert f"PASSED s3://{bucket}/data/b.jsonl::tokaudit" in result.stdout.str()
    result = one.run("-vv", paths=(f"s3://{bucket}-missing/data/",))
    assert_clean(result)
    assert result.ret == USAGE, result.stdout.str()
    assert f"cannot list s3://{bucket}-missing/data/: no such file or bucket" in result.stderr.str()


def test_one_file_over_http_a_key_holding_colons_and_one_item_by_node_id(
        one: TokProject, s3: S3, bucket: str, monkeypatch: pytest.MonkeyPatch):
    """An http(s) URL is one file (no listing); a credential in its query (a presigned
    URL's signature, say) is used but never shown. A URL argument is a file unless it ends
    in one of the plugin's item names (issue #22, item 11: a key may hold `::`), so a URL
    argument may name one item. Two runs: two files named (one over http, one whose key
    holds `::`), then three items named by node id (two shards, one of a key holding `::`;
    one version of an object at its presigned URL)."""
    s3.put(bucket, "data/a.jsonl", b"\n".join(json.dumps(rec(i, billed=30 if i == 3 else None)).encode()
                                             for i in range(1, 6)))
    s3.put(bucket, "data/a::b.jsonl", jsonl([rec(1), rec(2, billed=30)]))
    s3.put(bucket, "data/big::g.jsonl", jsonl([rec(100 + i) for i in range(40)]))
    one.ini()
    monkeypatch.setenv("COLUMNS", "200")  # the failure section's title fits
    url = f"{s3.endpoint}/{bucket}/data/a.jsonl"
    colons = f"s3://{bucket}/data/a::b.jsonl"
    result = one.run("-rA", paths=(url + "?X-Amz-Signature=sekrit0query0value", colons))
    assert_clean(result)
    assert "sekrit0query0value" not in result.stdout.str() + result.stderr.str()
    url += "?X-Amz-Signature=***"  # as shown
    assert result.ret == FAILED, result.stdout.str()
    assert any(line.startswith(f"{url}:3: sample_id=3: count: billed 30, counted 10")
               for line in failure_section(result, url)), result.stdout.str()
    result.stdout.fnmatch_lines([f"FAILED {url}::tokaudit - *"])
    # The key holding colons is the file named, not fsspec's URL chaining.
    assert failure_section(result, colons)[1].startswith(
        f"{colons}:2: sample_id=2: count: billed 30, counted 10"), result.stdout.str()
    # The http file counted with its 5 records (and a::b.jsonl's 2).
    assert "pytest.ini::tokaudit::coverage: passed: 2 data files (7 records)" in result.stdout.str()
    big = b"".join(json.dumps(rec(i)).encode() + b"\n" for i in range(1, 101))
    s3.put(bucket, "big/b.jsonl", big)
    assert shard_count(len(jsonl([rec(100 + i) for i in range(40)])), 800) > 2
    shards = [f"s3://{bucket}/big/b.jsonl::tokaudit[shard 2]",
              f"s3://{bucket}/data/big::g.jsonl::tokaudit[shard 2]"]
    # And one of two versions of an object, each at its presigned https URL (as in
    # test_urls_differing_only_in_their_query_are_two_items), by its node id, named with the
    # signature the URL needs: the good version only.
    s3.client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    s3.put(bucket, "vers/v.jsonl", jsonl([rec(i) for i in range(1, 4)]))
    s3.put(bucket, "vers/v.jsonl", jsonl([rec(1), rec(2, billed=30), rec(3)]))
    (first,) = [v["VersionId"] for v in s3.client.list_object_versions(Bucket=bucket, Prefix="vers/")[
        "Versions"] if not v["IsLatest"]]
    good = f"{s3.endpoint}/{bucket}/vers/v.jsonl?versionId={first}"
    sign = "&X-Amz-Signature=sekrit0query0value"
    result = one.run("-rA", "-o", "tokaudit_shard_size=800", paths=(*shards, good + sign + "::tokaudit"))
    assert_clean(result)
    assert "sekrit0query0value" not in result.stdout.str() + result.stderr.str()
    assert f"PASSED {good}&X-Amz-Signature=***::tokaudit" in result.stdout.lines, result.stdout.str()
    assert sorted(re.findall(r"^PASSED (.+)$", result.stdout.str(), re.M)) == [
        f"{good}&X-Amz-Signature=***::tokaudit", *shards], result.stdout.str()
    result.stdout.fnmatch_lines(["SKIPPED [[]1[]] pytest.ini: partial run*"])


def test_an_unchanged_object_reuses_its_result_and_a_rewritten_one_is_audited(
    one: TokProject, s3: S3, bucket: str
):
    """Incremental runs over a bucket (issue #12): an object is keyed by its ETag, which
    S3 changes on every write; a result is never reused for a rewritten object, and a URL
    whose server's ETag may not follow the bytes (https) is audited every run."""
    def lines(ids: range, bad: int | None = None) -> bytes:
        return b"".join(json.dumps(rec(i, billed=40 if i == bad else None)).encode() + b"\n"
                        for i in ids)

    s3.put(bucket, "data/a.jsonl", lines(range(1, 6), bad=3))
    s3.put(bucket, "data/b.jsonl", lines(range(6, 11)))
    one.ini()
    url = f"s3://{bucket}/data/"
    a, b = f"{url}a.jsonl::tokaudit", f"{url}b.jsonl::tokaudit"
    # The same object over https, in every run: never reused (moto serves a signed URL's
    # object; any signature will do). Node ids sorted: http:// before s3://.
    http = f"{s3.endpoint}/{bucket}/data/a.jsonl"
    h = f"{http}?X-Amz-Signature=***::tokaudit"

    def run() -> tuple[pytest.RunResult, dict]:
        result = one.run("-rA", "--tokaudit-json=audit.json", paths=(url, http + "?X-Amz-Signature=x"))
        assert_clean(result)
        return result, json.loads((one.path / "audit.json").read_text())["cache"]

    cold, cache = run()
    assert cache["items"] == [] and cache["audited"] == [h, a, b], cache
    warm, cache = run()
    assert cache["items"] == [a, b] and cache["audited"] == [h], cache
    assert warm.ret == cold.ret == FAILED
    assert failure_section(warm, f"{url}a.jsonl") == failure_section(cold, f"{url}a.jsonl")
    assert outcome_lines(warm) == outcome_lines(cold)

    s3.put(bucket, "data/b.jsonl", lines(range(6, 11), bad=8))  # same size, new bytes
    changed, cache = run()
    assert cache["items"] == [a] and cache["audited"] == [h, b], cache
    assert f"{url}b.jsonl:3: sample_id=8: count: billed 40, counted 10" in changed.stdout.str()


# -- an object that changes between listing and audit (issue #22, item 3) --------------------

def change_after_listing(bucket: str, changes: dict[str, bytes], gone: tuple[str, ...] = ()) -> str:
    """A conftest.py that rewrites each key of `changes` and deletes each of `gone` after the
    controller listed the bucket (the remote plugin lists in a tryfirst sessionstart), before
    any worker reads it."""
    puts = "".join(
        f"        client.put_object(Bucket={bucket!r}, Key={key!r}, Body=bytes.fromhex({body.hex()!r}))\n"
        for key, body in changes.items())
    deletes = "".join(f"        client.delete_object(Bucket={bucket!r}, Key={key!r})\n" for key in gone)
    return (
        "import boto3, os\n"
        "def pytest_sessionstart(session):\n"
        "    if not hasattr(session.config, 'workerinput'):\n"
        "        client = boto3.client('s3', endpoint_url=os.environ['FSSPEC_S3_ENDPOINT_URL'])\n"
        + puts + deletes
    )


def jsonl(records: list) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def parquet(records: list, tmp_path: Path) -> bytes:
    path = tmp_path / "t.parquet"
    pq.write_table(pa.Table.from_pylist(records), path, row_group_size=4)
    return path.read_bytes()


CHANGES = {
    # name: (file name, before, after, its verdict once audited to the end) as functions of tmp_path
    "grows-by-a-bad-record": ("a.jsonl", lambda t: jsonl([rec(i) for i in range(1, 6)]),
                              lambda t: jsonl([rec(i) for i in range(1, 6)] + [rec(6, billed=30)]), "FAILED"),
    "grows-by-good-records": ("a.jsonl", lambda t: jsonl([rec(i) for i in range(1, 6)]),
                              lambda t: jsonl([rec(i) for i in range(1, 9)]), "PASSED"),
    "shrinks": ("a.jsonl", lambda t: jsonl([rec(i) for i in range(1, 9)]),
                lambda t: jsonl([rec(i) for i in range(1, 3)]), "PASSED"),
    "same-size-new-version": ("a.jsonl", lambda t: jsonl([rec(i) for i in range(1, 6)]),
                              lambda t: jsonl([rec(i) for i in range(5, 10)]), "PASSED"),
    "sharded-grows": ("big.jsonl", lambda t: jsonl([rec(i) for i in range(1, 41)]),
                      lambda t: jsonl([rec(i) for i in range(1, 41)] + [rec(41, billed=30)]), "FAILED"),
    "parquet-grows": ("c.parquet", lambda t: parquet([rec(i) for i in range(1, 9)], t),
                      lambda t: parquet([rec(i) for i in range(1, 9)] + [rec(9, billed=30)], t), "FAILED"),
}


def test_an_object_changed_after_listing_fails_saying_so(one: TokProject, s3: S3, bucket: str, tmp_path: Path):
    """The object is read as it is now, not up to the listed size: it fails saying it
    changed since it was listed, and the run is partial (never a green over bytes the
    audit did not see, never "audited to the end"). Every kind of change in one run, each
    object its own item in a folder of its own (a run per kind cost seconds each), and a
    key deleted after listing: a read finding of its own item, the run partial too."""
    urls, after = {}, {}
    for change, (name, before, later, _) in CHANGES.items():
        key = f"data/{change}/{name}"
        s3.put(bucket, key, before(tmp_path))
        after[key] = later(tmp_path)
        urls[change] = f"s3://{bucket}/{key}"
    s3.put(bucket, "data/other.jsonl", jsonl([rec(100)]))
    s3.put(bucket, "data/gone.jsonl", jsonl([rec(101)]))
    one.write("conftest.py", change_after_listing(bucket, after, gone=("data/gone.jsonl",)))
    one.ini(tokaudit_shard_size=800)
    result = one.run("-rA", paths=(f"s3://{bucket}/data/",))
    assert_clean(result)
    assert result.ret == FAILED, result.stdout.str()
    text = result.stdout.str()
    found = re.findall(r"^_+ tokaudit: (.+?) _+$", text, re.M)
    for change, url in urls.items():
        titles = [t for t in found if t.startswith(url)]
        assert titles, (change, text)
        for title in titles:
            section = failure_sections(result, f"tokaudit: {title}")[0]
            assert "changed after it was listed (" in section[0], (change, section)  # the headline
            assert any(re.match(r"(\S+: )?read: changed after it was listed \(.*\): "
                                r"run the audit again", line) for line in section), (change, section)
    # A sharded object: each shard notices the change, none passes, and its [file] verdict
    # says none was audited to the end.
    sharded = urls["sharded-grows"]
    assert len([t for t in found if t.startswith(f"{sharded} [shard ")]) >= 2, text
    assert not [line for line in result.stdout.lines
                if "PASSED" in line and sharded in line and "shard" in line], text
    result.stdout.fnmatch_lines(["SKIPPED [[]1[]] *sharded-grows/big.jsonl: needs every shard: 0 of *"])
    # The deleted key: its item cannot open it.
    assert failure_section(result, f"s3://{bucket}/data/gone.jsonl")[0].startswith(
        "cannot open: no such file or bucket"), text
    assert f"PASSED s3://{bucket}/data/other.jsonl::tokaudit" in text
    result.stdout.fnmatch_lines([
        f"SKIPPED [[]1[]] pytest.ini: partial run: {len(CHANGES) + 1} data files did not finish*"])
    (partial,) = [line for line in result.stdout.lines if "partial run:" in line and "SKIPPED" in line]
    assert f"s3://{bucket}/data/gone.jsonl" in partial, partial
    # Run again: listed as it is now, audited to the end, judged on its bytes. Beside it, a
    # prefix holding no data file fails coverage, naming it and what is there.
    one.write("conftest.py", "")
    s3.put(bucket, "empty/notes.csv", b"x\n")
    again = one.run("-rA", paths=(f"s3://{bucket}/data/", f"s3://{bucket}/empty/"))
    assert_clean(again)
    assert "changed after it was listed" not in again.stdout.str()
    assert again.ret == FAILED, again.stdout.str()
    assert (f"pytest.ini::tokaudit::coverage: failed: no data file under s3://{bucket}/empty/: "
            "tokaudit_glob (*.jsonl *.jsonl.gz *.jsonl.zst *.parquet *.arrow *.feather) matched nothing there"
            in again.stdout.str()), again.stdout.str()
    assert f"present but not matched by tokaudit_glob: s3://{bucket}/empty/notes.csv" in again.stdout.str()
    for change, url in urls.items():
        verdict = CHANGES[change][3]  # a file or, sharded, its whole
        assert re.search(rf"^{verdict} {re.escape(url)}::tokaudit(\[file\])?( |$)", again.stdout.str(), re.M), \
            (change, again.stdout.str())


# Without xdist: the sharded-grows object of test_an_object_changed_after_listing_fails_saying_so
# (the same change, in the same run). With two workers in the full matrix only, as every -n 2
# variant of this module: the workers read what the controller listed.
@pytest.mark.full
@pytest.mark.parametrize("xdist_mode", [XDIST_MODES["xdist-2"]], ids=["xdist-2"])
def test_a_sharded_object_changed_after_listing_under_xdist(project: TokProject, s3: S3, bucket: str):
    """The workers read what the controller listed: each shard notices the change."""
    name, before, after, _ = CHANGES["sharded-grows"]
    key = f"data/{name}"
    s3.put(bucket, key, before(None))
    project.write("conftest.py", change_after_listing(bucket, {key: after(None)}))
    project.ini(tokaudit_shard_size=800)
    result = project.run("-rA", paths=(f"s3://{bucket}/data/",))
    assert_clean(result)
    assert result.ret == FAILED, result.stdout.str()
    assert "PASSED" not in "".join(l for l in result.stdout.lines if "shard" in l), result.stdout.str()
    assert result.stdout.str().count("changed after it was listed") >= 2
    result.stdout.fnmatch_lines(["SKIPPED [[]1[]] *big.jsonl: needs every shard: 0 of *"])


# -- keys that read like fsspec syntax (issue #22, item 11) ------------------------------------

ODD_KEYS = ["data/a::b.jsonl", "data/c?versionId=1.jsonl", "data/d::e?versionId=x::.jsonl",
            "data/s3::f.jsonl"]


def test_keys_holding_colons_or_a_version_query_are_read_as_listed(project: TokProject, s3: S3, bucket: str):
    """`::` is fsspec's URL chaining and `?versionId=` s3fs's version syntax, but both are
    legal in a key: such objects are opened by their key, audited like any other, cached
    by their ETag, and a sharded one gets its [file] verdict (under xdist, the controller
    rebuilds it from the listing, not from the node id)."""
    for n, key in enumerate(ODD_KEYS):
        s3.put(bucket, key, jsonl([rec(10 * n + i) for i in range(1, 4)]))
    s3.put(bucket, "data/big::g.jsonl", jsonl([rec(100 + i) for i in range(40)]))
    s3.put(bucket, "meta/ids::v2?versionId=7.txt",
           b"".join(b"%d\n" % i for i in [*(10 * n + i for n in range(4) for i in range(1, 4)),
                                           *range(100, 140)]))
    project.ini(tokaudit_shard_size=800, tokaudit_unique_ids="true",
                tokaudit_expected_ids=f"s3://{bucket}/meta/ids::v2?versionId=7.txt")
    url = f"s3://{bucket}/data/"
    for run in ("cold", "warm"):
        result = project.run("-rA", "--tokaudit-json=audit.json", paths=(url,))
        assert_clean(result)
        assert result.ret == OK, result.stdout.str()
        text = result.stdout.str()
        for key in ODD_KEYS:
            assert f"PASSED s3://{bucket}/{key}::tokaudit" in text, text
        assert f"PASSED s3://{bucket}/data/big::g.jsonl::tokaudit[file]" in text, text
        assert "pytest.ini::tokaudit::coverage: passed: 5 data files (52 records)" in text, text
        assert "PASSED pytest.ini::tokaudit::expected_ids" in text, text
        cache = json.loads((project.path / "audit.json").read_text())["cache"]
        if run == "warm":  # each object's ETag was read back: its result reused
            assert cache["audited"] == [], cache


# -- URLs that differ only in their query (issue #31, item 8) ---------------------------------

def test_urls_differing_only_in_their_query_are_two_items(one: TokProject, s3: S3, bucket: str):
    """Two versions of one object, each at its own presigned https URL (`?versionId=`):
    two items, each audited, named apart; neither hides the other, in either order. The
    signature is shown without its value; two URLs that differ only in a credential's value
    cannot be named apart, and are refused. (moto serves a signed URL's object; any
    signature will do.)"""
    s3.client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    s3.put(bucket, "data/a.jsonl", jsonl([rec(i) for i in range(1, 4)]))
    s3.put(bucket, "data/a.jsonl", jsonl([rec(1), rec(2, billed=30), rec(3)]))
    first = jsonl([rec(i) for i in range(1, 4)])
    ids = sorted((s3.client.get_object(Bucket=bucket, Key="data/a.jsonl", VersionId=v)[
        "Body"].read() != first, v) for v in (
        v["VersionId"] for v in s3.client.list_object_versions(Bucket=bucket)["Versions"]))
    good, bad = (f"{s3.endpoint}/{bucket}/data/a.jsonl?versionId={v}" for _, v in ids)
    sign = "&X-Amz-Signature=sekrit0query0value"
    one.ini()
    for order in ((good, bad), (bad, good)):
        result = one.run("-rA", paths=tuple(url + sign for url in order))
        assert_clean(result)
        text = result.stdout.str()
        assert "sekrit0query0value" not in text + result.stderr.str()
        assert result.ret == FAILED, text
        assert f"PASSED {good}&X-Amz-Signature=***::tokaudit" in text, text
        assert f"FAILED {bad}&X-Amz-Signature=***::tokaudit" in text, text
        assert f"{bad}&X-Amz-Signature=***:2: sample_id=2: count: billed 30, counted 10" in text, text
        assert "pytest.ini::tokaudit::coverage: passed: 2 data files (6 records)" in text, text
    # One item by its node id: test_one_file_over_http_a_key_holding_colons_and_one_item_by_node_id.
    result = one.run("-rA", paths=(good + sign, good + "&X-Amz-Signature=other0value"))
    assert_clean(result)
    assert "sekrit0query0value" not in result.stdout.str() + result.stderr.str()
    assert result.ret == USAGE, result.stdout.str()
    assert (f"{good}&X-Amz-Signature=*** names two URLs that differ only in the value of a "
            "credential") in result.stderr.str(), result.stderr.str()
