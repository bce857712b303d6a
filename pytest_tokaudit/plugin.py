"""pytest entry point: options, ini keys, hook specs, and plugins registered by role.

pytest imports this module on every run, with or without --tokaudit: keep it light.
"""

from __future__ import annotations

import pytest

from .contract import add_ini_keys


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from . import hookspecs

    hookspecs.register(pluginmanager)  # also declared by the tokaudit-hooks entry point


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tokaudit", "token data audit (pytest-tokaudit)")
    group.addoption(
        "--tokaudit", action="store_true", default=False,
        help="collect JSONL data files (tokaudit_glob) and audit them against the contract",
    )
    group.addoption(
        "--tokaudit-tokenizer", metavar="DIR", default=None,
        help="local tokenizer directory (overrides tokaudit_tokenizer)",
    )
    group.addoption(
        "--tokaudit-json", metavar="PATH", default=None,
        help="write the whole audit as JSON to PATH",
    )
    group.addoption(
        "--tokaudit-baseline", metavar="PATH", default=None,
        help="fail files that got worse than in an earlier --tokaudit-json report",
    )
    add_ini_keys(parser)
    from .ci import add_options

    add_options(parser, group)  # CI outputs and the `tokaudit = true` ini switch


def pytest_load_initial_conftests(early_config: pytest.Config, args: list[str]) -> None:
    # URL testpaths (s3://...) must reach pytest as arguments, or it collects the rootdir.
    if any("://" in t for t in early_config.getini("testpaths") or []):
        from .remote import testpath_urls_as_args

        testpath_urls_as_args(early_config, args)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "tokaudit: an item of pytest-tokaudit (a data file, shard or dataset check)"
    )
    from .ci import remind, switched_on

    if not switched_on(config):  # --tokaudit, or `tokaudit = true` in the ini file
        remind(config)
        return
    from .checks import BUILTIN
    from .collect import CONTRACT, Collector, DeferLast
    from .contract import contract_from_config
    from .dataset import BUILTIN as DATASET_BUILTIN
    from .dataset import IdsChannel

    contract = contract_from_config(config)
    config.stash[CONTRACT] = contract
    pm = config.pluginmanager
    pm.register(Collector(config, contract), "tokaudit.collect")
    pm.register(DeferLast(), "tokaudit.order")
    for name, check in {**BUILTIN, **DATASET_BUILTIN}.items():
        if not pm.is_blocked(name):
            pm.register(check(), name)
    # Unnamed, so no -p no:NAME can block it: without the ids, unique_ids would pass
    # having seen none.
    pm.register(IdsChannel())
    baseline = config.getoption("tokaudit_baseline")
    if baseline:
        from .jsonreport import BaselineCheck

        pm.register(BaselineCheck(baseline), "tokaudit.baseline")
    json_path = config.getoption("tokaudit_json")
    if json_path and not hasattr(config, "workerinput"):  # a usage error now, not after the audit
        from .jsonreport import check_writable

        check_writable(config.invocation_params.dir / json_path, "--tokaudit-json")
    if not hasattr(config, "workerinput"):
        from .controller import CONTROLLER, Controller

        config.stash[CONTROLLER] = Controller(config, contract)
        pm.register(config.stash[CONTROLLER], "tokaudit.controller")
    from .ci import configure

    configure(config)  # annotations, Markdown summary, failures file
    # URLs on the command line or in testpaths: out of pytest's args, listed and collected
    # by remote.py (registered after the collector, so its items come before the checks').
    from .remote import configure as configure_remote

    configure_remote(config)
