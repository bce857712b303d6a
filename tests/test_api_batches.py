"""api.audit_records over batches of dicts: the kernel (engine/kernel.py, engine/dicts.py)
gives exactly what the per-line path gives, record for record.

Each stream is audited twice: TOKAUDIT_COLUMNAR=0 (every dict through parse_object and the
per-record hooks, the reference) and in batches through the kernel. The findings, the
Totals and the whole summary (figures included) must be equal, whatever the dicts hold:
bools, floats, ints past int32, int64 and uint64, nested lists, int subclasses, missing
fields, JSON lines and other values among them.
"""

from __future__ import annotations

import atexit
import enum
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

pytest.importorskip("numpy")

from conftest import examples, rec  # noqa: E402
from pytest_tokaudit import api  # noqa: E402
from pytest_tokaudit.engine import columnar, dicts  # noqa: E402
from pytest_tokaudit.engine import plain as plain_module  # noqa: E402
from pytest_tokaudit.model.report import file_entry  # noqa: E402

# The request file of the "joined" contract: a sample_id each of some ids the items draw.
REQUESTS = Path(tempfile.mkdtemp(prefix="tokaudit-requests-")) / "requests.jsonl"
REQUESTS.write_text("".join(json.dumps({"sample_id": v, "body": {}}) + "\n"
                            for v in ["", "a", "b", "ab", 0, 1, 2, 3]))
atexit.register(shutil.rmtree, REQUESTS.parent, True)

CONTRACTS = {
    "structure": {
        "tokaudit_count_abs": "2", "tokaudit_count_rel": "0%", "tokaudit_count_outliers": "2",
        "tokaudit_require_once": "3", "tokaudit_require_last": "7 8", "tokaudit_forbid": "0",
        "tokaudit_budget": "60", "tokaudit_unique_ids": "true", "tokaudit_max_shown": "1000",
    },
    "where": {"tokaudit_where": "provider", "tokaudit_count_rel": "10%", "tokaudit_max_shown": "3"},
    "no-id": {"tokaudit_id_field": "", "tokaudit_require_last": "151645",
              "tokaudit_max_line_bytes": "80"},
    # Tokens past int32 (a batch of dicts reads its ids as int32: marshal's cells).
    "wide": {"tokaudit_require_last": "7 2147483648", "tokaudit_forbid": "0 4294967295"},
    # Joined to requests by sample_id: error lines (`error`, `response.status_code`) apart.
    "joined": {"tokaudit_requests": str(REQUESTS), "tokaudit_join_field": "sample_id",
               "tokaudit_unique_ids": "true"},
}


class Small(enum.IntEnum):
    THREE = 3


def audit(contract: api.Contract, items: list[Any], batch: int, mode: str,
          plugins: tuple[Any, ...] = ()) -> tuple[Any, ...]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(columnar.ENV, mode)
        stream = api.audit_records(contract, items, batch=batch, figures=True, plugins=plugins)
        found = list(stream)
    return found, stream.summary, json.loads(stream.file_summary.to_json())


def assert_same(contract: api.Contract, items: list[Any], batch: int,
                plugins: tuple[Any, ...] = ()) -> None:
    fast = audit(contract, items, batch, "", plugins)
    plain = audit(contract, items, batch, "0", plugins)
    assert fast[2] == plain[2]
    assert fast == plain


class WholeRecords:
    """A user's checks reading whole records (their dict, ids, last id, token counts): the
    kernel hands them every record whole. What they find does not depend on batches."""

    @pytest.hookimpl
    def pytest_tokaudit_check_record(self, record):
        data = record.data
        found = []
        if data.get("provider") == "":
            found.append(record.finding("no_provider", f"{record.n_ids} ids, last {record.last_id}"))
        if record.ids[:1] == [3] and record.count_each((7, 8)) == [0, 0]:
            found.append(record.finding("no_end", f"keys {sorted(data)}"))
        if record.n_ids % 3 == 0:
            found.append(record.finding("thirds", f"{data.get('sample_id')!r}: {data['output_ids']}"))
        return found

    @pytest.hookimpl
    def pytest_tokaudit_check_batch(self, records):
        return [r.finding("odd_count", f"billed {r.count}, {type(r.data).__name__}")
                for r in records if r.count % 5 == 2]


ids_element = st.one_of(
    st.sampled_from([0, 3, 7, 8, 9, 1000, 151645]), st.integers(0, 200_000),
    st.integers(-3, 3), st.sampled_from([2**31 - 1, 2**31, -(2**31), 2**63 - 1, 2**63, 2**64 - 1,
                                         2**64, -(2**63) - 1]),
    st.booleans(), st.floats(allow_nan=False), st.none(), st.text(max_size=2),
    st.lists(st.integers(0, 9), max_size=2), st.just(Small.THREE),
)
scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 2**65), st.floats(allow_nan=False),
                    st.text(max_size=3), st.just(Small.THREE))


@st.composite
def items(draw: Any) -> Any:
    """Mostly well-formed records (some breaking a rule), with every odd value among them."""
    kind = draw(st.integers(0, 19))
    if kind == 0:
        return draw(st.one_of(st.sampled_from(["", " ", "[1, 2]", "null", '{"sample_id": 1'],),
                              st.integers(), st.lists(st.integers(), max_size=2)))
    n = draw(st.integers(0, 9))
    ids: list[Any] = [3] + draw(st.lists(st.integers(1, 150_000), min_size=n, max_size=n)) + [
        draw(st.sampled_from([7, 8, 7, 151645, 9]))]
    if not draw(st.integers(0, 4)):
        ids.insert(draw(st.integers(0, len(ids))), draw(ids_element))
    billed: Any = len(ids) + draw(st.sampled_from([0, 0, 0, 1, -1, 3, -3, 40]))
    if not draw(st.integers(0, 8)):
        billed = draw(scalars)
    record: dict[str, Any] = {
        "sample_id": draw(st.one_of(st.text(max_size=3), st.integers(-2, 2**64), scalars)),
        "completion_tokens": billed,
        "output_ids": ids,
        "provider": draw(st.sampled_from(["p", "p", "p", "", None, 0, 1, [], [1]])),
    }
    for key in draw(st.lists(st.sampled_from(sorted(record)), max_size=1)):
        if not draw(st.integers(0, 3)):
            del record[key]
    if not draw(st.integers(0, 3)):  # an API's answer: an error line with tokaudit_requests
        record["error"] = draw(st.sampled_from([None, None, {"message": "expired"}, False, "e"]))
        record["response"] = draw(st.sampled_from([{"status_code": 200}, {"status_code": 500},
                                                   {"status_code": "200"}, [200], None]))
    if kind == 1:
        return json.dumps(record)  # a JSON line among the dicts
    return record


SETTINGS = settings(max_examples=examples(120), derandomize=True, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@SETTINGS
@given(stream=st.lists(items(), max_size=80), which=st.sampled_from(sorted(CONTRACTS)),
       batch=st.sampled_from([16, 17, 64, 256]))
@example(stream=[rec(f"r{i}", 6, once=[3], last=7) for i in range(15)]
         + [{"sample_id": "b", "completion_tokens": 3, "output_ids": [3, True, 7]}],
         which="structure", batch=16)
@example(stream=[rec(f"r{i}", 6, once=[3], last=7) for i in range(15)]
         + [{"sample_id": "f", "completion_tokens": 3, "output_ids": [3, 1.5, 7]}],
         which="structure", batch=16)
def test_batches_of_dicts_audit_as_the_per_line_path(stream, which, batch):
    assert_same(api.Contract.from_dict(CONTRACTS[which]), stream, batch)


@SETTINGS
@given(stream=st.lists(items(), max_size=80), which=st.sampled_from(sorted(CONTRACTS)),
       batch=st.sampled_from([16, 64]))
@example(stream=[rec(f"r{i}", 6, once=[3], last=7) for i in range(15)]
         + [{"sample_id": "b", "completion_tokens": 3, "output_ids": [3, 1, 1], "provider": ""}],
         which="structure", batch=16)
def test_a_users_checks_see_the_same_whole_records(stream, which, batch):
    contract = api.Contract.from_dict(CONTRACTS[which])
    assert dicts.plan(contract, api.check_hook([WholeRecords()])).full
    assert_same(contract, stream, batch, (WholeRecords(),))


@pytest.mark.parametrize("batch", [16, 17, 64])
def test_a_stream_joined_to_requests_counts_error_lines_apart_as_the_per_line_path(tmp_path, batch):
    """With tokaudit_requests the join reads whole records (full mode) and an error line
    (`error` set, a status other than 200) is the per-line path's: the same summary, its
    one join entry included, whatever the batches."""
    requests = tmp_path / "requests.jsonl"
    requests.write_text("".join(json.dumps({"custom_id": f"r{i}", "body": {}}) + "\n" for i in range(100)))
    contract = api.Contract.from_dict({"tokaudit_id_field": "custom_id",
                                       "tokaudit_requests": str(requests)})
    stream: list[Any] = [{"custom_id": f"r{i}", "completion_tokens": 3, "output_ids": [1, 2, 3],
                          "response": {"status_code": 200}, "error": None} for i in range(100)]
    stream[3]["error"] = {"message": "expired"}
    stream[20]["response"] = {"status_code": 500}
    stream[21]["response"] = {"status_code": "200"}
    stream[40]["error"] = False
    stream[41]["response"] = [200]  # no object: no status, a response
    stream[70].update(error="rate limited", output_ids=None)
    stream[90] = json.dumps(stream[90])  # a JSON line among the dicts
    assert dicts.plan(contract, api.check_hook()).full
    assert_same(contract, stream, batch)
    summary = audit(contract, stream, batch, "")[2]
    assert (summary["errors"], summary["audited"]) == (5, 95)
    assert len(summary["channels"]["join"]) == 1


def test_every_odd_id_type_is_worded_as_the_per_line_path_words_it():
    """An id marshal writes in a cell of the same size as an int32 (a bool and a float
    together), past int32 or int64 (still valid), past uint64, an int subclass, a negative
    one, a numpy integer: each record takes the per-line path, which words its finding."""
    import numpy

    contract = api.Contract.from_dict(CONTRACTS["structure"])
    odd: list[Any] = [[True, 1.5], [2**31], [2**63], [2**64], [Small.THREE], [-1], [[1]],
                      [numpy.int64(5)], [None], ["5"]]
    stream: list[Any] = [rec(f"r{i}", 6, once=[3], last=7) for i in range(20)]
    for i, extra in enumerate(odd):
        stream[i * 2]["output_ids"] = [3, *extra, 7]
        stream[i * 2]["completion_tokens"] = 2 + len(extra)
    assert_same(contract, stream, 20)
    found = audit(contract, stream, 20, "")[0]
    assert {f.line for f in found if f.check == "schema"} == {1, 7, 9, 11, 13, 15, 17, 19}
    assert not [f for f in found if f.line in (3, 5)]  # 2**31, 2**63: valid ids, per line


def test_clean_records_never_reach_the_per_record_path(monkeypatch):
    """Dicts in batches: parse_object and the per-record hooks run only on records that
    fail; the findings are the per-line path's."""
    contract = api.Contract.from_dict(CONTRACTS["structure"])
    stream = [rec(f"r{i}", 6, once=[3], last=7) for i in range(100)]
    stream[10] = rec("r10", 6, once=[3], last=9)
    stream[70] = rec("r70", 6, 20, once=[3], last=7)
    seen: list[int] = []
    take = plain_module.PlainPass.take_parsed

    def spy(self, line, parsed):
        seen.append(line)
        return take(self, line, parsed)

    monkeypatch.setattr(plain_module.PlainPass, "take_parsed", spy)
    fast = audit(contract, stream, 64, "")
    assert seen == []
    assert [(f.line, f.check) for f in fast[0] if f.line] == [(11, "require_last"), (71, "count")]
    assert fast == audit(contract, stream, 64, "0")
    assert len(seen) == 100


def test_a_stream_in_batches_reports_as_the_file_of_its_records(tmp_path: Path):
    """What a pytest item of the same records reports (its JSON report entry)."""
    contract = api.Contract.from_dict(CONTRACTS["structure"])
    stream = [rec(f"r{i}", 5 + i % 7, 5 + i % 7 + (i % 13 == 0) * 9, once=[3], last=7 + i % 3)
              for i in range(300)]
    path = tmp_path / "x.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in stream))
    audited = api.audit_records(contract, stream, name=str(path), batch=128)
    found = list(audited)
    whole = api.audit_file(contract, path)
    assert file_entry(audited.file_summary) == file_entry(whole.summary)
    assert found == whole.findings


def test_small_batches_take_the_per_line_path(monkeypatch):
    assert dicts.SMALL > 1
    contract = api.Contract.from_dict(CONTRACTS["structure"])
    stream = [rec(f"r{i}", 6, once=[3], last=7) for i in range(40)]
    seen: list[int] = []
    take = plain_module.PlainPass.take_parsed
    monkeypatch.setattr(plain_module.PlainPass, "take_parsed",
                        lambda self, line, parsed: (seen.append(line), take(self, line, parsed))[1])
    assert audit(contract, stream, 1, "") == audit(contract, stream, 1, "0")
    assert len(seen) == 80
