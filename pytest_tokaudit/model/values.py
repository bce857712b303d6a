"""The value parsers of the contract's keys: each turns what an ini file, -o, a TOML table,
a report's JSON or a conftest hook gives into the value the contract keeps, or raises
ContractError saying what was expected (the contract adds the key's name).
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass
from typing import Any

from ..base.fields import CountSum, FieldError, Template, parse_count_formula, parse_template

# Bounds: counts travel as JSON through orjson (64-bit integers at most), and a bad-record
# list longer than MAX_SHOWN helps nobody.
MAX_COUNT = 2**63 - 1


MAX_SHOWN = 10**6


MAX_SHARE = 100.0  # 10000%: a larger share is a typo, not a tolerance


MAX_PRICE = 10**6  # per million tokens


MAX_TOKEN_ID = 2**32 - 1  # tokenizers hold ids as u32


class ContractError(ValueError):
    """A configuration value that cannot be used; the message names the key."""


def is_token_id(spec: str) -> bool:
    """'151668' is an id; '²' and '٣' are not (str.isdigit alone accepts both)."""
    return spec.isascii() and spec.isdigit()


@dataclass(frozen=True, slots=True)
class Allowance:
    """How many records may break a per-record tolerance: a count or a share."""

    value: float
    relative: bool

    def of(self, audited: int) -> int:
        if self.relative:
            # A share of the audited records, rounded down: 0.5% of 100 allows 0.
            return math.floor(self.value * audited + 1e-9)
        return int(self.value)

    def __str__(self) -> str:
        return fmt_rel(self.value) if self.relative else str(int(self.value))


def fmt_rel(value: float) -> str:
    return f"{value * 100:g}%"


_WHOLE = re.compile(r"-?[0-9]+")  # the sign only to say "non-negative"


_DECIMAL = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")


def _unset(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _shown(value: Any) -> str:
    return repr(value.strip()) if isinstance(value, str) else repr(value)


# A shard is an item: below this it costs more (collection, a report, an open and a seek in
# every process) than it spreads. TOKAUDIT_MIN_SHARD_SIZE (bytes) lowers it, for tests that
# shard files of a few KB.
MIN_SHARD_SIZE = 1 << 20


def parse_shard_size(value: Any) -> int:
    """tokaudit_shard_size: 0 (never shard), or MIN_SHARD_SIZE bytes or more."""
    import os

    n = parse_count(value)
    least = parse_count(os.environ.get("TOKAUDIT_MIN_SHARD_SIZE") or MIN_SHARD_SIZE)
    if 0 < n < least:
        raise ContractError(f"{n:,} is below the minimum of {_size(least)}: each shard is an item, "
                            "and a smaller one costs more than it spreads (0 never shards)")
    return n


def _size(n: int) -> str:
    return f"{n >> 20:,} MiB" if n % (1 << 20) == 0 else f"{n:,} bytes"


def parse_count(value: Any, *, lo: int = 0, hi: int = MAX_COUNT) -> int:
    """A whole number from `lo` to `hi`: 12 or '12'."""
    text = value.strip() if isinstance(value, str) else None
    if _is_int(value):
        n = value
    elif text is not None and _WHOLE.fullmatch(text):
        n = int(text)
    else:
        raise ContractError(f"expected a whole number, got {_shown(value)}")
    if n < 0:
        raise ContractError(f"expected a non-negative whole number, got {_shown(value)}")
    if n > hi:
        raise ContractError(f"{n} is out of range: at most {hi:,}")
    if n < lo:
        raise ContractError(f"{n} is out of range: at least {lo:,}")
    return n


def parse_optional_count(value: Any) -> int | None:
    return None if _unset(value) else parse_count(value)


def parse_rel(value: Any, *, hi: float = MAX_SHARE) -> float:
    """A share: '2%', '0.02', 0.02 -> 0.02."""
    text = value.strip() if isinstance(value, str) else ""
    pct = text.endswith("%")
    number = text[:-1].rstrip() if pct else text
    if _is_number(value):
        share = float(value)
    elif _DECIMAL.fullmatch(number):
        share = float(number) / 100 if pct else float(number)
    else:
        raise ContractError(f"expected a number like 0.02 or 2%, got {_shown(value)}")
    return _bounded(share, value, "number", hi, fmt_rel(hi))


def _bounded(n: float, value: Any, what: str, limit: float, shown_limit: str) -> float:
    """`n` (read from `value`) if finite and from 0 to `limit`."""
    if not math.isfinite(n) or n < 0:
        raise ContractError(f"expected a non-negative {what}, got {_shown(value)}")
    if n > limit:
        raise ContractError(f"{_shown(value)} is out of range: at most {shown_limit}")
    return n


def parse_optional_rel(value: Any) -> float | None:
    return None if _unset(value) else parse_rel(value)


def parse_allowance(value: Any) -> Allowance:
    """A count of records (3, '3') or a share of them ('0.5%'); an Allowance as it is."""
    if isinstance(value, Allowance):
        if value.relative:
            return Allowance(parse_rel(value.value, hi=1.0), relative=True)
        if isinstance(value.value, float) and value.value.is_integer():
            return Allowance(parse_count(int(value.value)), relative=False)
        return Allowance(parse_count(value.value), relative=False)
    return _count_or_share(value, 1.0, "a count like 3 or a share like 0.5%")


def _count_or_share(value: Any, hi: float, example: str) -> Allowance:
    """'3' or 3: a count; '0.5%': a share up to `hi`."""
    if isinstance(value, str) and value.strip().endswith("%"):
        return Allowance(parse_rel(value, hi=hi), relative=True)
    if _is_int(value) or (isinstance(value, str) and _WHOLE.fullmatch(value.strip())):
        return Allowance(parse_count(value), relative=False)
    raise ContractError(f"expected {example}, got {_shown(value)}")


_TRUE = {"1", "true", "yes", "on", "y", "t"}


_FALSE = {"0", "false", "no", "off", "n", "f"}


def parse_bool(value: Any) -> bool:
    """true/false, yes/no, on/off, 1/0 (the words pytest's own "bool" type takes)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        low = value.strip().lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
    raise ContractError(f"expected true or false, got {_shown(value)}")


# Where the audit items run: each engine's module (run/engines), imported only when chosen;
# `local` is no engine (each item audits itself). A new engine is its module plus one line here.
ENGINES = {"local": None, "ray": "pytest_tokaudit.run.engines.ray"}


def parse_engine(value: Any) -> str:
    """An engine's name, of ENGINES (so the API refuses what the plugin refuses)."""
    text = str(value).strip().lower()
    if text not in ENGINES:
        raise ContractError(f"expected one of {', '.join(ENGINES)}, got {text!r}")
    return text


WORDS = "expected words separated by spaces, or a list of strings"


def parse_words(value: Any) -> tuple[str, ...]:
    """Words separated as in a shell ('a "b c"'), or a list of them (TOML, an "args" key)."""
    if value is None:
        return ()
    if isinstance(value, str):
        try:
            return tuple(shlex.split(value))
        except ValueError as exc:
            raise ContractError(f"{WORDS}: {exc}") from None  # as pytest's own reading says
    if not isinstance(value, (list, tuple)):
        raise ContractError(f"expected words or a list of them, got {value!r}")
    words = []
    for item in value:
        if _is_int(item) and item >= 0:
            item = str(item)  # a token id written as a TOML integer
        if not isinstance(item, str) or not item:
            raise ContractError(f"expected a list of non-empty strings, got {item!r} in {value!r}")
        words.append(item)
    return tuple(words)


def parse_patterns(value: Any) -> tuple[str, ...]:
    patterns = parse_words(value)
    if not patterns:
        raise ContractError("expected at least one file name pattern, like *.jsonl")
    return patterns


def parse_tokens(value: Any) -> tuple[str, ...]:
    """Token ids and names; an id must fit a vocabulary (names are checked when resolved)."""
    specs = parse_words(value)
    for spec in specs:
        if is_token_id(spec) and int(spec) > MAX_TOKEN_ID:
            raise ContractError(f"token id {spec} is out of range: at most {MAX_TOKEN_ID:,}")
    return specs


def parse_field(value: Any) -> tuple[str, ...]:
    """A field name; dots reach into nested objects ('usage.completion_tokens')."""
    if isinstance(value, (tuple, list)):
        parts = tuple(value)
        text = ".".join(map(str, parts))
    elif isinstance(value, str):
        text = value.strip()
        parts = tuple(text.split(".")) if text else ()
    else:
        raise ContractError(f"expected a field name like usage.completion_tokens, got {value!r}")
    if any(not isinstance(p, str) or not p.strip() for p in parts):
        raise ContractError(f"expected a field name like usage.completion_tokens, got {text!r}")
    return parts


def parse_required_field(value: Any) -> tuple[str, ...]:
    parts = parse_field(value)
    if not parts:
        raise ContractError("must not be empty: name the field, like completion_tokens")
    return parts


def parse_count_field(value: Any) -> tuple[str, ...] | CountSum:
    """A field, or fields and whole numbers added or subtracted:
    'usage.completion_tokens + usage.x.reasoning_tokens?', 'a - b.c', 'completion_tokens - 1'.
    Anything the grammar cannot read is an error, never a field named after the text."""
    if isinstance(value, CountSum):
        return value
    if isinstance(value, str) and value.strip():
        try:
            return parse_count_formula(value)
        except FieldError as exc:
            raise ContractError(str(exc)) from None
    return parse_required_field(value)


def parse_optional_template(value: Any) -> Template | None:
    """'{choices.0.message.reasoning?}</think>{choices.0.message.content}<|im_end|>'."""
    if value is None or isinstance(value, Template):
        return value
    if not isinstance(value, str):
        raise ContractError(f"expected a text template like {{choices.0.message.content}}<|im_end|>, "
                            f"got {value!r}")
    if not value.strip():
        return None
    try:
        return parse_template(value.strip())
    except FieldError as exc:
        raise ContractError(str(exc)) from None


def parse_mean_abs(value: Any) -> float:
    """A number of tokens, whole or not (5, '2.5'); empty: 0."""
    if _unset(value):
        return 0.0
    return _non_negative(value, "a number of tokens like 5 or 2.5", "number of tokens", MAX_COUNT)


def parse_optional_limit(value: Any) -> Allowance | None:
    """How far off a record may be and still be forgiven: tokens (200) or a share of its
    billed count (50%); unset: no limit."""
    if _unset(value):
        return None
    if isinstance(value, Allowance):
        return value
    return _count_or_share(value, MAX_SHARE, "a count of tokens like 200 or a share like 50%")


def parse_fields(value: Any) -> tuple[str, ...]:
    """Field names separated by spaces ('provider model'), each checked like a field."""
    words = parse_words(value)
    for word in words:
        parse_required_field(word)
    return words


_VARIABLE = re.compile(r"\$[A-Za-z_][A-Za-z0-9_]*")


def parse_cache_inputs(value: Any) -> tuple[str, ...]:
    """File patterns (globs, relative to the ini file) and $VARIABLE names a check reads at
    run time: they join the cache key."""
    words = parse_words(value)
    for word in words:
        if word.startswith("$") and not _VARIABLE.fullmatch(word):
            raise ContractError(f"{word!r} is not an environment variable's name like $LIMITS_FILE")
        if word.startswith("$"):
            continue
        if word.strip() != word or not word or "\0" in word:
            raise ContractError(f"{word!r} is not a file pattern like limits/*.json")
    return words


def parse_path(value: Any) -> str:
    if not isinstance(value, str):
        raise ContractError(f"expected a path, got {value!r}")
    return value.strip()


def parse_optional_price(value: Any) -> float | None:
    if _unset(value):
        return None
    return _non_negative(value, "a price like 0.60", "price", MAX_PRICE)


def parse_optional_price_total(value: Any) -> float | None:
    """An amount of money (a budget), unset when empty."""
    if _unset(value):
        return None
    return _non_negative(value, "an amount like 1500 or 12.50", "amount", float(MAX_COUNT))


def _non_negative(value: Any, example: str, what: str, limit: float) -> float:
    """A finite decimal from 0 to `limit` (a number, or its text as written in the ini)."""
    if _is_number(value):
        n = float(value)
    elif isinstance(value, str) and _DECIMAL.fullmatch(value.strip()):
        n = float(value.strip())
    else:
        raise ContractError(f"expected {example}, got {_shown(value)}")
    return _bounded(n, value, what, limit, f"{limit:,}")
