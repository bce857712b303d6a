"""Behaviour of `pytest --tokaudit`, end to end, in a pytest subprocess.

Every test here runs twice (fixture `xdist_mode`: without xdist, and with `-n 2`) and
asserts the same outcome and the same lines in both modes.
"""

from __future__ import annotations

import bisect
import json
import os
import re
import stat
import xml.etree.ElementTree as ET

import pytest

from conftest import (
    assert_no_crash,
    compress,
    failure_section,
    failure_sections,
    jsonl_bytes,
    rec,
    summary_rows,
    summary_section,
)
from corpus import BAD_LINES, SHARD_SIZE, complete_lines, shard_records
from pytest_tokaudit.sources.base import shard_count, shard_cuts
OK, FAILED, USAGE = 0, 1, 4


# -- 1. the plugin stays out of the way without --tokaudit ---------------------------------------

def test_without_tokaudit_flag_only_ordinary_tests_run(project):
    project.jsonl("data/x.jsonl", [rec("a"), "{not json", rec("b", 10, 99)])
    project.write("test_x.py", "def test_ordinary():\n    assert True\n")

    result = project.run(paths=(), tokaudit=False)
    assert result.ret == OK
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*data/x.jsonl*")
    # The header's 'plugins: ..., tokaudit-0.1.0' is pytest's own listing; nothing else.
    # (The test's own directory name is no mention either.)
    mentions = [
        line for line in result.outlines + result.errlines
        if "tokaudit" in line.replace(str(project.path), "<dir>").lower()
        and not line.startswith("plugins:")
    ]
    assert mentions == []
    assert_no_crash(result)

    result = project.run("-p", "no:tokaudit")
    assert result.ret == USAGE
    result.stderr.fnmatch_lines(["*error: unrecognized arguments: --tokaudit*"])
    assert_no_crash(result)


# -- 2. a clean file and its summary row ---------------------------------------------------------

def test_clean_files_pass_and_the_summary_table_shows_them(project):
    project.ini(tokaudit_allow_empty="true")
    project.jsonl("data/clean.jsonl", [
        rec("c1", 100), rec("c2", 200), "", rec("c3", 301, 300), rec("c4", 401, 400),
    ])
    project.write("data/empty.jsonl", b"")  # allowed by tokaudit_allow_empty
    project.write("data/blank_only.jsonl", b"\n  \n\r\n")

    result = project.run()
    assert result.ret == OK
    result.assert_outcomes(passed=4)  # 3 files and the coverage check
    assert_no_crash(result)
    # 4 records (the blank line is not one), billed 1000, counted 1002, |diff| 1 + 1.
    assert summary_section(result) == [
        "file                   records  audited  skipped  mean billed  mean counted   mean |diff|  max |diff|  findings",
        "data/blank_only.jsonl        0        0        0          0.0           0.0  0.00 (0.00%)           0         0",
        "data/clean.jsonl             4        4        0        250.0         250.5  0.50 (0.20%)           1         0",
        "data/empty.jsonl             0        0        0          0.0           0.0  0.00 (0.00%)           0         0",
        "all 3 files                  4        4        0        250.0         250.5  0.50 (0.20%)           1         0",
        "",
        "worst records by |billed - counted|:",
        "record              sample_id  billed  counted  billed - counted",
        "data/clean.jsonl:4  'c3'          300      301                -1",
        "data/clean.jsonl:5  'c4'          400      401                -1",
        "",
        "pytest.ini::tokaudit::coverage: passed: 3 data files (4 records) audited to the end "
        "under the rootdir",
    ]


# -- 3. the bad-input corpus --------------------------------------------------------------------

def test_bad_input_corpus_is_reported_line_by_line(project):
    project.ini(tokaudit_max_shown=50, tokaudit_count_mean_rel="")
    project.jsonl("data/lines.jsonl", BAD_LINES)
    project.jsonl("data/crlf.jsonl", [rec("c1"), rec("c2", 12)], newline=b"\r\n")
    project.jsonl("data/no_final_newline.jsonl", [rec("n1"), rec("n2"), rec("n3", 40)],
                  final_newline=False)
    project.write("data/empty.jsonl", b"")
    project.write("data/blank_only.jsonl", b"\n\n")
    big = [rec(f"t{i}", 200) for i in range(400)]  # > 1 zstd block: a cut keeps whole lines
    big[1] = rec("t1", 200, billed=1)
    cut = {}
    for suffix in (".gz", ".zst"):
        packed = compress(jsonl_bytes(big), suffix)
        project.write(f"data/truncated.jsonl{suffix}", packed[: len(packed) // 2])
        cut[suffix] = complete_lines(packed[: len(packed) // 2], suffix)
        assert 2 < cut[suffix] < 400
        project.jsonl(f"data/good.jsonl{suffix}", [rec("g1"), rec("g2", 30)])
    project.write("data/garbage.jsonl.gz", b"this is not gzip data\n" * 10)
    project.write("data/garbage.jsonl.zst", b"this is not zstd data\n" * 10)

    result = project.run()
    assert result.ret == FAILED
    result.assert_outcomes(passed=5, failed=7)
    assert_no_crash(result)

    contract = ("contract: default [tokaudit_count_abs = 8, tokaudit_count_rel = 2%, "
                "tokaudit_count_outliers = 0]")
    assert failure_section(result, "data/lines.jsonl") == [
        "17 of 19 audited records break the contract; 6 unreadable lines; 1 record breaks the "
        "count tolerance, at most 0 allowed (0 of 19 audited)",
        "data/lines.jsonl:2: json: invalid JSON: unexpected end of data at column 65",
        "data/lines.jsonl:3: json: invalid UTF-8 at byte 18: b'\\xff\", '",
        "data/lines.jsonl:4: json: expected a JSON object, found list",
        "data/lines.jsonl:5: json: expected a JSON object, found str",
        "data/lines.jsonl:6: json: expected a JSON object, found null",
        "data/lines.jsonl:7: sample_id='r7': schema: missing field 'output_ids'",
        "data/lines.jsonl:8: sample_id='r8': schema: missing field 'completion_tokens'",
        "data/lines.jsonl:9: schema: missing field 'sample_id'",
        "data/lines.jsonl:10: sample_id='r10': schema: completion_tokens must be an integer, found '10' (str)",
        "data/lines.jsonl:11: sample_id='r11': schema: completion_tokens must be an integer, found 390.0 (float)",
        "data/lines.jsonl:12: sample_id='r12': schema: completion_tokens must be an integer, found true (bool)",
        "data/lines.jsonl:13: sample_id='r13': schema: output_ids must be a list of token ids, found str",
        "data/lines.jsonl:14: sample_id='r14': schema: output_ids[1] must be an integer token id, found 2.0 (float)",
        "data/lines.jsonl:15: sample_id='r15': schema: output_ids[1] must be an integer token id, found '2' (str)",
        "data/lines.jsonl:16: sample_id='r16': schema: output_ids[1] must be an integer token id, found true (bool)",
        "data/lines.jsonl:17: sample_id='r17': schema: output_ids[1] must be an integer token id, found null",
        "data/lines.jsonl:18: sample_id='r18': schema: completion_tokens must be non-negative, found -1",
        "data/lines.jsonl:19: sample_id='r19': schema: output_ids[1] must be a non-negative token id, found -5",
        "data/lines.jsonl:22: json: invalid JSON: line starts with a UTF-8 byte order mark",
        "data/lines.jsonl:23: schema: sample_id must be a string or integer, found list",
        "data/lines.jsonl:24: schema: missing field 'sample_id'",
        "data/lines.jsonl:24: schema: missing field 'completion_tokens'",
        "data/lines.jsonl:24: schema: missing field 'output_ids'",
        # The count breach after all the bad lines is still found.
        "data/lines.jsonl:25: sample_id='r25': count: billed 50, counted 10 (+40, +80.0%) > max(8, 2%)",
        "data/lines.jsonl:26: sample_id=26: schema: output_ids must be a list of token ids, found dict",
        "data/lines.jsonl: count_outliers: 1 record breaks the count tolerance, at most 0 allowed "
        "(0 of 19 audited)",
        contract,
    ]
    empty = "no records: the file is empty"
    for name in ("empty", "blank_only"):
        assert failure_section(result, f"data/{name}.jsonl") == [
            empty, f"data/{name}.jsonl: empty: {empty}",
            "contract: default [tokaudit_allow_empty = false]",
        ]
    gz_cut = ("truncated compressed file: Compressed file ended before the end-of-stream "
              f"marker was reached (after line {cut['.gz']})")
    zst_cut = ("truncated compressed file: compressed data ends before the end of the zstd "
               f"frame (after line {cut['.zst']})")
    for suffix, message in ((".gz", gz_cut), (".zst", zst_cut)):
        path, n = f"data/truncated.jsonl{suffix}", cut[suffix]
        outliers = f"1 record breaks the count tolerance, at most 0 allowed (0 of {n} audited)"
        assert failure_section(result, path) == [
            f"1 of {n} audited records break the contract; {message}; {outliers}",
            # Records before the cut are audited: line 2 breaks the count tolerance.
            f"{path}:2: sample_id='t1': count: billed 1, counted 200 (-199, -19900.0%) > max(8, 2%)",
            f"{path}: read: {message}",
            f"{path}: count_outliers: {outliers}",
            contract,
        ]
    bad_gz = "corrupt or unreadable file: Not a gzipped file (b'th') (after line 0)"
    assert failure_section(result, "data/garbage.jsonl.gz") == [
        bad_gz, f"data/garbage.jsonl.gz: read: {bad_gz}",
    ]
    garbage_zst = failure_section(result, "data/garbage.jsonl.zst")
    assert len(garbage_zst) == 2
    assert re.fullmatch(r"corrupt zstd data: .+ \(after line 0\)", garbage_zst[0])
    assert garbage_zst[1] == f"data/garbage.jsonl.zst: read: {garbage_zst[0]}"

    rows = summary_rows(result)
    assert rows["data/lines.jsonl"] == ["25", "19", "0", "23.3", "10.0", "13.33 (57.14%)", "40", "26"]
    assert rows["data/crlf.jsonl"] == ["2", "2", "0", "11.0", "11.0", "0.00 (0.00%)", "0", "0"]
    # The last line, without a newline, is audited: (10 + 10 + 40) / 3 = 20.
    assert rows["data/no_final_newline.jsonl"] == ["3", "3", "0", "20.0", "20.0", "0.00 (0.00%)", "0", "0"]
    for suffix in (".gz", ".zst"):
        assert rows[f"data/good.jsonl{suffix}"] == ["2", "2", "0", "20.0", "20.0", "0.00 (0.00%)", "0", "0"]
        assert rows[f"data/truncated.jsonl{suffix}"][:3] == [str(cut[suffix]), str(cut[suffix]), "0"]
    for name in ("empty.jsonl", "blank_only.jsonl", "garbage.jsonl.gz", "garbage.jsonl.zst"):
        assert rows[f"data/{name}"] == ["0", "0", "0", "0.0", "0.0", "0.00 (0.00%)", "0", "1"]
    # xdist reports files in the order its workers finish them: compare as a set.
    failed = sorted(line.split(" - ")[0] for line in result.outlines if line.startswith("FAILED "))
    assert failed == sorted(f"FAILED data/{name}::tokaudit" for name in (
        "lines.jsonl", "empty.jsonl", "blank_only.jsonl", "truncated.jsonl.gz",
        "truncated.jsonl.zst", "garbage.jsonl.gz", "garbage.jsonl.zst",
    ))
    result.stdout.fnmatch_lines(
        ["FAILED data/lines.jsonl::tokaudit - 17 of 19 audited records break the contra*"])
    result.stdout.fnmatch_lines(
        ["FAILED data/truncated.jsonl.gz::tokaudit - 1 of * audited records break the*"])


# -- 4. usage errors ----------------------------------------------------------------------------

@pytest.mark.parametrize(("ini", "args", "message"), [
    pytest.param(
        {"tokaudit_count_rel": "lots"}, (),
        "ERROR: tokaudit_count_rel (pytest.ini): expected a number like 0.02 or 2%, got 'lots'",
        id="ini-count-rel",
    ),
    pytest.param(
        {}, ("-o", "tokaudit_count_rel=lots"),
        "ERROR: tokaudit_count_rel (-o): expected a number like 0.02 or 2%, got 'lots'",
        id="override-count-rel",
    ),
    pytest.param(
        {"tokaudit_count_outliers": "many"}, (),
        "ERROR: tokaudit_count_outliers (pytest.ini): expected a count like 3 or a share "
        "like 0.5%, got 'many'",
        id="ini-count-outliers",
    ),
    pytest.param(
        {"tokaudit_require_once": "</think>"}, (),
        "ERROR: tokaudit_require_once: token names ['</think>'] need a tokenizer; set "
        "tokaudit_tokenizer to a local tokenizer directory, or write token ids",
        id="token-name-without-tokenizer",
    ),
])
def test_bad_contract_values_are_usage_errors(project, ini, args, message):
    project.ini(**ini)
    project.jsonl("data/x.jsonl", [rec("a")])
    result = project.run(*args)
    assert result.ret == USAGE
    result.stderr.fnmatch_lines([message])
    assert_no_crash(result)
    result.stdout.no_fnmatch_line("*passed*")


# -- 5. outlier allowance, mean tolerance, max_shown, where the contract came from ------------

def _breaches(prefix: str, n: int, bad: set[int], billed: int) -> list[dict]:
    """n records of 100 ids; those in `bad` (1-based) billed `billed`."""
    return [rec(f"{prefix}{i}", 100, billed if i in bad else None) for i in range(1, n + 1)]


def test_outlier_allowance_mean_tolerance_and_max_shown(project):
    project.ini(
        tokaudit_count_abs=2, tokaudit_count_rel=0, tokaudit_count_outliers=2,
        tokaudit_count_mean_rel="", tokaudit_max_shown=3,
    )
    project.jsonl("data/two.jsonl", _breaches("a", 10, {3, 7}, 104))
    project.jsonl("data/three.jsonl", _breaches("b", 10, {2, 5, 9}, 104))
    project.jsonl("data/two_and_schema.jsonl",
                  _breaches("c", 10, {4, 6}, 104) + [{"sample_id": "c11", "completion_tokens": 1}])
    # Every record within |diff| <= 2, but the mean |diff| is 2% of the mean billed.
    project.jsonl("data/mean.jsonl", [rec(f"m{i}", 102, 100) for i in range(1, 5)])
    # Ten bad records each, more than tokaudit_max_shown = 3.
    # (The last has the field, as null: a field no record has is one finding of the file.)
    project.jsonl("data/schema.jsonl",
                  [{"sample_id": f"s{i}", "completion_tokens": 1} for i in range(1, 10)]
                  + [{"sample_id": "s10", "completion_tokens": 1, "output_ids": None}])
    project.jsonl("data/count.jsonl", [rec(f"k{i}", 10, 50) for i in range(1, 11)])

    three = [
        "data/three.jsonl:2: sample_id='b2': count: billed 104, counted 100 (+4, +3.8%) > max(2, 0%)",
        "data/three.jsonl:5: sample_id='b5': count: billed 104, counted 100 (+4, +3.8%) > max(2, 0%)",
        "data/three.jsonl:9: sample_id='b9': count: billed 104, counted 100 (+4, +3.8%) > max(2, 0%)",
    ]
    two_and_schema = [
        "1 of 11 audited records break the contract",
        "data/two_and_schema.jsonl:4: sample_id='c4': count: billed 104, counted 100 (+4, +3.8%) "
        "> max(2, 0%) (allowed outlier)",
        "data/two_and_schema.jsonl:6: sample_id='c6': count: billed 104, counted 100 (+4, +3.8%) "
        "> max(2, 0%) (allowed outlier)",
        "data/two_and_schema.jsonl:11: sample_id='c11': schema: missing field 'output_ids'",
    ]

    # Run A: the allowance is a count (2), from pytest.ini; the mean check is off.
    result = project.run()
    assert result.ret == FAILED
    result.assert_outcomes(passed=3, failed=4)  # two.jsonl, mean.jsonl and coverage pass
    assert_no_crash(result)
    outliers = "3 records break the count tolerance, at most 2 allowed (2 of 10 audited)"
    assert failure_section(result, "data/three.jsonl") == [
        f"3 of 10 audited records break the contract; {outliers}",
        *three,  # exactly max_shown: no '... and 0 more'
        f"data/three.jsonl: count_outliers: {outliers}",
        "contract: pytest.ini [tokaudit_count_abs = 2, tokaudit_count_rel = 0, "
        "tokaudit_count_outliers = 2]",
    ]
    assert failure_section(result, "data/two_and_schema.jsonl") == [
        *two_and_schema,
        "contract: pytest.ini [tokaudit_count_abs = 2, tokaudit_count_rel = 0, "
        "tokaudit_count_outliers = 2]",
    ]
    # two.jsonl passes; its allowed outliers are still named, after the summary table.
    result.stdout.fnmatch_lines([
        "allowed outliers (tokaudit_count_outliers) in files that passed:",
        "data/two.jsonl:3: sample_id='a3': count: billed 104, counted 100 (+4, +3.8%) > max(2, 0%)",
        "data/two.jsonl:7: sample_id='a7': count: billed 104, counted 100 (+4, +3.8%) > max(2, 0%)",
    ])
    result.stdout.re_match_lines([r"data/two\.jsonl:3 +'a3' +104 +100 +\+4$",
                                  r"data/two\.jsonl:7 +'a7' +104 +100 +\+4$"])
    assert summary_rows(result)["data/two.jsonl"] == [
        "10", "10", "0", "100.8", "100.0", "0.80 (0.79%)", "4", "2",
    ]
    assert failure_section(result, "data/schema.jsonl") == [
        "10 of 10 audited records break the contract",
        "data/schema.jsonl:1: sample_id='s1': schema: missing field 'output_ids'",
        "data/schema.jsonl:2: sample_id='s2': schema: missing field 'output_ids'",
        "data/schema.jsonl:3: sample_id='s3': schema: missing field 'output_ids'",
        "... and 7 more (tokaudit_max_shown = 3)",
    ]
    breach = "count: billed 50, counted 10 (+40, +80.0%) > max(2, 0%)"
    outliers = "10 records break the count tolerance, at most 2 allowed (2 of 10 audited)"
    assert failure_section(result, "data/count.jsonl") == [
        f"10 of 10 audited records break the contract; {outliers}",
        f"data/count.jsonl:1: sample_id='k1': {breach}",
        f"data/count.jsonl:2: sample_id='k2': {breach}",
        f"data/count.jsonl:3: sample_id='k3': {breach}",
        "... and 7 more (tokaudit_max_shown = 3)",
        f"data/count.jsonl: count_outliers: {outliers}",
        "contract: pytest.ini [tokaudit_count_abs = 2, tokaudit_count_rel = 0, "
        "tokaudit_count_outliers = 2]",
    ]

    # Run B: a share (20%) and a mean tolerance, both from -o, and count_abs from -o too.
    result = project.run(
        "-o", "tokaudit_count_abs=2", "-o", "tokaudit_count_outliers=20%",
        "-o", "tokaudit_count_mean_rel=1.5%", "-o", "tokaudit_count_mean_abs=0",
    )
    assert result.ret == FAILED
    result.assert_outcomes(passed=2, failed=5)  # two.jsonl passes: 20% of 10 allows 2
    assert_no_crash(result)
    outliers = "3 records break the count tolerance, at most 2 allowed (20% of 10 audited)"
    assert failure_section(result, "data/three.jsonl") == [
        f"3 of 10 audited records break the contract; {outliers}",
        *three,
        f"data/three.jsonl: count_outliers: {outliers}",
        "contract: -o [tokaudit_count_abs = 2, tokaudit_count_outliers = 20%]; "
        "pytest.ini [tokaudit_count_rel = 0]",
    ]
    assert failure_section(result, "data/two_and_schema.jsonl") == [  # 20% of 11 allows 2
        *two_and_schema,
        "contract: -o [tokaudit_count_abs = 2, tokaudit_count_outliers = 20%]; "
        "pytest.ini [tokaudit_count_rel = 0]",
    ]
    mean = "mean |diff| 2.00 / mean billed 100.0 = 2.000% > 1.500%"
    assert failure_section(result, "data/mean.jsonl") == [
        mean,
        f"data/mean.jsonl: count_mean: {mean}",
        "contract: -o [tokaudit_count_mean_abs = 0, tokaudit_count_mean_rel = 1.5%]",
    ]


# -- 6. field names: dotted paths and tokaudit_where ------------------------------------------

def _nested(rid, billed, ids, **top):
    return {"meta": {"id": rid}, "usage": {"completion_tokens": billed},
            "response": {"output_ids": ids}, **top}


def test_dotted_field_paths_and_where(project):
    project.ini(
        tokaudit_count_field="usage.completion_tokens", tokaudit_ids_field="response.output_ids",
        tokaudit_id_field="meta.id", tokaudit_count_mean_rel="", tokaudit_where="provider",
    )
    p = {"provider": "p"}
    project.jsonl("data/nested.jsonl", [
        _nested("n1", 3, [1, 2, 3], **p),
        _nested("n2", 30, [1, 2, 3], **p),
        {**_nested("n3", 3, [1, 2, 3], **p), "usage": 3},
        {"meta": {"id": "n4"}, "completion_tokens": 3, "output_ids": [1, 2, 3], **p},
        _nested("n5", "3", [1, 2, 3], **p),
        _nested(6, 2, [1, 2], **p),
    ])
    # tokaudit_where: records without a truthy provider are skipped, whatever they hold.
    project.jsonl("data/mixed.jsonl", [
        _nested("w1", 10, list(range(10)), provider="openai"),
        {"note": "no provider and none of the other fields"},
        rec("w3", 10, billed=99),                     # flat fields, a count breach: skipped
        {"provider": "", "meta": {"id": "w4"}},       # falsy: skipped
        {"provider": None},                           # null: skipped
        "",
        _nested("w7", 30, list(range(30)), provider="anthropic"),
    ])
    project.jsonl("data/all_skipped.jsonl", [_nested("s1", 1, [1]), {"provider": False}])

    result = project.run()
    assert result.ret == FAILED
    result.assert_outcomes(passed=2, failed=2)
    assert_no_crash(result)
    assert failure_section(result, "data/nested.jsonl") == [
        "4 of 6 audited records break the contract; 1 record breaks the count tolerance, "
        "at most 0 allowed (0 of 6 audited)",
        "data/nested.jsonl:2: meta.id='n2': count: billed 30, counted 3 (+27, +90.0%) > max(8, 2%)",
        "data/nested.jsonl:3: meta.id='n3': schema: missing field 'usage.completion_tokens'",
        "data/nested.jsonl:4: meta.id='n4': schema: missing field 'usage.completion_tokens'",
        "data/nested.jsonl:4: meta.id='n4': schema: missing field 'response.output_ids'",
        "data/nested.jsonl:5: meta.id='n5': schema: usage.completion_tokens must be an integer, "
        "found '3' (str)",
        "data/nested.jsonl: count_outliers: 1 record breaks the count tolerance, at most 0 "
        "allowed (0 of 6 audited)",
        "contract: default [tokaudit_count_abs = 8, tokaudit_count_rel = 2%, "
        "tokaudit_count_outliers = 0]",
    ]
    message = "no audited records: all 2 skipped by tokaudit_where"
    assert failure_section(result, "data/all_skipped.jsonl") == [
        message,
        f"data/all_skipped.jsonl: empty: {message}",
        "contract: default [tokaudit_allow_empty = false]",
    ]
    result.stdout.no_fnmatch_line("*mixed.jsonl:*")
    rows = summary_rows(result)
    assert rows["data/nested.jsonl"] == ["6", "6", "0", "11.7", "2.7", "9.00 (77.14%)", "27", "6"]
    assert rows["data/mixed.jsonl"] == ["6", "2", "4", "20.0", "20.0", "0.00 (0.00%)", "0", "0"]
    assert rows["data/all_skipped.jsonl"] == ["2", "0", "2", "0.0", "0.0", "0.00 (0.00%)", "0", "1"]
    # The worst-records table names the id column by its field path.
    assert summary_section(result)[-4:-2] == [  # then a blank line and the coverage verdict
        "record               meta.id  billed  counted  billed - counted",
        "data/nested.jsonl:2  'n2'         30        3               +27",
    ]


# -- 7. hooks in conftest.py ------------------------------------------------------------------

ROOT_CONFTEST = """
from pytest_tokaudit import Finding

def pytest_tokaudit_check_record(record):
    if record.data.get("finish_reason") == "length":
        return Finding("finish_reason", "response cut off (finish_reason=length)")
    if record.data.get("lang") == "xx":
        return ["unknown language 'xx'", Finding("lang", "not in the allowed list")]

def pytest_tokaudit_check_file(path, summary):
    if path.name.startswith("tiny") and summary.checked < 3:
        return f"only {summary.checked} records; expected at least 3"
"""

LOCAL_CONFTEST = """
def pytest_tokaudit_contract(path, contract):
    return contract.replace(count_abs=16)
"""


def test_conftest_hooks_and_disabling_builtin_checks(project):
    project.ini(tokaudit_count_mean_rel="")
    project.write("conftest.py", ROOT_CONFTEST)
    project.write("data/local/conftest.py", LOCAL_CONFTEST)
    loose = [rec("l1"), rec("l2", 10, billed=20)]  # |diff| 10: > 8, <= 16
    project.jsonl("data/local/loose.jsonl", loose)
    project.jsonl("data/local/deeper/loose.jsonl", loose)
    project.jsonl("data/local/worse.jsonl", [rec("w1", 10, billed=40)])  # |diff| 30 > 16
    project.jsonl("data/strict.jsonl", loose)
    project.jsonl("data/cut.jsonl", [rec("c1"), rec("c2", finish_reason="length"),
                                     rec("c3", lang="xx"), rec("c4", finish_reason="stop")])
    project.jsonl("data/tiny.jsonl", [rec("t1"), rec("t2")])
    project.write("data/empty.jsonl", b"")

    cut = [
        "2 of 4 audited records break the contract",
        "data/cut.jsonl:2: sample_id='c2': finish_reason: response cut off (finish_reason=length)",
        "data/cut.jsonl:3: sample_id='c3': custom: unknown language 'xx'",
        "data/cut.jsonl:3: sample_id='c3': lang: not in the allowed list",
    ]
    tiny = [
        "only 2 records; expected at least 3",
        "data/tiny.jsonl: custom: only 2 records; expected at least 3",
    ]

    result = project.run()
    assert result.ret == FAILED
    result.assert_outcomes(passed=3, failed=5)
    assert_no_crash(result)
    assert failure_section(result, "data/cut.jsonl") == cut
    assert failure_section(result, "data/tiny.jsonl") == tiny
    outliers = "1 record breaks the count tolerance, at most 0 allowed (0 of 2 audited)"
    assert failure_section(result, "data/strict.jsonl") == [
        f"1 of 2 audited records break the contract; {outliers}",
        "data/strict.jsonl:2: sample_id='l2': count: billed 20, counted 10 (+10, +50.0%) > max(8, 2%)",
        f"data/strict.jsonl: count_outliers: {outliers}",
        "contract: default [tokaudit_count_abs = 8, tokaudit_count_rel = 2%, "
        "tokaudit_count_outliers = 0]",
    ]
    # data/local/conftest.py loosens count_abs to 16 below data/local only.
    result.stdout.no_fnmatch_line("*tokaudit: data/local/*loose.jsonl*")
    worse = failure_section(result, "data/local/worse.jsonl")
    assert worse[1] == (
        "data/local/worse.jsonl:1: sample_id='w1': count: billed 40, counted 10 (+30, +75.0%) "
        "> max(16, 2%)"
    )
    # The contract line names the tolerance that was applied (16), not the ini default (8).
    assert worse[-1].startswith("contract: ")
    assert "tokaudit_count_abs = 16" in worse[-1], worse[-1]
    assert "tokaudit_count_abs = 8" not in worse[-1], worse[-1]
    assert failure_section(result, "data/empty.jsonl")[0] == "no records: the file is empty"

    # The built-in count and empty checks are plugins that -p no: turns off.
    result = project.run("-p", "no:tokaudit.count", "-p", "no:tokaudit.empty")
    assert result.ret == FAILED
    result.assert_outcomes(passed=6, failed=2)
    assert_no_crash(result)
    assert failure_section(result, "data/cut.jsonl") == cut
    assert failure_section(result, "data/tiny.jsonl") == tiny
    result.stdout.no_fnmatch_line("*count*tolerance*")
    result.stdout.no_fnmatch_line("*no records*")


# -- 8. junitxml ------------------------------------------------------------------------------

def test_junitxml_has_one_testcase_per_file_and_no_summary_property(project):
    project.jsonl("data/good.jsonl", [rec("g1"), rec("g2")])
    project.jsonl("data/bad.jsonl", [rec("b1"), "{oops"])

    result = project.run("--junitxml=r.xml")
    assert result.ret == FAILED
    result.assert_outcomes(passed=2, failed=1)
    assert_no_crash(result)
    root = ET.parse(project.path / "r.xml").getroot()
    cases = {(c.get("classname"), c.get("name")): c for c in root.iter("testcase")}
    assert set(cases) == {  # the data folder as the class, the file as the test
        ("data", "good.jsonl"), ("data", "bad.jsonl"), ("tokaudit", "coverage"),
    }
    good, bad = cases["data", "good.jsonl"], cases["data", "bad.jsonl"]
    assert [child.tag for child in good] == []
    (failure,) = bad.findall("failure")
    assert failure.get("message").startswith("1 unreadable line")
    assert "data/bad.jsonl:2: json: invalid JSON" in failure.text
    # The summary that travels in user_properties must not end up in the XML.
    properties = [(p.get("name"), p.get("value")) for p in root.iter("property")]
    assert properties == []
    assert '"worst"' not in (project.path / "r.xml").read_text()


# -- 9. read-only data -------------------------------------------------------------------------

def _snapshot(root):
    """Every path below root: its mode, mtime and (for files) bytes."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            st = os.stat(path)
            data = open(path, "rb").read() if stat.S_ISREG(st.st_mode) else None
            out[os.path.relpath(path, root)] = (stat.S_IMODE(st.st_mode), st.st_mtime_ns, data)
    return out


def test_read_only_data_is_audited_and_left_untouched(project):
    project.jsonl("data/good.jsonl", [rec("g1"), rec("g2")])
    project.jsonl("data/good.jsonl.gz", [rec("z1")])
    project.jsonl("data/sub/bad.jsonl", [rec("b1"), rec("b2", 10, 99)])
    data = project.path / "data"
    dirs = [data, data / "sub"]
    for path in data.rglob("*"):
        if path.is_file():
            path.chmod(0o444)
    for path in reversed(dirs):
        path.chmod(0o555)
    # As root chmod is not enforced: compare listing, modes, mtimes and bytes instead.
    before = _snapshot(data)
    try:
        result = project.run()
    finally:
        after = _snapshot(data)
        for path in dirs:
            path.chmod(0o755)
    assert after == before
    assert result.ret == FAILED
    result.assert_outcomes(passed=3, failed=1)
    assert_no_crash(result)
    assert failure_section(result, "data/sub/bad.jsonl")[1] == (
        "data/sub/bad.jsonl:2: sample_id='b2': count: billed 99, counted 10 (+89, +89.9%) > max(8, 2%)"
    )
    assert summary_rows(result)["data/good.jsonl.gz"][:3] == ["1", "1", "0"]


# -- 10. shards --------------------------------------------------------------------------------

UNSHARDED_CONFTEST = """
def pytest_tokaudit_contract(path, contract):
    return contract.replace(shard_size=0)  # 0: never shard
"""


def _shard_of_line(records: list, line: int) -> int:
    """1-based shard a line falls in: the one holding its first byte (cut by shard_cuts)."""
    start = len(jsonl_bytes(records[: line - 1])) if line > 1 else 0
    cuts = shard_cuts(len(jsonl_bytes(records)), SHARD_SIZE)
    return bisect.bisect_right(cuts, start)


def test_sharded_file_reports_like_the_whole_file(project):
    # The mean check's relative part alone (its absolute part would forgive 1.03 tokens).
    project.ini(tokaudit_shard_size=SHARD_SIZE, tokaudit_count_mean_abs=0)
    project.write("data/whole/conftest.py", UNSHARDED_CONFTEST)
    records = shard_records()
    project.jsonl("data/whole/big.jsonl", records)
    big = project.jsonl("data/sharded/big.jsonl", records)
    n = shard_count(big.stat().st_size, SHARD_SIZE)
    assert n >= 4
    bad_shards = {_shard_of_line(records, line) for line in (5, 41, 78)}
    assert len(bad_shards) == 3

    result = project.run("-rA")
    assert result.ret == FAILED
    assert_no_crash(result)
    # The whole twin is one item; the sharded file is n shard items and its file verdict.
    result.assert_outcomes(failed=1 + len(bad_shards) + 1, passed=n - len(bad_shards) + 1)
    result.stdout.fnmatch_lines(["FAILED data/whole/big.jsonl::tokaudit - 3 of 77 audited *"])
    for i in range(1, n + 1):
        word = "FAILED" if i in bad_shards else "PASSED"
        result.stdout.re_match_lines(
            [rf"{word} data/sharded/big\.jsonl::tokaudit\[shard {i}\]( - .*)?$"]
        )
    result.stdout.fnmatch_lines(["FAILED data/sharded/big.jsonl::tokaudit[[]file[]] - 2 records break *"])

    outliers = "2 records break the count tolerance, at most 0 allowed (0 of 77 audited)"
    mean = "mean |diff| 1.03 / mean billed 13.9 = 7.365% > 0.500%"
    whole = [
        f"3 of 77 audited records break the contract; 2 unreadable lines; {outliers}; {mean}",
        "data/whole/big.jsonl:5: json: invalid JSON: unexpected end of data at column 65",
        "data/whole/big.jsonl:23: sample_id='s023': count: billed 60, counted 10 (+50, +83.3%) "
        "> max(8, 2%)",
        "data/whole/big.jsonl:41: sample_id='s041': schema: missing field 'completion_tokens'",
        "data/whole/big.jsonl:58: sample_id='s058': count: billed 40, counted 12 (+28, +70.0%) "
        "> max(8, 2%)",
        "data/whole/big.jsonl:78: json: expected a JSON object, found list",
        f"data/whole/big.jsonl: count_outliers: {outliers}",
        f"data/whole/big.jsonl: count_mean: {mean}",
        "contract: default [tokaudit_count_abs = 8, tokaudit_count_rel = 2%, "
        "tokaudit_count_outliers = 0, tokaudit_count_mean_rel = 0.5%]; "
        "pytest.ini [tokaudit_count_mean_abs = 0]",
    ]
    assert failure_section(result, "data/whole/big.jsonl") == whole

    def as_whole(lines):
        # Table columns are as wide as their longest cell: compare cells, not padding.
        return [" ".join(line.replace("data/sharded/", "data/whole/").split()) for line in lines]

    # Each failing shard shows its records at their absolute lines.
    shard_lines = []
    for i in bad_shards:
        (section,) = failure_sections(result, f"tokaudit: data/sharded/big.jsonl [shard {i} of {n}]")
        assert re.match(rf"(\d+ of \d+ audited records in shard {i} of {n} break the contract|"
                        rf"\d+ unreadable lines? in shard {i} of {n})$",
                        section[0]), section
        shard_lines += [line for line in as_whole(section) if line.startswith("data/whole/big.jsonl:")]
    # The shards show their failing records; count breaches wait for the file verdict.
    assert sorted(shard_lines) == sorted(l for l in whole[1:6] if ": count: " not in l)
    # The file verdict, judged on the merged shards, gives what no shard can: the allowance
    # and the mean, with the allowable records they weigh, as the whole twin does. The
    # records that failed their shards are not listed again: one bad record, one failure.
    (verdict,) = failure_sections(result, "tokaudit: data/sharded/big.jsonl [whole file]")
    failing = ", ".join(f"shard {i} of {n}" for i in sorted(bad_shards))
    assert as_whole(verdict) == as_whole([
        f"{outliers}; {mean}",
        *(line for line in whole[1:6] if ": count: " in line),
        *whole[6:8],
        f"(3 records with findings no allowance forgives: failures of {failing}, listed there)",
        whole[8],
    ])

    rows = summary_rows(result)
    assert rows["data/whole/big.jsonl"] == [
        "79", "77", "0", "13.9", "12.9", "1.03 (7.37%)", "50", "7",
    ]
    assert rows["data/sharded/big.jsonl"] == rows["data/whole/big.jsonl"]
    worst = [line for line in summary_section(result) if re.match(r"data/\w+/big\.jsonl:\d", line)]
    assert as_whole([line for line in worst if "sharded" in line]) == [
        " ".join(line.split()) for line in worst if "whole" in line
    ]
    assert len(worst) == 4


SHARD_CONFTESTS = {
    # A looser contract below data/loose: five count breaches per file are fine.
    "data/loose/conftest.py": """
from pytest_tokaudit import Allowance

def pytest_tokaudit_contract(path, contract):
    return contract.replace(count_outliers=Allowance(5, relative=False))
""",
    # A file check below data/checked only.
    "data/checked/conftest.py": """
def pytest_tokaudit_check_file(path, summary):
    return f"checked: {summary.records} records"
""",
}


def test_sharded_file_is_judged_with_its_own_conftest(project):
    """The whole-file verdict of a sharded file uses the contract and the file checks of
    the conftest.py files above it, as an unsharded file's item does."""
    project.ini(tokaudit_shard_size=SHARD_SIZE, tokaudit_count_mean_rel="")
    for rel, text in SHARD_CONFTESTS.items():
        project.write(rel, text)
    clean = [rec(f"s{i:03d}", 10 + i % 7) for i in range(1, 81)]
    breaches = list(clean)
    breaches[22] = rec("s023", 10, billed=60)
    breaches[57] = rec("s058", 12, billed=40)
    project.jsonl("data/loose/big.jsonl", breaches)   # 2 breaches, 5 allowed: passes
    project.jsonl("data/checked/big.jsonl", clean)    # its conftest's file check fails it
    big = project.jsonl("data/plain/big.jsonl", clean)  # no conftest: passes
    n = shard_count(big.stat().st_size, SHARD_SIZE)
    assert n >= 4

    result = project.run("-rA")
    assert_no_crash(result)
    assert result.ret == FAILED
    result.assert_outcomes(passed=3 * n + 3, failed=1)
    (verdict,) = failure_sections(result, "tokaudit: data/checked/big.jsonl [whole file]")
    assert verdict == ["checked: 80 records", "data/checked/big.jsonl: custom: checked: 80 records"]
    for name in ("loose", "plain"):
        result.stdout.fnmatch_lines([f"PASSED data/{name}/big.jsonl::tokaudit[[]file[]]*"])
