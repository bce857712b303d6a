"""Local Hugging Face tokenizers: loading, token names -> ids, decode->encode round trip.

A tokenizer.json that says all there is to say (a fast tokenizer loaded as-is, or Qwen2's
pipeline, which transformers would rebuild identically) is loaded with `tokenizers` alone
(FastTokenizer): importing transformers costs ~2 s per process. Anything else goes through
transformers, imported lazily inside `load_tokenizer`: a run without a tokenizer pays for
neither.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import math
import os
import unicodedata
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import tiktoken

__all__ = ["RoundTrip", "TokenizerError", "load_tokenizer", "require_roundtrip", "resolve_tokens",
           "roundtrip"]


_TRUST_HINT = "set tokaudit_trust_remote_code = true in pytest.ini (or -o tokaudit_trust_remote_code=true)"


# The fast backend takes ids as u32: anything outside raises OverflowError.
_U32 = 2**32


_CONTEXT_IDS = 2  # ids shown before the first difference


_AFTER_IDS = 4  # ids shown from the first difference on


_TEXT_BEFORE, _TEXT_AFTER = 30, 40  # characters of decoded text shown around it


class TokenizerError(ValueError):
    """A tokenizer configuration problem; the message says what to fix."""


@dataclass(frozen=True, slots=True)
class RoundTrip:
    """Result of decode->encode for one id list.

    `changed` is the token edit distance, `ratio` is changed / len(ids) (0.0 for no ids;
    it can exceed 1.0 when the text re-encodes to more tokens), `detail` says where the
    first difference is (None when the ids come back unchanged). `at_least`: the distance
    is over the limit the round trip was asked about, and `changed` is that limit + 1, not
    the distance (measuring it all is quadratic work on a long list).
    """

    changed: int
    ratio: float
    detail: str | None = None
    at_least: bool = False


_SAME = RoundTrip(0, 0.0)


def load_tokenizer(path: str | os.PathLike[str], trust_remote_code: bool = False) -> Any:
    """The transformers tokenizer in local directory `path`, loaded once per process.

    Never downloads. Raises TokenizerError for a missing or unusable directory, and for
    a tokenizer that needs its own Python code (auto_map) unless trust_remote_code.
    """
    if not str(path).strip():
        raise TokenizerError("empty tokenizer path: give a local tokenizer directory")
    if str(path).startswith(tiktoken.PREFIX):  # tiktoken:o200k_base, tiktoken:/path/x.tiktoken
        return _load_tiktoken(str(path))
    return _load(str(Path(path).expanduser().resolve()), bool(trust_remote_code))


@functools.cache
def _load_tiktoken(spec: str) -> Any:
    try:
        return tiktoken.load_encoding(spec)
    except tiktoken.TiktokenError as exc:
        raise TokenizerError(str(exc)) from None


@functools.cache
def _load(directory: str, trust_remote_code: bool) -> Any:
    where = Path(directory)
    if not where.is_dir():
        what = "is not a directory" if where.exists() else "does not exist"
        raise TokenizerError(f"tokenizer directory {directory} {what}; give a local directory "
                             "holding tokenizer.json / tokenizer_config.json (nothing is downloaded)")
    if not any((where / name).is_file() for name in ("tokenizer.json", "tokenizer_config.json")):
        raise TokenizerError(f"no tokenizer files in {directory}: expected tokenizer.json "
                             "and/or tokenizer_config.json")
    remote = _remote_code(where)
    if remote and not trust_remote_code:
        raise TokenizerError(f"the tokenizer in {directory} needs remote code ({remote}); "
                             f"to allow it to run, {_TRUST_HINT}")
    if not remote:
        direct = load_direct(where)
        if direct is not None:
            return direct
    try:
        transformers = import_transformers()
        with quiet(transformers):
            tok = transformers.AutoTokenizer.from_pretrained(
                directory, local_files_only=True, trust_remote_code=trust_remote_code)
    except TokenizerError:
        raise
    except ImportError as exc:  # its remote code imports what is not installed (tiktoken...)
        # transformers' own check of a remote module's imports names them in its message only
        names = [exc.name.split(".")[0]] if exc.name else [n for n in _EXTRAS if n in str(exc)]
        hint = next((_EXTRAS[n] for n in names if n in _EXTRAS), None)
        hint = f": pip install 'pytest-tokaudit[{hint}]'" if hint else ""
        raise TokenizerError(f"cannot load the tokenizer in {directory}: "
                             f"{one_line(exc)}{hint}") from exc
    except Exception as exc:
        raise TokenizerError(f"cannot load the tokenizer in {directory}: {one_line(exc)}") from exc
    # A remote-code tokenizer over a tiktoken Encoding (Kimi K2's and others'): its
    # Encoding directly, the fastest exact path, which never turns text into a special token.
    encoding = tiktoken.find_encoding(tok)
    if encoding is not None:
        return tiktoken.TiktokenTokenizer(encoding, source=tok)
    # Any other slow (pure Python) tokenizer is accepted: roundtrip() then goes record by
    # record through tok.decode/tok.encode, which is much slower.
    return tok


# The extra that installs a module a tokenizer's own code may import.
_EXTRAS = {"tiktoken": "tiktoken", "tokenizers": "tokenizer", "transformers": "tokenizer"}


# Classes transformers loads tokenizer.json for as it is.
_AS_IS = frozenset({"PreTrainedTokenizerFast", "TokenizersBackend"})


# Classes whose pipeline transformers (5) rebuilds from vocab and merges: direct only when
# tokenizer.json's pipeline is the one it would build (_qwen2_pipeline).
_QWEN2 = frozenset({"Qwen2Tokenizer", "Qwen2TokenizerFast"})


_SPECIAL_KEYS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
                 "mask_token")


_QWEN2_DEFAULTS = {"unk_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
                   "pad_token": "<|endoftext|>"}  # Qwen2Tokenizer's, for keys the config lacks


def load_direct(where: Path) -> FastTokenizer | None:
    """tokenizer.json loaded with `tokenizers`, where that gives the tokenizer transformers
    would load; None where transformers must load it (another class, no tokenizer.json, a
    special token tokenizer.json lacks, tokenizers not installed)."""
    try:
        config = json.loads((where / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    file = where / "tokenizer.json"
    if not isinstance(config, dict) or not file.is_file():
        return None
    kind = config.get("tokenizer_class")
    if kind not in _AS_IS and kind not in _QWEN2:
        return None
    try:
        from tokenizers import Tokenizer
    except ImportError:
        return None
    try:
        backend = Tokenizer.from_file(str(file))
    except Exception as exc:  # the Rust side raises plain Exceptions for a bad file
        raise TokenizerError(f"cannot load the tokenizer in {where}: {one_line(exc)}") from exc
    if kind in _QWEN2:
        if not _qwen2_pipeline(backend, config):
            return None
        config = {**_QWEN2_DEFAULTS, **config}
    specials = _config_specials(config)
    if specials is None or any(backend.token_to_id(name) is None for name in specials.values()):
        return None  # transformers would add the token: let it
    for index, entry in (config.get("added_tokens_decoder") or {}).items():
        content = entry.get("content") if isinstance(entry, dict) else None
        if not str(index).isdigit() or backend.id_to_token(int(index)) != content:
            return None
    return FastTokenizer(backend, config, specials)


def _state(component: Any) -> Any:
    """A pipeline component as JSON, without trim_offsets (offsets only, never ids)."""
    def strip(obj: Any) -> Any:
        if isinstance(obj, dict):
            return {k: strip(v) for k, v in obj.items() if k != "trim_offsets"}
        if isinstance(obj, list):
            return [strip(v) for v in obj]
        return obj
    return None if component is None else strip(json.loads(component.__getstate__()))


def _qwen2_pipeline(backend: Any, config: dict[str, Any]) -> bool:
    """Whether tokenizer.json's pipeline is the one transformers' Qwen2Tokenizer builds."""
    from tokenizers import Regex, normalizers, pre_tokenizers

    # transformers' tokenization_qwen2.PRETOKENIZE_REGEX
    regex = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"""
             r""" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")
    prefix = bool(config.get("add_prefix_space") or False)
    want = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=prefix, use_regex=False),
    ])
    model = backend.model
    return (
        type(model).__name__ == "BPE" and model.dropout is None and not model.byte_fallback
        and not model.continuing_subword_prefix and not model.end_of_word_suffix
        and not model.fuse_unk and not model.ignore_merges
        and _state(backend.normalizer) == _state(normalizers.NFC())
        and _state(backend.pre_tokenizer) == _state(want)
        and (_state(backend.decoder) or {}).get("type") == "ByteLevel"
    )


def _config_specials(config: dict[str, Any]) -> dict[str, str] | None:
    """The special tokens tokenizer_config.json names: attribute -> token, and
    "additional" -> each extra one; None for a value this module cannot read."""
    def name(value: Any) -> str | None | bool:
        if value is None or isinstance(value, str):
            return value
        if isinstance(value, dict) and isinstance(value.get("content"), str):
            return str(value["content"])
        return False

    out: dict[str, str | None] = {}
    for key in _SPECIAL_KEYS:
        value = name(config.get(key))
        if value is False:
            return None
        out[key] = value  # type: ignore[assignment]  # False returned above
    extra = config.get("additional_special_tokens") or config.get("extra_special_tokens") or []
    if isinstance(extra, dict):
        extra = list(extra.values())
    if not isinstance(extra, list):
        return None
    for k, value in enumerate(extra):
        value = name(value)
        if not isinstance(value, str):
            return None
        out[f"additional {k}"] = value
    return {k: v for k, v in out.items() if v is not None}


_CLEAN_UP = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
             (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"))


class FastTokenizer:
    """A tokenizer.json loaded with `tokenizers`: the part of transformers' fast tokenizer
    interface this package (and a conftest.py) uses, answering as transformers would."""

    is_fast = True

    def __init__(self, backend: Any, config: dict[str, Any], specials: dict[str, str]):
        self.backend_tokenizer = backend
        self.split_special_tokens = bool(config.get("split_special_tokens") or False)
        self.clean_up_tokenization_spaces = bool(config.get("clean_up_tokenization_spaces") or False)
        self.unk_token: str | None = specials.get("unk_token")
        self.unk_token_id: int | None = (backend.token_to_id(self.unk_token)
                                         if self.unk_token is not None else None)
        self.all_special_tokens = list(dict.fromkeys(specials.values()))
        self.all_special_ids = [backend.token_to_id(t) for t in self.all_special_tokens]

    def __len__(self) -> int:
        return int(self.backend_tokenizer.get_vocab_size(with_added_tokens=True))

    def __repr__(self) -> str:
        return f"FastTokenizer(vocabulary {len(self):,})"

    def get_added_vocab(self) -> dict[str, int]:
        return {t.content: i for i, t in self.backend_tokenizer.get_added_tokens_decoder().items()}

    def convert_tokens_to_ids(self, tokens: Any) -> Any:
        if isinstance(tokens, str):
            i = self.backend_tokenizer.token_to_id(tokens)
            return self.unk_token_id if i is None else i
        return [self.convert_tokens_to_ids(t) for t in tokens]

    def convert_ids_to_tokens(self, ids: Any) -> Any:
        if isinstance(ids, int):
            return self.backend_tokenizer.id_to_token(ids)
        return [self.backend_tokenizer.id_to_token(i) for i in ids]

    def encode(self, text: str, add_special_tokens: bool = True,
               split_special_tokens: bool | None = None) -> list[int]:
        backend = self.backend_tokenizer
        split = self.split_special_tokens if split_special_tokens is None else split_special_tokens
        if backend.encode_special_tokens != split:
            backend.encode_special_tokens = split
        try:
            return list(backend.encode(text, add_special_tokens=add_special_tokens).ids)
        finally:
            if backend.encode_special_tokens != self.split_special_tokens:
                backend.encode_special_tokens = self.split_special_tokens

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False,
               clean_up_tokenization_spaces: bool | None = None) -> str:
        text: str = self.backend_tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)
        clean = (self.clean_up_tokenization_spaces if clean_up_tokenization_spaces is None
                 else clean_up_tokenization_spaces)
        if clean:
            for a, b in _CLEAN_UP:
                text = text.replace(a, b)
        return text


def _remote_code(where: Path) -> str | None:
    """The custom tokenizer code an auto_map names (any auto_map in tokenizer_config.json,
    the AutoTokenizer entry of config.json's), if any."""
    for name in ("tokenizer_config.json", "config.json"):
        try:
            auto_map = json.loads((where / name).read_text(encoding="utf-8")).get("auto_map")
        except (OSError, ValueError, AttributeError):
            continue
        entry = auto_map.get("AutoTokenizer") if isinstance(auto_map, dict) else auto_map
        if not auto_map or (entry is None and name == "config.json"):
            continue
        refs = [entry] if isinstance(entry, str) else entry or []
        modules = sorted({ref.split("--")[-1].rpartition(".")[0] + ".py"
                          for ref in refs if isinstance(ref, str) and "." in ref})
        return ", ".join(modules) or f"auto_map in {name}"
    return None


def import_transformers() -> Any:
    import sys

    if sys.modules.get("transformers") is not None:  # None: an import that is refused
        return sys.modules["transformers"]
    # Without PyTorch, importing transformers logs an advisory ("PyTorch was not found...")
    # unless TRANSFORMERS_NO_ADVISORY_WARNINGS is set: set it for the import only, so the
    # user's environment and transformers' log level are left as they were.
    added = "TRANSFORMERS_NO_ADVISORY_WARNINGS" not in os.environ
    if added:
        os.environ["TRANSFORMERS_NO_ADVISORY_WARNINGS"] = "1"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import transformers
    except ImportError as exc:
        if exc.name != "transformers":
            raise
        raise TokenizerError("a tokenizer is configured but transformers is not installed: "
                             "pip install 'pytest-tokaudit[tokenizer]'") from exc
    finally:
        if added:
            os.environ.pop("TRANSFORMERS_NO_ADVISORY_WARNINGS", None)
    return transformers


@contextlib.contextmanager
def quiet(transformers: Any) -> Iterator[None]:
    """Silence transformers' logger and Python warnings, restoring both afterwards."""
    tlog = transformers.utils.logging
    before = tlog.get_verbosity()
    tlog.set_verbosity_error()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        tlog.set_verbosity(before)


class TokenizerWarning(UserWarning):
    """Said once per process: what a tokenizer logged during the audit was silenced."""


_SILENCED: set[int] = set()


@contextlib.contextmanager
def _quiet_calls(tok: Any) -> Iterator[None]:
    """A slow tokenizer's calls with its logging and warnings silenced (some log a warning
    on every call that takes keyword arguments: a line per record, uncapped), said once."""
    before = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(before)
    if id(tok) not in _SILENCED:
        _SILENCED.add(id(tok))
        warnings.warn(TokenizerWarning(
            f"tokaudit: {type(tok).__name__} is a slow tokenizer: its logging and warnings are "
            "silenced during the audit (its round trip goes record by record)"))


def one_line(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split()) or "(no message)"
    text = f"{type(exc).__name__}: {text}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def resolve_tokens(tok: Any, specs: Iterable[str | int], key: str) -> tuple[int, ...]:
    """Ids for `specs`: ints, decimal strings ("163607") or single-token strings ("</think>").

    A decimal string is always an id, never the token spelled with those digits.
    `key` (the ini key) starts every error message.
    """
    return tuple(_resolve_one(tok, spec, key) for spec in specs)


def _resolve_one(tok: Any, spec: str | int, key: str) -> int:
    if isinstance(spec, bool) or not isinstance(spec, (int, str)):
        raise TokenizerError(f"{key}: {spec!r} is neither a token id nor a token name")
    if isinstance(spec, int) or (spec.strip().isdigit() and spec.strip().isascii()):
        i = int(spec)
        if not _known(tok)(i):
            raise TokenizerError(f"{key}: token id {i} is not in the vocabulary (size {len(tok)})")
        return i
    if not spec:
        raise TokenizerError(f"{key}: empty token name")
    added = tok.get_added_vocab()
    if spec in added:
        return int(added[spec])
    i = tok.convert_tokens_to_ids(spec)
    # Unknown names come back as None (fast) or as the unk id (some slow tokenizers).
    if isinstance(i, int) and (i != tok.unk_token_id or spec == tok.unk_token):
        return i
    # The text of a token rather than its vocabulary spelling (" the" for byte-level "Ġthe").
    ids = tok.encode(spec, add_special_tokens=False)
    if len(ids) == 1 and _decode(tok, ids) == spec:
        return int(ids[0])
    special = sorted(set(added) | set(tok.all_special_tokens))
    import difflib  # here: only an unknown token's message needs it (start-up)

    close = difflib.get_close_matches(spec, special, n=5, cutoff=0.5)
    hint = (f"closest special tokens: {', '.join(map(repr, close))}" if close
            else f"it is not a single token, and no special token is close; "
                 f"give the id instead ({len(special)} special tokens)")
    raise TokenizerError(f"{key}: unknown token {spec!r}; {hint}")


def _known(tok: Any) -> Callable[[int], bool]:
    """A test for "this id is in the vocabulary"."""
    if isinstance(tok, tiktoken.TiktokenTokenizer):
        return tok.known
    if is_fast(tok):
        to_token = tok.backend_tokenizer.id_to_token
        return lambda i: 0 <= i < _U32 and to_token(i) is not None
    size = len(tok)
    return lambda i: 0 <= i < size


def require_roundtrip(tokenizer: str) -> None:
    """TokenizerError naming the extra to install unless the round trip's library (rapidfuzz,
    in the [tokenizer] and [tiktoken] extras) is installed; `tokenizer` as configured."""
    try:
        import rapidfuzz  # noqa: F401
    except ImportError:
        extra = "tiktoken" if str(tokenizer).startswith(tiktoken.PREFIX) else "tokenizer"
        raise TokenizerError("tokaudit_roundtrip_rel needs rapidfuzz, which is not installed "
                             f"here: pip install 'pytest-tokaudit[{extra}]'") from None


# Cells of the edit-distance matrix a list is measured exactly in, limit or not: short
# lists (most records) get their exact distance, however far over the limit.
EXACT_CELLS = 1 << 26


def roundtrip(tok: Any, id_lists: Sequence[Sequence[int]], rel: float | None = None
              ) -> list[RoundTrip]:
    """Decode each id list (special tokens kept, no space clean-up), encode the text again
    (no added special tokens) and compare the ids.

    With `rel` (tokaudit_roundtrip_rel) the distance is measured only as far as the verdict
    needs: exactly up to `rel` of the list's length (or more, for a short list), else
    "over it" (`at_least`). The work is then bounded by that band (rapidfuzz's banded
    Levenshtein with a cutoff, which stops once the band is past it) instead of the list's
    length squared: 2M adversarial ids take a fraction of a second instead of minutes.
    Ids the tokenizer does not know give ratio 1.0 and a detail naming the id.
    """
    from rapidfuzz.distance import Levenshtein

    lists = [ids if isinstance(ids, list) else list(ids) for ids in id_lists]
    out: list[RoundTrip] = []
    for ids, result in zip(lists, decode_encode(tok, lists), strict=True):
        if isinstance(result, RoundTrip):
            out.append(result)
            continue
        text, again = result
        if again == ids:
            out.append(_SAME)
            continue
        # The fast backend silently drops unknown ids, so look for them only now.
        unknown = _unknown_id(tok, ids)
        if unknown is not None:
            out.append(unknown)
            continue
        # The hint selects a banded algorithm: ~100x faster for long, nearly equal lists;
        # the cutoff bounds the band (the answer is then cutoff + 1).
        n = max(len(ids), len(again), 1)
        cutoff = None
        if rel is not None:
            cutoff = max(math.floor(rel * len(ids) + 1e-9), EXACT_CELLS // n)
            cutoff = None if cutoff >= n else cutoff
        changed = Levenshtein.distance(ids, again, score_hint=abs(len(ids) - len(again)) + 8,
                                       score_cutoff=cutoff)
        over = cutoff is not None and changed > cutoff
        out.append(RoundTrip(changed, changed / max(len(ids), 1),
                             _detail(tok, ids, again, text), at_least=over))
    return out


def decode_encode(tok: Any, lists: list[list[int]]) -> list[tuple[str, list[int]] | RoundTrip]:
    """(decoded text, its ids) per id list, or a RoundTrip for ids that cannot be decoded.

    The fast path is equivalent to tok.decode(ids, skip_special_tokens=False,
    clean_up_tokenization_spaces=False) and tok.encode(text, add_special_tokens=False).
    """
    if isinstance(tok, tiktoken.TiktokenTokenizer):
        return [result if not isinstance(result, int) else _unknown_id(tok, ids) or _SAME
                for ids, result in zip(lists, tok.roundtrip_ids(lists), strict=True)]
    if not is_fast(tok):
        with _quiet_calls(tok):
            return [slow_one(tok, ids) for ids in lists]
    backend = encoding_backend(tok)
    # Ids outside u32 would make the whole batch raise OverflowError.
    fits = [not ids or (min(ids) >= 0 and max(ids) < _U32) for ids in lists]
    texts = backend.decode_batch([ids for ids, ok in zip(lists, fits, strict=True) if ok],
                                 skip_special_tokens=False)
    done = iter(zip(texts, backend.encode_batch(texts, add_special_tokens=False), strict=True))
    out: list[tuple[str, list[int]] | RoundTrip] = []
    for ids, ok in zip(lists, fits, strict=True):
        if ok:
            text, encoding = next(done)
            out.append((text, encoding.ids))
        else:
            bad = _unknown_id(tok, ids)
            assert bad is not None  # an id outside u32 is never known
            out.append(bad)
    return out


def slow_one(tok: Any, ids: list[int]) -> tuple[str, list[int]] | RoundTrip:
    try:
        text = _decode(tok, ids)
    except Exception as exc:  # slow tokenizers raise all sorts on bad ids
        return _unknown_id(tok, ids) or RoundTrip(len(ids), 1.0, f"cannot decode: {one_line(exc)}")
    return text, list(tok.encode(text, add_special_tokens=False))


def _decode(tok: Any, ids: list[int]) -> str:
    if is_fast(tok):
        return tok.backend_tokenizer.decode(ids, skip_special_tokens=False)
    return tok.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)


def is_fast(tok: Any) -> bool:
    return bool(getattr(tok, "is_fast", False)) and hasattr(tok, "backend_tokenizer")


def encoding_backend(tok: Any) -> Any:
    """A fast tokenizer's `tokenizers` backend, set as tok.encode() sets it on every call
    (no truncation, no padding, special tokens split only if the tokenizer says so), so
    that its batch calls encode exactly as tok.encode() does."""
    backend = tok.backend_tokenizer
    if backend.truncation is not None:
        backend.no_truncation()
    if backend.padding is not None:
        backend.no_padding()
    split = bool(getattr(tok, "split_special_tokens", False))
    if backend.encode_special_tokens != split:
        backend.encode_special_tokens = split
    return backend


def _unknown_id(tok: Any, ids: list[int]) -> RoundTrip | None:
    known = _known(tok)
    for pos, i in enumerate(ids):
        if not known(i):
            return RoundTrip(len(ids), 1.0,
                             f"id {i} at token {pos} is not in the vocabulary (size {len(tok)})")
    return None


def _detail(tok: Any, ids: list[int], again: list[int], text: str) -> str:
    """One line: where the ids first differ, the ids around it, and the text there."""
    at, before, after, snippet = difference(tok, ids, again, text, ids)
    return f"first difference at token {at}: {before} -> {after}; text {snippet}"


def difference(tok: Any, ids: list[int], again: list[int], text: str,
               located: list[int]) -> tuple[int, str, str, str]:
    """(index of the first difference, both id windows around it, the text there, found by
    decoding `located` up to it): what the round trip and ids_match_text findings show."""
    # zip stops at the shorter list: then the difference is where it ends.
    at = next((k for k, (a, b) in enumerate(zip(ids, again)) if a != b), min(len(ids), len(again)))
    start = max(0, at - _CONTEXT_IDS)

    def window(seq: list[int]) -> str:
        shown = [str(i) for i in seq[start:at + _AFTER_IDS]]
        return "[" + ", ".join(["..."] * (start > 0) + shown + ["..."] * (at + _AFTER_IDS < len(seq))) + "]"

    pos = len(_decode(tok, located[:at]))
    lo, hi = max(0, pos - _TEXT_BEFORE), pos + _TEXT_AFTER
    snippet = _show(text[lo:hi])
    snippet = snippet[0] + "..." * (lo > 0) + snippet[1:-1] + "..." * (hi < len(text)) + snippet[-1]
    return at, window(ids), window(again), snippet


def _show(text: str) -> str:
    """repr(), also escaping combining marks and U+FFFD: invisible or easily missed, they
    are often the difference (repr already escapes control, format and space characters)."""
    return "".join(f"\\u{ord(c):04x}" if c == "\ufffd" or unicodedata.category(c)[0] == "M" else c
                   for c in repr(text))
