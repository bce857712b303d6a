"""Values the contract reads out of a record beyond one field: billing sums and text templates.

Parsing only (no tokenizer, no orjson): model/contract.py validates the ini text with these, and
reader.py / engine/template.py read records with the parsed forms.

- CountSum: `usage.completion_tokens + usage.completion_tokens_details.reasoning_tokens?`,
  the billed count as integer fields and whole numbers added or subtracted
  (`usage.completion_tokens - usage.completion_tokens_details.reasoning_tokens`); `?` marks
  an addend that may be missing or null (it counts 0).
- Template: `{choices.0.message.reasoning?}</think>{choices.0.message.content}<|im_end|>`,
  how a completion's tokens are rebuilt: `{path}` placeholders (`{path?}` may be missing or
  null) between literal text; `{{` and `}}` are literal braces, `\\n`, `\\t` and `\\\\` a
  newline, a tab and a backslash. Which literals are special tokens is up to the tokenizer
  (engine/template.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Union

MISSING = object()


Path = tuple[str, ...]


_FIELD_HELP = "a field name like usage.completion_tokens"


class FieldError(ValueError):
    """A bad formula or template; model/contract.py turns it into a ContractError naming the key."""


def _path(text: str, what: str) -> Path:
    parts = tuple(text.split("."))
    if not text or any(not p.strip() or p != p.strip() for p in parts):
        raise FieldError(f"expected {_FIELD_HELP} in {what}, got {text!r}")
    return parts


@dataclass(frozen=True, slots=True)
class Term:
    path: Path
    optional: bool = False
    negative: bool = False  # subtracted: `usage.completion_tokens - usage.x.reasoning_tokens`

    def __str__(self) -> str:
        return ".".join(self.path) + "?" * self.optional


@dataclass(frozen=True, slots=True)
class CountSum:
    """The billed count as fields added or subtracted, plus a whole number: more than one
    field, or one field and a constant (`completion_tokens - 1`)."""

    terms: tuple[Term, ...]
    constant: int = 0

    def __str__(self) -> str:
        text = str(self.terms[0])
        for t in self.terms[1:]:
            text += f" {'-' if t.negative else '+'} {t}"
        if self.constant:
            text += f" {'-' if self.constant < 0 else '+'} {abs(self.constant)}"
        return text

    @property
    def paths(self) -> tuple[Path, ...]:
        return tuple(t.path for t in self.terms)


_COUNT_HELP = ("a field like usage.completion_tokens, or fields and whole numbers joined by "
               "+ and -, like usage.completion_tokens - usage.completion_tokens_details."
               "reasoning_tokens (`?`: an addend that may be missing or null counts 0)")


# An operator: `+` anywhere, `-` with white space on a side (`a-b` is one field, as JSON
# keys may hold hyphens). A field path in a formula holds no white space and none of
# the characters of other arithmetic, so `a * 2` or `(a + b)` is refused, not read as a name.
_OPERATOR = re.compile(r"\s*\+\s*|\s+-\s*|\s*-\s+")


_NOT_ARITHMETIC = re.compile(r"[*/()=,<>^%]")


_NUMBER = re.compile(r"[0-9]+")


def parse_count_formula(text: str) -> Path | CountSum:
    """'completion_tokens' -> ('completion_tokens',); 'a + b.c? - d - 2' -> CountSum.

    FieldError for anything else: an operator without an operand, a lone optional field,
    no required field, arithmetic the grammar does not have (`*`, parentheses)."""
    whole = text.strip()
    if not whole:
        raise FieldError(f"expected {_COUNT_HELP}, got {text!r}")
    if whole[0] in "+-":
        raise FieldError(f"{whole!r} starts with {whole[0]!r}: expected a field first, like "
                         "usage.completion_tokens - 1")
    words = _OPERATOR.split(whole)
    signs = [m.group(0).strip() for m in _OPERATOR.finditer(whole)]
    terms: list[Term] = []
    constant = 0
    for k, word in enumerate(words):
        negative = k > 0 and signs[k - 1] == "-"
        if not word:
            raise FieldError(f"{whole!r} has an operator without an operand: expected "
                             f"{_COUNT_HELP}")
        if _NUMBER.fullmatch(word):
            constant += -int(word) if negative else int(word)
            continue
        bad = _NOT_ARITHMETIC.search(word)
        why = (f"{bad.group(0)!r} is not + or -" if bad else
               "white space inside a field name" if re.search(r"\s", word) else
               "`?` only ends a field" if "?" in word[:-1] else "")
        if why:
            raise FieldError(f"cannot read {word!r} in {whole!r} ({why}): expected {_COUNT_HELP}")
        optional = word.endswith("?")
        terms.append(Term(_path(word.removesuffix("?"), repr(whole)), optional, negative))
    if not terms:
        raise FieldError(f"{whole!r} names no field: expected {_COUNT_HELP}")
    if all(t.optional for t in terms):
        if len(terms) == 1:
            raise FieldError(f"a lone field cannot be optional (?): {whole!r}; "
                             "`?` marks an addend of a sum that may be missing")
        raise FieldError(f"at least one addend must be required (without ?): {whole!r}")
    if len(terms) == 1 and not constant and not terms[0].negative:
        return terms[0].path
    if terms[0].negative:  # only a constant came first ('10 - a'): keep it readable
        raise FieldError(f"{whole!r}: write the fields first, then the whole numbers "
                         "(usage.completion_tokens - 1)")
    return CountSum(tuple(terms), constant)


def count_paths(count_field: Path | CountSum) -> tuple[Path, ...]:
    """Every field path a count formula reads."""
    return count_field.paths if isinstance(count_field, CountSum) else (count_field,)


@dataclass(frozen=True, slots=True)
class Placeholder:
    path: Path
    optional: bool = False

    @property
    def name(self) -> str:
        return ".".join(self.path)


Part = Union[str, Placeholder]


@dataclass(frozen=True, slots=True)
class Template:
    """A parsed text template: literal strings and placeholders, in order."""

    text: str
    parts: tuple[Part, ...]

    def __str__(self) -> str:
        return self.text

    @property
    def placeholders(self) -> tuple[Placeholder, ...]:
        return tuple(p for p in self.parts if type(p) is Placeholder)

    @property
    def paths(self) -> tuple[Path, ...]:
        return tuple(p.path for p in self.placeholders)


_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")


_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\"}


_BACKSLASH = re.compile(r"\\(.?)", re.S)


def unescape(text: str) -> str:
    """`\\n`, `\\t` and `\\\\` read as Python strings read them (an ini file cannot hold a
    newline in a value); FieldError for any other backslash sequence, which would otherwise
    be encoded as its two characters, silently."""
    def one(m: re.Match[str]) -> str:
        char = m.group(1)
        if char in _ESCAPES:
            return _ESCAPES[char]
        what = "a lone backslash at the end" if not char else f"unknown escape {m.group(0)!r}"
        raise FieldError(f"{what} at character {m.start() + 1} of {text!r}: a template reads "
                         "\\n (newline), \\t (tab) and \\\\ (a backslash)")

    return _BACKSLASH.sub(one, text) if "\\" in text else text


def parse_template(text: str) -> Template:
    """'{a.b}</think>\\n\\n{c?}' -> Template; FieldError for unbalanced braces, bad paths or
    an unknown backslash escape. `text` is kept as written (escapes and all)."""
    written, text = text, unescape(text)
    parts: list[Part] = []
    literal: list[str] = []
    at = 0
    for m in _TOKEN.finditer(text):
        literal.append(text[at:m.start()])
        at = m.end()
        token = m.group(0)
        if token in ("{{", "}}"):
            literal.append(token[0])
            continue
        if m.group(1) is None:
            raise FieldError(f"unbalanced {token!r} at character {m.start() + 1} of {text!r}; "
                             "write {{ or }} for a literal brace")
        inner = m.group(1).strip()
        optional = inner.endswith("?")
        path = _path(inner.removesuffix("?").strip(), f"placeholder {m.group(0)!r}")
        if "".join(literal):
            parts.append("".join(literal))
        literal = []
        parts.append(Placeholder(path, optional))
    literal.append(text[at:])
    if "".join(literal):
        parts.append("".join(literal))
    if not any(type(p) is Placeholder for p in parts):
        raise FieldError(f"no {{field}} placeholder in {written!r}: name the fields the text "
                         "is built from, like {choices.0.message.content}")
    return Template(written, tuple(parts))


def why_missing(obj: Any, path: Path) -> str:
    """Where a dotted path breaks: "no 'choices'", "'choices' is an empty list", ..."""
    for k, part in enumerate(path):
        here = ".".join(path[:k]) or "the record"
        if type(obj) is dict:
            if part not in obj:
                return f"no {part!r} in {here}" if k else f"no {part!r}"
            obj = obj[part]
        elif type(obj) is list:
            if not re.fullmatch(r"0|[1-9][0-9]*", part):
                return f"{here} is a list, {part!r} is not an index"
            if not obj:
                return f"{here} is an empty list"
            if int(part) >= len(obj):
                return f"{here} has {len(obj)} item{'s' * (len(obj) != 1)}, no index {part}"
            obj = obj[int(part)]
        else:
            kind = "null" if obj is None else type(obj).__name__
            return f"{here} is {kind}, not an object"
    return "present"


def get_path(obj: Any, path: tuple[str, ...]) -> Any:
    """The value at a dotted path, or MISSING; a part of digits indexes a list
    (`choices.0.message.content`), a dict's keys are always names ("0" is a key there)."""
    for part in path:
        kind = type(obj)
        if kind is dict:
            obj = obj.get(part, MISSING)
            if obj is MISSING:
                return MISSING
        elif kind is list and LIST_INDEX(part):
            index = int(part)
            if index >= len(obj):
                return MISSING
            obj = obj[index]
        else:
            return MISSING
    return obj


LIST_INDEX = re.compile(r"0|[1-9][0-9]{0,17}").fullmatch  # a list index as JSON paths write it


def paths_of(obj: Any, limit: int = 200, depth: int = 6) -> list[str]:
    """The dotted paths of a parsed record, shallow ones first (a list's first item stands
    for all of them), to name the fields closest to one no record has."""
    out: list[str] = []
    queue: list[tuple[str, Any, int]] = [("", obj, 0)]
    for prefix, value, level in queue:
        if len(out) >= limit:
            break
        if type(value) is dict:
            items = list(value.items())
        elif type(value) is list and value and type(value[0]) in (dict, list):
            items = [("0", value[0])]  # not a list of values: the ids may be cut out (fastids)
        else:
            continue
        for key, child in items:
            path = f"{prefix}.{key}" if prefix else str(key)
            out.append(path)
            if level + 1 < depth:
                queue.append((path, child, level + 1))
    return out[:limit]


def closest_paths(path: str, seen: list[str], n: int = 3) -> list[str]:
    """The paths of `seen` most like `path` (a typo's likely meaning), best first."""
    import difflib

    close = difflib.get_close_matches(path, seen, n=n, cutoff=0.6)
    if close:
        return close
    # A typo in the last part only: compare last parts among paths of the same parent.
    head, _, last = path.rpartition(".")
    siblings = {p.rpartition(".")[2]: p for p in seen if p.rpartition(".")[0] == head}
    return [siblings[k] for k in difflib.get_close_matches(last, list(siblings), n=n, cutoff=0.6)]
