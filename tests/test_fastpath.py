"""The fast path (ids kept as bytes) must give exactly what the plain path gives."""

from __future__ import annotations

import json

import orjson
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pytest_tokaudit.model.contract import KEYS, Contract
from pytest_tokaudit.model.records import SKIPPED, Record, Rejected
from pytest_tokaudit.sources.parse import parse_line
CONTRACT = Contract(**{k.attr: k.parse(k.default) for k in KEYS}).replace(where=("provider",))
TOKENS = (0, 7, 151668, 151645)
NEIGHBOURS = (151668, 151667, 15166, 1516680)  # one prefix: count_each scans once for all


def view(result):
    """Everything a check can see of a parse result."""
    if result is SKIPPED or isinstance(result, Rejected):
        return result
    assert isinstance(result, Record)
    return (
        result.line, result.id, result.count, result.n_ids, result.last_id,
        [result.occurrences(t) for t in TOKENS + NEIGHBOURS], result.count_each(TOKENS),
        result.count_each(NEIGHBOURS), result.ids, result.data,
    )


def same(raw: bytes) -> None:
    fast = parse_line(raw, 3, CONTRACT, fast=True)
    plain = parse_line(raw, 3, CONTRACT, fast=False)
    assert view(fast) == view(plain)


ids = st.lists(
    st.one_of(
        st.sampled_from(TOKENS + NEIGHBOURS),
        st.integers(0, 200_000),
        st.integers(-5, 5),
        st.integers(2**63, 2**66),
        st.floats(allow_nan=False, allow_infinity=False),
        st.booleans(),
        st.none(),
        st.text(max_size=3),
    ),
    max_size=30,
)
separators = st.sampled_from([(",", ":"), (", ", ": "), (" , ", " : "), ("\t,\n", ":")])


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(
    ids=ids,
    count=st.one_of(st.integers(-3, 400), st.floats(0, 10), st.none(), st.text(max_size=2)),
    provider=st.sampled_from(["x", "", None]),
    sep=separators,
    extra=st.dictionaries(st.sampled_from(["text", 'a "output_ids', "output_ids2"]),
                          st.one_of(st.text(max_size=8), st.lists(st.integers(0, 9), max_size=3))),
)
@example(ids=[7, 7, 7], count=3, provider="x", sep=(",", ":"), extra={})
@example(ids=[], count=0, provider="x", sep=(", ", ": "), extra={'a "output_ids': [1]})
def test_fast_and_plain_paths_agree(ids, count, provider, sep, extra):
    record = {"sample_id": 1, "provider": provider, **extra, "completion_tokens": count,
              "output_ids": ids}
    same(json.dumps(record, separators=sep).encode())


@given(st.binary(max_size=80))
def test_agree_on_arbitrary_bytes(tail):
    same(b'{"sample_id": 1, "provider": "x", "completion_tokens": 2, "output_ids": [1' + tail)


def test_agree_on_hand_made_edge_cases():
    for raw in [
        b'{"provider":"x","sample_id":1,"completion_tokens":3,"output_ids":[01,2]}',
        b'{"provider":"x","sample_id":1,"completion_tokens":3,"output_ids":[1,,2]}',
        b'{"provider":"x","sample_id":1,"completion_tokens":3,"output_ids":[1,2,]}',
        b'{"provider":"x","sample_id":1,"completion_tokens":3,"output_ids":[,1]}',
        b'{"provider":"x","sample_id":1,"completion_tokens":3,"output_ids":[1 2]}',
        b'{"provider":"x","sample_id":1,"completion_tokens":3,"output_ids":[18446744073709551616]}',
        b'{"provider":"x","sample_id":1,"completion_tokens":3,"output_ids":[1], "output_ids":[2,3]}',
        b'{"provider":"x","sample_id":1,"completion_tokens":3,"output_ids":[1]} trailing',
        b'{"provider":"x","sample_id":1,"completion_tokens":3,"output_ids":"[1,2]"}',
        b'{"provider":"x","sample_id":1,"completion_tokens":3,"nested":{"output_ids":[9]},"output_ids":[1]}',
        b'{"provider":"x","sample_id":1,"completion_tokens":3,"output_ids" : [ 7 , 7 ]}',
        b'{"provider":"x","sample_id":1,"completion_tokens":3,"output_ids":[0,0,7]}',
        b'{"provider":"x","sample_id":1,"completion_tokens":3,"output_ids":[1,\xff]}',
    ]:
        same(raw)


def test_fast_path_is_taken_for_ordinary_records():
    raw = orjson.dumps({"sample_id": 5, "provider": "x", "completion_tokens": 4,
                        "output_ids": [7, 151668, 3, 151645]})
    record = parse_line(raw, 1, CONTRACT)
    assert record._ids is None  # kept as bytes until someone asks for the list
    assert (record.n_ids, record.last_id, record.occurrences(151668)) == (4, 151645, 1)
    assert record.data["output_ids"] == [7, 151668, 3, 151645]


def fast(ids: list[int] | str) -> Record:
    text = ids if isinstance(ids, str) else json.dumps(ids, separators=(",", ":"))
    raw = b'{"provider":"x","sample_id":1,"completion_tokens":3,"output_ids":%s}' % text.encode()
    same(raw)
    return parse_line(raw, 1, CONTRACT)


def test_fast_path_takes_every_integer_up_to_19_digits():
    for value in (0, 9, 10, 100, 10**18, 10**19 - 1, 2**63):
        assert fast([value, 0, value])._ids is None, value  # still bytes: the fast path
    for value in (10**19, 2**64 - 1, 2**64, 10**25):  # 20+ digits: the plain path decides
        result = fast([1, value, 2])
        assert not isinstance(result, Record) or result._ids is not None, value


def test_fast_path_on_arrays_longer_than_its_masks():
    ids = [151668, 0, 7] * 40_000  # 120,000 ids, ~1 MB of text
    record = fast(ids)
    assert record._ids is None
    assert (record.n_ids, record.count_each(NEIGHBOURS)) == (120_000, [40_000, 0, 0, 0])


def test_count_each_falls_back_for_frequent_prefixes():
    ids = [151668, 151667, 7] * 50 + [1516680]
    record = fast(ids)
    assert record.count_each(NEIGHBOURS) == [50, 50, 0, 1]
    assert record.count_each((7,)) == [50]
    assert fast([7, 7, 7, 1, 7, 7] * 10).count_each((7, 1)) == [50, 10]
