"""The contract: every tolerance and field name, resolved once from ini / -o / CLI.

One list of keys (KEYS) says for each setting its ini type, its parser, its default and its
help (the parsers are in model/values.py). Every way of making a contract goes through the
same parsers: the ini file and -o (contract_from_config), a report's JSON
(Contract.from_json), a conftest hook (Contract.replace), even dataclasses.replace
(Contract.__post_init__). A bad value is a ContractError whose message names the key;
contract_from_config makes it a UsageError.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import shlex
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from ..base.fields import CountSum, Template
from ..base.formats import default_glob
from ..base.urls import display_url, is_url
from ..tokenizers.hf import load_tokenizer, resolve_tokens
from .rules import mean_within
from .spend import amount
from .values import (MAX_SHOWN, WORDS, Allowance, ContractError, fmt_rel, is_token_id,
    parse_allowance, parse_bool, parse_cache_inputs, parse_count, parse_count_field, parse_engine,
    parse_field, parse_fields, parse_mean_abs, parse_optional_count, parse_optional_limit,
    parse_optional_price, parse_optional_price_total, parse_optional_rel, parse_optional_template,
    parse_path, parse_patterns, parse_rel, parse_required_field, parse_shard_size, parse_tokens,
    parse_words)

if TYPE_CHECKING:
    import pytest


@dataclass(frozen=True)
class Key:
    """One ini key: its contract attribute, parser, default, help and kind of value.

    `kind` picks the type pytest reads the key with: "bool", "args" (words), "int" (a whole
    number, never empty), "int?" (a whole number or a text: empty, '0.5%'), "float" (a
    number or a text: '2%', empty), "string".
    """

    EXPECTS = {
        "bool": "expected true or false",
        "args": WORDS,
        "int": "expected a whole number",
        "int?": "expected a whole number or a text",
        "float": "expected a number or a text like 2%",
        "string": "expected a string",
    }

    name: str
    attr: str
    parse: Callable[[Any], Any]
    default: str
    help: str
    kind: str = "string"
    doc: str = ""  # the meaning column of docs/configuration.md's table (made from KEYS)

    def readme_row(self) -> str:
        if not self.default:
            shown = "unset"
        else:
            shown = f"`{self.default}`"
            if self.kind == "int" and int(self.default) >= 1 << 20 and int(self.default) % (1 << 20) == 0:
                shown += f" ({int(self.default) >> 20} MiB)"
        return f"| `{self.name}` | {shown} | {self.doc or self.help} |"

    @property
    def ini_type(self) -> Any:
        """The `type` for parser.addini, so that a typed TOML table's values get through.

        Text comes first wherever pytest allows: an ini file's strings then reach the parser
        as written and are judged alike in every pytest. pytest 9.0 and 9.1 check a typed
        table against one type only: there a bool key is "bool" (pytest reads 'true'), a
        count "int" (pytest's int() reads the text), and a key that also takes text ('2%',
        empty for unset) stays "string", so the table needs a string for it.
        """
        return ini_type(self.kind)


@functools.cache
def _pytest_version() -> tuple[int, ...]:
    """The running pytest's (major, minor): this module is below the layers that import
    pytest (the public API runs without it), so from the loaded module, else its metadata."""
    text = getattr(sys.modules.get("pytest"), "__version__", None)
    if not isinstance(text, str):
        from importlib.metadata import version

        text = version("pytest")
    return tuple(int(p) for p in re.findall(r"[0-9]+", text)[:2])


def ini_type(kind: str) -> Any:
    """The `type` for parser.addini of a key of this kind (Key.ini_type says why).

    What this pytest reads: TOML tables that keep their types ([tool.pytest], pytest.toml)
    came in pytest 9.0, ini types that are unions such as `str | int` in 9.2 ("int" and
    "float" types in 8.4, but before 9.0 every value reaches a plugin as text or a list anyway).
    """
    if kind == "args":
        return "args"
    version = _pytest_version()
    typed_toml, union_types = version >= (9, 0), version >= (9, 2)
    if union_types:
        unions = {"bool": str | bool, "int": str | int, "int?": str | int, "float": str | float}
        return unions.get(kind, "string")
    if typed_toml and kind in ("bool", "int"):
        return kind
    return "string"


KEYS: tuple[Key, ...] = (
    Key("tokaudit_glob", "glob", parse_patterns, default_glob(),
        "file name patterns collected as audit items", "args",
        doc="file name patterns collected as audit items (see Data sources)"),
    Key("tokaudit_ids_field", "ids_field", parse_required_field, "output_ids",
        "field holding the token ids (dots reach into nested objects)",
        doc="field holding the token ids; dots reach into nested objects and numbers index lists (`response.ids`, `choices.0.ids`)"),
    Key("tokaudit_count_field", "count_field", parse_count_field, "completion_tokens",
        "field holding the billed token count, or fields and whole numbers added or subtracted (a + b? - 1)",
        doc="field holding the billed count (`usage.completion_tokens` works), or fields and whole numbers added or subtracted: `usage.completion_tokens + usage.completion_tokens_details.reasoning_tokens?` for providers that bill reasoning apart (`?`: a missing or null addend counts 0), `usage.completion_tokens - usage.completion_tokens_details.reasoning_tokens` to audit the visible answer alone; a result below 0 is a finding at the record; the budget and summaries use the same formula"),
    Key("tokaudit_id_field", "id_field", parse_field, "sample_id",
        "field identifying a record (empty: records have no id)",
        doc="field naming a record, shown with every finding; a string or an int; empty: no ids"),
    Key("tokaudit_where", "where", parse_field, "",
        "audit only records whose field is present and truthy; others are skipped",
        doc="audit only records whose field is present and truthy (e.g. `provider`: API responses, not local ones); the rest are counted as skipped"),
    Key("tokaudit_count_abs", "count_abs", parse_count, "8",
        "per record: |billed - counted| <= max(abs, rel * billed)", "int",
        doc="per record: `abs(billed - len(ids)) <= max(abs, rel * billed)`, as `pytest.approx`"),
    Key("tokaudit_count_rel", "count_rel", parse_rel, "2%",
        "per record: relative part of the count tolerance (0.02 or 2%)", "float",
        doc="the relative part of that tolerance"),
    Key("tokaudit_count_outliers", "count_outliers", parse_allowance, "0",
        "per file: records allowed to break the count tolerance (3 or 0.5%)", "int?",
        doc="per file: audited records allowed to break the count tolerance, a count (`3`) or a share of audited records (`0.5%`, rounded down); they are still listed, as allowed outliers. Each check's allowable findings are weighed against it on their own"),
    Key("tokaudit_count_outlier_max", "count_outlier_max", parse_optional_limit, "",
        "per record: a record off by more than this (200 or 50% of billed) is never an allowed outlier", "int?",
        doc="per record: how far off an allowed outlier may be, tokens (`200`) or a share of its billed count (`50%`); a record off by more is a finding `tokaudit_count_outliers` never forgives"),
    Key("tokaudit_count_mean_rel", "count_mean_rel", parse_optional_rel, "0.5%",
        "per file: mean |diff| <= max(tokaudit_count_mean_abs, rel * mean billed) (empty: off)", "float",
        doc="per file: `mean(abs(billed - len(ids))) <= max(mean_abs, mean_rel * mean billed)`: the relative part (a real audit measured 0.04%); empty turns the mean check off"),
    Key("tokaudit_count_mean_abs", "count_mean_abs", parse_mean_abs, "5",
        "per file: the absolute part of the mean tolerance, in tokens (0: none)", "float",
        doc="the absolute part of that tolerance, in tokens (`2.5` works; `0`: none): short answers' noise and a provider's framing tokens stay under it (see How the defaults were chosen)"),
    Key("tokaudit_text_template", "text_template", parse_optional_template, "",
        "how a completion's tokens are rebuilt from the record: {field} placeholders and special tokens",
        doc="how a completion's tokens are rebuilt from its text (needs a tokenizer): `{dotted.path}` placeholders (`{path?}`: may be missing or null), literal text and special tokens (`\\n`, `\\t`, `\\\\`: a newline, a tab, a backslash; any other backslash sequence is an error), e.g. `{choices.0.message.reasoning?}</think>{choices.0.message.content}<|im_end|>`. Records without the ids field are audited on the ids it yields; records with both are checked by `ids_match_text` (see Raw API responses)"),
    Key("tokaudit_finish_reason_field", "finish_reason_field", parse_field, "choices.0.finish_reason",
        "field holding the finish reason (judged by tokaudit_finish_reason)",
        doc="field holding why the API stopped; a record without it (or with null) is not judged by `tokaudit_finish_reason`"),
    Key("tokaudit_finish_reason", "finish_reason", parse_words, "",
        "per record: allowed finish reasons (e.g. stop)", "args",
        doc="per record: the allowed finish reasons (e.g. `stop`): a response cut at max_tokens (`length`) is a finding even when its ids end in `<|im_end|>`"),
    Key("tokaudit_group_by", "group_by", parse_fields, "",
        "fields whose values split the summary and the mean check into groups", "args",
        doc="fields (e.g. `provider model`) whose values split the counts into groups: a table by group in the summary, a `groups` channel in the JSON report, and the mean check per group, so a provider that drifts shows even when its file passes"),
    Key("tokaudit_require_once", "require_once", parse_tokens, "",
        "per record: tokens that occur exactly once (ids, or names with a tokenizer)", "args",
        doc="per record: each listed token occurs exactly once"),
    Key("tokaudit_require_last", "require_last", parse_tokens, "",
        "per record: the last token is one of these", "args",
        doc="per record: the last token is one of these"),
    Key("tokaudit_forbid", "forbid", parse_tokens, "",
        "per record: tokens that never occur", "args",
        doc="per record: none of these tokens occurs"),
    Key("tokaudit_allow_empty", "allow_empty", parse_bool, "false",
        "a file with no audited record passes", "bool",
        doc="a file with no audited record passes instead of failing"),
    Key("tokaudit_max_shown", "max_shown", lambda v: parse_count(v, hi=MAX_SHOWN), "20",
        "cap on bad records shown per file (the rest are counted)", "int",
        doc="bad records shown per file; the rest are counted, never dropped silently"),
    Key("tokaudit_tokenizer", "tokenizer", parse_path, "",
        "local Hugging Face tokenizer directory (relative to the ini file)",
        doc="a LOCAL Hugging Face tokenizer directory (`tokenizer.json`, `tokenizer_config.json`); `--tokaudit-tokenizer=DIR` overrides it. Loaded once per process with `local_files_only`; nothing is downloaded"),
    Key("tokaudit_trust_remote_code", "trust_remote_code", parse_bool, "false",
        "allow a tokenizer's own Python code (auto_map) to run", "bool",
        doc="let a tokenizer run its own code (`auto_map`, e.g. Kimi K2's `tokenization_kimi.py`); without it such a tokenizer is a usage error saying so"),
    Key("tokaudit_roundtrip_rel", "roundtrip_rel", parse_optional_rel, "",
        "per record: decode->encode edit distance / len(ids) must not exceed it", "float",
        doc="per record: decode the ids (special tokens kept, no space clean-up), encode the text (no added special tokens); token edit distance / len(ids) must not exceed it (the seed used `5%`)"),
    Key("tokaudit_max_line_bytes", "max_line_bytes", lambda v: parse_count(v, lo=1), "67108864",
        "a JSONL line longer than this is one finding, read past without being held", "int",
        doc="a JSONL line longer than this many bytes is a finding at its line, read past "
            "without being held in memory (a corrupt or runaway line cannot exhaust memory); "
            "a Parquet or Arrow IPC row whose values take more bytes (8 per int64 id, a "
            "string's bytes; from the list offsets, no value read) is the same `line_length` "
            "finding at its row, never checked, and a Parquet row group of one such row is "
            "not even read (the footer's value counts tell)"),
    Key("tokaudit_shard_size", "shard_size", parse_shard_size, "134217728",
        "files larger than this many bytes are audited in shards", "int",
        doc="a file larger than this is audited as several items, so xdist spreads it over "
            "workers: byte ranges of an uncompressed JSONL file, none larger than this, cut at "
            "multiples of it (so appending to the file re-audits its last two shards only) "
            "with what is left after an even number of them halved (so two workers get the "
            "same bytes); runs of whole zstd frames or BGZF members of about this many compressed bytes of "
            "a `.zst` or `.gz` file (see Data sources); runs of row groups of about this many "
            "compressed bytes of a Parquet file. `0` never shards; below 1 MiB is a usage "
            "error (each shard is an item, and a smaller one costs more than it spreads). A "
            "file becomes at most 1,024 items: past that its shards grow"),
    Key("tokaudit_budget", "budget", parse_optional_count, "",
        "dataset: billed tokens summed over all files must not exceed it", "int?",
        doc="dataset: billed tokens summed over every audited record of every file must not exceed it"),
    Key("tokaudit_price_per_mtok", "price_per_mtok", parse_optional_price, "",
        "dataset: price per million billed tokens, for the money column", "float",
        doc="dataset: price per million billed tokens; the summary shows the money spent (and the cap in money)"),
    Key("tokaudit_unique_ids", "unique_ids", parse_bool, "false",
        "dataset: a record id appears once across all audited files", "bool",
        doc="dataset: a record id appears once across all audited files; findings name each id and all its `file:line` places"),
    Key("tokaudit_unique_text", "unique_text", parse_bool, "false",
        "dataset: the same completion (same ids) appears under one record id only", "bool",
        doc="dataset: the same completion (the same stored or rebuilt ids) under different record ids is a duplicate (a response paid for twice); findings name the ids and their `file:line` places"),
    Key("tokaudit_expected_ids", "expected_ids", parse_path, "",
        "dataset: manifest of ids that must have a record (relative to the ini file)",
        doc="dataset: a manifest (JSONL with the id field, or one id per line) of ids that must have a record; missing ids are reported as a count and their first ranges"),
    Key("tokaudit_cache_dir", "cache_dir", parse_path, "",
        "folder of the incremental cache (relative to the ini file; default: pytest's cache)",
        doc="folder of the incremental cache (relative to the ini file), for CI to keep between jobs; unset: `.pytest_cache/d/tokaudit` (see Incremental runs)"),
    Key("tokaudit_cache_inputs", "cache_inputs", parse_cache_inputs, "",
        "files (globs, relative to the ini file) and $VARIABLES the checks read at run time: they join the cache key", "args",
        doc="what your checks read at run time, for the incremental cache to key: file patterns (relative to the ini file, `**` for any depth) and `$VARIABLE` names; an edited file or a changed variable re-audits (see Incremental runs)"),
    Key("tokaudit_engine", "engine", parse_engine, "local",
        "where the audit items run: local, or ray (a Ray cluster; RAY_ADDRESS finds it)",
        doc="where each data item's audit runs: `local` (this process, or its `-n` workers) or `ray` (a task on a Ray cluster, found by `RAY_ADDRESS`; see Past one machine); `--tokaudit-engine` overrides it"),
    # The whole bill (docs/whole-bill.md): prompt counts through the chat template,
    # requests joined to responses, money by component.
    Key("tokaudit_prompt_messages", "prompt_messages", parse_field, "",
        "field holding the request's OpenAI-style messages: audits the billed prompt count",
        doc="field holding the request's OpenAI-style `messages` list (`request.messages`); set, each record's billed prompt count is held to the length of the tokenizer's chat template applied to them (generation prompt added). With `tokaudit_requests`: a path in the request record, default `body.messages`"),
    Key("tokaudit_prompt_tools", "prompt_tools", parse_field, "",
        "field holding the request's tools list, rendered by the chat template",
        doc="field holding the request's `tools` list, handed to the chat template; a missing or null one is no tools. With `tokaudit_requests`: a path in the request record, default `body.tools`"),
    Key("tokaudit_prompt_count_field", "prompt_count_field", parse_count_field, "usage.prompt_tokens",
        "field holding the billed prompt count (a formula as tokaudit_count_field)",
        doc="field holding the billed prompt count (a formula as `tokaudit_count_field`); the money by component reads it too"),
    Key("tokaudit_chat_template", "chat_template", parse_path, "",
        "a Jinja chat template file used instead of the tokenizer's own (relative to the ini file)",
        doc="a Jinja chat template file used instead of the tokenizer's own; without it a tokenizer with no chat template is a usage error when prompts are audited"),
    Key("tokaudit_prompt_count_abs", "prompt_count_abs", parse_count, "8",
        "per record: |billed prompt - counted| <= max(abs, rel * billed)", "int",
        doc="per record: the prompt count's tolerance, as `tokaudit_count_abs`"),
    Key("tokaudit_prompt_count_rel", "prompt_count_rel", parse_rel, "2%",
        "per record: relative part of the prompt count tolerance", "float",
        doc="the relative part of that tolerance, as `tokaudit_count_rel`"),
    Key("tokaudit_prompt_count_outliers", "prompt_count_outliers", parse_allowance, "0",
        "per file: records allowed to break the prompt count tolerance (3 or 0.5%)", "int?",
        doc="per file: records allowed to break the prompt count tolerance, as `tokaudit_count_outliers`"),
    Key("tokaudit_prompt_count_mean_rel", "prompt_count_mean_rel", parse_optional_rel, "0.5%",
        "per file: the prompt count's mean tolerance, relative part (empty: off)", "float",
        doc="per file: the prompt count's mean tolerance, as `tokaudit_count_mean_rel` (empty: off)"),
    Key("tokaudit_prompt_count_mean_abs", "prompt_count_mean_abs", parse_mean_abs, "5",
        "per file: the prompt count's mean tolerance, absolute part in tokens", "float",
        doc="the absolute part of that tolerance, as `tokaudit_count_mean_abs`"),
    Key("tokaudit_requests", "requests", parse_path, "",
        "dataset: request files (a glob, relative to the ini file) joined to the responses",
        doc="dataset: the request files (a glob relative to the ini file, e.g. `batches/*_input.jsonl`: OpenAI Batch input lines with `custom_id` and `body`; plain, `.gz` or `.zst`, local files only: a URL is a usage error), joined to the audited responses by `tokaudit_join_field`: every request answered exactly once (`pytest.ini::tokaudit::requests`), and the prompt audit reads each response's request"),
    Key("tokaudit_join_field", "join_field", parse_required_field, "custom_id",
        "field joining a response to its request (in both records)",
        doc="the field naming a request in both the request and the response records"),
    Key("tokaudit_price_input_per_mtok", "price_input_per_mtok", parse_optional_price, "",
        "dataset: price per million prompt tokens not read from the cache", "float",
        doc="dataset: price per million prompt tokens (the part not read from the cache); with the two below, the summary and reports show the spend by component and by group"),
    Key("tokaudit_price_cached_input_per_mtok", "price_cached_input_per_mtok", parse_optional_price, "",
        "dataset: price per million cached prompt tokens (unset: the input price)", "float",
        doc="dataset: price per million cached prompt tokens (unset: the input price)"),
    Key("tokaudit_price_output_per_mtok", "price_output_per_mtok", parse_optional_price, "",
        "dataset: price per million billed completion tokens (reasoning included as billed)", "float",
        doc="dataset: price per million billed completion tokens (`tokaudit_count_field`: reasoning included as the provider bills it)"),
    Key("tokaudit_cached_tokens_field", "cached_tokens_field", parse_field, "usage.prompt_tokens_details.cached_tokens",
        "field holding the cached part of the prompt count (missing or null: 0)",
        doc="field holding the cached part of the billed prompt count; missing or null counts 0"),
    Key("tokaudit_prices", "prices", parse_path, "",
        "dataset: a price table file (TOML or CSV) per provider/model (relative to the ini file)",
        doc="dataset: a TOML (`[[price]]` tables) or CSV file of prices per group of field values (e.g. `provider`, `model`) with columns `input`, `cached_input`, `output`; a record takes the first row whose fields all match, else the `tokaudit_price_*_per_mtok` keys"),
    Key("tokaudit_budget_money", "budget_money", parse_optional_price_total, "",
        "dataset: the spend by component summed over all files must not exceed it (in the prices' currency)", "float",
        doc="dataset: the spend by component over every file must not exceed it (`pytest.ini::tokaudit::budget_money`)"),
    Key("tokaudit_baseline_rel", "baseline_rel", parse_rel, "10%",
        "baseline: how much worse than the baseline a file may get", "float",
        doc="with `--tokaudit-baseline`: how much worse than the baseline a file's mean diff ratio, records with findings or mean round-trip ratio may get"),
)


KEYS_BY_ATTR = {k.attr: k for k in KEYS}


def readme_table() -> str:
    """The configuration table of docs/configuration.md, from KEYS."""
    return "\n".join(["| key | default | meaning |", "|---|---|---|", *(k.readme_row() for k in KEYS)])


TOKEN_ATTRS = ("require_once", "require_last", "forbid")


def add_ini_keys(parser: pytest.Parser) -> None:
    """Register every key with pytest, typed so that TOML values arrive as written."""
    for key in KEYS:
        default = f"default: {key.default}" if key.default else "default: unset"
        parser.addini(key.name, f"tokaudit: {key.help} ({default})", type=key.ini_type,
                      default=None)


def parse_key(key: Key, value: Any) -> Any:
    """`key`'s parser, its error messages prefixed with the key's name."""
    try:
        return key.parse(value)
    except ContractError as exc:
        raise ContractError(f"{key.name}: {exc}") from None


@dataclass(frozen=True)
class Contract:
    """The resolved contract. Adjust it per path with `replace` (it validates, as ini does)."""

    glob: tuple[str, ...]
    ids_field: tuple[str, ...]
    count_field: tuple[str, ...] | CountSum
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
    max_line_bytes: int
    shard_size: int
    budget: int | None
    price_per_mtok: float | None
    unique_ids: bool
    expected_ids: str
    baseline_rel: float
    text_template: Template | None = None
    finish_reason_field: tuple[str, ...] = ("choices", "0", "finish_reason")
    finish_reason: tuple[str, ...] = ()
    count_outlier_max: Allowance | None = None
    unique_text: bool = False
    group_by: tuple[str, ...] = ()
    count_mean_abs: float = 5.0
    prompt_messages: tuple[str, ...] = ()
    prompt_tools: tuple[str, ...] = ()
    prompt_count_field: tuple[str, ...] | CountSum = ("usage", "prompt_tokens")
    chat_template: str = ""
    prompt_count_abs: int = 8
    prompt_count_rel: float = 0.02
    prompt_count_outliers: Allowance = Allowance(0, False)
    prompt_count_mean_rel: float | None = 0.005
    prompt_count_mean_abs: float = 5.0
    requests: str = ""
    join_field: tuple[str, ...] = ("custom_id",)
    price_input_per_mtok: float | None = None
    price_cached_input_per_mtok: float | None = None
    price_output_per_mtok: float | None = None
    cached_tokens_field: tuple[str, ...] = ("usage", "prompt_tokens_details", "cached_tokens")
    prices: str = ""
    budget_money: float | None = None
    cache_dir: str = ""  # where results are cached, not a rule: no part of a cache key
    cache_inputs: tuple[str, ...] = ()  # keyed by what they hold (run/cache.py), not reported
    engine: str = "local"  # where the items run, not a rule: no part of a cache key or report
    # Token specs resolved to ids (names need the tokenizer); filled by resolve_tokens.
    require_once_ids: tuple[int, ...] = ()
    require_last_ids: tuple[int, ...] = ()
    forbid_ids: tuple[int, ...] = ()
    # key name -> (text as written, where it came from); for failure messages.
    sources: dict[str, tuple[str, str]] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        # Every way of making a contract lands here (dataclasses.replace too): parse each
        # value again, so a text ('2%'), an int or the parsed value are all accepted and a bad
        # one is refused, naming its key.
        for key in KEYS:
            object.__setattr__(self, key.attr, parse_key(key, getattr(self, key.attr)))
        if self.roundtrip_rel is not None and not self.tokenizer:
            raise ContractError(
                "tokaudit_roundtrip_rel needs a tokenizer: set tokaudit_tokenizer to a local "
                "tokenizer directory (or pass --tokaudit-tokenizer=DIR)"
            )
        if self.prompt_messages and not self.tokenizer:
            raise ContractError(
                "tokaudit_prompt_messages needs a tokenizer (its chat template counts the "
                "prompt): set tokaudit_tokenizer to a local tokenizer directory")
        if self.text_template is not None and not self.tokenizer:
            raise ContractError(
                "tokaudit_text_template needs a tokenizer: set tokaudit_tokenizer to a local "
                "tokenizer directory (or pass --tokaudit-tokenizer=DIR)"
            )

    def replace(self, **changes: Any) -> Contract:
        """A copy with some values changed, e.g. in pytest_tokaudit_contract.

        Values take the forms the ini file takes: `count_rel="2%"` or `0.02`,
        `count_outliers=5`, `"0.5%"` or an Allowance, `where="meta.provider"` or a tuple.
        """
        return self.replace_from("pytest_tokaudit_contract", **changes)

    def replace_from(self, origin: str, **changes: Any) -> Contract:
        """`replace`, naming `origin` as where the changed values came from."""
        resolved = {"require_once_ids", "require_last_ids", "forbid_ids"}
        unknown = sorted(changes.keys() - KEYS_BY_ATTR.keys() - resolved)
        if unknown:
            raise ContractError(f"unknown contract value {', '.join(unknown)}; known: "
                                f"{', '.join(KEYS_BY_ATTR)}")
        sources = dict(self.sources)
        values = {}
        for attr, value in changes.items():
            if attr in resolved:
                values[attr] = value
                continue
            key = KEYS_BY_ATTR[attr]
            values[attr] = parse_key(key, value)
            text = source_text(key, value, values[attr])
            sources[key.name] = (text, origin)
        new = dataclasses.replace(self, **values, sources=sources)
        if {*TOKEN_ATTRS, "tokenizer", "trust_remote_code"} & changes.keys():
            new = new.resolve_tokens()
        return new

    def check_file_level(self, base: Contract) -> None:
        """Raise ContractError if this per-file contract changes a dataset-level key of
        `base`: dataset checks are judged once over all files, so a folder's value would be
        silently ignored."""
        changed = [KEYS_BY_ATTR[a].name for a in DATASET_ATTRS if getattr(self, a) != getattr(base, a)]
        if changed:
            raise ContractError(
                f"{', '.join(changed)} {'is a dataset-level key' if len(changed) == 1 else 'are dataset-level keys'}, "
                "judged once over every file: set it in the ini file, not per folder")

    def mean_breach(self, records: int, billed: int, absdiff: int) -> str | None:
        """Why `records` records' mean |diff| breaks the mean tolerance
        (model.rules.mean_within), or None: off, or within."""
        if mean_within(self, records, billed, absdiff):
            return None
        rel, most = self.count_mean_rel, self.count_mean_abs
        assert rel is not None  # mean_within: off is within
        mean = absdiff / records
        if not billed:  # nothing billed: no share to judge, only the tokens
            return f"mean |diff| {mean:.2f} > {most:g} tokens (mean billed 0)"
        text = (f"mean |diff| {mean:.2f} / mean billed {billed / records:,.1f} = "
                f"{absdiff / billed:.3%} > {rel:.3%}")
        return text + (f", and {mean:.2f} > {most:g} tokens" if most else "")

    @property
    def needs_tokenizer(self) -> bool:
        specs = self.require_once + self.require_last + self.forbid
        return (self.roundtrip_rel is not None or self.text_template is not None
                or bool(self.prompt_messages) or not all(map(is_token_id, specs)))

    @property
    def prompt_fields(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(messages, tools) paths of the prompt audit: in the request record with
        tokaudit_requests (default body.messages, body.tools), else in the record itself;
        no messages path: no prompt audit."""
        if self.requests:
            return self.prompt_messages or ("body", "messages"), self.prompt_tools or ("body", "tools")
        return self.prompt_messages, self.prompt_tools

    @property
    def audits_prompts(self) -> bool:
        """Whether records' prompt counts are audited (a messages path and a tokenizer)."""
        return bool(self.prompt_fields[0]) and bool(self.tokenizer)

    def allowance(self, check: str) -> Allowance:
        """How many allowable findings of `check` a file may have."""
        return self.prompt_count_outliers if check == "prompt_count" else self.count_outliers

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

        return load_tokenizer(self.tokenizer, self.trust_remote_code)

    def resolve_tokens(self) -> Contract:
        """Turn token specs (ids or names) into ids; names need a tokenizer."""
        return dataclasses.replace(self, **self.token_ids())

    def token_ids(self) -> dict[str, Any]:
        """`<attr>_ids` -> the ids (a tuple) of each token spec attribute; names need a tokenizer."""
        resolved: dict[str, Any] = {}  # "<attr>_ids" -> a tuple of ids, for dataclasses.replace
        for attr in TOKEN_ATTRS:
            specs = getattr(self, attr)
            key = KEYS_BY_ATTR[attr].name
            names = [s for s in specs if not is_token_id(s)]
            if not names:
                resolved[attr + "_ids"] = tuple(int(s) for s in specs)
                continue
            if not self.tokenizer:
                raise ContractError(
                    f"{key}: token names {names} need a tokenizer; set tokaudit_tokenizer "
                    "to a local tokenizer directory, or write token ids"
                )

            resolved[attr + "_ids"] = resolve_tokens(self.tokenizer_object(), specs, key)
        return resolved

    def describe(self, attrs: tuple[str, ...]) -> str:
        """'pytest.ini [tokaudit_count_abs = 8, ...]': values and where they came from."""
        by_origin: dict[str, list[str]] = {}
        for attr in attrs:
            key = KEYS_BY_ATTR[attr].name
            text, origin = self.sources.get(key, (KEYS_BY_ATTR[attr].default, "default"))
            by_origin.setdefault(origin, []).append(f"{key} = {_safe(text)}")
        return "; ".join(f"{o} [{', '.join(v)}]" for o, v in by_origin.items())

    def to_json(self) -> dict[str, str]:
        """Every key as it would be written in pytest.ini (paths made absolute, URLs without
        credentials: see base.urls.display_url), but tokaudit_cache_dir and tokaudit_engine."""
        out = {}
        for key in KEYS:
            if key.attr in RUN_ATTRS:  # how this run ran, not a rule of the data
                continue
            text = self.sources.get(key.name, (key.default, "default"))[0]
            if key.attr in PATH_ATTRS:
                text = getattr(self, key.attr)
            out[key.name] = _safe(text)
        return out

    def differences(self, base: Contract) -> dict[str, str]:
        """The keys whose value differs from `base`'s, as to_json writes them: what a
        folder's pytest_tokaudit_contract changed (kept in each file's summary)."""
        if self is base:
            return {}
        theirs = base.to_json()
        return {k: v for k, v in self.to_json().items() if theirs.get(k) != v}

    def own_contract(self, differences: dict[str, str]) -> Contract:
        """This (the run's) contract with a file's `differences` applied: the contract the
        file was judged by, for the views (token names are not resolved)."""
        if not differences:
            return self
        return Contract.from_json({**self.to_json(), **differences}, "pytest_tokaudit_contract")

    @classmethod
    def from_json(cls, texts: Any, origin: str = "report") -> Contract:
        """The contract a JSON report was made with (token names left unresolved).

        ContractError names the key of a bad value; a key the report lacks takes its default.
        """
        if not isinstance(texts, dict):
            raise ContractError(f"expected an object of tokaudit_* keys, got {texts!r}")
        values, sources = {}, {}
        for key in KEYS:
            text = texts.get(key.name, key.default)
            if not isinstance(text, str):
                raise ContractError(f"{key.name}: expected a string as written in pytest.ini, "
                                    f"got {text!r}")
            values[key.attr] = parse_key(key, text)
            sources[key.name] = (text, origin)
        return cls(**values, sources=sources)


PATH_ATTRS = ("tokenizer", "expected_ids", "cache_dir", "chat_template", "requests", "prices")


def _safe(text: Any) -> Any:
    """A value as shown or stored: a URL without what would be a credential in it."""
    return display_url(text) if is_url(text) else text


RUN_ATTRS = ("cache_dir", "engine", "cache_inputs")  # how a run ran: in no report, no cache key


DATASET_ATTRS = ("budget", "price_per_mtok", "unique_ids", "unique_text", "expected_ids",
                 "requests", "price_input_per_mtok", "price_cached_input_per_mtok",
                 "price_output_per_mtok", "prices", "budget_money")


FIELD_ATTRS = ("ids_field", "count_field", "id_field", "where", "finish_reason_field",
               "prompt_messages", "prompt_tools", "prompt_count_field", "join_field",
               "cached_tokens_field")


_PLAIN_WORD = re.compile(r"[^\s'\"\\]+")


def _text(attr: str, value: Any) -> str:
    """A value as it would be written in pytest.ini."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        if attr in FIELD_ATTRS:
            return ".".join(value)
        return " ".join(w if _PLAIN_WORD.fullmatch(w) else shlex.quote(w) for w in value)
    if isinstance(value, float) and not attr.startswith("price") and attr not in (
            "count_mean_abs", "prompt_count_mean_abs", "budget_money"):
        return fmt_rel(value)
    if isinstance(value, float):
        return f"{value:g}"
    return "" if value is None else str(value)


def source_text(key: Key, raw: Any, value: Any) -> str:
    """What a failure message quotes: the text as written; a bool, a list or a TOML number
    as pytest.ini would hold it (pytest gives TOML's true as 'True', or as True)."""
    if isinstance(raw, str) and key.kind != "bool":
        return raw.strip()
    return _text(key.attr, value)


def money(tokens: int, contract: Contract) -> str:
    return "" if contract.price_per_mtok is None else amount(tokens * contract.price_per_mtok / 1e6)
