"""The reader on hostile input: each test pins a case that once went wrong.

1. the fast path read forged or duplicate ids keys differently from orjson;
2. form feed / vertical tab counted as white space;
3. a good zstd frame followed by garbage lost every line;
4. valid JSON numbers past 64 bits / a double failed whole records;
5. an over-long line was held in memory whole;
6. blank lines cost a Python step each;
7. findings embedded whole bad values;
8. the billed count of a record with unusable ids was dropped;
9. a git-lfs pointer gave three invalid-JSON findings.

In-process tests use real files and the real built-in checks (see test_reader.py); the
end-to-end test runs pytest in a subprocess.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pytest_tokaudit.model.contract import Contract
from pytest_tokaudit.sources.jsonl import JSON_WS, Lines
from pytest_tokaudit.model.records import SKIPPED, Record, Rejected
from pytest_tokaudit.sources.parse import parse_line
from pytest_tokaudit.model.summary import FileSummary
from conftest import assert_no_crash, compress, examples, failure_section, jsonl_bytes, rec, summary_rows
from audits import (
    CONTRACTS,
    Spy,
    _parsed,
    audit_both,
    audited_summary,
    iter_lines,
    merged_by_controller,
    physical_lines,
    run_audit,
)
from corpus import BAD_LINES, FORGED, LFS, NEW_BAD_LINES

FUZZ = settings(
    max_examples=examples(300),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
DEFAULT = CONTRACTS["default"]


def messages(result: Any) -> list[str]:
    assert type(result) is Rejected, result
    return [f.message for f in result.findings]


def both(raw: bytes, contract: Contract = DEFAULT) -> Any:
    """parse_line on both paths; they must agree. Returns the fast path's answer."""
    fast = parse_line(raw, 1, contract)
    plain = parse_line(raw, 1, contract, fast=False)
    assert _parsed(fast) == _parsed(plain), raw
    return fast


# -- 1. the fast path reads the object as orjson does -------------------------------------------

@pytest.mark.parametrize("raw", FORGED, ids=range(1, len(FORGED) + 1))
def test_forged_or_duplicate_ids_keys_get_the_plain_paths_verdict(raw):
    assert messages(both(raw)) == ["output_ids must be a list of token ids, found str"]
    assert type(orjson.loads(raw)["output_ids"]) is str  # what orjson reads, the last key


def test_duplicate_ids_key_with_a_list_reads_the_last_list():
    raw = b'{"sample_id":1,"completion_tokens":3,"output_ids":[9,9,9,9],"output_ids":[1,2,3]}'
    record = both(raw)
    assert (record.n_ids, record.ids, record.data["output_ids"]) == (3, [1, 2, 3], [1, 2, 3])


def test_ordinary_lines_keep_the_fast_path():
    """Escapes that cannot spell the key (\\n, \\", \\u00e9, CJK, control characters) do not
    send a line to the plain path; the fast path keeps the ids as bytes."""
    text = 'caf\u00e9 "quoted" \\ back\nslash \u4e2d\u6587 \x1b'
    for dumps in (json.dumps, lambda o: orjson.dumps(o).decode()):
        raw = dumps({"sample_id": 1, "text": text, "completion_tokens": 3,
                     "output_ids": [5, 6, 7], "meta": {"note": "see output_ids"}}).encode()
        record = parse_line(raw, 1, DEFAULT)
        assert record._ids is None, raw  # (until a check asks for the list)
        both(raw)
        assert record.data == orjson.loads(raw)


KEY_CHARS = "output_ids"


@st.composite
def key_spellings(draw) -> str:
    """The ids key as written: plain, with some characters escaped (any hex case), or text
    that contains the key's bytes without being it."""
    kind = draw(st.sampled_from(["plain", "plain", "escaped", "near"]))
    if kind == "plain":
        return '"output_ids"'
    if kind == "escaped":
        out = ""
        for c in KEY_CHARS:
            if draw(st.booleans()):
                hexa = f"{ord(c):04x}"
                out += "\\u" + (hexa.upper() if draw(st.booleans()) else hexa)
            else:
                out += c
        return f'"{out}"'
    return draw(st.sampled_from([
        r'"a\"output_ids"', r'"output_ids\""', '"xoutput_ids"', '"output_idsx"', '"output_ids "',
        r'"\\output_ids"', r'"output_ids\u0000"',
    ]))


sentinels = st.sampled_from([
    r'"\u0000tokaudit-ids"', r'"\u0000tokaudit\u002dids"', r'"\u0000tokaudit\u002Dids"',
    r'"\\u0000tokaudit-ids"', '"tokaudit-ids"', r'"\u0000\u0074okaudit-ids"',
])
id_arrays = st.one_of(
    st.lists(st.integers(0, 200_000), max_size=6).map(lambda v: json.dumps(v, separators=(",", ":"))),
    st.lists(st.integers(0, 9), max_size=6).map(json.dumps),
    st.sampled_from(["[]", "[ ]", "[1,,2]", "[01]", "[1.0]", "[-1]", "[18446744073709551616]",
                     "[1 2]", '["1"]', "[[1]]", "[1,[2]]"]),
)
ws = st.sampled_from(["", "", " ", "\t", "\n", "\r", "\r\n", "  "])
odd_ws = st.sampled_from(["\x0b", "\x0c", "\u00a0", "\x1c"])  # not JSON white space


@st.composite
def values(draw, depth: int = 0) -> str:
    options = ["ids", "ids", "sentinel", "text", "scalar"] + (["object"] if depth < 2 else [])
    kind = draw(st.sampled_from(options))
    if kind == "ids":
        return draw(id_arrays)
    if kind == "sentinel":
        return draw(sentinels)
    if kind == "text":
        return json.dumps(draw(st.sampled_from(
            ["output_ids", '"output_ids": [1]', "\\u0000tokaudit-ids", "\x00tokaudit-ids", "x"])))
    if kind == "scalar":
        return draw(st.sampled_from(["null", "0", "3", "true", "1e400", "-0", "2.5"]))
    items = draw(st.lists(st.tuples(key_spellings(), values(depth + 1)), max_size=3))
    return "{" + ",".join(f"{k}:{v}" for k, v in items) + "}"


@st.composite
def hostile_lines(draw) -> bytes:
    pairs = [('"sample_id"', draw(st.sampled_from(["1", '"s"', "18446744073709551616", "null"]))),
             ('"completion_tokens"', draw(st.sampled_from(["3", "0", "2.0", '"3"', "-1"])))]
    pairs += draw(st.lists(st.tuples(key_spellings(), values()), min_size=1, max_size=4))
    pairs = draw(st.permutations(pairs))
    text = "{"
    for i, (k, v) in enumerate(pairs):
        sep = draw(ws) if draw(st.integers(0, 19)) else draw(odd_ws)
        text += ("," if i else "") + draw(ws) + k + sep + ":" + draw(ws) + v + draw(ws)
    text += "}"
    return text.encode()


@FUZZ
@given(raw=hostile_lines(), which=st.sampled_from(["default", "where", "no-id"]))
@example(raw=FORGED[0], which="default")
@example(raw=FORGED[2], which="default")
@example(raw=b'{"sample_id":1,"completion_tokens":3,"output_ids":[1,2,3]}', which="default")
def test_fast_path_agrees_with_plain_path_and_orjson_on_hostile_keys(raw, which):
    contract = CONTRACTS[which]
    fast = both(raw, contract)
    try:
        whole = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        whole = None
        if exc.msg.startswith("number is infinity"):  # 1e400: valid JSON orjson rejects,
            try:  # which the reader reads with the stdlib (section 4), the last key winning too
                whole = json.loads(raw)
            except ValueError:
                pass
    if type(fast) is Record:
        # orjson's reading of the whole object: the last duplicate key wins.
        assert type(whole) is dict
        assert fast.data == whole
        assert fast.ids == whole["output_ids"]
        assert fast.n_ids == len(whole["output_ids"])
    elif type(whole) is dict and fast is not SKIPPED:
        ids = whole.get("output_ids")
        if not (type(ids) is list and all(type(v) is int and v >= 0 for v in ids)):
            assert any("output_ids" in m for m in messages(fast)), (raw, fast)


# -- 2. only JSON white space is white space ----------------------------------------------------

def test_form_feed_and_vertical_tab_are_invalid_json_not_white_space(tmp_path):
    good = json.dumps(rec("ok")).encode()
    path = tmp_path / "ws.jsonl"
    path.write_bytes(b"\x0c" + good + b"\x0b\n" + b"\x0b\x0c\n" + b" \t\r\n" + good + b" \t\r\n")
    summary = run_audit(path, DEFAULT, Spy())
    assert (summary.lines, summary.blank, summary.records, summary.checked) == (4, 1, 3, 1)
    assert [(f.line, f.check) for f in summary.shown] == [(1, "json"), (2, "json")]
    assert all(f.message.startswith("invalid JSON: ") for f in summary.shown)
    for raw in (b"\x0c" + good, good + b"\x0b", b"\x0b\x0c", b"\x85" + good):
        assert type(both(raw)) is Rejected


# -- Lines: line numbers, blank runs, long lines and byte ranges, against a model --------------

def model(data: bytes, start: int, end: int | None, max_line: int) -> tuple[list, int, int]:
    """(items, lines, blank) the reader must give for the lines starting in [start, end)."""
    items, n, blank, at = [], 0, 0, 0
    for raw in physical_lines(data):
        first, at = at, at + len(raw)
        if first < start or (end is not None and first >= end):
            continue
        n += 1
        content = raw[:-1] if raw.endswith(b"\n") else raw
        if not content.strip(JSON_WS):
            blank += 1
        elif len(content) > max_line:
            items.append((n, len(content)))
        else:
            items.append((n, content.strip(JSON_WS)))
    return items, n, blank


line_parts = st.lists(
    st.sampled_from([b"\n", b"\n", b"\r\n", b" ", b"\t", b"\r", b"\x0b", b"\x0c", b"{}", b"ab",
                     b"x" * 7, b" \n \n\n", b"\n" * 5]),
    max_size=40,
)


@FUZZ
@given(parts=line_parts, cuts=st.lists(st.integers(0, 120), max_size=4), last_open=st.booleans(),
       chunk=st.integers(1, 9), max_line=st.integers(0, 12))
@example(parts=[b"\n", b" ", b"\n", b"ab"], cuts=[1, 2], last_open=False, chunk=1, max_line=5)
@example(parts=[b" ", b"\n" * 5, b"ab"], cuts=[3], last_open=False, chunk=100, max_line=5)
def test_lines_match_the_physical_lines(scratch, parts, cuts, last_open, chunk, max_line):
    data = b"".join(parts)
    path = scratch / "lines.jsonl"
    path.write_bytes(data)
    points = sorted({c for c in cuts if 0 < c < len(data)})
    bounds = [0, *points, len(data)]
    for i, (a, b) in enumerate(zip(bounds, bounds[1:])):
        end = None if last_open and i == len(bounds) - 2 else b
        lines = Lines(path, a, end, max_line=max_line, chunk=chunk)
        got = list(lines)
        assert (got, lines.lines, lines.blank) == model(data, a, b, max_line), (a, end)
        # iter_lines, the simple reference, splits the same range the same way
        assert b"".join(iter_lines(path, a, end)) == b"".join(
            r for r, s in zip(physical_lines(data), _starts(data)) if a <= s < b)


def _starts(data: bytes) -> list[int]:
    out, at = [], 0
    for raw in physical_lines(data):
        out.append(at)
        at += len(raw)
    return out


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return tmp_path_factory.mktemp("reliability")


@pytest.mark.parametrize("suffix", [".gz", ".zst"])
def test_compressed_lines_match_the_physical_lines(tmp_path, suffix):
    data = b"".join([b"\n" * 3000, b" \t\r\n" * 500, b"x" * 5000, b"\n", b"{}\n" * 10, b"  {} "])
    path = tmp_path / f"c.jsonl{suffix}"
    path.write_bytes(compress(data, suffix))
    for chunk in (1, 7, 4096):
        lines = Lines(path, max_line=4000, chunk=chunk)
        assert (list(lines), lines.lines, lines.blank) == model(data, 0, None, 4000)


# -- 3. zstd: a good frame before garbage or a corrupt frame is audited -------------------------

def zst_frame(records: list) -> bytes:
    return compress(jsonl_bytes(records), ".zst")


@pytest.mark.parametrize("tail", ["garbage", "corrupt-frame", "truncated-frame"])
def test_zstd_lines_before_a_bad_frame_are_audited(tmp_path, tail):
    good = zst_frame([rec("z1"), rec("z2", 10, 50), rec("z3")])
    second = zst_frame([rec(f"y{i}") for i in range(50)])
    bad = {
        "garbage": b"this is not zstd data\n" * 20,
        "corrupt-frame": second[:4] + b"\xff" * (len(second) - 4),
        "truncated-frame": second[: len(second) // 2],
    }[tail]
    path = tmp_path / "x.jsonl.zst"
    path.write_bytes(good + bad)
    summary = run_audit(path, DEFAULT, Spy())
    assert summary.checked >= 3 and summary.lines >= 3
    assert [(f.line, f.record_id, f.check) for f in summary.shown_allowable] == [(2, "z2", "count")]
    assert re.fullmatch(r"(corrupt zstd data|truncated compressed file): .+ \(after line \d+\)",
                        summary.read_error)
    assert summary.read_error.endswith(f"(after line {summary.lines})")
    assert [f.message for f in summary.file_findings if f.check == "read"] == [summary.read_error]


def test_zstd_frames_back_to_back_are_one_stream(tmp_path):
    frames = b"".join(zst_frame([rec(f"f{i}{j}") for j in range(3)]) for i in range(4))
    path = tmp_path / "x.jsonl.zst"
    path.write_bytes(frames)
    summary = run_audit(path, DEFAULT, Spy())
    assert (summary.read_error, summary.checked, summary.lines) == (None, 12, 12)


# -- 4. numbers valid in JSON but past orjson's range --------------------------------------------

def test_out_of_range_float_in_an_unrelated_field_is_fine():
    raw = b'{"sample_id":"a","completion_tokens":3,"output_ids":[1,2,3],"logprob":1e400,"x":-1e999}'
    record = both(raw)
    assert type(record) is Record
    assert (record.id, record.count, record.ids) == ("a", 3, [1, 2, 3])
    assert record.data["logprob"] == float("inf") and record.data["x"] == float("-inf")


def test_huge_integer_in_an_unrelated_field_is_fine():
    raw = b'{"sample_id":"a","completion_tokens":3,"output_ids":[1,2,3],"seed":' + b"7" * 5000 + b"}"
    record = both(raw)
    assert type(record) is Record and record.ids == [1, 2, 3]


@pytest.mark.parametrize(("fields", "message"), [
    ('"sample_id":18446744073709551616,"completion_tokens":2,"output_ids":[1,2]',
     "sample_id 18446744073709551616 is out of range (over 2**64-1)"),
    ('"sample_id":-9223372036854775809,"completion_tokens":2,"output_ids":[1,2]',
     "sample_id -9223372036854775809 is out of range (under -2**63)"),
    ('"sample_id":"a","completion_tokens":18446744073709551616,"output_ids":[1,2]',
     "completion_tokens 18446744073709551616 is out of range (over 2**64-1)"),
    ('"sample_id":"a","completion_tokens":-18446744073709551616,"output_ids":[1,2]',
     "completion_tokens must be non-negative, found -18446744073709551616"),
    ('"sample_id":"a","completion_tokens":2,"output_ids":[1,18446744073709551616]',
     "output_ids[1] 18446744073709551616 is out of range (over 2**64-1)"),
    ('"sample_id":"a","completion_tokens":1e400,"output_ids":[1,2]',
     "completion_tokens must be an integer, found inf (float)"),
    ('"sample_id":"a","completion_tokens":2.0,"output_ids":[1,2]',
     "completion_tokens must be an integer, found 2.0 (float)"),
    ('"sample_id":"a","completion_tokens":2,"output_ids":[1,2e400]',
     "output_ids[1] must be an integer token id, found inf (float)"),
])
def test_numbers_past_64_bits_are_named_exactly(fields, message):
    assert messages(both(b"{" + fields.encode() + b"}")) == [message]


def test_highest_in_range_values_are_fine():
    raw = b'{"sample_id":18446744073709551615,"completion_tokens":18446744073709551615,"output_ids":[18446744073709551615]}'
    record = both(raw)
    assert (record.id, record.count, record.ids) == (2**64 - 1, 2**64 - 1, [2**64 - 1])


def test_a_5000_digit_count_is_shown_cut():
    raw = b'{"sample_id":"a","completion_tokens":' + b"9" * 5000 + b',"output_ids":[1]}'
    (message,) = messages(both(raw))
    assert message == f"completion_tokens {'9' * 80}... (5,000 digits) is out of range (over 2**64-1)"


@pytest.mark.parametrize(("raw", "message"), [
    (b'{"a":1e400,"b":NaN}', "invalid JSON: NaN is not a JSON value"),
    (b'{"a":1e400,"b":"\\ud800"}', "invalid JSON: a string holds a lone surrogate (\\ud800-\\udfff)"),
    (b'{"a":1e400,"b":[1,]}', "invalid JSON: Expecting value at column 19"),
    (b'{"a":1e400,"b":"\xff"}', "invalid UTF-8 at byte 17: b'\\xff\"}'"),
])
def test_a_big_number_does_not_make_invalid_json_valid(raw, message):
    assert messages(both(raw)) == [message]


# -- 5. a line over the limit is read past, never held ------------------------------------------

def test_long_line_is_one_finding_and_the_next_line_is_audited(tmp_path):
    contract = DEFAULT.replace(max_line_bytes=1000)
    long = json.dumps(rec("long", 600)).encode()
    assert len(long) > 1000
    for suffix in ("", ".gz", ".zst"):
        path = tmp_path / f"x.jsonl{suffix}"
        path.write_bytes(compress(jsonl_bytes([rec("a"), long, "", long + b"  ", rec("b")]), suffix))
        summary = run_audit(path, contract, Spy())
        assert (summary.lines, summary.blank, summary.checked) == (5, 1, 2), suffix
        assert [(f.line, f.check, f.message) for f in summary.shown] == [
            (2, "line_length",
             f"the line is {len(long):,} bytes, over the limit of 1,000 bytes (tokaudit_max_line_bytes)"),
            (4, "line_length",
             f"the line is {len(long) + 2:,} bytes, over the limit of 1,000 bytes (tokaudit_max_line_bytes)"),
        ]


LONG_LINE_SCRIPT = textwrap.dedent('''
    import dataclasses, json, re, resource, sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[2])
    from audits import CONTRACTS, Spy, run_audit
    from pytest_tokaudit.model.contract import Contract
    contract = CONTRACTS["default"].replace(max_line_bytes=8 << 20)
    run_audit(Path(sys.argv[3]), contract, Spy())  # warm up: every import and cache
    size = int(re.search(r"VmSize:\\s+(\\d+) kB", Path("/proc/self/status").read_text())[1]) * 1024
    # Far less than the line: holding it (or half of it) cannot fit.
    resource.setrlimit(resource.RLIMIT_AS, (size + (80 << 20), resource.RLIM_INFINITY))
    summary = run_audit(Path(sys.argv[1]), contract, Spy())
    print(json.dumps([summary.lines, summary.checked, summary.read_error,
                      [(f.line, f.check, f.message) for f in summary.shown]]))
''')


@pytest.mark.parametrize("suffix", [".gz", ".zst"])
def test_long_line_is_read_in_bounded_memory(tmp_path, suffix):
    """A 200 MB line in a small compressed file, under an address-space limit of the
    interpreter's size + 80 MiB: the old reader held the line and ran out of memory."""
    head = b'{"sample_id":"long","completion_tokens":1,"output_ids":['
    path = tmp_path / f"long.jsonl{suffix}"
    piece = b"1," * (1 << 19)  # 1 MiB
    n_pieces = 200
    if suffix == ".gz":
        with gzip.open(path, "wb", compresslevel=1) as fh:
            fh.write(jsonl_bytes([rec("a")]) + head)
            for _ in range(n_pieces):
                fh.write(piece)
            fh.write(b"1]}\n" + jsonl_bytes([rec("b")]))
    else:
        import zstandard

        with open(path, "wb") as raw, zstandard.ZstdCompressor(level=1).stream_writer(raw) as fh:
            fh.write(jsonl_bytes([rec("a")]) + head)
            for _ in range(n_pieces):
                fh.write(piece)
            fh.write(b"1]}\n" + jsonl_bytes([rec("b")]))
    assert path.stat().st_size < 5 << 20
    warm = tmp_path / "warm.jsonl"
    warm.write_bytes(jsonl_bytes([rec("w")]))
    size = len(head) + n_pieces * len(piece) + 3
    proc = subprocess.run(
        [sys.executable, "-c", LONG_LINE_SCRIPT, str(path), str(Path(__file__).parent), str(warm)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines, checked, read_error, shown = json.loads(proc.stdout)
    assert (lines, checked, read_error) == (3, 2, None)
    assert shown == [[2, "line_length",
                      f"the line is {size:,} bytes, over the limit of 8 MiB (tokaudit_max_line_bytes)"]]


# -- 6. blank lines are counted in bulk ---------------------------------------------------------

def test_a_long_run_of_blank_lines_keeps_exact_line_numbers(tmp_path):
    """32 Mi blank lines (the old reader: ~1 M lines/s, half a minute) between two records."""
    run = b"\n" * (24 << 20) + b"\r\n" * (4 << 20) + b" \t\n" * (4 << 20)
    n_blank = 32 << 20
    path = tmp_path / "blank.jsonl.gz"
    with gzip.open(path, "wb", compresslevel=1) as fh:
        fh.write(jsonl_bytes([rec("first")]))
        fh.write(run)
        fh.write(jsonl_bytes([rec("last", 10, 99)]) + b"\n\n")
    summary = run_audit(path, DEFAULT, Spy())
    assert (summary.lines, summary.blank, summary.records) == (n_blank + 4, n_blank + 2, 2)
    assert [(f.line, f.record_id) for f in summary.shown_allowable] == [(n_blank + 2, "last")]


# -- 7. findings show a preview of a bad value, not the value -----------------------------------

def test_findings_cut_long_values(tmp_path):
    big = "x" * 5_000_000
    path = tmp_path / "big.jsonl"
    path.write_bytes(jsonl_bytes([
        {"sample_id": "a", "completion_tokens": big, "output_ids": [1]},
        {"sample_id": "b", "completion_tokens": 1, "output_ids": [big]},
        {"sample_id": "c", "completion_tokens": [1] * 1_000_000, "output_ids": [1]},
    ]))
    summary = run_audit(path, DEFAULT, Spy())
    shown = [f.message for f in summary.shown]
    assert shown == [
        f"completion_tokens must be an integer, found '{'x' * 79}... (5,000,000 chars) (str)",
        f"output_ids[0] must be an integer token id, found '{'x' * 79}... (5,000,000 chars) (str)",
        f"completion_tokens must be an integer, found {('[' + '1, ' * 30)[:80]}... (3,000,000 chars) (list)",
    ]
    assert len(summary.to_json()) < 5000


# -- 8. spend of records that cannot be checked is kept -----------------------------------------

def test_billed_count_and_id_of_unusable_records_are_kept(tmp_path):
    path = tmp_path / "spend.jsonl"
    path.write_bytes(jsonl_bytes([
        rec("ok", 10),                                                          # 1 checked
        {"sample_id": "nul", "completion_tokens": 100, "output_ids": None},     # 2 unusable ids
        {"sample_id": "el", "completion_tokens": 200, "output_ids": [1, "x"]},  # 3 a bad element
        {"sample_id": 7, "completion_tokens": 300},                             # 4 no ids
        {"sample_id": ["bad"], "completion_tokens": 400, "output_ids": {}},    # 5 no usable id
        {"sample_id": "neg", "completion_tokens": -5, "output_ids": None},      # 6 no valid count
        "{not json",                                                            # 7
        {"sample_id": "big", "completion_tokens": 2**64, "output_ids": [1]},    # 8 out of range
    ]))
    contract = dataclasses.replace(DEFAULT, unique_ids=True)
    summary = run_audit(path, contract, Spy())
    assert (summary.checked, summary.billed) == (1, 10)
    assert (summary.unusable_billed, summary.billed_unusable) == (4, 1000)
    assert summary.billed_total == 1010
    assert summary.channels["ids"] == [[None, ["ok", "nul", "el", 7, "neg", "big"], [1, 2, 3, 4, 6, 8]]]
    back = FileSummary.from_json(summary.to_json())
    assert back == summary and back.billed_total == 1010
    other = FileSummary.from_json(summary.to_json())
    other.merge(back)
    assert (other.unusable_billed, other.billed_unusable, other.billed_total) == (8, 2000, 2020)


def test_parse_line_gives_back_what_it_could_read():
    raw = b'{"sample_id":"s","completion_tokens":5,"output_ids":null}'
    assert both(raw) == Rejected(
        [parse_line(raw, 1, DEFAULT, fast=False).findings[0]], "s", 5)
    assert both(b'{"sample_id":1.5,"completion_tokens":true,"output_ids":[]}').record_id is None
    assert both(b'{"sample_id":1,"completion_tokens":true,"output_ids":[]}').count is None
    assert both(b"[]") == Rejected(both(b"[]").findings, None, None)


def test_shards_add_up_the_spend_of_unusable_records(tmp_path):
    records = [{"sample_id": f"u{i}", "completion_tokens": i, "output_ids": None} for i in range(40)]
    path = tmp_path / "x.jsonl"
    data = jsonl_bytes(records + [rec("ok")])
    path.write_bytes(data)
    whole = audited_summary(path, DEFAULT)
    cuts = [0, len(data) // 3, 2 * len(data) // 3, len(data)]
    parts = [audited_summary(path, DEFAULT, a, b, shard=(i, 3)) for i, (a, b) in enumerate(zip(cuts, cuts[1:]))]
    merged = merged_by_controller(parts, DEFAULT)
    assert (merged.unusable_billed, merged.billed_unusable) == (whole.unusable_billed, whole.billed_unusable) == (40, 780)


# -- 9. a git-lfs pointer is one finding --------------------------------------------------------

POINTER = LFS + b"\noid sha256:" + b"ab" * 32 + b"\nsize 123456789\n"


@pytest.mark.parametrize("name", ["x.jsonl", "x.jsonl.gz", "x.jsonl.zst"])
def test_git_lfs_pointer_is_one_finding(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(POINTER)
    summary = run_audit(path, DEFAULT, Spy())
    assert summary.findings == 1
    assert [(f.check, f.message) for f in summary.file_findings] == [
        ("read", "git-lfs pointer, data not pulled: run git lfs pull")]
    assert (summary.records, summary.shown) == (0, [])


def test_lfs_text_after_the_first_line_is_ordinary_data(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_bytes(jsonl_bytes([rec("a")]) + POINTER)
    summary = run_audit(path, DEFAULT, Spy())
    assert summary.read_error is None and summary.checked == 1
    assert [f.check for f in summary.shown] == ["json"] * 3


# -- the whole bad-input corpus, fast path and plain path ---------------------------------------

@pytest.mark.parametrize("which", ["default", "where", "structure", "no-id"])
def test_bad_input_corpus_audits_the_same_on_both_paths(tmp_path, monkeypatch, which):
    path = tmp_path / "corpus.jsonl"
    path.write_bytes(jsonl_bytes(BAD_LINES + NEW_BAD_LINES))
    fast, plain = audit_both(path, dataclasses.replace(CONTRACTS[which], unique_ids=True), monkeypatch)
    assert fast == plain


# -- end to end: the new findings in a real run -------------------------------------------------

def test_new_findings_end_to_end(project):
    project.ini(tokaudit_max_shown=50, tokaudit_count_mean_rel="")
    project.write("data/lfs.jsonl", POINTER)
    good = zst_frame([rec("z1"), rec("z2")])
    project.write("data/frames.jsonl.zst", good + b"this is not zstd data\n")
    project.jsonl("data/odd.jsonl", [
        rec("o1"),
        b"\x0c" + json.dumps(rec("o2")).encode(),
        b'{"sample_id":"o3","completion_tokens":3,"output_ids":[1,2,3],"logprob":1e400}',
        b'{"sample_id":"o4","completion_tokens":18446744073709551616,"output_ids":[1]}',
        {"sample_id": "o5", "completion_tokens": "y" * 1_000_000, "output_ids": [1]},
        FORGED[0],
    ])
    result = project.run()
    assert_no_crash(result)
    assert len(result.stdout.str()) < 20_000
    assert failure_section(result, "data/lfs.jsonl") == [
        "git-lfs pointer, data not pulled: run git lfs pull",
        "data/lfs.jsonl: read: git-lfs pointer, data not pulled: run git lfs pull",
    ]
    frames = failure_section(result, "data/frames.jsonl.zst")
    assert re.fullmatch(r"corrupt zstd data: .+ \(after line 2\)", frames[0])
    assert failure_section(result, "data/odd.jsonl") == [
        "3 of 5 audited records break the contract; 1 unreadable line",
        "data/odd.jsonl:2: json: invalid JSON: unexpected character, expected a JSON value at column 1",
        "data/odd.jsonl:4: sample_id='o4': schema: completion_tokens 18446744073709551616 is out of range (over 2**64-1)",
        f"data/odd.jsonl:5: sample_id='o5': schema: completion_tokens must be an integer, found "
        f"'{'y' * 79}... (1,000,000 chars) (str)",
        "data/odd.jsonl:6: sample_id=1: schema: output_ids must be a list of token ids, found str",
    ]
    rows = summary_rows(result)
    assert rows["data/odd.jsonl"][:3] == ["6", "5", "0"]  # records, audited, skipped: line 2 is unreadable
    assert rows["data/frames.jsonl.zst"][:3] == ["2", "2", "0"]


def test_the_line_limit_is_an_ini_key(pytester: pytest.Pytester):
    pytester.makeini("[pytest]\ntokaudit_max_line_bytes = 1000\n")
    long = json.dumps(rec("long", 600))
    pytester.path.joinpath("data").mkdir()
    pytester.path.joinpath("data/x.jsonl").write_text(json.dumps(rec("a")) + "\n" + long + "\n")
    result = pytester.runpytest("--tokaudit", "data", "-p", "no:xdist")
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines([f"data/x.jsonl:2: line_length: the line is {len(long):,} bytes, "
                                 "over the limit of 1,000 bytes (tokaudit_max_line_bytes)"])
    bad = pytester.runpytest("--tokaudit", "data", "-p", "no:xdist", "-o", "tokaudit_max_line_bytes=0")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["ERROR: tokaudit_max_line_bytes (-o): 0 is out of range: at least 1"])


@pytest.mark.parametrize("suffix", ["", ".zst"])
def test_a_long_line_in_a_later_shard_is_named_by_the_file_line_alone(pytester: pytest.Pytester,
                                                                      suffix: str):
    """The finding's message names no line of its own: in a shard it would be the shard's
    (`line 3`), under the file's line in the location; the failures file repeats it."""
    if suffix:
        pytest.importorskip("zstandard")
    pytester.makeini("[pytest]\ntokaudit_max_line_bytes = 1000\ntokaudit_shard_size = 2000\n")
    rows: list = [rec(f"r{i}") for i in range(1, 41)]
    long = json.dumps(rec("long", 600))
    rows[30] = long  # line 31, in a later shard
    data = pytester.path / "data"
    data.mkdir()
    if suffix:
        import zstandard

        frames = [jsonl_bytes(rows[i:i + 5]) for i in range(0, len(rows), 5)]
        blob = b"".join(zstandard.ZstdCompressor().compress(f) for f in frames)
    else:
        blob = jsonl_bytes(rows)
    (data / f"x.jsonl{suffix}").write_bytes(blob)
    result = pytester.runpytest("--tokaudit", "data", "-p", "no:xdist", "-rA",
                                "--tokaudit-failures=failures.jsonl")
    assert "shard" in result.stdout.str(), result.stdout.str()
    name = f"data/x.jsonl{suffix}"
    result.stdout.fnmatch_lines([f"{name}:31: line_length: the line is {len(long):,} bytes, "
                                 "over the limit of 1,000 bytes (tokaudit_max_line_bytes)"])
    found = [json.loads(line) for line in pytester.path.joinpath("failures.jsonl").read_text().splitlines()]
    assert [(f["line"], f["message"]) for f in found if f["check"] == "line_length"] == [
        (31, f"the line is {len(long):,} bytes, over the limit of 1,000 bytes (tokaudit_max_line_bytes)")]
    assert not re.search(r"line \d+ is", result.stdout.str())
