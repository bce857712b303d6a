"""pytest_tokaudit.tokenizers.hf against the real Qwen3 tokenizer (and a real slow one)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rapidfuzz.distance import Levenshtein
from tokdata import (
    END_THINK,
    IM_END,
    THINK,
    byte_ids,
    make_record_ids,
    qwen_dir,
    sample_records,
    sample_texts,
    split_token,
)

from pytest_tokaudit.tokenizers.hf import RoundTrip, TokenizerError, TokenizerWarning, decode_encode, slow_one, load_tokenizer, resolve_tokens, roundtrip
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def records(tok):
    return sample_records(tok, 50)


def reference(tok, ids: list[int]) -> tuple[str, list[int], int]:
    """The slow, obviously right path: transformers' own decode and encode."""
    text = tok.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
    again = tok.encode(text, add_special_tokens=False)
    return text, again, Levenshtein.distance(ids, again)


def with_splits(tok, ids: list[int], positions: list[int]) -> list[int]:
    """ids with the tokens at `positions` each replaced by two valid sub-tokens."""
    out = list(ids)
    for k in sorted(positions, reverse=True):
        out[k:k + 1] = split_token(tok, ids[k])
    return out


def splittable(tok, ids: list[int]) -> list[int]:
    return [k for k, i in enumerate(ids) if split_token(tok, i) is not None]


def first_difference(detail: str) -> int:
    match = re.match(r"first difference at token (\d+): ", detail)
    assert match, detail
    return int(match[1])


def non_canonical(tok, records) -> list[list[int]]:
    """Broken variants of real records: split tokens, text cut mid-character, decomposed accent."""
    return [
        with_splits(tok, records[0], splittable(tok, records[0])[10:13]),
        with_splits(tok, records[1], splittable(tok, records[1])[-1:]),
        byte_ids(tok, "naïve 中文".encode()[:-1]) + [END_THINK, IM_END],
        cut_inside_character(tok, "Okay, the parrot 🦜 says 你好", "Hello!"),
        decomposed_accent(tok),
    ]


def decomposed_accent(tok) -> list[int]:
    """'Le café est bon' with 'e' + U+0301 (combining acute) instead of 'é'."""
    return [*tok.encode("Le cafe", add_special_tokens=False),
            *tok.encode("\u0301 est bon", add_special_tokens=False)]


def cut_inside_character(tok, reasoning: str, content: str) -> list[int]:
    """A record whose reasoning stops inside its first multi-byte character."""
    ids = make_record_ids(tok, reasoning, content)
    end = ids.index(END_THINK)
    k = next(k for k in range(1, end) if tok.decode(ids[:k]).endswith("\ufffd"))
    return ids[:k] + ids[end:]


# --- 1. canonical ids come back unchanged -----------------------------------------------


def test_canonical_records_round_trip(tok, records):
    assert len(records) == 50 and sum(map(len, records)) > 20_000
    joined = [tok.decode(r) for r in records]
    assert all(r[-1] == IM_END and END_THINK in r for r in records)
    assert any(re.search("[\u4e00-\u9fff]", t) for t in joined)  # CJK
    assert any(re.search("[\U0001F300-\U0001FAFF]", t) for t in joined)  # emoji
    assert roundtrip(tok, records) == [RoundTrip(0, 0.0, None)] * len(records)


def test_empty_and_tuple_inputs(tok, records):
    assert roundtrip(tok, []) == []
    assert roundtrip(tok, [[], tuple(records[0])]) == [RoundTrip(0, 0.0, None)] * 2


# --- 2. non-canonical splits ------------------------------------------------------------


def test_split_tokens_are_caught_at_the_right_index(tok, records):
    ids = records[3]
    positions = splittable(tok, ids)[5:25:5]  # four well separated splits
    assert len(positions) == 4
    [result] = roundtrip(tok, [with_splits(tok, ids, positions)])
    # Each split is one substitution plus one insertion.
    assert result.changed == 2 * len(positions)
    assert result.ratio == pytest.approx(result.changed / (len(ids) + len(positions)))
    assert first_difference(result.detail) == positions[0]
    left, right = split_token(tok, ids[positions[0]])
    assert f"{left}, {right}" in result.detail
    assert "\n" not in result.detail and len(result.detail) < 300


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_any_single_split_is_caught(tok, records, data):
    ids = data.draw(st.sampled_from(records))
    k = data.draw(st.sampled_from(splittable(tok, ids)))
    [result] = roundtrip(tok, [with_splits(tok, ids, [k])])
    assert result.changed == 2
    assert first_difference(result.detail) == k


# --- 3. text cut inside a multi-byte character -----------------------------------------


@pytest.mark.parametrize("reasoning", [
    "The parrot emoji is 🦜, a bird", "古文：龘靐齉爩", "नमस्ते दुनिया", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ℵ", "👩‍💻 coder"])
def test_record_cut_inside_a_character(tok, reasoning):
    ids = cut_inside_character(tok, reasoning, "The answer.")
    k = ids.index(END_THINK)  # ids[k - 1] holds the first bytes of a character
    [result] = roundtrip(tok, [ids])
    assert result.changed > 0
    assert first_difference(result.detail) == k - 1
    assert "\\ufffd</think>The answer." in result.detail  # U+FFFD shown escaped


def test_byte_tokens_of_truncated_utf8(tok):
    text = "naïve 中文 🦜"
    for drop in (1, 2, 3):
        data = text.encode()[:-drop]
        with pytest.raises(UnicodeDecodeError):
            data.decode()
        [result] = roundtrip(tok, [byte_ids(tok, data) + [IM_END]])
        assert result.changed > 0 and result.detail
    # Whole characters as single bytes: valid UTF-8 but still non-canonical.
    [result] = roundtrip(tok, [byte_ids(tok, "中".encode())])
    assert result.changed == 3 and first_difference(result.detail) == 0


def test_decomposed_accent_is_changed_by_nfc(tok):
    # Qwen's tokenizer.json normalises to NFC on encode: 'e' + U+0301 comes back as 'é'.
    [result] = roundtrip(tok, [decomposed_accent(tok)])
    assert result.changed > 0
    assert "\\u0301" in result.detail


# --- 4. batch path == transformers' own decode/encode ------------------------------------


def test_batch_path_equals_decode_encode(tok, records):
    lists = records + non_canonical(tok, records)
    expected = [reference(tok, ids) for ids in lists]
    assert decode_encode(tok, lists) == [(text, again) for text, again, _ in expected]
    results = roundtrip(tok, lists)
    assert [r.changed for r in results] == [d for _, _, d in expected]
    assert all(r.changed > 0 for r in results[len(records):])


def test_slow_path_equals_fast_path(tok, records):
    lists = records[:10] + non_canonical(tok, records)
    assert [slow_one(tok, ids) for ids in lists] == decode_encode(tok, lists)


@pytest.fixture(scope="module")
def slow_tok(tmp_path_factory):
    """A real slow (pure Python) tokenizer, saved and loaded like any other directory."""
    from transformers import ByT5Tokenizer

    directory = tmp_path_factory.mktemp("byt5")
    ByT5Tokenizer().save_pretrained(directory)
    return load_tokenizer(directory)


def test_slow_tokenizer(slow_tok):
    assert not slow_tok.is_fast
    good = slow_tok.encode("héllo 中文</s>", add_special_tokens=False)
    cut = slow_tok.encode("héllo 中", add_special_tokens=False)[:-1]
    # The first round trip of a slow tokenizer in a process says, once, that its logging is
    # silenced during the audit (a tokenizer may log a line per call).
    with pytest.warns(TokenizerWarning, match="slow tokenizer: its logging and warnings are silenced"):
        results = roundtrip(slow_tok, [good, cut, good + [len(slow_tok)], [-5]])
    assert results[0] == RoundTrip(0, 0.0, None)
    assert results[1].changed > 0 and first_difference(results[1].detail) == len(cut) - 2
    assert results[2].ratio == 1.0 and f"id {len(slow_tok)} at token {len(good)}" in results[2].detail
    assert results[3].ratio == 1.0
    assert resolve_tokens(slow_tok, ["</s>", "259", 2], "k") == (1, 259, 2)
    with pytest.raises(TokenizerError, match="closest special tokens: '</s>'"):
        resolve_tokens(slow_tok, ["</ss>"], "k")


# --- 5. resolve_tokens -------------------------------------------------------------------


def test_resolve_tokens(tok):
    assert resolve_tokens(tok, ["</think>", "<think>", "<|im_end|>"], "k") == (END_THINK, THINK, IM_END)
    assert resolve_tokens(tok, [151668, "151645", " 151667 "], "k") == (END_THINK, IM_END, THINK)
    assert resolve_tokens(tok, ["<|im_end|>", 151667, "151668"], "k") == (IM_END, THINK, END_THINK)
    assert resolve_tokens(tok, [], "k") == ()
    # Regular tokens: vocabulary spelling or text; digits are always ids.
    the = tok.encode(" the", add_special_tokens=False)
    assert resolve_tokens(tok, ["Ġthe", " the", "4"], "k") == (*the, *the, 4)


@pytest.mark.parametrize("spec", ["</thnk>", "<think", "<|im_end>"])
def test_unknown_token_lists_close_special_tokens(tok, spec):
    with pytest.raises(TokenizerError) as info:
        resolve_tokens(tok, ["</think>", spec], "tokaudit_require_once")
    message = str(info.value)
    assert message.startswith(f"tokaudit_require_once: unknown token {spec!r}; closest special tokens: ")
    assert "'</think>'" in message or "'<|im_end|>'" in message


@pytest.mark.parametrize("spec", ["no such token here", "", 151669, "999999", -1, True, 1.5])
def test_bad_specs(tok, spec):
    with pytest.raises(TokenizerError, match=r"^tokaudit_require_once: "):
        resolve_tokens(tok, [spec], "tokaudit_require_once")


# --- 6. load errors ----------------------------------------------------------------------


def test_load_is_cached(tok):
    assert load_tokenizer(str(qwen_dir()) + "/") is tok
    assert load_tokenizer(f"{qwen_dir()}/../tokenizer_files/.") is tok


def test_missing_directory(tmp_path):
    with pytest.raises(TokenizerError, match=re.escape(str(tmp_path / "nope")) + ".*does not exist"):
        load_tokenizer(tmp_path / "nope")
    with pytest.raises(TokenizerError, match="empty tokenizer path"):
        load_tokenizer("")


def test_file_instead_of_directory(tmp_path):
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(TokenizerError, match="is not a directory"):
        load_tokenizer(tmp_path / "tokenizer.json")


def test_directory_without_tokenizer_files(tmp_path):
    (tmp_path / "README.md").write_text("not a tokenizer")
    with pytest.raises(TokenizerError, match=f"no tokenizer files in {re.escape(str(tmp_path))}"):
        load_tokenizer(tmp_path)


def test_broken_tokenizer_files(tmp_path):
    (tmp_path / "tokenizer.json").write_text("{not json")
    (tmp_path / "tokenizer_config.json").write_text('{"tokenizer_class": "PreTrainedTokenizerFast"}')
    expected = f"cannot load the tokenizer in {re.escape(str(tmp_path))}: "
    with pytest.raises(TokenizerError, match=expected) as info:
        load_tokenizer(tmp_path)
    assert "\n" not in str(info.value)


def test_remote_code_needs_opt_in(tmp_path):
    # What Kimi K2 ships: an auto_map naming its own tokenizer module.
    config = json.loads((qwen_dir() / "tokenizer_config.json").read_text(encoding="utf-8"))
    config["auto_map"] = {"AutoTokenizer": ["tokenization_kimi.TikTokenTokenizer", None]}
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    shutil.copy(qwen_dir() / "tokenizer.json", tmp_path)
    with pytest.raises(TokenizerError) as info:
        load_tokenizer(tmp_path)
    message = str(info.value)
    assert str(tmp_path) in message and "tokenization_kimi.py" in message
    assert "tokaudit_trust_remote_code = true" in message
    assert "-o tokaudit_trust_remote_code=true" in message


# --- 7. no transformers on import, and a quiet load -------------------------------------


def test_import_does_not_load_transformers_and_load_is_quiet(tmp_path):
    """Qwen3's tokenizer.json is loaded with `tokenizers` alone; one transformers must load
    (here: add_prefix_space, which transformers' Qwen2 class builds in) imports it quietly."""
    other = tmp_path / "prefix"
    other.mkdir()
    (other / "tokenizer.json").symlink_to(qwen_dir() / "tokenizer.json")
    config = json.loads((qwen_dir() / "tokenizer_config.json").read_text(encoding="utf-8"))
    (other / "tokenizer_config.json").write_text(json.dumps({**config, "add_prefix_space": True}))
    code = (
        "import os, sys, pytest_tokaudit.tokenizers.hf as t\n"
        "assert 'transformers' not in sys.modules, 'transformers imported'\n"
        "env = dict(os.environ)\n"
        f"qwen = t.load_tokenizer({str(qwen_dir())!r})\n"
        "assert type(qwen).__name__ == 'FastTokenizer' and qwen.is_fast\n"
        "assert 'transformers' not in sys.modules, 'transformers imported for tokenizer.json'\n"
        f"tok = t.load_tokenizer({str(other)!r})\n"
        "assert 'transformers' in sys.modules and tok.is_fast\n"
        # transformers made it (how it honours add_prefix_space varies by version)
        "assert type(tok).__name__ != 'FastTokenizer'\n"
        "assert dict(os.environ) == env, 'environment changed'\n"
        "import transformers, logging\n"
        "assert transformers.utils.logging.get_verbosity() == logging.WARNING\n"
    )
    env = {k: v for k, v in __import__("os").environ.items()
           if not k.startswith(("TRANSFORMERS_", "HF_", "TOKENIZERS_"))}
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "" and proc.stderr == ""


@pytest.fixture(scope="module")
def transformers_tok():
    """Qwen3 loaded by transformers, the reference the direct load must answer as."""
    from pytest_tokaudit.tokenizers.hf import import_transformers
    return import_transformers().AutoTokenizer.from_pretrained(str(qwen_dir()), local_files_only=True)


def test_the_direct_load_answers_as_transformers(tok, transformers_tok, records):
    ref = transformers_tok
    assert type(tok).__name__ == "FastTokenizer" and type(ref).__name__ != "FastTokenizer"
    texts = [*sample_texts(), "a </think> b <|im_end|> c <think>", " the  \n\n x", "<|endoftext|>"]
    for text in texts:
        ids = ref.encode(text, add_special_tokens=False)
        assert tok.encode(text, add_special_tokens=False) == ids
        assert tok.encode(text) == ref.encode(text)
        assert (tok.encode(text, add_special_tokens=False, split_special_tokens=True)
                == ref.encode(text, add_special_tokens=False, split_special_tokens=True))
        assert tok.decode(ids) == ref.decode(ids, skip_special_tokens=False)
        assert tok.decode(ids, skip_special_tokens=True) == ref.decode(ids, skip_special_tokens=True)
    assert tok.get_added_vocab() == ref.get_added_vocab()
    assert set(tok.all_special_tokens) == set(ref.all_special_tokens)
    assert set(tok.all_special_ids) == set(ref.all_special_ids)
    assert (tok.unk_token, tok.unk_token_id, len(tok), tok.split_special_tokens) == (
        ref.unk_token, ref.unk_token_id, len(ref), ref.split_special_tokens)
    names = ["</think>", "Ġthe", "no such token", "<|im_end|>"]
    assert tok.convert_tokens_to_ids(names) == ref.convert_tokens_to_ids(names)
    assert tok.convert_ids_to_tokens([END_THINK, 785]) == ref.convert_ids_to_tokens([END_THINK, 785])
    # what the audit computes with either
    lists = records + non_canonical(tok, records)
    assert roundtrip(tok, lists) == roundtrip(ref, lists)
    specs = ["</think>", "<|im_end|>", " the", "Ġthe", "151667"]
    assert resolve_tokens(tok, specs, "k") == resolve_tokens(ref, specs, "k")


@pytest.mark.parametrize("change, direct", [
    ({}, True),
    ({"tokenizer_class": "PreTrainedTokenizerFast"}, True),  # transformers loads it as-is
    ({"add_prefix_space": True}, False),  # Qwen2's class builds another pre-tokenizer
    ({"tokenizer_class": "LlamaTokenizerFast"}, False),  # a class not known to be equal
    ({"additional_special_tokens": ["<|not_in_the_file|>"]}, False),  # transformers adds it
    ({"added_tokens_decoder": {"151643": {"content": "<|other|>", "special": True}}}, False),
])
def test_tokenizers_alone_only_where_it_gives_what_transformers_would(tmp_path, change, direct):
    config = json.loads((qwen_dir() / "tokenizer_config.json").read_text(encoding="utf-8"))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({**config, **change}))
    (tmp_path / "tokenizer.json").symlink_to(qwen_dir() / "tokenizer.json")
    from pytest_tokaudit.tokenizers.hf import load_direct
    assert (load_direct(tmp_path) is not None) is direct


# --- 8. ids outside the vocabulary --------------------------------------------------------


def test_out_of_range_ids_do_not_crash(tok, records):
    size = len(tok)
    bad = [
        records[0][:5] + [size] + records[0][5:],  # just past the end: the backend drops it
        [size + 100_000],
        [-1, 5],  # the backend raises OverflowError for these two
        [2**32],
        records[1],
    ]
    results = roundtrip(tok, records[:2] + bad)
    assert results[:2] == [RoundTrip(0, 0.0, None)] * 2
    assert results[-1] == RoundTrip(0, 0.0, None)
    for result, ids, pos in zip(results[2:-1], bad[:-1], (5, 0, 0, 0), strict=True):
        assert result.ratio == 1.0 and result.changed == len(ids)
        assert result.detail == f"id {ids[pos]} at token {pos} is not in the vocabulary (size {size})"
