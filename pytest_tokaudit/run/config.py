"""The contract from the ini file, -o and the command line: a bad value is a UsageError naming its key."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

from ..api import check_tokenizer, contract_from_values
from ..base.urls import scrub
from ..model.contract import KEYS, KEYS_BY_ATTR, Contract, Key
from ..tokenizers.hf import TokenizerError

CONTRACT = pytest.StashKey[Contract]()  # the ini file's contract, in every process

CLI = {"tokenizer": "tokaudit_tokenizer", "engine": "tokaudit_engine"}  # attr -> option dest


def contract_from_config(config: pytest.Config) -> Contract:
    """Read every key; a bad value is a UsageError naming the key and what to write. The
    values are validated by api.contract_from_values, as the public API's contracts are."""
    overrides = {
        item.split("=", 1)[0].strip()
        for item in (config.getoption("override_ini", None) or [])
        if "=" in item
    }
    where_file = config.inipath.name if config.inipath else "ini"
    raw: dict[str, tuple[Any, str, Path]] = {}
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
                value = config.getini(key.name)
        except (ValueError, TypeError, pytest.UsageError) as exc:
            # pytest's own check of the ini type (a TOML bool where a list belongs, ...).
            message = str(exc).removeprefix(f"{config.inipath}: ")
            expects = Key.EXPECTS[key.kind]
            raise pytest.UsageError(f"{key.name} ({origin}): {expects}: {message}") from None
        if value is None:
            continue  # the default
        if key.attr in CLI and config.getoption(CLI[key.attr], None):
            continue  # given on the command line, below
        raw[key.name] = (value, origin, _folder(config, origin))
    for attr, dest in CLI.items():  # the command line's option beats the ini key
        cli = config.getoption(dest, None)
        if cli:
            origin = "--" + dest.replace("_", "-")
            raw[KEYS_BY_ATTR[attr].name] = (cli, origin, _folder(config, origin))
    try:
        return contract_from_values(raw, check_remote=not hasattr(config, "workerinput"))
    except ValueError as exc:  # ContractError, or TokenizerError from loading
        raise pytest.UsageError(scrub(str(exc))) from None


class CollectUsageError(Exception):
    """A usage error met while collecting a data file: the tokenizer its folder's contract
    names cannot load, or reading it needs an extra that is not installed. The run stops
    with it, as with the ini's (exit 4): see UsageInCollection."""


def file_contract(ihook: Any, source: Any, base: Contract, where: str) -> Contract:
    """`base` as the pytest_tokaudit_contract hooks of `source`'s folders adjust it, checked
    as the ini's contract is at start: a tokenizer that cannot load (or the round trip's
    missing library) is a CollectUsageError; any other bad value, a ValueError naming it."""
    try:
        contract = ihook.pytest_tokaudit_contract(path=source, contract=base) or base
        if contract is not base:
            check_tokenizer(contract)
    except TokenizerError as exc:  # raised in the hook too, by replace() resolving token names
        raise CollectUsageError(
            scrub(f"tokaudit_tokenizer (pytest_tokaudit_contract for {where}): {exc}")) from None
    contract.check_file_level(base)
    return contract


class UsageInCollection:
    """Registered in every process: a CollectUsageError ends the run as a usage error
    (exit 4, `ERROR: message`), as the same error in the ini does, not as a collection
    error. A collector that met one fails with the message in a report section (what
    crosses from an xdist worker); where reports are judged (not on a worker) the first
    such report raises pytest.UsageError, outside any collector's error handling."""

    def __init__(self, config: pytest.Config):
        self.worker = hasattr(config, "workerinput")  # its reports go to the controller

    @pytest.hookimpl(wrapper=True)
    def pytest_make_collect_report(self, collector: pytest.Collector) -> Any:
        report = yield
        message = getattr(collector, "tokaudit_usage", None)
        if message and report.failed:
            report.sections.append((USAGE_SECTION, message))
        return report

    @pytest.hookimpl(tryfirst=True)
    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        message = dict(report.sections).get(USAGE_SECTION)
        if message and not self.worker:
            raise pytest.UsageError(message)


USAGE_SECTION = "tokaudit usage error"


def _folder(config: pytest.Config, origin: str) -> Path:
    """What a relative path is relative to: ini values to the ini file, command-line ones
    to where pytest runs."""
    if origin not in ("-o", "--tokaudit-tokenizer") and config.inipath:
        return config.inipath.parent
    return Path(config.invocation_params.dir)
