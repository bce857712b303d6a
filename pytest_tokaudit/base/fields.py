"""Values the contract reads out of a record beyond one field: billing sums and text templates.

Parsing only (no tokenizer, no orjson): model/contract.py validates the ini text with these, and
reader.py / engine/template.py read records with the parsed forms.

- CountSum: `usage.completion_tokens + usage.completion_tokens_details.reasoning_tokens?`,
  the billed count as a sum of integer fields; `?` marks an addend that may be missing or
  null (it counts 0).
- Template: `{choices.0.message.reasoning?}</think>{choices.0.message.content}<|im_end|>`,
  how a completion's tokens are rebuilt: `{path}` placeholders (`{path?}` may be missing or
  null) between literal text; `{{` and `}}` are literal braces. Which literals are special
  tokens is up to the tokenizer (engine/template.py).
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

    def __str__(self) -> str:
        return ".".join(self.path) + "?" * self.optional


@dataclass(frozen=True, slots=True)
class CountSum:
    """The billed count as a sum of fields (at least two addends)."""

    terms: tuple[Term, ...]

    def __str__(self) -> str:
        return " + ".join(map(str, self.terms))

    @property
    def paths(self) -> tuple[Path, ...]:
        return tuple(t.path for t in self.terms)


def parse_count_formula(text: str) -> Path | CountSum:
    """'completion_tokens' -> ('completion_tokens',); 'a + b.c?' -> CountSum."""
    terms = []
    for word in text.split("+"):
        word = word.strip()
        if not word:
            raise FieldError(f"expected {_FIELD_HELP} or a sum like a + b?, got {text.strip()!r}")
        optional = word.endswith("?")
        terms.append(Term(_path(word.removesuffix("?").strip(), repr(text.strip())), optional))
    if len(terms) == 1:
        if terms[0].optional:
            raise FieldError(f"a lone field cannot be optional (?): {text.strip()!r}; "
                             "`?` marks an addend of a sum that may be missing")
        return terms[0].path
    if all(t.optional for t in terms):
        raise FieldError(f"at least one addend must be required (without ?): {text.strip()!r}")
    return CountSum(tuple(terms))


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


def parse_template(text: str) -> Template:
    """'{a.b}</think>{c?}' -> Template; FieldError for unbalanced braces or bad paths."""
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
        raise FieldError(f"no {{field}} placeholder in {text!r}: name the fields the text is "
                         "built from, like {choices.0.message.content}")
    return Template(text, tuple(parts))


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
        elif kind is list and _INDEX(part):
            index = int(part)
            if index >= len(obj):
                return MISSING
            obj = obj[index]
        else:
            return MISSING
    return obj


_INDEX = re.compile(r"0|[1-9][0-9]{0,17}").fullmatch  # a list index as JSON paths write it
