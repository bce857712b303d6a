"""The contract: every tolerance and field name, resolved once from ini / -o / CLI."""

from __future__ import annotations

import dataclasses
import math
import shlex
from dataclasses import dataclass, field
from typing import Any, Callable

import pytest

MISSING = object()


class ContractError(ValueError):
    """A configuration value that cannot be used; the message names the key."""


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
        return _fmt_rel(self.value) if self.relative else str(int(self.value))


def _fmt_rel(value: float) -> str:
    return f"{value * 100:g}%"


def parse_rel(text: str) -> float:
    """'2%' or '0.02' -> 0.02."""
    text = text.strip()
    pct = text.endswith("%")
    try:
        value = float(text[:-1] if pct else text)
    except ValueError:
        raise ContractError(f"expected a number like 0.02 or 2%, got {text!r}") from None
    if pct:
        value /= 100
    if not math.isfinite(value) or value < 0:
        raise ContractError(f"expected a non-negative number, got {text!r}")
    return value


def parse_count(text: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise ContractError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise ContractError(f"expected a non-negative whole number, got {text!r}")
    return value


def parse_allowance(text: str) -> Allowance:
    text = text.strip()
    if text.endswith("%"):
        return Allowance(parse_rel(text), relative=True)
    try:
        return Allowance(parse_count(text), relative=False)
    except ContractError:
        raise ContractError(
            f"expected a count like 3 or a share like 0.5%, got {text!r}"
        ) from None


def parse_bool(text: str) -> bool:
    low = text.strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off", ""):
        return False
    raise ContractError(f"expected true or false, got {text!r}")


def parse_optional_count(text: str) -> int | None:
    return None if not text.strip() else parse_count(text)


def parse_optional_rel(text: str) -> float | None:
    return None if not text.strip() else parse_rel(text)


def parse_words(text: str) -> tuple[str, ...]:
    try:
        return tuple(shlex.split(text))
    except ValueError as exc:
        raise ContractError(f"cannot split {text!r}: {exc}") from None


def parse_field(text: str) -> tuple[str, ...]:
    """A field name; dots reach into nested objects ('usage.completion_tokens')."""
    text = text.strip()
    return tuple(text.split(".")) if text else ()


def parse_optional_price(text: str) -> float | None:
    if not text.strip():
        return None
    try:
        value = float(text)
    except ValueError:
        raise ContractError(f"expected a price like 0.60, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise ContractError(f"expected a non-negative price, got {text!r}")
    return value


@dataclass(frozen=True)
class Key:
    """One ini key: its contract attribute, parser, default and help."""

    name: str
    attr: str
    parse: Callable[[str], Any]
    default: str
    help: str


KEYS: tuple[Key, ...] = (
    Key("tokaudit_glob", "glob", parse_words, "*.jsonl *.jsonl.gz *.jsonl.zst",
        "file name patterns collected as audit items"),
    Key("tokaudit_ids_field", "ids_field", parse_field, "output_ids",
        "field holding the token ids (dots reach into nested objects)"),
    Key("tokaudit_count_field", "count_field", parse_field, "completion_tokens",
        "field holding the billed token count"),
    Key("tokaudit_id_field", "id_field", parse_field, "sample_id",
        "field identifying a record (empty: records have no id)"),
    Key("tokaudit_where", "where", parse_field, "",
        "audit only records whose field is present and truthy; others are skipped"),
    Key("tokaudit_count_abs", "count_abs", parse_count, "8",
        "per record: |billed - counted| <= max(abs, rel * billed)"),
    Key("tokaudit_count_rel", "count_rel", parse_rel, "2%",
        "per record: relative part of the count tolerance (0.02 or 2%)"),
    Key("tokaudit_count_outliers", "count_outliers", parse_allowance, "0",
        "per file: records allowed to break the count tolerance (3 or 0.5%)"),
    Key("tokaudit_count_mean_rel", "count_mean_rel", parse_optional_rel, "0.5%",
        "per file: mean |diff| / mean billed must not exceed it (empty: off)"),
    Key("tokaudit_require_once", "require_once", parse_words, "",
        "per record: tokens that occur exactly once (ids, or names with a tokenizer)"),
    Key("tokaudit_require_last", "require_last", parse_words, "",
        "per record: the last token is one of these"),
    Key("tokaudit_forbid", "forbid", parse_words, "",
        "per record: tokens that never occur"),
    Key("tokaudit_allow_empty", "allow_empty", parse_bool, "false",
        "a file with no audited record passes"),
    Key("tokaudit_max_shown", "max_shown", parse_count, "20",
        "cap on bad records shown per file (the rest are counted)"),
    Key("tokaudit_tokenizer", "tokenizer", str.strip, "",
        "local Hugging Face tokenizer directory (relative to the ini file)"),
    Key("tokaudit_trust_remote_code", "trust_remote_code", parse_bool, "false",
        "allow a tokenizer's own Python code (auto_map) to run"),
    Key("tokaudit_roundtrip_rel", "roundtrip_rel", parse_optional_rel, "",
        "per record: decode->encode edit distance / len(ids) must not exceed it"),
    Key("tokaudit_shard_size", "shard_size", parse_count, "134217728",
        "uncompressed files larger than this many bytes are audited in shards"),
    Key("tokaudit_budget", "budget", parse_optional_count, "",
        "dataset: billed tokens summed over all files must not exceed it"),
    Key("tokaudit_price_per_mtok", "price_per_mtok", parse_optional_price, "",
        "dataset: price per million billed tokens, for the money column"),
    Key("tokaudit_unique_ids", "unique_ids", parse_bool, "false",
        "dataset: a record id appears once across all audited files"),
    Key("tokaudit_expected_ids", "expected_ids", str.strip, "",
        "dataset: manifest of ids that must have a record (relative to the ini file)"),
    Key("tokaudit_baseline_rel", "baseline_rel", parse_rel, "10%",
        "baseline: how much worse than the baseline a file may get"),
)
KEYS_BY_ATTR = {k.attr: k for k in KEYS}


@dataclass(frozen=True)
class Contract:
    """The resolved contract. Adjust per path with `dataclasses.replace`."""

    glob: tuple[str, ...]
    ids_field: tuple[str, ...]
    count_field: tuple[str, ...]
    id_field: tuple[str, ...]
    where: tuple[str, ...]
    count_abs: int
    count_rel: float
    count_outliers: Allowance
    count_mean_rel: float | None
    require_once: tuple[str, ...]
    require_last: tuple[str, ...]
    forbid: tuple[str, ...]
    allow_empty: bool
    max_shown: int
    tokenizer: str
    trust_remote_code: bool
    roundtrip_rel: float | None
    shard_size: int
    budget: int | None
    price_per_mtok: float | None
    unique_ids: bool
    expected_ids: str
    baseline_rel: float
    # Token specs resolved to ids (names need the tokenizer); filled by resolve_tokens.
    require_once_ids: tuple[int, ...] = ()
    require_last_ids: tuple[int, ...] = ()
    forbid_ids: tuple[int, ...] = ()
    # key name -> (text as written, where it came from); for failure messages.
    sources: dict[str, tuple[str, str]] = field(default_factory=dict, compare=False)

    def replace(self, **changes: Any) -> Contract:
        """A copy with some values changed, e.g. in pytest_tokaudit_contract."""
        sources = dict(self.sources)
        for attr, value in changes.items():
            if attr in KEYS_BY_ATTR:
                sources[KEYS_BY_ATTR[attr].name] = (_text(attr, value), "pytest_tokaudit_contract")
        new = dataclasses.replace(self, **changes, sources=sources)
        token_keys = {"require_once", "require_last", "forbid"}
        if token_keys & changes.keys():
            new = new.resolve_tokens()
        return new

    def count_tolerance(self, billed: int) -> float:
        return max(self.count_abs, self.count_rel * billed)

    @property
    def needs_tokenizer(self) -> bool:
        specs = self.require_once + self.require_last + self.forbid
        return self.roundtrip_rel is not None or not all(s.isdigit() for s in specs)

    def token_label(self, token: int) -> str:
        """'151645' or, with a tokenizer, "151645 ('<|im_end|>')"."""
        if not self.tokenizer:
            return str(token)
        try:
            name = self.tokenizer_object().convert_ids_to_tokens(token)
        except Exception:  # an id the vocabulary lacks: the number says enough
            return str(token)
        return f"{token} ({name!r})" if name is not None else str(token)

    def tokenizer_object(self) -> Any:
        """The tokenizer (loaded once per process), or None if not configured."""
        if not self.tokenizer:
            return None
        from .tokenizer import load_tokenizer

        return load_tokenizer(self.tokenizer, self.trust_remote_code)

    def resolve_tokens(self) -> Contract:
        """Turn token specs (ids or names) into ids; names need a tokenizer."""
        resolved = {}
        for attr in ("require_once", "require_last", "forbid"):
            specs = getattr(self, attr)
            key = KEYS_BY_ATTR[attr].name
            if all(s.isdigit() for s in specs):
                resolved[attr + "_ids"] = tuple(int(s) for s in specs)
                continue
            if not self.tokenizer:
                names = [s for s in specs if not s.isdigit()]
                raise ContractError(
                    f"{key}: token names {names} need a tokenizer; set tokaudit_tokenizer "
                    "to a local tokenizer directory, or write token ids"
                )
            from .tokenizer import resolve_tokens

            resolved[attr + "_ids"] = resolve_tokens(self.tokenizer_object(), specs, key)
        return dataclasses.replace(self, **resolved)

    def describe(self, attrs: tuple[str, ...]) -> str:
        """'pytest.ini [tokaudit_count_abs = 8, ...]': values and where they came from."""
        by_origin: dict[str, list[str]] = {}
        for attr in attrs:
            key = KEYS_BY_ATTR[attr].name
            text, origin = self.sources.get(key, (KEYS_BY_ATTR[attr].default, "default"))
            by_origin.setdefault(origin, []).append(f"{key} = {text}")
        return "; ".join(f"{o} [{', '.join(v)}]" for o, v in by_origin.items())

    def to_json(self) -> dict[str, str]:
        """Every key as it would be written in pytest.ini (paths made absolute)."""
        out = {}
        for key in KEYS:
            text = self.sources.get(key.name, (key.default, "default"))[0]
            if key.attr in PATH_ATTRS:
                text = getattr(self, key.attr)
            out[key.name] = text
        return out

    @classmethod
    def from_json(cls, texts: dict[str, str], origin: str = "report") -> Contract:
        """The contract a JSON report was made with (token names left unresolved)."""
        values, sources = {}, {}
        for key in KEYS:
            text = texts.get(key.name, key.default)
            values[key.attr] = key.parse(text)
            sources[key.name] = (text, origin)
        return cls(**values, sources=sources)


PATH_ATTRS = ("tokenizer", "expected_ids")
FIELD_ATTRS = ("ids_field", "count_field", "id_field", "where")


def _text(attr: str, value: Any) -> str:
    """A value as it would be written in pytest.ini."""
    if isinstance(value, tuple):
        return ("." if attr in FIELD_ATTRS else " ").join(map(str, value))
    if isinstance(value, float) and attr != "price_per_mtok":
        return _fmt_rel(value)
    return "" if value is None else str(value)


def contract_from_config(config: pytest.Config) -> Contract:
    """Read every key; a bad value is a UsageError naming the key and what to write."""
    overrides = {
        item.split("=", 1)[0].strip()
        for item in (config.getoption("override_ini", None) or [])
        if "=" in item
    }
    where_file = config.inipath.name if config.inipath else "ini"
    values: dict[str, Any] = {}
    sources: dict[str, tuple[str, str]] = {}
    for key in KEYS:
        raw = config.getini(key.name)
        if raw is None:
            text, origin = key.default, "default"
        else:
            text = raw
            origin = "-o" if key.name in overrides else where_file
        if key.name == "tokaudit_tokenizer":
            cli = config.getoption("tokaudit_tokenizer", None)
            if cli:
                text, origin = cli, "--tokaudit-tokenizer"
        try:
            value = key.parse(text)
        except ContractError as exc:
            raise pytest.UsageError(f"{key.name} ({origin}): {exc}") from None
        if key.attr in PATH_ATTRS and value:
            value = str(_relative_to(config, value, origin))
        values[key.attr] = value
        sources[key.name] = (text.strip(), origin)
    if not values["ids_field"] or not values["count_field"]:
        raise pytest.UsageError("tokaudit_ids_field and tokaudit_count_field must not be empty")
    if values["roundtrip_rel"] is not None and not values["tokenizer"]:
        raise pytest.UsageError(
            "tokaudit_roundtrip_rel needs a tokenizer: set tokaudit_tokenizer to a local "
            "tokenizer directory (or pass --tokaudit-tokenizer=DIR)"
        )
    contract = Contract(**values, sources=sources)
    try:
        if contract.needs_tokenizer:
            contract.tokenizer_object()  # a bad directory is a usage error now, not per file
        return contract.resolve_tokens()
    except ValueError as exc:  # ContractError, or TokenizerError from loading
        raise pytest.UsageError(str(exc)) from None


def _relative_to(config: pytest.Config, value: str, origin: str):
    from pathlib import Path

    path = Path(value).expanduser()
    if path.is_absolute():
        return path
    # ini values are relative to the ini file, command-line ones to where pytest runs.
    if origin not in ("-o", "--tokaudit-tokenizer") and config.inipath:
        return config.inipath.parent / path
    return Path(config.invocation_params.dir) / path
