"""CI outputs, wired in one place: options, the `tokaudit` ini switch, and registration.

plugin.py calls `add_options` and `configure`; every CI output lives in its own module
(github.py, markdown.py, failures.py). Imported on every run: keep it light.
"""

from __future__ import annotations

import pytest

SWITCH = "tokaudit"  # the ini switch: `tokaudit = true` turns the audit on


def add_options(parser: pytest.Parser, group: pytest.OptionGroup) -> None:
    group.addoption(
        "--tokaudit-annotations", choices=("auto", "github", "none"), default="auto",
        help="GitHub Actions annotations, one per finding: github (always), none, "
             "auto (default: when GITHUB_ACTIONS=true)",
    )
    group.addoption(
        "--tokaudit-markdown", metavar="PATH", default=None,
        help="append a Markdown summary of the audit to PATH "
             "(default: $GITHUB_STEP_SUMMARY when set)",
    )
    group.addoption(
        "--tokaudit-failures", metavar="PATH", default=None,
        help="write every bad record, uncapped, as JSON lines to PATH",
    )
    parser.addini(SWITCH, "tokaudit: audit the data files without --tokaudit (default: false)",
                  type="bool", default=False)


def switched_on(config: pytest.Config) -> bool:
    """--tokaudit, or `tokaudit = true` in the ini file."""
    if config.getoption("tokaudit"):
        return True
    try:
        return bool(config.getini(SWITCH))
    except (ValueError, pytest.UsageError) as exc:  # "maybe" for a bool (pytest 9.2 names no key)
        raise pytest.UsageError(f"{SWITCH}: {exc}") from None


def configure(config: pytest.Config) -> None:
    """After the controller is registered: the CI outputs of this process."""
    pm = config.pluginmanager
    failures = config.getoption("tokaudit_failures")
    if failures:
        from .failures import configure as configure_failures

        configure_failures(config, failures)
    if hasattr(config, "workerinput"):
        return
    from .github import Annotations, enabled

    if enabled(config):
        pm.register(Annotations(config), "tokaudit.annotations")
    from .markdown import JobSummary, target

    path = target(config)
    if path is not None:
        pm.register(JobSummary(config, path), "tokaudit.markdown")


class Reminder:
    """Without the switch: ini keys of the plugin but nothing collected deserve a word."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.collected = 0

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.collected = session.testscollected

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        from .contract import KEYS

        keys = [k.name for k in KEYS if self.config.getini(k.name) not in (None, "", [])]
        if not keys or self.collected:
            return
        terminalreporter.write_line(
            f"tokaudit: the ini file sets {keys[0]}{' ...' if len(keys) > 1 else ''} but the "
            "audit is off: pass --tokaudit or set `tokaudit = true` in the ini file",
            yellow=True,
        )


def remind(config: pytest.Config) -> None:
    """Called when the audit is off."""
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(Reminder(config), "tokaudit.reminder")
