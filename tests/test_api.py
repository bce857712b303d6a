"""pytest_tokaudit.api: the audit without pytest, and the same verdicts as a pytest run.

The API's contract is validated as the ini file is (the same messages); its summaries and
findings over a corpus of bad input equal those of `pytest --tokaudit` on the same bytes
(its JSON report and its failures file), in every format the plugin reads.
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import http.server
import json
import random
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
import forkrun
from conftest import RUN_TIMEOUT, UNRELATED_PLUGINS, jsonl_bytes, rec
from tokdata import END_THINK, IM_END, qwen_dir

from pytest_tokaudit import api
from pytest_tokaudit.model.contract import Contract as ModelContract
from pytest_tokaudit.model.report import file_entry

ROOT = Path(__file__).resolve().parent.parent


def test_importing_the_api_imports_no_pytest(tmp_path: Path):
    check = ("assert 'pytest' not in sys.modules and '_pytest' not in sys.modules, "
             "sorted(m for m in sys.modules if 'pytest' in m)")
    (tmp_path / "a.jsonl").write_bytes(jsonl_bytes([rec("a", 5), rec("b", 5, 50), "{"]))
    code = "\n".join([
        "import sys, pytest_tokaudit.api, pytest_tokaudit", check,
        # nor does using it: a contract, a stream, a file, the dataset checks
        "from pytest_tokaudit import api",
        "c = api.Contract.from_dict({'tokaudit_unique_ids': True, 'tokaudit_budget': 10})",
        "a = api.audit_file(c, 'a.jsonl')",
        "assert [f.check for f in a.findings] == ['count', 'json', 'count_outliers', 'count_mean']",
        "assert [(f.line, f.check) for f in api.audit_records(c, [{}])] == [(1, 'schema')] * 3",
        "assert [o.outcome for o in api.judge_dataset(c, [a])] == ['failed', 'passed']", check,
    ])
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                            timeout=60, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert result.returncode == 0, result.stderr


def test_the_api_is_exported_from_the_package():
    import pytest_tokaudit

    assert pytest_tokaudit.api is api
    assert {"Contract", "ContractError", "audit_records", "audit_file", "judge_dataset"} <= set(api.__all__)


# -- the contract ------------------------------------------------------------------------------

# key = value in pytest.ini -> the usage error's message after "(pytest.ini): ".
BAD_VALUES = [
    ("tokaudit_count_rel", "2x%", "expected a number like 0.02 or 2%, got '2x%'"),
    ("tokaudit_count_outliers", "lots", "expected a count like 3 or a share like 0.5%, got 'lots'"),
    ("tokaudit_tokenizer", "no_such_dir", "tokenizer directory"),
    ("tokaudit_id_field", "a..b", "expected a field name like usage.completion_tokens, got 'a..b'"),
    ("tokaudit_require_last", "<|im_end|>", "token names ['<|im_end|>'] need a tokenizer"),
]


@pytest.mark.parametrize("key, value, why", BAD_VALUES, ids=[b[0] for b in BAD_VALUES])
def test_a_bad_value_is_the_usage_error_of_the_plugin(pytester: pytest.Pytester, key: str,
                                                      value: str, why: str):
    ini = pytester.path / "pytest.ini"
    ini.write_text(f"[pytest]\n{key} = {value}\n")
    with pytest.raises(api.ContractError) as info:
        api.Contract.from_ini(ini)
    message = str(info.value)
    assert message.startswith(key) and why in message
    result = forkrun.runpytest(pytester, "--tokaudit", *UNRELATED_PLUGINS, timeout=RUN_TIMEOUT)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"ERROR: {message}" in result.stderr.lines
    # The same value from a dict: the same message, naming where it came from.
    with pytest.raises(api.ContractError) as info:
        api.Contract.from_dict({key: value}, base_dir=pytester.path)
    assert str(info.value) == message.replace("(pytest.ini)", "(dict)", 1)


def test_from_dict_names_a_misspelt_key():
    with pytest.raises(api.ContractError, match=r"^tokaudit_count_ab \(dict\): not a key of the "
                                                r"contract; did you mean tokaudit_count_abs\?$"):
        api.Contract.from_dict({"tokaudit_count_ab": 8})


def test_from_dict_takes_toml_values_and_resolves_token_names():
    tok = qwen_dir()
    contract = api.Contract.from_dict({
        "tokaudit_tokenizer": str(tok), "tokaudit_count_abs": 3, "tokaudit_count_rel": 0.05,
        "tokaudit_require_last": ["<|im_end|>"], "tokaudit_require_once": "</think>",
        "tokaudit_unique_ids": True,
    })
    assert (contract.count_abs, contract.count_rel, contract.unique_ids) == (3, 0.05, True)
    assert contract.require_last_ids == (IM_END,) and contract.require_once_ids == (END_THINK,)


@pytest.mark.parametrize("name, text", [
    ("pyproject.toml", '[tool.pytest.ini_options]\ntokaudit_count_abs = "3"\ntokaudit_forbid = "0 1"\n'),
    ("setup.cfg", "[tool:pytest]\ntokaudit_count_abs = 3\ntokaudit_forbid = 0 1\n"),
    ("tox.ini", "[pytest]\ntokaudit_count_abs = 3\ntokaudit_forbid = 0 1\n"),
])
def test_from_ini_reads_each_file_pytest_reads(tmp_path: Path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text)
    contract = api.Contract.from_ini(path)
    assert contract.count_abs == 3 and contract.forbid_ids == (0, 1)
    assert contract.sources["tokaudit_count_abs"] == ("3", name)


def test_from_ini_refuses_a_file_it_cannot_read(tmp_path: Path):
    path = tmp_path / "pytest.ini"
    path.write_text("[pytest]\ntokaudit_count_abs = 1\ntokaudit_count_abs = 2\n")
    with pytest.raises(api.ContractError, match=r"^cannot read .*pytest.ini: .*duplicate name 'tokaudit_count_abs'"):
        api.Contract.from_ini(path)
    with pytest.raises(api.ContractError, match=r"^cannot read .*nothing.toml: .*No such file"):
        api.Contract.from_ini(tmp_path / "nothing.toml")


def test_a_contract_from_json_checks_structure():
    # The model's from_json leaves token specs unresolved (a report names them); the API's
    # contract never audits with them so: the structure check would pass every record.
    texts = {"tokaudit_require_last": "7"}
    assert ModelContract.from_json(texts).require_last_ids == ()
    assert api.Contract.from_json(texts).require_last_ids == (7,)
    records = [rec("a", 5, last=7), rec("b", 5, last=8)]
    # However an API contract is made, its specs are resolved with it.
    names = ModelContract.__match_args__[:24]  # its 24 positional arguments
    values = [("7",) if n == "require_last" else getattr(ModelContract.from_json({}), n) for n in names]
    assert ModelContract(*values).require_last_ids == ()
    made = api.Contract(*values)
    assert made.require_last_ids == (7,)
    assert dataclasses.replace(made, require_last=("8",)).require_last_ids == (8,)
    assert made.replace(forbid="0 1").forbid_ids == (0, 1)
    for contract in (api.Contract.from_json(texts), ModelContract.from_json(texts)):
        found = [(f.line, f.check) for f in api.audit_records(contract, records)]
        assert found == [(2, "require_last")]


# -- the bad-input corpus: the API and a pytest run agree ---------------------------------------

INI = {
    "tokaudit_count_abs": "2", "tokaudit_count_rel": "0%", "tokaudit_count_outliers": "1",
    "tokaudit_require_once": "3", "tokaudit_require_last": "7", "tokaudit_forbid": "0",
    "tokaudit_max_line_bytes": "400", "tokaudit_budget": "60", "tokaudit_unique_ids": "true",
    "tokaudit_price_per_mtok": "2.5", "tokaudit_max_shown": "1000",
}


def good(sample_id: Any, n: int = 6, billed: int | None = None, **extra: Any) -> dict[str, Any]:
    return rec(sample_id, n, billed, once=[3], last=7, **extra)


def corpus() -> list[bytes]:
    """Lines of every kind of bad input the reader words a finding for, and good ones."""
    lines: list[Any] = [
        good("a"), good("b", billed=9), good("c", billed=7), good("a"),  # off by 3, by 1; a repeat
        rec("d", 6, once=[3], last=8), rec("e", 6, once=[3, 0], last=7), rec("f", 6, last=7),
        {"sample_id": "g", "completion_tokens": 3, "output_ids": [3, 3, 7]},
        '{"sample_id": "h", "completion_tokens": ', "[1, 2]", "null", '"text"',
        {"sample_id": "i"}, {"sample_id": "j", "completion_tokens": "7", "output_ids": [3, 7]},
        {"sample_id": "k", "completion_tokens": 2, "output_ids": [3, "7"]},
        {"sample_id": "l", "completion_tokens": 2, "output_ids": [3, -7]},
        {"sample_id": 2**70, "completion_tokens": 2, "output_ids": [3, 7]},
        {"sample_id": "m", "completion_tokens": 2**70, "output_ids": [3, 7]},
        {"sample_id": "n", "completion_tokens": 2, "output_ids": [3, 2**70]},
        '{"sample_id": "o", "completion_tokens": NaN, "output_ids": [3, 7]}',
        '{"sample_id": "p", "completion_tokens": 1e400, "output_ids": [3, 7]}',
        {"sample_id": ["q"], "completion_tokens": 2, "output_ids": [3, 7]},
        {"sample_id": "r", "completion_tokens": 2, "output_ids": {"a": 1}},
        {"sample_id": "s", "completion_tokens": None, "output_ids": [3, 7]},
        b"\xef\xbb\xbf" + json.dumps(good("t")).encode(), b"\xff\xfe{}", b"  ", b"",
        json.dumps(good("u", n=300)).encode(),  # past tokaudit_max_line_bytes
        '{"sample_id": "v", "sample_id": "w", "completion_tokens": 2, "output_ids": [3, 7]}',
        good("x", billed=0, n=2), good(7, n=2),
    ]
    rng = random.Random(32)
    for i in range(60):  # well-formed records, a few off, and junk bytes between
        lines.append(good(f"r{i}", n=rng.randint(2, 40), billed=None if rng.random() < 0.8 else rng.randint(0, 50)))
        if rng.random() < 0.15:
            lines.append(bytes(rng.randrange(256) for _ in range(rng.randint(1, 12))).replace(b"\n", b" "))
    return [line.rstrip(b"\r") for line in jsonl_bytes(lines).split(b"\n")[:-1]]


def run_pytest(pytester: pytest.Pytester) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The JSON report and the failures file's findings of `pytest --tokaudit data`."""
    (pytester.path / "pytest.ini").write_text("[pytest]\n" + "".join(f"{k} = {v}\n" for k, v in INI.items()))
    result = forkrun.runpytest(pytester, 
        "--tokaudit", "data", "--tokaudit-json=report.json", "--tokaudit-failures=failures.jsonl",
        "-p", "no:xdist", *UNRELATED_PLUGINS, timeout=RUN_TIMEOUT)
    assert result.ret == 1, result.stdout.str() + result.stderr.str()
    report = json.loads((pytester.path / "report.json").read_text())
    failures = [json.loads(line) for line in (pytester.path / "failures.jsonl").read_text().splitlines()]
    return report, failures


def as_found(entry: dict[str, Any]) -> api.AuditFinding:
    return api.AuditFinding(entry["line"], entry["id"], entry["check"], entry["message"],
                            entry["billed"], entry["counted"], entry["allowable"])


def test_the_api_gives_a_pytest_runs_verdicts_on_bad_input(pytester: pytest.Pytester):
    data = corpus()
    (pytester.path / "data").mkdir()
    (pytester.path / "data" / "bad.jsonl").write_bytes(b"\r\n".join(data) + b"\r\n")
    (pytester.path / "data" / "bad.jsonl.gz").write_bytes(gzip.compress(b"\n".join(data), mtime=0))
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    rows = [good(f"pq{i}", n=i % 9 + 2, billed=i % 11) for i in range(40)]
    pq.write_table(pa.Table.from_pylist(rows), pytester.path / "data" / "rows.parquet")
    report, failures = run_pytest(pytester)
    contract = api.Contract.from_ini(pytester.path / "pytest.ini")
    by_path = {entry["path"]: entry for entry in report["files"]}
    assert sorted(by_path) == ["data/bad.jsonl", "data/bad.jsonl.gz", "data/rows.parquet"]
    audits = []
    for path in sorted(by_path):
        # The JSON report carries the figures (merge draws the HTML page from it): asked for.
        audit = api.audit_file(contract, path, figures=True)
        audits.append(audit)
        assert file_entry(audit.summary) == by_path[path], path
        # By default nothing asks for them: the same entry without them.
        plain = file_entry(api.audit_file(contract, path).summary)
        assert plain.pop("plotted") is False and plain.pop("figures") != by_path[path]["figures"]
        assert plain == {k: v for k, v in by_path[path].items() if k != "figures"}, path
        theirs = [as_found(e) for e in failures if e.get("path") == path]
        assert [f for f in audit.findings if f.line is not None] == theirs, path
        assert audit.failed == (by_path[path]["shown"] != [] or by_path[path]["file_findings"] != [])
    # The stream of the same lines (bytes, then str), as the file without its \r: the same.
    whole = audits[1]
    for stream in (data, [line.decode("utf-8", "surrogateescape") for line in data]):
        audit = api.audit_records(contract, stream, name="data/bad.jsonl.gz", figures=True)
        found = list(audit)
        assert file_entry(audit.file_summary) == by_path["data/bad.jsonl.gz"]
        assert found == whole.findings
    dicts = [good(f"d{i}", n=i % 7 + 2, billed=i % 5) for i in range(30)]
    lines = [json.dumps(d) for d in dicts]
    assert (list(api.audit_records(contract, dicts)) == list(api.audit_records(contract, lines)))
    # The dataset checks: the report's outcomes (but coverage, which is the run's).
    outcomes = api.judge_dataset(contract, audits)
    assert [o.to_json() for o in outcomes] == [o for o in report["dataset"] if o["name"] != "coverage"]
    assert {o.name: o.outcome for o in outcomes} == {"budget": "failed", "unique_ids": "failed"}


# Lines of any kind: bytes, text, JSON values, records near the contract, white space.
_values = st.one_of(st.none(), st.booleans(), st.integers(-3, 2**70), st.floats(), st.text(max_size=4),
                    st.lists(st.integers(-1, 2**65), max_size=5), st.lists(st.integers(0, 9), max_size=12))
_records = st.fixed_dictionaries({}, optional={
    "sample_id": st.one_of(st.text(max_size=3), st.integers(), st.none()),
    "completion_tokens": _values, "output_ids": _values,
})
_lines = st.one_of(
    st.binary(max_size=20).map(lambda b: b.replace(b"\n", b"")),
    _records.map(lambda r: json.dumps(r).encode()),
    st.builds(lambda i, n, d: json.dumps(good(f"s{i}", n=n, billed=max(0, n + d))).encode(),
              st.integers(0, 5), st.integers(2, 30), st.integers(-12, 12)),
    st.sampled_from([b"", b" ", b"\t", b"\r", b" \r", b"\x0c{}", b"[]", b"1e400"]),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(_lines, max_size=20), newline=st.sampled_from([b"\n", b"\r\n"]),
       last=st.booleans())
def test_a_stream_of_lines_audits_as_the_file_of_them(tmp_path_factory, lines: list[bytes],
                                                       newline: bytes, last: bool):
    """The stream of a file's lines (each without its \\n, a \\r kept) and the file itself:
    the same summary and findings, whatever the lines hold."""
    data = newline.join(lines) + (newline if last and lines else b"")
    path = tmp_path_factory.mktemp("stream") / "f.jsonl"
    path.write_bytes(data)
    contract = api.Contract.from_dict({**INI, "tokaudit_max_line_bytes": "60"})
    items = data.split(b"\n")
    if data.endswith(b"\n"):
        items.pop()
    stream = api.audit_records(contract, items if data else [], name=str(path))
    found = list(stream)
    whole = api.audit_file(contract, path)
    assert file_entry(stream.file_summary) == file_entry(whole.summary)
    assert found == whole.findings


def test_audit_file_reads_arrow_ipc_and_a_url(tmp_path: Path):
    """An Arrow IPC file audits as the same rows in Parquet; a file at an http URL (read
    through fsspec) as the same file on disk; the path shown is what was given."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.feather as feather
    import pyarrow.parquet as pq

    rows = [good(f"r{i}", n=i % 9 + 2, billed=i % 11) for i in range(40)]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "rows.parquet")
    feather.write_feather(pa.Table.from_pylist(rows), tmp_path / "rows.arrow")
    (tmp_path / "rows.jsonl").write_bytes(jsonl_bytes(rows))
    contract = api.Contract.from_dict(INI)

    def entry(where: Any) -> dict[str, Any]:
        audit = api.audit_file(contract, where)
        assert audit.summary.checked == 40 and audit.failed
        entry = {**file_entry(audit.summary), "path": None}
        for worst in entry["worst_records"]:  # the place names the file it was given
            assert worst.pop("location").startswith(f"{where}:")
        return entry

    assert entry(tmp_path / "rows.arrow") == entry(tmp_path / "rows.parquet")

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(tmp_path)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/rows.jsonl"
        assert api.audit_file(contract, url).summary.path == url
        assert entry(url) == entry(tmp_path / "rows.jsonl")
        with pytest.raises(api.ContractError, match="cannot list"):
            api.audit_file(contract, url.replace("rows", "none"))
    finally:
        server.shutdown()


# -- streaming ------------------------------------------------------------------------------------

def test_a_stream_stops_when_drift_passes_a_limit():
    pulled = []

    def responses() -> Iterator[dict[str, Any]]:
        for i in range(1000):
            pulled.append(i)
            # Billing drifts from the 50th response on: 3 tokens more each time.
            yield rec(f"s{i}", 20, 20 if i < 50 else 23)

    contract = api.Contract.from_dict({"tokaudit_count_abs": 2, "tokaudit_count_rel": 0,
                                       "tokaudit_price_per_mtok": 1})
    audit = api.audit_records(contract, responses())
    assert audit.summary.records == 0
    seen = []
    for finding in audit:
        seen.append(finding)
        if audit.summary.mean_diff > 0.5:
            break
    # The 50 good ones, then each bad one is found as it is read; the mean passes 0.5 at
    # the 61st record (11 * 3 / 61 > 0.5): nothing is read past it.
    assert len(pulled) == 61 and audit.summary.records == 61
    assert [f.line for f in seen] == list(range(51, 62))
    assert seen[0] == api.AuditFinding(51, "s50", "count", "billed 23, counted 20 (+3, +13.0%) > max(2, 0%)",
                                       23, 20, True)
    totals = audit.summary
    assert (totals.checked, totals.billed, totals.counted) == (61, 50 * 20 + 11 * 23, 61 * 20)
    assert totals.spend == pytest.approx(totals.billed / 1e6) and totals.spend_text == "$0.0013"


def test_records_in_memory_are_checked_a_batch_at_a_time_and_a_stream_one_at_a_time():
    """A list (already bought) is read ahead api.AUTO_BATCH records at a time; a generator
    one record at a time; `batch=` overrides either. The findings are the same."""
    records = [rec(f"s{i}", 20, 23 if i % 100 == 7 else 20) for i in range(api.AUTO_BATCH + 600)]
    contract = api.Contract.from_dict({"tokaudit_count_abs": 2, "tokaudit_count_rel": 0})

    def first(audit: api.RecordAudit) -> tuple[int | None, int]:
        finding = next(audit)
        return finding.line, audit.summary.records

    assert first(api.audit_records(contract, records)) == (8, api.AUTO_BATCH)
    assert first(api.audit_records(contract, tuple(records))) == (8, api.AUTO_BATCH)
    # Long records: fewer at a time (about AUTO_BATCH_IDS ids), never fewer than the minimum.
    assert api.auto_batch(contract, [rec("a", 1000)] * 3) == api.AUTO_BATCH_IDS // 1000 == 262
    assert api.auto_batch(contract, [rec("a", 20), rec("b", 1980)]) == 262  # the mean
    assert api.auto_batch(contract, [rec("a", 5000)]) == api.AUTO_BATCH_MIN
    assert api.auto_batch(contract, ["{}", 3]) == api.AUTO_BATCH  # no dict to measure
    long = [rec(f"s{i}", 1000, 1003 if i == 7 else 1000) for i in range(600)]
    assert first(api.audit_records(contract, long)) == (8, 262)
    assert first(api.audit_records(contract, iter(records))) == (8, 8)
    assert first(api.audit_records(contract, records, batch=1)) == (8, 8)
    assert first(api.audit_records(contract, iter(records), batch=100)) == (8, 100)
    found = [list(api.audit_records(contract, r, **kw))
             for r, kw in ((records, {}), (iter(records), {}), (records, {"batch": 7}))]
    assert found[0] == found[1] == found[2] and [f.line for f in found[0][:6]] == [8, 108, 208, 308, 408, 508]


def test_the_end_of_a_stream_runs_the_file_checks():
    contract = api.Contract.from_dict({"tokaudit_count_abs": 0, "tokaudit_count_rel": 0,
                                       "tokaudit_count_mean_abs": 0})
    audit = api.audit_records(contract, [rec("a", 10, 11), rec("b", 10)])
    found = list(audit)
    assert [(f.line, f.check) for f in found] == [(1, "count"), (None, "count_outliers"), (None, "count_mean")]
    assert audit.file_summary.complete and audit.file_summary.failed


def test_the_summary_counts_unreadable_lines_apart():
    """records = audited + skipped + unreadable, as in the pytest run's summary table."""
    contract = api.Contract.from_dict(INI)
    audit = api.audit_records(contract, [json.dumps(good("a")), b"[1, 2]", b"{not json",
                                         b"x" * 500, json.dumps(good("b"))])
    list(audit)
    totals = audit.summary
    assert (totals.records, totals.audited, totals.skipped, totals.unreadable) == (5, 2, 0, 3)
    assert totals.errors == 0


def test_a_plugin_object_runs_with_the_built_in_checks():
    class Provider:
        def pytest_tokaudit_check_record(self, record):
            if record.data.get("provider") == "bad":
                return "a provider we do not buy from"

    contract = api.Contract.from_dict({})
    records = [rec("a", provider="good"), rec("b", provider="bad"), rec("c", 5, 50)]
    found = [(f.line, f.check, f.message) for f in api.audit_records(contract, records, plugins=[Provider()])]
    assert found[:2] == [(2, "custom", "a provider we do not buy from"), (3, "count", found[1][2])]
    off = api.audit_records(contract, records, disable=["tokaudit.count"])
    assert [f.check for f in off] == []


def test_a_conftest_file_judges_the_dataset(tmp_path: Path):
    """A plugin given by path (a conftest.py, say): its batch hook fills a channel, its
    dataset check judges it, as in the docs' example of pytest_tokaudit_check_dataset."""
    conftest = tmp_path / "conftest.py"
    conftest.write_text(
        "from pytest_tokaudit import Outcome\n"
        "def pytest_tokaudit_dataset_checks():\n    return ['providers']\n"
        "def pytest_tokaudit_check_batch(records, summary):\n"
        "    summary.channel('providers').extend({r.data['provider'] for r in records})\n"
        "def pytest_tokaudit_check_dataset(name, dataset):\n"
        "    if name != 'providers':\n        return None\n"
        "    seen = sorted({p for _, values in dataset.channel('providers') for p in values})\n"
        "    return Outcome.failed(f'mixed: {seen}') if len(seen) > 1 else Outcome.passed(f'one: {seen}')\n")
    contract = api.Contract.from_dict({})
    audits = []
    for i, provider in enumerate(("a", "b")):
        audit = api.audit_records(contract, [rec("x", provider=provider)], plugins=[conftest], name=f"f{i}")
        assert list(audit) == []
        audits.append(audit)
    outcomes = api.judge_dataset(contract, audits, plugins=[conftest])
    assert [(o.name, o.outcome, o.message) for o in outcomes] == [("providers", "failed", "mixed: ['a', 'b']")]
    assert api.judge_dataset(contract, audits[:1], plugins=[str(conftest)])[0].outcome == "passed"


def test_judge_dataset_finds_an_id_in_two_files(tmp_path: Path):
    contract = api.Contract.from_dict({"tokaudit_unique_ids": True, "tokaudit_budget": 100})
    for name, ids in (("a.jsonl", ["x", "y"]), ("b.jsonl", ["y", "z"])):
        (tmp_path / name).write_bytes(jsonl_bytes(rec(i, 10) for i in ids))
    audits = [api.audit_file(contract, tmp_path / n) for n in ("a.jsonl", "b.jsonl")]
    outcomes = {o.name: o for o in api.judge_dataset(contract, audits)}
    assert outcomes["budget"].outcome == "passed" and outcomes["budget"].message == "billed 40 of 100 tokens (40.0%)"
    assert outcomes["unique_ids"].outcome == "failed"
    assert outcomes["unique_ids"].lines == [f"sample_id='y': 2 records: {tmp_path}/a.jsonl:2, {tmp_path}/b.jsonl:1"]
    stream = api.audit_records(contract, [rec("w", 10)], name="stream")
    list(stream)
    assert [o.outcome for o in api.judge_dataset(contract, [audits[0], stream])] == ["passed", "passed"]
    with pytest.raises(api.ContractError, match="given twice"):
        api.judge_dataset(contract, [audits[0], audits[0]])



def test_audits_side_by_side_keep_apart():
    """The built-in checks' hooks are built once and shared by every audit without
    plugins (api.check_hook): two audits read in turn find what each finds alone."""
    contract = api.Contract.from_dict({"tokaudit_count_abs": 2, "tokaudit_count_rel": 0,
                                       "tokaudit_count_outliers": "1%"})
    first = [rec(f"a{i}", 20, 23 if i % 3 == 0 else 20) for i in range(300)]
    second = [rec(f"b{i}", 20, 20 if i % 50 else 30) for i in range(300)]
    alone = [[(f.line, f.id, f.check, f.message) for f in api.audit_records(contract, r, batch=16)]
             for r in (first, second)]
    audits = [api.audit_records(contract, iter(r), batch=16) for r in (first, second)]
    together: list[list[Any]] = [[], []]
    while any(a is not None for a in audits):
        for k, audit in enumerate(audits):
            if audit is not None:
                finding = next(audit, None)
                if finding is None:
                    audits[k] = None
                else:
                    together[k].append((finding.line, finding.id, finding.check, finding.message))
    assert together == alone
    assert [f[2] for f in alone[0][-1:]] == ["count_outliers"] and len(alone[1]) == 6 + 1
    assert api.check_hook() is api.check_hook()
    assert api.check_hook(disable=["tokaudit.count"]) is not api.check_hook()
