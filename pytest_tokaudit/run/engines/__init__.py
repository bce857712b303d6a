"""Execution engines: where the audit of the selected data items runs.

`local` (the default) audits each item in the pytest process that runs it (one process, or
each xdist worker). Another engine takes "audit these items" and hands back each item's
summary, which the item then reports as if it had audited in process: collection, node
ids, the cache, the dataset checks and every report stay in pytest. An engine is one module
here plus one line in ENGINES; it is imported only when chosen.
"""

from __future__ import annotations

from typing import Any, Protocol

import pytest

from ...model.summary import FileSummary

ENGINES = {"local": None, "ray": "pytest_tokaudit.run.engines.ray"}


class EngineError(Exception):
    """An item's audit failed in the engine (a task that kept failing): its message says why."""


class Engine(Protocol):
    def summary(self, item: Any) -> FileSummary:
        """The item's audit summary (before the per-file checks); raises what stopped it."""


ENGINE = pytest.StashKey[Engine]()
