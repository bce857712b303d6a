"""Chat templates: how many tokens a request's messages (and tools) make as a prompt.

The count is transformers' `apply_chat_template(messages, tools=tools, tokenize=True,
add_generation_prompt=True)`, which renders the template and encodes the text with no added
special tokens. Here the rendering goes record by record through the tokenizer's own
`apply_chat_template(..., tokenize=False)` (so every version's rules for messages and tools
apply unchanged), and the texts of a batch are encoded in one call of the fast backend
(`encode_batch`): the same ids, without a Python call and a BatchEncoding per record.

A message part the template cannot count (an image, audio, a file) makes the conversation
unusable for the count: `conversation()` says why. Parts that are all text are joined, as a
string content.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re
from pathlib import Path
from typing import Any, Sequence

from .hf import (
    TokenizerError,
    encoding_backend,
    import_transformers,
    is_fast,
    load_tokenizer,
    one_line,
    quiet,
)
from .tiktoken import TiktokenTokenizer

__all__ = ["Chat", "chat_for", "check_template", "conversation"]


class Chat:
    """A tokenizer's chat template, ready to count prompts: `lengths(conversations)`."""

    def __init__(self, renderer: Any, template: str | None, where: str):
        self.renderer = renderer  # a transformers tokenizer: its apply_chat_template renders
        self.template = template  # the override's text; None: the tokenizer's own
        self.where = where  # where the template comes from, for messages
        self._split: Any = False  # not worked out yet
        self._pieces: dict[str, int] = {}

    def render(self, messages: list[dict[str, Any]], tools: list[Any] | None) -> str:
        """The prompt text (generation prompt added); raises ValueError when the template
        refuses the messages (its own raise_exception, a wrong shape)."""
        try:
            text = self.renderer.apply_chat_template(
                messages, tools=tools or None, chat_template=self.template, tokenize=False,
                add_generation_prompt=True)
        except Exception as exc:  # jinja2's errors, the template's raise_exception, TypeError
            raise ValueError(one_line(exc)) from None
        return str(text)

    def encode(self, texts: list[str]) -> list[int]:
        """Each text's length in tokens, no special tokens added (as apply_chat_template)."""
        tok = self.renderer
        if not is_fast(tok):
            return [len(tok.encode(t, add_special_tokens=False)) for t in texts]
        backend = encoding_backend(tok)
        split = self._splitter(backend)
        if split is None:
            return [len(e.ids) for e in backend.encode_batch(texts, add_special_tokens=False)]
        # The backend encodes the text between added tokens piece by piece: a prompt's
        # pieces repeat across records (the system prompt, the tools section), so each
        # distinct piece is encoded once and its length kept (a bounded cache).
        cuts = [split.split(t) for t in texts]  # pieces at even places, added tokens at odd
        known = self._pieces
        new = list(dict.fromkeys(p for pieces in cuts for p in pieces[::2] if p and p not in known))
        if len(known) + len(new) > _PIECES:
            known.clear()
            new = list(dict.fromkeys(p for pieces in cuts for p in pieces[::2] if p))
        for piece, e in zip(new, backend.encode_batch(new, add_special_tokens=False)):
            known[piece] = len(e.ids)
        return [sum(known[p] for p in pieces[::2] if p) + len(pieces) // 2 for pieces in cuts]

    def _splitter(self, backend: Any) -> Any:
        """A regex cutting a text at the added tokens, where the backend's own cut is exactly
        that (no added token strips white space or matches words or normalised text, special
        tokens in text are tokens); None where it is not: whole texts are encoded then."""
        if self._split is False:
            tokens = backend.get_added_tokens_decoder().values()
            plain = all(not (t.lstrip or t.rstrip or t.single_word or t.normalized) for t in tokens)
            names = sorted((t.content for t in tokens), key=len, reverse=True)
            self._split = (re.compile("(" + "|".join(map(re.escape, names)) + ")")
                           if plain and names and not backend.encode_special_tokens else None)
        return self._split

    def lengths(self, conversations: Sequence[tuple[list[dict[str, Any]], list[Any] | None]]
                ) -> list[int | str]:
        """Each conversation's prompt length, or why the template refused it."""
        texts: list[str] = []
        out: list[int | str] = []
        for messages, tools in conversations:
            try:
                texts.append(self.render(messages, tools))
                out.append(len(texts) - 1)
            except ValueError as exc:
                out.append(f"the chat template cannot render the messages: {exc}")
        counts = self.encode(texts) if texts else []
        return [counts[v] if type(v) is int else v for v in out]


_PIECES = 1 << 16  # distinct pieces whose lengths are kept


TEXT_PARTS = frozenset({"text", "input_text"})


def conversation(messages: Any, tools: Any) -> tuple[list[dict[str, Any]], list[Any] | None] | str:
    """(messages, tools) as the template takes them, or why they cannot be counted: a part
    that is not text (an image, audio), or a shape that is no OpenAI-style messages list.
    Text-only part lists are joined into one string, as the providers read them."""
    if not isinstance(messages, list) or not messages:
        return "the messages are not a non-empty list"
    if tools is not None and not isinstance(tools, list):
        return "the tools are not a list"
    out = messages
    for k, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            return f"message {k} is not an object with a role"
        content = message.get("content")
        if isinstance(content, list):
            kinds = [p.get("type") if isinstance(p, dict) else type(p).__name__ for p in content]
            other = [str(kind) for kind in kinds if kind not in TEXT_PARTS]
            if other:
                return f"message {k} has a part the template cannot count ({other[0]})"
            if out is messages:
                out = list(messages)
            out[k] = {**message, "content": "".join(str(p.get("text", "")) for p in content)}
    return out, tools


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or blocked in sys.modules
        return False


def check_template(tokenizer: str, override: str) -> None:
    """Raise TokenizerError when the prompt audit would find no chat template: a stat and a
    read of tokenizer_config.json, at configure time (transformers is imported on first use);
    also when jinja2, which renders it, is not installed (a look-up, not an import)."""
    if not _installed("jinja2"):
        raise TokenizerError("the prompt audit renders the chat template with jinja2, which is "
                             "not installed here: pip install 'pytest-tokaudit[tokenizer]'")
    if override or tokenizer.startswith("tiktoken:"):
        if not override:
            raise TokenizerError(f"the prompt audit needs a Hugging Face tokenizer directory with "
                                 f"a chat template; {tokenizer} is a tiktoken encoding")
        check_syntax(override)
        return
    where = Path(tokenizer)
    if any((where / name).is_file() for name in ("chat_template.jinja", "chat_template.json")):
        return
    if (where / "additional_chat_templates").is_dir():
        return
    try:
        config = json.loads((where / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        config = {}
    if not (isinstance(config, dict) and config.get("chat_template")):
        raise TokenizerError(f"the tokenizer in {tokenizer} has no chat template: set "
                             "tokaudit_chat_template to a Jinja chat template file")


def check_syntax(path: str) -> None:
    """TokenizerError when the Jinja file at `path` does not parse: a mistake of the
    configuration, said once at start rather than as every record's finding. Parsed only
    (names of filters and functions are the renderer's to know); a tag this parser does not
    know is left to the renderer, which may (transformers' own, such as `generation`)."""
    import jinja2  # here: only a run whose contract names a template file pays for it

    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TokenizerError(f"tokaudit_chat_template: cannot read {path}: {exc}") from None
    try:
        jinja2.Environment(extensions=["jinja2.ext.loopcontrols"]).parse(text)
    except jinja2.TemplateSyntaxError as exc:
        if not exc.message or not exc.message.startswith("Encountered unknown tag"):
            raise TokenizerError(f"tokaudit_chat_template: {path}, line {exc.lineno}: "
                                 f"{exc.message}") from None


@functools.cache
def chat_for(tokenizer: str, trust_remote_code: bool, override: str) -> Chat:
    """The chat template of the tokenizer at `tokenizer` (or the Jinja file `override`),
    loaded once per process; TokenizerError when there is none, saying what to set."""
    tok = load_tokenizer(tokenizer, trust_remote_code)
    source = getattr(tok, "source", None) if isinstance(tok, TiktokenTokenizer) else tok
    renderer = source if hasattr(source, "apply_chat_template") else None
    if renderer is None:
        if isinstance(tok, TiktokenTokenizer):
            raise TokenizerError(f"the prompt audit needs a Hugging Face tokenizer directory with "
                                 f"a chat template; {tokenizer} is a tiktoken encoding")
        transformers = import_transformers()
        try:
            with quiet(transformers):
                renderer = transformers.AutoTokenizer.from_pretrained(
                    tokenizer, local_files_only=True, trust_remote_code=trust_remote_code)
        except Exception as exc:
            raise TokenizerError(f"cannot load the tokenizer in {tokenizer}: {one_line(exc)}") from exc
    if override:
        try:
            text = Path(override).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise TokenizerError(f"tokaudit_chat_template: cannot read {override}: {exc}") from None
        return Chat(renderer, text, override)
    if not getattr(renderer, "chat_template", None):
        raise TokenizerError(f"the tokenizer in {tokenizer} has no chat template: set "
                             "tokaudit_chat_template to a Jinja chat template file")
    return Chat(renderer, None, f"{tokenizer}'s chat template")
