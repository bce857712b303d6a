"""In-process tests of the reader, the audit pass and FileSummary (no pytest subprocess).

The audit runs with the real built-in checks, registered in a small pluggy PluginManager
with the plugin's hook specs, exactly as pytest would call them.
"""

from __future__ import annotations

import gzip
import json
import tempfile
from pathlib import Path

import pluggy
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pytest_tokaudit import Finding, checks
from pytest_tokaudit.engine.passes import audit
from pytest_tokaudit.engine.plain import check_file
from pytest_tokaudit.sources.lines import lines_before as count_lines_before
from pytest_tokaudit.sources.base import ReadError
from pytest_tokaudit.sources.parse import parse_line
from pytest_tokaudit.model.summary import FileSummary
from conftest import compress, examples, jsonl_bytes, rec
from audits import (
    CONTRACTS,
    SETTINGS,
    Spy,
    _parsed,
    audit_both,
    audited_summary,
    builtin_hook,
    default_contract,
    iter_lines,
    jsonl_files,
    merged_by_controller,
    physical_lines,
    run_audit,
)

@pytest.fixture(scope="module")
def scratch():
    """A directory for hypothesis examples (function-scoped tmp_path does not mix with @given)."""
    with tempfile.TemporaryDirectory() as d:
        yield Path(d)


# -- 1. audit(): never raises, every non-blank line accounted for ------------------------------

def assert_accounted(summary: FileSummary, spy: Spy, data: bytes | None) -> None:
    """Every non-blank line is skipped, checked, or has a json/schema finding; never two."""
    parse_lines = {f.line for f in summary.shown if f.check in ("json", "schema")}
    assert summary.records == summary.skipped + summary.checked + len(parse_lines)
    # an unreadable line (not a JSON object) is no audited record: records add up
    assert summary.audited + summary.unreadable == summary.checked + len(parse_lines)
    assert summary.records == summary.audited + summary.skipped + summary.unreadable
    assert len(spy.lines) == summary.checked
    assert len(set(spy.lines)) == len(spy.lines)
    assert not parse_lines & set(spy.lines)
    # Shown lists are complete with a high max_shown; nothing is lost or double counted.
    assert summary.findings == (
        len(summary.shown) + len(summary.shown_allowable) + len(summary.file_findings)
    )
    assert summary.findings == sum(summary.by_check.values())
    assert summary.allowable == len(summary.shown_allowable)
    for f in summary.shown + summary.shown_allowable:
        assert 1 <= f.line <= summary.lines
    assert summary.lines == summary.blank + summary.records
    if data is not None:
        phys = physical_lines(data)
        assert summary.lines == len(phys)
        blank = {i + 1 for i, raw in enumerate(phys) if not raw.strip(b" \t\r\n")}  # JSON white space only
        assert summary.blank == len(blank)
        found_lines = {f.line for f in summary.shown + summary.shown_allowable}
        assert not found_lines & blank
        assert not set(spy.lines) & blank


@SETTINGS
@given(data=jsonl_files(), which=st.sampled_from(sorted(CONTRACTS)))
@example(data=b"", which="default")
@example(data=b"\xef\xbb\xbf{}\n\xff\xfe\n[1]\n\n", which="default")
@example(data=b'{"sample_id":"a","completion_tokens":1.0,"output_ids":[1]}', which="default")
@example(data=b'{"sample_id":"a","completion_tokens":1,"output_ids":[true]}\r\n', which="no-id")
def test_audit_never_raises_and_accounts_for_every_line(scratch, data, which):
    path = scratch / "x.jsonl"
    path.write_bytes(data)
    spy = Spy()
    summary = run_audit(path, CONTRACTS[which], spy)
    assert summary.read_error is None
    assert_accounted(summary, spy, data)
    if which != "where":
        assert summary.skipped == 0


@SETTINGS
@given(data=st.binary(max_size=400))
def test_audit_of_arbitrary_bytes_never_raises(scratch, data):
    path = scratch / "raw.jsonl"
    path.write_bytes(data)
    spy = Spy()
    summary = run_audit(path, CONTRACTS["default"], spy)
    if summary.read_error:  # only a git-lfs pointer (its first line) stops a plain file
        assert data.split(b"\n")[0].rstrip(b"\r") == b"version https://git-lfs.github.com/spec/v1"
        assert (summary.lines, summary.findings) == (0, 1)
        return
    assert_accounted(summary, spy, data)


@SETTINGS
@given(
    data=jsonl_files(),
    suffix=st.sampled_from([".gz", ".zst"]),
    cut=st.floats(0, 1),
    garbage=st.binary(max_size=20),
)
def test_audit_of_compressed_files_never_raises(scratch, data, suffix, cut, garbage):
    """Whole, truncated and garbage compressed files: findings, never an exception."""
    packed = compress(data, suffix)
    cases = {
        "whole": packed,
        "truncated": packed[: int(len(packed) * cut)],
        "garbage": garbage,
        "trailing": packed + garbage,
    }
    whole_lines = len(physical_lines(data))
    for kind, content in cases.items():
        path = scratch / f"{kind}.jsonl{suffix}"
        path.write_bytes(content)
        spy = Spy()
        summary = run_audit(path, CONTRACTS["default"], spy)
        assert_accounted(summary, spy, data if kind == "whole" else None)
        assert summary.lines <= whole_lines or kind == "garbage", kind
        if kind == "whole":
            assert summary.read_error is None
        if summary.read_error:
            read = [f for f in summary.file_findings if f.check == "read"]
            assert [f.message for f in read] == [summary.read_error]
            assert summary.read_error.endswith(f"(after line {summary.lines})")
        if kind == "truncated" and 0 < len(content) < len(packed):
            # A compressed stream cut short is always noticed.
            assert summary.read_error, (content, data)


def test_truncated_compressed_files_keep_the_lines_before_the_cut(tmp_path):
    """The records decoded before the cut are audited; the cut is one 'read' finding."""
    records = [rec(f"t{i}", 200) for i in range(400)]
    records[1] = rec("t1", 200, billed=1)
    data = jsonl_bytes(records)
    for suffix in (".gz", ".zst"):
        packed = compress(data, suffix)
        path = tmp_path / f"cut.jsonl{suffix}"
        path.write_bytes(packed[: len(packed) // 2])
        summary = run_audit(path, CONTRACTS["default"], Spy())
        assert summary.read_error
        assert 2 <= summary.lines < 400
        assert summary.checked == summary.lines
        assert [(f.line, f.record_id, f.check) for f in summary.shown_allowable] == [(2, "t1", "count")]
        assert "read" in summary.by_check


def test_unreadable_plain_file_is_a_read_finding(tmp_path):
    summary = run_audit(tmp_path / "missing.jsonl", CONTRACTS["default"], Spy())
    assert summary.read_error.startswith("cannot open: ")
    assert [f.check for f in summary.file_findings] == ["read"]


# -- 1b. parse_line: the fast path for the ids array agrees with the plain path ---------------

# Array elements as they may be spelled in a file: mostly valid ids (the fast path's
# business), and everything that is not one (which must fall back to the plain path).
odd_id_texts = st.sampled_from([
    "9223372036854775807", "18446744073709551616", "99999999999999999999",
    "1000000000000000000", "01", "00", "-1", "-0", "1.0", "1e2", "1E2",
    '"4"', "true", "null", "[5]", "{}", " 2", "2 ", "\t3", "\n3", "",
])
id_texts = st.one_of(
    st.integers(0, 200_000).map(str), st.integers(0, 9).map(str), odd_id_texts,
)
separators = st.one_of(st.just(","), st.just(", "), st.sampled_from([" ,", ",  ", ",\t", ",,"]))


valid_id_texts = st.integers(0, 200_000).map(str) | st.integers(0, 9).map(str)


@st.composite
def ids_arrays(draw) -> str:
    if draw(st.booleans()):  # a plain array of ids, as json.dumps writes it
        items = draw(st.lists(valid_id_texts, max_size=8))
        sep = draw(st.sampled_from([",", ", "]))
        if draw(st.booleans()) and items:
            items += [items[-1]] * draw(st.integers(1, 3))
        return "[" + sep.join(items) + "]"
    items = draw(st.lists(id_texts, max_size=8))
    if draw(st.booleans()) and items:
        items += [items[-1]] * draw(st.integers(1, 3))  # runs of one token (",7,7,")
    body = ""
    for i, item in enumerate(items):
        body += (draw(separators) if i else "") + item
    wrap = draw(st.one_of(st.just("[{}]"), st.sampled_from(["[ {} ]", "[{} ]", "[\n{}]"])))
    return wrap.format(body)


@st.composite
def record_lines(draw) -> bytes:
    """A JSON-object-ish line whose ids array takes many spellings, keys in any order."""
    fields = {
        "sample_id": json.dumps(draw(st.one_of(st.text(max_size=3), st.integers(-2, 9)))),
        "completion_tokens": draw(st.one_of(
            st.just("3"), st.sampled_from(["0", "-1", "3.0", '"3"', "null"]))),
        "output_ids": draw(ids_arrays()),
        "provider": '"p"',
    }
    extras = draw(st.lists(st.sampled_from([
        ('"meta"', '{"output_ids": [9, 9]}'),            # the key, nested, before the real one
        ('"note"', '"output_ids"'),                        # the key's text as a value
        ('"note"', '"\\"output_ids\\": [1]"'),          # ... inside a string
        ('"output_ids"', '[8]'),                           # a duplicate key: the last one wins
        ('"output\\u005fids"', '[6, 6]'),                 # the key spelled with an escape
    ]), max_size=draw(st.sampled_from([0, 0, 2]))))
    items = [(json.dumps(k), v) for k, v in fields.items() if draw(st.integers(0, 9))] + extras
    items = draw(st.permutations(items))
    colon = draw(st.sampled_from([": ", ":", " : "]))
    comma = draw(st.sampled_from([", ", ","]))
    return ("{" + comma.join(f"{k}{colon}{v}" for k, v in items) + "}").encode()


@settings(SETTINGS, max_examples=examples(400))
@given(raw=record_lines(), which=st.sampled_from(["default", "where", "no-id"]))
@example(raw=b'{"sample_id": "a", "completion_tokens": 3, "output_ids": [7,7,7]}', which="default")
@example(raw=b'{"output_ids": [1], "output_ids": [2, 3], "sample_id": 1, "completion_tokens": 2}',
         which="default")
def test_fast_path_agrees_with_plain_path(raw, which):
    contract = CONTRACTS[which]
    fast = parse_line(raw, 3, contract)
    plain = parse_line(raw, 3, contract, fast=False)
    assert _parsed(fast) == _parsed(plain)


def test_fast_path_sentinel_text_in_the_data_is_not_mistaken_for_ids():
    """A duplicate ids key holding the fast path's placeholder text: still a schema finding."""
    raw = b'{"sample_id": "a", "completion_tokens": 0, "output_ids": [], "output_ids": "\\u0000tokaudit-ids"}'
    plain = parse_line(raw, 1, CONTRACTS["default"], fast=False)
    assert [f.message for f in plain.findings] == ["output_ids must be a list of token ids, found str"]
    assert _parsed(parse_line(raw, 1, CONTRACTS["default"])) == _parsed(plain)


# -- 2. iter_lines over byte ranges ----------------------------------------------------------

chunks = st.lists(st.sampled_from([b"a", b"bc", b"\n", b"\n", b"\r\n", b"{}", b" "]), max_size=60)


@SETTINGS
@given(parts=chunks, cuts=st.lists(st.integers(0, 200), max_size=8), last_open=st.booleans())
@example(parts=[b"\n", b"\n", b"a"], cuts=[1, 2], last_open=False)
@example(parts=[b"a", b"\n"], cuts=[1], last_open=True)
def test_iter_lines_ranges_partition_the_file(scratch, parts, cuts, last_open):
    data = b"".join(parts)
    path = scratch / "ranges.jsonl"
    path.write_bytes(data)
    whole = list(iter_lines(path))
    assert whole == physical_lines(data)
    assert b"".join(whole) == data
    starts = [sum(map(len, whole[:i])) for i in range(len(whole))]

    points = sorted({c for c in cuts if 0 < c < len(data)})
    bounds = [0, *points, len(data)]
    joined: list[bytes] = []
    for i, (a, b) in enumerate(zip(bounds, bounds[1:])):
        end = None if last_open and i == len(bounds) - 2 else b
        got = list(iter_lines(path, a, end))
        # A line belongs to the range its first byte is in.
        assert got == [line for line, s in zip(whole, starts) if a <= s < b], (a, b)
        if a:
            assert count_lines_before(path, a) == sum(1 for s in starts if s < a)
        joined += got
    assert joined == whole


def test_iter_lines_range_examples(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_bytes(b"aaa\nbbb\nccc")
    assert list(iter_lines(path, 0, 1)) == [b"aaa\n"]
    assert list(iter_lines(path, 1, 5)) == [b"bbb\n"]  # 'aaa' started before 1
    assert list(iter_lines(path, 4, 5)) == [b"bbb\n"]  # starts exactly at 4
    assert list(iter_lines(path, 5, None)) == [b"ccc"]
    assert list(iter_lines(path, 9, 11)) == []
    assert count_lines_before(path, 4) == 1
    assert count_lines_before(path, 5) == 2


def test_iter_lines_missing_file_is_a_read_error(tmp_path):
    with pytest.raises(ReadError, match="cannot open"):
        list(iter_lines(tmp_path / "nope.jsonl"))


# -- 3. FileSummary: JSON round trip, shards merged like a whole file ------------------------

def test_file_summary_json_round_trip(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_bytes(jsonl_bytes([
        rec("a"), "{oops", rec(7, 10, 30), "", rec("b", 5, 50), [1], rec("c", 12, 1),
    ]))
    contract = default_contract(max_shown=1)
    summary = audited_summary(path, contract, shard=(2, 5))
    check_file(path, contract, builtin_hook(), summary)
    summary.add_roundtrip(0.25)
    summary.add_roundtrip(0.0)
    assert summary.worst and summary.shown and summary.shown_allowable and summary.file_findings

    text = summary.to_json()
    back = FileSummary.from_json(text)
    assert back == summary
    assert back.to_json() == text
    assert back.worst_records() == summary.worst_records() == [
        (45, 5, "b", 50, 5), (20, 3, 7, 30, 10), (11, 7, "c", 1, 12),
    ]
    assert isinstance(back.shown[0], Finding)
    # Unknown keys (a newer plugin on a worker) are ignored, bytes are accepted.
    data = json.loads(text)
    data["from_the_future"] = 1
    assert FileSummary.from_json(json.dumps(data).encode()) == summary


@SETTINGS
@given(data=jsonl_files(max_lines=40))
def test_file_summary_json_round_trip_any_file(scratch, data):
    path = scratch / "rt.jsonl"
    path.write_bytes(data)
    summary = audited_summary(path, default_contract(max_shown=3))
    assert FileSummary.from_json(summary.to_json()) == summary


COMPARED = (
    "lines", "blank", "records", "audited", "skipped", "checked", "billed", "counted",
    "absdiff", "max_absdiff", "findings", "allowable", "bad_records", "outlier_records",
    "by_check", "shown", "shown_allowable", "file_findings", "read_error",
)


@SETTINGS
@given(
    data=jsonl_files(max_lines=40),
    cuts=st.lists(st.integers(1, 4000), max_size=5),
    max_shown=st.integers(0, 6),
)
def test_shards_merge_to_the_whole_file(scratch, data, cuts, max_shown):
    path = scratch / "shards.jsonl"
    path.write_bytes(data)
    contract = default_contract(max_shown=max_shown)
    whole = audited_summary(path, contract)

    points = sorted({c for c in cuts if c < len(data)})
    bounds = [0, *points, len(data)]
    n = len(bounds) - 1
    parts = [
        audited_summary(path, contract, a, b, shard=(i, n))
        for i, (a, b) in enumerate(zip(bounds, bounds[1:]))
    ]
    merged = merged_by_controller(parts, contract)
    for name in COMPARED:
        assert getattr(merged, name) == getattr(whole, name), name
    assert merged.worst_records() == whole.worst_records()
    assert (merged.shard, merged.shards) == (None, 1)


def test_merge_adds_counts_and_keeps_the_first_findings():
    a = FileSummary(path="p", max_shown=2)
    b = FileSummary(path="p", max_shown=2)
    for line, (billed, counted) in enumerate([(10, 10), (10, 14), (5, 9)], 1):
        a.add_counts(line, f"a{line}", billed, counted)
    for line, (billed, counted) in enumerate([(10, 30), (8, 8)], 4):
        b.add_counts(line, f"b{line}", billed, counted)
    a.add_record_findings([Finding("schema", "x", 1), Finding("count", "y", 2, allowable=True)])
    b.add_record_findings([Finding("json", "z", 4), Finding("json", "w", 5), Finding("json", "v", 6)])
    a.lines, b.lines = 3, 3
    a.merge(b)
    assert (a.checked, a.billed, a.counted, a.absdiff, a.max_absdiff) == (5, 43, 71, 28, 20)
    assert a.by_check == {"schema": 1, "count": 1, "json": 3}
    assert [f.line for f in a.shown] == [1, 4]  # max_shown = 2, first lines first
    assert [f.line for f in a.shown_allowable] == [2]
    assert (a.findings, a.allowable, a.bad_records, a.outlier_records) == (5, 1, 4, 1)
    assert a.worst_records() == [
        (20, 4, "b4", 10, 30), (4, 2, "a2", 10, 14), (4, 3, "a3", 5, 9),
    ]
    assert a.lines == 6


def test_as_gzip_helper_is_readable(tmp_path):
    """Sanity check of the suite's own compress helper against the reader."""
    data = jsonl_bytes([rec("a"), rec("b")])
    path = tmp_path / "x.jsonl.gz"
    path.write_bytes(compress(data, path.name))
    assert gzip.decompress(path.read_bytes()) == data
    assert b"".join(iter_lines(path)) == data


# -- fast path vs plain path, whole files ------------------------------------------------------

@SETTINGS
@given(data=jsonl_files(), which=st.sampled_from(sorted(CONTRACTS)))
def test_whole_files_audit_the_same_on_both_paths(scratch, data, which):
    path = scratch / "both.jsonl"
    path.write_bytes(data)
    with pytest.MonkeyPatch.context() as mp:
        fast, plain = audit_both(path, CONTRACTS[which], mp)
    assert fast == plain


def test_example_project_audits_the_same_on_both_paths(monkeypatch):
    """The demo's data, with one fault of every kind, gives identical summaries."""
    data = Path(__file__).parent.parent / "example_project" / "data"
    contract = CONTRACTS["structure"].replace(
        require_once=("151668",), require_last=("151645",), forbid=("151667",), where=("provider",)
    )
    files = sorted(data.rglob("*.jsonl*"))
    assert len(files) >= 4
    for path in files:
        fast, plain = audit_both(path, contract, monkeypatch)
        assert fast == plain, path


def test_a_billed_sum_past_64_bits_travels_exactly():
    """Two counts of 2**64-1 are valid; their sum must not lose the file's summary."""
    summary = FileSummary(path="data/a.jsonl")
    for line in (1, 2):
        summary.add_counts(line, line, 2**64 - 1, 1)
    back = FileSummary.from_json(summary.to_json())
    assert back.billed == 2 * (2**64 - 1) and type(back.billed) is int
    assert back == summary
