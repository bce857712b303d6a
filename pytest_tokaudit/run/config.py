"""The contract from the ini file, -o and the command line: a bad value is a UsageError naming its key."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

from ..base.urls import display_url, is_url, scrub
from ..checks.join import request_files
from ..engine.template import check_literals
from ..model.contract import (
    KEYS,
    PATH_ATTRS,
    Contract,
    ContractError,
    Key,
    _source_text,
)
from ..sources.remote import RemoteUnavailable, describe, filesystem
from ..tokenizers.chat import check_template
from ..tokenizers.tiktoken import TiktokenError
from ..tokenizers.tiktoken import locate as locate_tiktoken

CONTRACT = pytest.StashKey[Contract]()  # the ini file's contract, in every process

CLI = {"tokenizer": "tokaudit_tokenizer", "engine": "tokaudit_engine"}  # attr -> option dest


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
        origin = "-o" if key.name in overrides else where_file
        try:
            with warnings.catch_warnings():
                # [tool.pytest.ini_options] may hold a TOML list or number for a key read as
                # text: pytest 9.2 warns that this will be a TypeError (pytest 10), which
                # the except below makes a usage error; until then the key's own parser
                # refuses the value, naming the key. Either way the user sees one error.
                warnings.filterwarnings("ignore", message="Passing a value that is not a string",
                                        category=pytest.PytestDeprecationWarning)
                raw = config.getini(key.name)
        except (ValueError, TypeError, pytest.UsageError) as exc:
            # pytest's own check of the ini type (a TOML bool where a list belongs, ...).
            message = str(exc).removeprefix(f"{config.inipath}: ")
            expects = Key.EXPECTS[key.kind]
            raise pytest.UsageError(f"{key.name} ({origin}): {expects}: {message}") from None
        if raw is None:
            raw, origin = key.default, "default"
        if key.attr in CLI:  # the command line's option beats the ini key
            cli = config.getoption(CLI[key.attr], None)
            if cli:
                raw, origin = cli, "--" + CLI[key.attr].replace("_", "-")
        try:
            value = key.parse(raw)
            if key.attr == "expected_ids" and value and "://" in value:
                _check_url(config, value)  # a manifest at a URL: read through fsspec
            elif key.attr == "tokenizer" and value and value.startswith("tiktoken:"):
                name = value[len("tiktoken:"):].strip()  # an encoding, or a .tiktoken file
                if "/" in name or name.endswith(".tiktoken"):
                    value = "tiktoken:" + str(_relative_to(config, name, origin))
                try:
                    locate_tiktoken(value)  # there, or a usage error saying where to put it
                except TiktokenError as exc:
                    raise ContractError(str(exc)) from None
            elif key.attr in PATH_ATTRS and value:
                value = str(_relative_to(config, value, origin))
                _check_path(key, Path(value))
        except ContractError as exc:
            raise pytest.UsageError(scrub(f"{key.name} ({origin}): {exc}")) from None
        values[key.attr] = value
        text = _source_text(key, raw, value)
        if is_url(text):  # as shown in failure text and stored in reports: no credential
            text = display_url(text)
        sources[key.name] = (text, origin)
    try:
        contract = Contract(**values, sources=sources)
        if contract.needs_tokenizer:
            contract.tokenizer_object()  # a bad directory is a usage error now, not per file
        if contract.text_template is not None:
            check_literals(contract.text_template, contract.tokenizer_object())
        if contract.audits_prompts:  # no chat template: a usage error now, not per file
            check_template(contract.tokenizer, contract.chat_template)
        return contract.resolve_tokens()
    except ValueError as exc:  # ContractError, or TokenizerError from loading
        raise pytest.UsageError(scrub(str(exc))) from None


def _check_path(key: Key, path: Path) -> None:
    """A configured directory or manifest that is not there: say so before auditing.

    Only a stat: the tokenizer itself (and transformers) is loaded when a check needs it.
    """
    if key.attr == "tokenizer" and not path.is_dir():
        what = "is not a directory" if path.exists() else "does not exist"
        raise ContractError(f"tokenizer directory {path} {what}; give a local directory "
                            "holding tokenizer.json / tokenizer_config.json")
    if key.attr == "cache_dir" and path.exists() and not path.is_dir():
        raise ContractError(f"cache folder {path} is not a directory")
    if key.attr in ("chat_template", "prices") and not path.is_file():
        what = "is not a file" if path.exists() else "does not exist"
        raise ContractError(f"{path} {what}")
    if key.attr == "requests" and not request_files(str(path)):
        raise ContractError(f"no request file matches {path}")
    if key.attr == "expected_ids" and not path.is_file():
        what = "is not a file" if path.exists() else "does not exist"
        raise ContractError(f"manifest {path} {what}")


def _check_url(config: pytest.Config, url: str) -> None:
    """A manifest URL: fsspec and its protocol installed (else name the extra) and, on the
    controller, the file there (one request; the workers never read the manifest)."""
    try:
        fs, path = filesystem(url)
    except RemoteUnavailable as exc:
        raise ContractError(str(exc)) from None
    if hasattr(config, "workerinput"):
        return
    try:
        found = fs.isfile(path)
    except Exception as exc:  # noqa: BLE001 - any storage error: say which, no traceback
        raise ContractError(f"manifest {display_url(url)}: {describe(exc)}") from None
    if not found:
        raise ContractError(f"manifest {display_url(url)} does not exist")


def _relative_to(config: pytest.Config, value: str, origin: str) -> Path:
    path = Path(value).expanduser()
    if path.is_absolute():
        return path
    # ini values are relative to the ini file, command-line ones to where pytest runs.
    if origin not in ("-o", "--tokaudit-tokenizer") and config.inipath:
        return config.inipath.parent / path
    return Path(config.invocation_params.dir) / path
