"""The columnar JSONL path (columnar.py) must give exactly what the per-line path gives.

Every test audits the same bytes twice, TOKAUDIT_COLUMNAR=0 (the per-line path, the
reference) and =1 (columnar wherever it is valid), and compares the FileSummary as JSON
(counts, sums, worst records, ids and their lines, every finding shown) and the failure
text. Chunks are made tiny so a file of a few lines is many chunks. A test also checks that
the columnar path really ran: a clean record must never reach the per-line path.
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

pytest.importorskip("simdjson")
pytest.importorskip("numpy")

from pytest_tokaudit.engine import plain as audit_module  # noqa: E402
from pytest_tokaudit.base.fields import parse_template  # noqa: E402
from pytest_tokaudit.engine import columnar  # noqa: E402
from pytest_tokaudit.engine.passes import audit  # noqa: E402
from pytest_tokaudit.engine.plain import check_file  # noqa: E402
from pytest_tokaudit.sources.base import Part  # noqa: E402
from pytest_tokaudit.engine.failure import failure_text  # noqa: E402
from pytest_tokaudit.model.summary import FileSummary  # noqa: E402

import forkrun  # noqa: E402
from conftest import assert_no_crash, compress, examples, failure_sections, jsonl_bytes, rec  # noqa: E402
from audits import builtin_hook, default_contract, jsonl_files  # noqa: E402
from corpus import BAD_LINES  # noqa: E402

SETTINGS = settings(
    max_examples=examples(200),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.function_scoped_fixture],
)

# The request file of the "joined" contract: a sample_id each of some ids the records draw.
REQUESTS = Path(tempfile.mkdtemp(prefix="tokaudit-requests-")) / "requests.jsonl"
REQUESTS.write_text("".join(json.dumps({"sample_id": v, "body": {}}) + "\n"
                            for v in ["", "a", "b", "ab", 0, 1, 2, 3]))
atexit.register(shutil.rmtree, REQUESTS.parent, True)

CONTRACTS = {
    "default": default_contract(max_shown=10**6, unique_ids=True),
    "where": default_contract(max_shown=10**6, where=("provider",), unique_ids=True),
    "structure": default_contract(
        max_shown=10**6, require_once=("3",), require_last=("7", "8"), forbid=("0",),
        where=("provider",), unique_ids=True, count_rel=0.1,
    ),
    "no-id": default_contract(max_shown=10**6, id_field=()),
    "short-lines": default_contract(max_shown=10**6, max_line_bytes=60),
    "capped": default_contract(max_shown=3, unique_ids=True),
    # Joined to requests by sample_id: error lines (`error`, `response.status_code`) apart.
    "joined": default_contract(max_shown=10**6, requests=str(REQUESTS), join_field=("sample_id",),
                               unique_ids=True),
}


def audited(path: Path, contract: Any, mode: str, start: int = 0, end: int | None = None,
            hook: Any = None) -> tuple[str, str]:
    """(summary JSON, failure text) of one part, through the path `mode` selects."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(columnar.ENV, mode)
        summary = FileSummary(path="data/x.jsonl", max_shown=contract.max_shown)
        hook = hook or builtin_hook()
        audit(path, contract, hook, summary, Part((start, end)))
        if not start and end is None:
            check_file(path, contract, hook, summary)
    return summary.to_json(), failure_text(summary, contract)


def assert_same(path: Path, contract: Any, start: int = 0, end: int | None = None,
                hook: Any = None) -> None:
    plain = audited(path, contract, "0", start, end, hook)
    fast = audited(path, contract, "1", start, end, hook)
    assert json.loads(fast[0]) == json.loads(plain[0])
    assert fast == plain


@pytest.fixture
def tiny_chunks(monkeypatch):
    """Chunks of 64 bytes: a file of a few records is many chunks, a record may span several."""
    monkeypatch.setattr(columnar, "CHUNK", 64)


# -- strategies: records as the columnar path sees them ------------------------------------------

TOKENS = (0, 3, 7, 8)
ids_elements = st.one_of(
    st.sampled_from(TOKENS), st.integers(0, 200_000), st.integers(-3, 3),
    st.sampled_from([2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1]),
    st.floats(allow_nan=False, allow_infinity=False), st.booleans(), st.none(),
    st.text(max_size=2), st.lists(st.integers(0, 9), max_size=2),
)
scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 2**65), st.floats(allow_nan=False),
                    st.text(max_size=4))


@st.composite
def records(draw) -> bytes:
    """One line: mostly a well-formed record, with what simdjson and orjson might read apart."""
    n = draw(st.integers(0, 12))
    ids: list[Any] = draw(st.lists(st.sampled_from([1, 2, 5, 9, 1000, 151668]), min_size=n, max_size=n))
    if draw(st.integers(0, 3)):  # the structure contract's tokens, mostly right
        ids = [3] + ids + [draw(st.sampled_from([7, 8, 7, 9]))]
        if not draw(st.integers(0, 4)):  # a token out of place: 0 is forbidden, 3 once
            ids.insert(draw(st.integers(0, len(ids))), draw(st.sampled_from([0, 3, 7])))
    if draw(st.integers(0, 4)) == 0:
        ids.insert(draw(st.integers(0, len(ids))), draw(ids_elements))
    billed: Any = len(ids) + draw(st.sampled_from([0, 0, 0, 1, -1, 9, -9, 40]))
    if draw(st.integers(0, 6)) == 0:
        billed = draw(scalars)
    record: dict[str, Any] = {
        "sample_id": draw(st.one_of(st.text(max_size=3), st.integers(-2, 2**64), scalars)),
        "completion_tokens": billed,
        "output_ids": ids,
    }
    provider = draw(st.one_of(st.just("p"), st.sampled_from(
        ["p", "", None, "missing", True, False, 0, 1, 0.0, [], [1], {}])))
    if provider != "missing":
        record["provider"] = provider
    for key in draw(st.lists(st.sampled_from(["sample_id", "completion_tokens", "output_ids",
                                              "provider"]), max_size=1)):
        if draw(st.booleans()):
            record.pop(key, None)
    if not draw(st.integers(0, 3)):  # an API's answer: an error line with tokaudit_requests
        record["error"] = draw(st.sampled_from([None, None, {"message": "expired"}, False, "e"]))
        record["response"] = draw(st.sampled_from([{"status_code": 200}, {"status_code": 500},
                                                   {"status_code": "200"}, [200], None]))
    record.update(draw(st.dictionaries(st.sampled_from(["text", "meta", "x"]),
                                       st.one_of(scalars, st.lists(scalars, max_size=3)),
                                       max_size=2)))
    sep = draw(st.sampled_from([(",", ":"), (", ", ": ")]))
    try:
        line = json.dumps(record, separators=sep, ensure_ascii=draw(st.booleans())).encode()
    except ValueError:
        line = b"{}"
    tweak = draw(st.integers(0, 14))
    if tweak == 0:  # a contract key given twice: orjson keeps the last
        key = draw(st.sampled_from([b'"output_ids"', b'"completion_tokens"', b'"sample_id"',
                                    b'"provider"', b'"error"']))
        value = draw(st.sampled_from([b"[1,2]", b"5", b'"z"', b"null", b"[3,7]"]))
        line = line[:1] + key + b":" + value + b"," + line[1:] if len(line) > 2 else line
    elif tweak == 1:  # a key spelled with an escape
        line = line.replace(b'"output_ids"', b'"output\\u005fids"', 1)
    elif tweak == 2:  # what one parser might take and the other refuse
        junk = draw(st.sampled_from([b"NaN", b"Infinity", b"1e400", b"123456789012345678901234567890",
                                     b'"\\ud800"', b'"\xff"', b'"\xed\xa0\x80"', b"[1,]", b"01",
                                     b"-", b"tru", b'"a\tb"', b"[" * 1030 + b"]" * 1030,
                                     b"[" * 1000 + b"]" * 1000, b'"\\u0000"', b"-0", b"1E2"]))
        line = line[:-1] + b',"junk":' + junk + b"}" if len(line) > 2 else line
    elif tweak == 3:  # around the object: BOM, white space, CR, trailing bytes
        line = draw(st.sampled_from([b"\xef\xbb\xbf", b" ", b"\t", b""])) + line + draw(
            st.sampled_from([b" ", b"\r", b"x", b" {}", b""]))
    elif tweak == 4:  # cut short
        line = line[: draw(st.integers(0, max(0, len(line) - 1)))]
    elif tweak == 5:  # ids nested or with white space
        line = line.replace(b'"output_ids":[', draw(st.sampled_from(
            [b'"output_ids":[[1],', b'"output_ids":[ ', b'"output_ids": [1,[2],'])), 1)
    return line


@st.composite
def files(draw) -> bytes:
    body = b""
    for line in draw(st.lists(st.one_of(records(), records(), st.sampled_from([b"", b"  ", b"\r"])),
                              max_size=30)):
        body += line + draw(st.sampled_from([b"\n", b"\n", b"\n", b"\r\n"]))
    if body and draw(st.booleans()):
        body = body[:-1]  # no newline after the last line
    return body


# -- 1. identical results --------------------------------------------------------------------

@SETTINGS
@given(data=files(), which=st.sampled_from(sorted(CONTRACTS)), chunk=st.sampled_from([16, 64, 1 << 20]),
       blanks_at_once=st.sampled_from([0, 64]))
@example(data=b'{"sample_id":"a","completion_tokens":1,"output_ids":[1],"output_ids":[2,3]}\n',
         which="default", chunk=64, blanks_at_once=64)
@example(data=b'{"sample_id":"a","completion_tokens":2,"output_ids":[1,[2]]}\n', which="default",
         chunk=64, blanks_at_once=64)
@example(data=b'\n \r\n{"sample_id":"a","completion_tokens":1,"output_ids":[1]}\n\t\n[1]\n  x\n\r',
         which="default", chunk=1 << 20, blanks_at_once=0)
@example(data=b'{"sample_id":"a","completion_tokens":1,"output_ids":[1],"error":{"message":"x"}}\n'
              b'{"sample_id":"b","completion_tokens":1,"output_ids":[1],"response":{"status_code":500}}\n'
              b'{"sample_id":1,"completion_tokens":1,"output_ids":[1],"error":null}\n',
         which="joined", chunk=1 << 20, blanks_at_once=0)
def test_random_files_audit_the_same_on_both_paths(tmp_path, monkeypatch, data, which, chunk,
                                                   blanks_at_once):
    monkeypatch.setattr(columnar, "CHUNK", chunk)
    # 0: a chunk's blank lines are always counted at once (columnar._Columns.apart)
    monkeypatch.setattr(columnar, "BLANKS_AT_ONCE", blanks_at_once)
    path = tmp_path / "x.jsonl"
    path.write_bytes(data)
    assert_same(path, CONTRACTS[which])


@SETTINGS
@given(data=files(), chunk=st.sampled_from([16, 64, 1 << 20]))
def test_random_answers_joined_to_requests_audit_the_same(tmp_path, monkeypatch, data, chunk):
    """The joined contract alone: a clean record that is an error line is rare among random
    lines (about one file in sixteen), so the contracts' draw above seldom meets one."""
    monkeypatch.setattr(columnar, "CHUNK", chunk)
    path = tmp_path / "x.jsonl"
    path.write_bytes(data)
    assert_same(path, CONTRACTS["joined"])


well_formed = st.builds(
    lambda i, ids, delta, provider: json.dumps(
        {"sample_id": f"w{i}", "completion_tokens": max(0, len(ids) + delta), "output_ids": ids,
         "provider": provider}).encode(),
    st.integers(0, 99),
    st.lists(st.sampled_from([0, 3, 7, 8, 1, 2, 1000, -1]), max_size=14),
    st.sampled_from([0, 0, 1, -1, 8, 9, -9, 30]),
    st.sampled_from(["p", "p", "p", ""]),
)


@SETTINGS
@given(lines=st.lists(well_formed, max_size=40), which=st.sampled_from(["structure", "default", "where"]))
def test_well_formed_records_audit_the_same(tmp_path, tiny_chunks, lines, which):
    """Records the columnar path folds itself: its vectorised checks against the hooks'."""
    path = tmp_path / "x.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    assert_same(path, CONTRACTS[which])


@SETTINGS
@given(data=jsonl_files(max_lines=30), which=st.sampled_from(sorted(CONTRACTS)))
def test_the_readers_hostile_files_audit_the_same(tmp_path, tiny_chunks, data, which):
    """test_reader.py's strategy: arbitrary bytes, JSON of every shape, BOMs, CRLF."""
    path = tmp_path / "x.jsonl"
    path.write_bytes(data)
    assert_same(path, CONTRACTS[which])


# Each built-in finding on a record that is otherwise clean, between clean records.
FINDINGS = [
    rec("c1", 10, once=[3], last=7, provider="p"),
    rec("count-over", 10, billed=30, once=[3], last=7, provider="p"),
    rec("count-under", 30, billed=10, once=[3], last=7, provider="p"),
    rec("once-missing", 10, last=7, provider="p"),
    rec("once-twice", 10, once=[3, 3], last=7, provider="p"),
    rec("last-wrong", 10, once=[3], last=9, provider="p"),
    rec("forbidden", 10, once=[3, 0], last=7, provider="p"),
    {"sample_id": "empty", "completion_tokens": 0, "output_ids": [], "provider": "p"},
    {"sample_id": "negative", "completion_tokens": 3, "output_ids": [3, -1, 7], "provider": "p"},
    {"sample_id": "nested", "completion_tokens": 3, "output_ids": [3, [1], 7], "provider": "p"},
    {"sample_id": None, "completion_tokens": 3, "output_ids": [3, 1, 7], "provider": "p"},
    rec("c2", 10, billed=11, once=[3], last=8, provider="p"),
    rec("skipped", 10, billed=99, provider=""),
]


@pytest.mark.parametrize("which", ["structure", "default"])
def test_every_builtin_finding_is_kept(tmp_path, tiny_chunks, which):
    path = tmp_path / "x.jsonl"
    path.write_bytes(jsonl_bytes(FINDINGS))
    assert_same(path, CONTRACTS[which])
    summary = json.loads(audited(path, CONTRACTS[which], "1")[0])
    if which == "structure":
        assert summary["bad_records"] + summary["outlier_records"] == 10  # count: allowable
        assert summary["checked"] == 9


@pytest.mark.parametrize("which", sorted(CONTRACTS))
def test_bad_input_corpus_audits_the_same(tmp_path, tiny_chunks, which):
    path = tmp_path / "x.jsonl"
    path.write_bytes(jsonl_bytes(BAD_LINES))
    assert_same(path, CONTRACTS[which])
    text = audited(path, CONTRACTS[which], "1")[1]
    assert ("over the limit" if which == "short-lines" else "invalid JSON") in text
    # A user's whole-record checks over the same lines, in one chunk (full mode).
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(columnar, "CHUNK", 1 << 20)
        hook = builtin_hook(WholeRecordChecks())
        assert_same(path, CONTRACTS[which], hook=hook)


@SETTINGS
@given(data=files(), cuts=st.lists(st.integers(0, 4000), max_size=4),
       which=st.sampled_from(["where", "structure", "default"]))
def test_shards_audit_the_same(tmp_path, tiny_chunks, data, cuts, which):
    """Byte ranges: a line belongs to the range its first byte is in, on both paths."""
    path = tmp_path / "x.jsonl"
    path.write_bytes(data)
    bounds = sorted({0, len(data), *(c for c in cuts if c < len(data))})
    for start, end in zip(bounds, bounds[1:]):
        assert_same(path, CONTRACTS[which], start, end)


@pytest.mark.parametrize("suffix", [".gz", ".zst"])
def test_compressed_files_audit_the_same(tmp_path, tiny_chunks, suffix):
    lines = [rec(f"r{i}", 10 + i % 5, provider="p") for i in range(60)] + BAD_LINES
    lines[7] = rec("r7", 10, billed=40, provider="p")
    path = tmp_path / f"x.jsonl{suffix}"
    path.write_bytes(compress(jsonl_bytes(lines), suffix))
    for contract in CONTRACTS.values():
        assert_same(path, contract)
    # Truncated: the lines before the cut, then a read finding, on both paths.
    packed = path.read_bytes()
    path.write_bytes(packed[: len(packed) * 2 // 3])
    assert_same(path, CONTRACTS["default"])
    assert "truncated" in audited(path, CONTRACTS["default"], "1")[0]


def test_over_long_lines_are_read_past_on_both_paths(tmp_path, monkeypatch):
    monkeypatch.setattr(columnar, "CHUNK", 32)
    contract = default_contract(max_shown=100, max_line_bytes=100)
    big = rec("big", 60)
    data = jsonl_bytes([rec("a"), big, " " * 500, rec("b", 12), big], final_newline=False)
    path = tmp_path / "x.jsonl"
    path.write_bytes(data)
    assert_same(path, contract)
    assert "over the limit" in audited(path, contract, "1")[1]


# -- 2. the columnar path runs where it may, and only there --------------------------------------

class Counter:
    def __init__(self) -> None:
        self.lines: list[int] = []


@pytest.fixture
def per_line(monkeypatch):
    """The lines that reach the per-line path."""
    seen = Counter()
    take = audit_module.PlainPass.take

    def spy(self, line, body):
        seen.lines.append(line)
        return take(self, line, body)

    monkeypatch.setattr(audit_module.PlainPass, "take", spy)
    return seen


def test_parsed_records_never_reach_the_per_line_path(tmp_path, tiny_chunks, per_line):
    """Count and structure findings come from the columns, not from a second parse."""
    contract = default_contract(max_shown=100, unique_ids=True, require_once=("3",), forbid=("0",),
                                require_last=("7",))
    lines = [rec(f"r{i}", 10, once=[3], last=7) for i in range(40)]
    lines[12] = rec("r12", 10, once=[3], last=9)  # a structure finding
    lines[30] = rec("r30", 10, billed=50, once=[3], last=7)  # a count finding
    path = tmp_path / "x.jsonl"
    path.write_bytes(jsonl_bytes(lines))
    summary, text = audited(path, contract, "1")
    assert per_line.lines == []
    assert summary == audited(path, contract, "0")[0]
    assert "x.jsonl:13: " in text and "x.jsonl:31: " in text
    assert json.loads(summary)["channels"]["ids"][0][1] == [f"r{i}" for i in range(40)]


class UserCheck:
    @pytest.hookimpl
    def pytest_tokaudit_check_record(self, record):
        return None


class WholeRecordChecks:
    """A user's checks that read whole records: a per-record hook (data, ids, last id,
    token counts) and a batch hook without reads() reading data. What they find does not
    depend on where a batch ends (the two paths cut batches differently)."""

    @pytest.hookimpl
    def pytest_tokaudit_check_record(self, record, contract):
        data = record.data
        assert data is record.data  # one object per record, as the per-line path's
        found = []
        if data.get("provider") == "":
            found.append(record.finding("no_provider", f"{record.n_ids} ids, last {record.last_id}"))
        if record.ids[:1] == [0]:
            found.append(record.finding("starts_at_0", f"3 and 7: {record.count_each((3, 7))}"))
        return found

    @pytest.hookimpl
    def pytest_tokaudit_check_batch(self, records, unusable, contract):
        return [r.finding("odd_count", f"billed {r.count}, keys {sorted(r.data)}")
                for r in records if r.count % 7 == 3]


@SETTINGS
@given(data=files(), which=st.sampled_from(sorted(CONTRACTS)), chunk=st.sampled_from([16, 64, 1 << 20]))
@example(data=b'{"sample_id":"a","completion_tokens":3,"output_ids":[0,3],"provider":""}\n'
              b'{"sample_id":"b","completion_tokens":2,"output_ids":[1,3],"provider":"p"}\n',
         which="default", chunk=1 << 20)
def test_a_users_checks_see_the_same_whole_records_on_both_paths(tmp_path, monkeypatch, data,
                                                                  which, chunk):
    monkeypatch.setattr(columnar, "CHUNK", chunk)
    path = tmp_path / "x.jsonl"
    path.write_bytes(data)
    contract = CONTRACTS[which]
    hook = builtin_hook(WholeRecordChecks())
    monkeypatch.setenv(columnar.ENV, "1")
    assert columnar.plan(path, contract, hook).full
    plain = audited(path, contract, "0", hook=hook)
    fast = audited(path, contract, "1", hook=hook)
    assert json.loads(fast[0]) == json.loads(plain[0])
    assert fast == plain


def test_whole_records_take_the_columnar_path(tmp_path, per_line):
    """With a user's per-record check, parsed records are still read from the chunk: only
    the lines the columns cannot hold reach the per-line path."""
    lines: list[Any] = [rec(f"r{i}", 11, provider="p") for i in range(30)]
    lines[5] = rec("r5", 11, provider="")
    lines[9] = '{"sample_id": "r9", "completion_tokens": 2, "output_ids": [1, 2.0], "provider": "p"}'
    path = tmp_path / "x.jsonl"
    path.write_bytes(jsonl_bytes(lines))
    contract = CONTRACTS["default"]
    hook = builtin_hook(WholeRecordChecks())
    summary, text = audited(path, contract, "1", hook=hook)
    assert per_line.lines == [10]
    assert (summary, text) == audited(path, contract, "0", hook=hook)
    assert "x.jsonl:6: sample_id='r5': no_provider: 11 ids, last " in text
    assert "odd_count" not in text


@pytest.mark.parametrize("chunk", [16, 64, 1 << 20])
def test_a_join_of_requests_on_chunks_is_the_per_line_paths(tmp_path, monkeypatch, per_line, chunk):
    """tokaudit_requests on the chunk engine: error lines (`error` set, a status other than
    200, a key given twice) reach the per-line path, every other record stays in the
    columns, and the join's one entry per part is the per-line path's, however the chunks
    and the runs between odd lines cut the batches."""
    monkeypatch.setattr(columnar, "CHUNK", chunk)
    requests = tmp_path / "requests.jsonl"
    requests.write_bytes(jsonl_bytes([{"custom_id": f"r{i}", "body": {}} for i in range(300)]))
    lines: list[Any] = [{"custom_id": f"r{i}", "completion_tokens": 2, "output_ids": [1, 2],
                         "response": {"status_code": 200}, "error": None} for i in range(300)]
    lines[5]["error"] = {"message": "expired"}
    lines[100]["response"] = {"status_code": 500}
    lines[101]["response"] = [500]  # no object: no status, a response
    lines[257]["error"] = "x"
    lines[280] = ('{"custom_id": "r280", "completion_tokens": 2, "output_ids": [1, 2], '
                  '"response": {"status_code": 200, "status_code": 503}}')
    lines[290]["custom_id"] = "nobody"
    path = tmp_path / "x.jsonl"
    path.write_bytes(jsonl_bytes(lines))
    contract = default_contract(max_shown=10**6, id_field=("custom_id",), requests=str(requests))
    fast = audited(path, contract, "1")
    assert per_line.lines == [6, 101, 258, 281]
    plain = audited(path, contract, "0")
    assert json.loads(fast[0]) == json.loads(plain[0])
    assert fast == plain
    summary = json.loads(fast[0])
    assert (summary["errors"], len(summary["channels"]["join"])) == (4, 1)


def test_plan_only_where_the_columnar_path_is_exact(tmp_path, monkeypatch):
    monkeypatch.setenv(columnar.ENV, "1")
    path = tmp_path / "x.jsonl"
    path.write_bytes(b"")
    contract = CONTRACTS["where"]
    assert columnar.plan(path, contract, builtin_hook()) == columnar.Plan(True, True, True)
    # A user's per-record hook sees every record whole (full mode), joined to requests
    # (error lines are the per-line path's) or with a text template too.
    assert columnar.plan(path, contract, builtin_hook(UserCheck())) == columnar.Plan(
        True, True, True, full=True)
    for change in [dict(requests="requests.jsonl"),
                   dict(text_template=parse_template("{text}"), tokenizer="tok")]:
        assert columnar.plan(path, dataclasses.replace(contract, **change),
                             builtin_hook(UserCheck())).full
    # Nested fields, groups, finish reasons, the round trip, unique_text and a text template
    # (its ids encoded a chunk at a time) go columnar too (tests/engine/).
    for change in [dict(id_field=("meta", "id")), dict(group_by=("model",)),
                   dict(finish_reason=("stop",)), dict(roundtrip_rel=0.05, tokenizer="tok"),
                   dict(unique_text=True), dict(text_template=parse_template("{text}"), tokenizer="tok")]:
        assert columnar.plan(path, dataclasses.replace(contract, **change), builtin_hook()) is not None
    monkeypatch.setenv(columnar.ENV, "0")
    assert columnar.plan(path, contract, builtin_hook()) is None
    # Unset: only parts big enough to be worth importing numpy, or, where this process has
    # imported numpy and simdjson already, parts of more than a few dozen records.
    monkeypatch.delenv(columnar.ENV)
    assert columnar.plan(path, contract, builtin_hook()) is None
    path.write_bytes(b" " * columnar.LOADED_MIN_BYTES)
    assert columnar.plan(path, contract, builtin_hook()) is not None
    with monkeypatch.context() as fresh:  # a process that has not imported simdjson yet
        fresh.delitem(sys.modules, "simdjson")
        assert columnar.plan(path, contract, builtin_hook()) is None
    path.write_bytes(b" " * columnar.MIN_BYTES)
    assert columnar.plan(path, contract, builtin_hook()) is not None


def test_a_blocked_builtin_check_is_not_run_by_the_columnar_path(tmp_path, tiny_chunks):
    """-p no:tokaudit.count: the columnar path must not apply the count tolerance either."""
    import pluggy

    from pytest_tokaudit import checks, hookspecs

    pm = pluggy.PluginManager("pytest")
    pm.add_hookspecs(hookspecs)
    for name, check in checks.builtin().items():
        if name != "tokaudit.count":
            pm.register(check(), name)
    contract = CONTRACTS["default"]
    path = tmp_path / "x.jsonl"
    path.write_bytes(jsonl_bytes([rec("a", 10, billed=90), rec("b")]))
    plain = audited(path, contract, "0", hook=pm.hook)
    fast = audited(path, contract, "1", hook=pm.hook)
    assert fast == plain
    assert json.loads(fast[0])["findings"] == 0


# -- 3. end to end: shards, xdist --------------------------------------------------------------

def test_pytest_runs_agree_with_and_without_the_columnar_path(pytester, monkeypatch):
    """A sharded file under -n 2 and in one process: the same failure text, the same JSON."""
    lines: list[Any] = [rec(f"s{i:03d}", 10 + i % 7, provider="p") for i in range(300)]
    lines[4] = '{"sample_id": "s004", "completion_tokens": 10, "output_ids": [1,'
    lines[22] = rec("s022", 10, billed=60, provider="p")
    lines[29] = ""
    lines[57] = {"sample_id": "s057", "output_ids": [1, 2], "provider": "p"}
    lines[150] = rec("s150", 10, provider="")
    lines[222] = '{"sample_id": "s222", "completion_tokens": 2, "output_ids": [1, 2.0], "provider": "p"}'
    pytester.makefile(".ini", pytest="[pytest]\ntokaudit_shard_size = 3000\ntokaudit_where = provider\n"
                                     "tokaudit_unique_ids = true\n")
    (pytester.path / "data").mkdir()
    (pytester.path / "data" / "big.jsonl").write_bytes(jsonl_bytes(lines))
    out = {}
    for mode in ("0", "1"):
        monkeypatch.setenv(columnar.ENV, mode)
        for xdist in (("-n", "2"), ("-p", "no:xdist")):
            written = pytester.path.parent / f"report-{mode}-{xdist[1]}.json"  # outside the root
            result = forkrun.runpytest(pytester, 
                # No cache: each run must audit, or the later ones would only reuse the first.
                "--tokaudit", "data", *xdist, f"--tokaudit-json={written}", "--tokaudit-no-cache")
            assert_no_crash(result)
            assert result.ret == 1
            report = json.loads(written.read_text())
            for key in ("created", "duration", "started", "finished", "environment"):
                report.pop(key, None)
            shards = sorted(line for line in result.stdout.lines if line.startswith("FAILED"))
            whole = failure_sections(result, "tokaudit: data/big.jsonl [whole file]")
            out[mode, xdist] = (whole, shards, report)
    reference = out["0", ("-p", "no:xdist")]
    assert len(reference[0]) == 1 and any("s022" in line for line in reference[0][0])
    assert len(reference[1]) == 4  # three shards and the whole file
    for key, value in out.items():
        assert value[:2] == reference[:2], key
    assert out["1", ("-n", "2")][2] == out["0", ("-n", "2")][2]
    assert out["1", ("-p", "no:xdist")][2] == out["0", ("-p", "no:xdist")][2]
