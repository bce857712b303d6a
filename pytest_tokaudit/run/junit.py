"""--junitxml names for the plugin's items: the data folder as classname, the file as name."""

from __future__ import annotations

import warnings

import pytest

from .compat import PrivateApiError, junit_attributes
from .items import MARKER, TokauditWarning, data_file_nodeid


def junit_names(nodeid: str, prefix: str | None = None) -> tuple[str, str] | None:
    """(classname, name) of an item of this plugin in --junitxml, or None for another.

    CI pages show classname as the group and name as the test: the data folder, dotted as
    pytest dots a test module's, and the file name (`data.chat` and `a.jsonl [shard 2]`),
    where pytest's own (`data.chat.a.jsonl`, `tokaudit[shard 2]`) reads `.jsonl` as a
    class. Dataset checks and files at the rootdir are in class `tokaudit`.
    """
    path = data_file_nodeid(nodeid)  # never cut at the first `::`: a file may hold one
    if path is None:  # a dataset check: pytest.ini::tokaudit::budget
        anchor, sep, name = nodeid.rpartition("::")
        if not sep or not (anchor == MARKER or anchor.endswith(f"::{MARKER}")):
            return None
        classname = MARKER
    else:
        folder, _, name = path.rpartition("/")
        if "://" in path:  # a URL: its folder as written
            classname = folder
        else:
            classname = folder.replace("/", ".") or MARKER
        label = nodeid[len(path) + len(MARKER) + 2:]
        if label.startswith("[shard "):
            name += f" {label}"
        elif label == "[file]":
            name += " [whole file]"
    return (f"{prefix}.{classname}" if prefix else classname), name


class JunitNames:
    """Registered where --junitxml writes (never on an xdist worker): names the items."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.broken = False

    @pytest.hookimpl(tryfirst=True)  # before junitxml records the report's attributes
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "setup" or self.broken:
            return
        names = junit_names(report.nodeid, self.config.getoption("junitprefix", None))
        if names is None:
            return

        try:
            junit_attributes(self.config, report, {"classname": names[0], "name": names[1]})
        except PrivateApiError as exc:  # pytest's own names are still a usable report
            self.broken = True
            warnings.warn(TokauditWarning(f"tokaudit: JUnit names left to pytest: {exc}"))
