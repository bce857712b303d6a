"""fastids directly against simple references: a regular expression for what a valid ids
array's text is, list methods for what IdsText answers, orjson for what `cut` must keep."""

from __future__ import annotations

import re

import orjson
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pytest_tokaudit.model.fastids import SENTINEL, IdsText, canonical, count_valid, cut  # The reference: non-negative JSON integers (no leading zero, no sign, no fraction) of at
# most 19 digits, which orjson always reads as ints, separated by single commas.
VALID = re.compile(rb",(?:(?:0|[1-9][0-9]{0,18}),)*")
TOKENS = (0, 7, 151668, 151667, 15166, 1516680, 10**18)

ids_lists = st.lists(
    st.one_of(st.sampled_from(TOKENS), st.integers(0, 200_000), st.integers(0, 10**19 - 1)),
    max_size=60,
)


@settings(max_examples=600)
@given(st.binary(max_size=40).map(lambda b: b.translate(bytes(b"0123456789,,, x-"[c % 16] for c in range(256)))))
@example(b",")
@example(b",0,")
@example(b",00,")
@example(b",1234567890123456789,")
@example(b",12345678901234567890,")
@example(b",,")
@example(b",0,0,0,0,0,0,0,0,0,0,")
def test_count_valid_matches_the_reference(body):
    text = b"," + body + b"," if body != b"," else body
    expected = text.count(b",") - 1 if VALID.fullmatch(text) else None
    assert count_valid(bytearray(text)) == expected


@settings(max_examples=300)
@given(ids_lists, st.lists(st.sampled_from(TOKENS + (3, 1)), min_size=1, max_size=5))
@example([7, 7, 7, 1, 7, 7] * 10, [7, 1])
@example([151668, 151667, 7] * 50 + [1516680], [151668, 151667, 15166, 1516680])
def test_ids_text_answers_as_the_list_does(ids, tokens):
    text = IdsText(bytearray(canonical(ids)), len(ids))
    assert count_valid(bytearray(canonical(ids))) == len(ids)
    assert len(text) == len(ids)
    assert text.last() == (ids[-1] if ids else None)
    assert text.to_list() == ids
    assert text.count_each(tuple(tokens)) == [ids.count(t) for t in tokens]


def _line(ids_json: bytes, before: bytes, after: bytes) -> bytes:
    return b"{" + before + b'"output_ids"' + ids_json + after + b"}"


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow])
@given(
    ids=st.lists(st.one_of(st.integers(-3, 200_000), st.integers(2**63, 2**65), st.floats(0, 2)),
                 max_size=8),
    sep=st.sampled_from([b":", b" : ", b":\t", b"", b":\n "]),
    comma=st.sampled_from([b",", b", ", b" ,", b",,"]),
    before=st.sampled_from([b"", b'"a":1,', b'"output_ids":[1],', b'"\\u006futput_ids":[2],',
                            b'"b":"output_ids",', b'"c":{"output_ids":[3]},']),
    after=st.sampled_from([b"", b',"a":1', b',"output_ids":[4]', b',"x":"\\u0041"', b",",
                           b',"t":"]"']),
)
def test_cut_keeps_the_object_orjson_reads(ids, sep, comma, before, after):
    ids_json = sep + b"[" + comma.join(orjson.dumps(i) if type(i) is float else str(i).encode()
                                       for i in ids) + b"]"
    raw = _line(ids_json, before, after)
    result = cut(raw, b'"output_ids"')
    if result is None:
        return  # the plain path decides: always allowed
    line, text = result
    try:
        expected = orjson.loads(raw)
    except orjson.JSONDecodeError:
        try:
            orjson.loads(line)
        except orjson.JSONDecodeError:
            return  # invalid either way
        raise AssertionError(f"cut made invalid JSON valid: {raw!r}") from None
    assert expected["output_ids"] == text.to_list()
    assert all(type(i) is int and i >= 0 for i in text.to_list())
    assert orjson.loads(line) == {**expected, "output_ids": SENTINEL}


def test_cut_takes_the_ordinary_line():
    result = cut(b'{"id":"a","output_ids":[1, 2,151645],"n":3}', b'"output_ids"')
    assert result is not None
    line, text = result
    assert orjson.loads(line)["output_ids"] == SENTINEL
    assert (len(text), text.last(), text.to_list()) == (3, 151645, [1, 2, 151645])
