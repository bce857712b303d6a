"""pytest entry point: options, ini keys, hook specs, and plugins registered by role.

pytest imports this module on every run, with or without --tokaudit: keep it light.
"""

from __future__ import annotations

import pytest

from . import outputs
from .hookspec_entry import pytest_addhooks  # noqa: F401 - the tokaudit-hooks entry point's too
from .model.contract import KEYS, add_ini_keys

SWITCH = "tokaudit"  # the ini switch: `tokaudit = true` turns the audit on


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
        "--tokaudit-baseline", metavar="PATH", default=None,
        help="fail files that got worse than in an earlier --tokaudit-json report",
    )
    group.addoption(
        "--tokaudit-no-cache", action="store_true", default=False,
        help="audit every file, reusing no cached result and storing none",
    )
    group.addoption(
        "--tokaudit-engine", metavar="NAME", default=None,
        help="where the data items are audited: local (default: in the pytest process or its "
             "xdist workers) or ray (tasks on the Ray cluster RAY_ADDRESS names, else a local one)",
    )
    parser.addini(SWITCH, "tokaudit: audit the data files without --tokaudit (default: false)",
                  type="bool", default=False)
    add_ini_keys(parser)
    outputs.add_options(parser, group)  # each output's own options


def pytest_load_initial_conftests(early_config: pytest.Config, args: list[str]) -> None:
    # URL testpaths (s3://...) must reach pytest as arguments, or it collects the rootdir.
    if any("://" in t for t in early_config.getini("testpaths") or []):
        from .run.remote import testpath_urls_as_args

        testpath_urls_as_args(early_config, args)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "tokaudit: an item of pytest-tokaudit (a data file, shard or dataset check)"
    )
    check_key_names(config)
    if not switched_on(config):  # --tokaudit, or `tokaudit = true` in the ini file
        if not hasattr(config, "workerinput"):
            config.pluginmanager.register(Reminder(config), "tokaudit.reminder")
        return
    # The audit's own modules are imported only when it is on: pytest imports this module
    # on every run.
    from .checks import builtin
    from .checks.dataset import IdsChannel
    from .run.config import CONTRACT, UsageInCollection, contract_from_config
    from .run.items import Collector, DeferLast

    contract = contract_from_config(config)
    config.stash[CONTRACT] = contract
    pm = config.pluginmanager
    pm.register(Collector(config, contract), "tokaudit.collect")
    pm.register(UsageInCollection(config), "tokaudit.usage")
    pm.register(DeferLast(), "tokaudit.order")
    for name, check in builtin().items():
        if not pm.is_blocked(name):
            pm.register(check(), name)
    # Not optional: without the ids, unique_ids would pass having seen none.
    if pm.is_blocked("tokaudit.ids"):
        raise pytest.UsageError("-p no:tokaudit.ids: the record ids the id checks read cannot "
                                "be turned off; turn off a check instead (-p no:tokaudit.unique_ids)")
    pm.register(IdsChannel(), "tokaudit.ids")
    configure_engine(config)
    baseline = config.getoption("tokaudit_baseline")
    if baseline:
        from .checks.baseline import BaselineCheck
        from .model.contract import ContractError

        try:
            pm.register(BaselineCheck(baseline), "tokaudit.baseline")
        except ContractError as exc:
            raise pytest.UsageError(str(exc)) from None
    if not hasattr(config, "workerinput"):
        from .run.controller import Controller
        from .run.targets import check_targets

        # Before any output opens its file: none may name the data.
        check_targets(config, contract, [*outputs.path_options(), ("--junitxml", "xmlpath")])

        pm.register(Controller(config, contract), "tokaudit.controller")
        if config.getoption("xmlpath", None):
            from .run.junit import JunitNames

            pm.register(JunitNames(config), "tokaudit.junit")
    from .base.atomic import Unwritable

    try:
        outputs.configure(config)  # each output registers what this process needs
    except Unwritable as exc:  # a report that could not be written: say so before any work
        raise pytest.UsageError(str(exc)) from None
    # URLs on the command line or in testpaths: out of pytest's args, listed and collected
    # by run/remote.py (registered after the collector, so its items come before the checks').
    from .run.remote import configure as configure_remote

    configure_remote(config)


def check_key_names(config: pytest.Config) -> None:
    """A misspelt tokaudit_* key is a usage error naming the closest known key, in every
    run: pytest would only warn at the end of collection, after an audit run with the
    default in its place."""
    import difflib

    from .run.compat import ini_file_keys

    if config.getoption("help", False) or config.getoption("version", 0):
        return  # --help and --version work whatever the ini file says

    where = config.inipath.name if config.inipath else "ini"
    given = [(item.split("=", 1)[0].strip(), "-o")  # first: pytest 9 puts them in the ini's keys
             for item in config.getoption("override_ini", None) or [] if "=" in item]
    given += [(k, where) for k in ini_file_keys(config)]
    known = [*(k.name for k in KEYS), SWITCH, *outputs.ini_keys()]  # the contract's, the outputs'
    for key, origin in given:
        if not key.startswith(SWITCH) or key in known:
            continue
        # Compared without the prefix they all share, or every name would be "close".
        tails = {k.removeprefix(f"{SWITCH}_"): k for k in known}
        close = difflib.get_close_matches(key.removeprefix(f"{SWITCH}_"), list(tails), n=1, cutoff=0.6)
        hint = f"did you mean {tails[close[0]]}?" if close else \
            "the keys are listed in the README's Configuration reference"
        raise pytest.UsageError(f"{key} ({origin}): not a key of pytest-tokaudit; {hint}")


def switched_on(config: pytest.Config) -> bool:
    """--tokaudit, or `tokaudit = true` in the ini file."""
    if config.getoption("tokaudit"):
        return True
    try:
        return bool(config.getini(SWITCH))
    except (ValueError, pytest.UsageError) as exc:  # "maybe" for a bool (pytest 9.2 names no key)
        raise pytest.UsageError(f"{SWITCH}: {exc}") from None


class Reminder:
    """Without the switch: ini keys of the plugin but nothing collected deserve a word."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.collected = 0

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.collected = session.testscollected

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        keys = [k.name for k in KEYS if self.config.getini(k.name) not in (None, "", [])]
        if not keys or self.collected:
            return
        terminalreporter.write_line(
            f"tokaudit: the ini file sets {keys[0]}{' ...' if len(keys) > 1 else ''} but the "
            "audit is off: pass --tokaudit or set `tokaudit = true` in the ini file",
            yellow=True,
        )


def configure_engine(config: pytest.Config) -> None:
    """--tokaudit-engine / tokaudit_engine: the engine module, imported only when chosen."""
    from importlib import import_module

    from .run.config import CONTRACT
    from .run.engines import ENGINE, ENGINES

    name = config.stash[CONTRACT].engine  # one of ENGINES: the contract checked it
    key = "--tokaudit-engine" if config.getoption("tokaudit_engine") else "tokaudit_engine"
    module = ENGINES[name]
    if module is None or hasattr(config, "workerinput"):
        return
    if config.getoption("numprocesses", None) or config.getoption("dist", "no") != "no":
        raise pytest.UsageError(f"{key}={name} with -n/--dist: pick one (the engine spreads "
                                "the items over its workers; xdist workers would each start it)")
    engine = import_module(module).ENGINE(config)
    config.stash[ENGINE] = engine
    config.add_cleanup(engine.close)
