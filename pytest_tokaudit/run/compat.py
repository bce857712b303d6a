"""Every private pytest attribute the plugin touches, in one place.

Each use fails loudly (PrivateApiError, which the caller turns into a failed result
naming the pytest version) rather than falling back to something that silently does
the wrong thing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import pytest


class PrivateApiError(RuntimeError):
    """pytest changed something private this plugin relies on."""


def failure_repr(path: str, lineno: int, message: str, lines: Sequence[str]) -> Any:
    """A failure longrepr that every report consumer reads like an exception's.

    `reprcrash` (path, 1-based line, message) is what `-r` short summaries, `--tb=line`
    and junitxml's `message` attribute show, on every pytest version (pytest 8 shows no
    reason for a plain-string longrepr). The body is the traceback's extra text, printed
    as is, with no traceback entry: plugins that place a failure by its first entry fall
    back to `reprcrash`'s line (pytest-github-actions-annotate-failures annotates the
    first bad record, not the file's line 1). xdist serialises it as any traceback.
    """
    try:
        from _pytest._code.code import (
            ExceptionChainRepr,
            ReprFileLocation,
            ReprTraceback,
        )
    except ImportError as exc:  # pragma: no cover - depends on pytest's internals
        raise PrivateApiError(f"pytest {pytest.__version__}: {exc}") from None
    # ReprFileLocation's lineno is shown as is; 0 means "the file" (no line).
    crash = ReprFileLocation(path=path, lineno=lineno, message=message)
    body = ReprTraceback(reprentries=[], extraline="\n".join(lines) if lines else None,
                         style="native")
    return ExceptionChainRepr([(body, crash, None)])


def load_conftests(config: pytest.Config, path: Path) -> None:
    """Import the conftest.py files that apply to `path`, as collection would.

    The xdist controller collects nothing, so it has not imported the conftest.py files
    below the root; a sharded file's whole-file verdict must be judged with its own hooks.
    pytest has no public call for this.
    """
    pm = config.pluginmanager
    load = getattr(pm, "_loadconftestmodules", None)
    if load is None:
        raise PrivateApiError(
            f"pytest {pytest.__version__} has no PytestPluginManager._loadconftestmodules"
        )
    try:
        load(path, config.getoption("importmode"), config.rootpath,
             consider_namespace_packages=config.getini("consider_namespace_packages"))
    except TypeError as exc:
        raise PrivateApiError(
            f"pytest {pytest.__version__}: _loadconftestmodules changed: {exc}"
        ) from None


def teardown_all(session: pytest.Session) -> None:
    """Tear down what an interrupted run loop left set up (as pytest does at session end).

    The deferred items run after the loop; pytest's SetupState refuses an item while a
    previous item's collectors are still set up.
    """
    teardown_towards(session, None)


def teardown_towards(session: pytest.Session, nextitem: pytest.Item | None) -> None:
    """Tear down what `nextitem` does not share, as the protocol of a skipped-over item would.

    An item whose protocol is put off never runs pytest's teardown step; the item before it
    kept the collectors they share (a sharded file's), which the next item may not want.
    """
    state = getattr(session, "_setupstate", None)
    if state is None or not hasattr(state, "teardown_exact"):
        raise PrivateApiError(f"pytest {pytest.__version__} has no Session._setupstate.teardown_exact")
    state.teardown_exact(nextitem)


def junit_attributes(config: pytest.Config, report: pytest.TestReport, attrs: dict[str, str]) -> None:
    """Set attributes of `report`'s <testcase> in --junitxml's file (classname, name).

    What `record_xml_attribute` does for a test, done on the process that writes the
    file (the xdist controller: workers have no junitxml). pytest derives classname and
    name from the node id and offers no public way to choose them for a report.
    """
    try:
        from _pytest.junitxml import xml_key
    except ImportError as exc:  # pragma: no cover - depends on pytest's internals
        raise PrivateApiError(f"pytest {pytest.__version__}: {exc}") from None
    xml = config.stash.get(xml_key, None)
    if xml is None:
        return
    try:
        reporter = xml.node_reporter(report)
        for name, value in attrs.items():
            reporter.add_attribute(name, value)
    except (AttributeError, TypeError) as exc:
        raise PrivateApiError(f"pytest {pytest.__version__}: junitxml changed: {exc}") from None


def ini_file_keys(config: pytest.Config) -> list[str]:
    """The keys the ini file (pytest.ini, tox.ini, setup.cfg, either pyproject.toml table)
    sets. pytest has no public list: it reads them from `Config._inicfg` (`Config.inicfg`
    before pytest 9.1, deprecated since)."""
    keys = getattr(config, "_inicfg", None)
    if keys is None:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            keys = getattr(config, "inicfg", None)
    if keys is None:
        raise PrivateApiError(f"pytest {pytest.__version__} has no Config._inicfg")
    return list(keys)


def write_above(terminalreporter: Any, text: str) -> None:
    """Write `text` as a line of its own and put back the line pytest was writing (a file's
    progress dots), so its `[ NN%]` column still lands where pytest puts it.

    pytest's TerminalReporter keeps the line only in its TerminalWriter (`_tw`,
    `_current_line`) and which file it belongs to in `currentfspath`."""
    tw = getattr(terminalreporter, "_tw", None)
    line = getattr(tw, "_current_line", None)
    if tw is None or not isinstance(line, str):
        raise PrivateApiError(f"pytest {pytest.__version__} has no TerminalWriter._current_line")
    path = terminalreporter.currentfspath
    if line:
        tw.line()  # end the line pytest was writing (a -q run's dots have no currentfspath)
    terminalreporter.currentfspath = None
    terminalreporter.write_line(text)
    if line:
        tw.write(line)  # again: pytest's next dots and its [ NN%] follow on
        terminalreporter.currentfspath = path
    terminalreporter.flush()


def xdist_hands_out_units(config: pytest.Config) -> bool:
    """On an xdist worker: whether the controller runs `--dist loadgroup`, whose scheduler
    hands out work units in turn (one to each worker, again, then one to each that
    finishes) rather than `load`'s consecutive pairs. The worker's `dist` is "no"; xdist
    keeps this one flag for it (xdist.remote.setup_config)."""
    return bool(getattr(config.option, "loadgroup", False))
