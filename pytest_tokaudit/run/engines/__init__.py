"""The execution boundary: "audit these items' parts" -> their summaries, somewhere else.

`local` (the default) is no engine: each AuditItem audits its part in its own runtest (in
this process, or on an xdist worker). Another engine is one module here plus one line in
model.values.ENGINES (the contract checks the name), imported only when chosen
(plugin.configure_engine), so its library is too. Its
module's ENGINE(config) has ``start(tasks)`` (called once, after collection, with every
selected item the cache does not answer, in run order), ``result(key)`` (an item's result
when its setup asks, or EngineError) and ``close()`` (cancels what is left). Collection,
node ids, the cache, the file and dataset checks and every report stay in pytest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, Sequence

import pytest

from ...model.contract import Contract
from ...model.summary import FileSummary
from ...model.values import ENGINES  # noqa: F401 - the registry, read by the contract's key
from ...sources.base import Part



class EngineError(Exception):
    """An item's audit could not be done by the engine (the cause, after any retries)."""


@dataclass
class Task:
    """One item's audit, as an engine receives it: everything the pass needs but the hook,
    which the engine ships in its own way."""

    key: str  # the item's node id
    source: Any  # a Path, or a sources.remote.RemoteFile
    display: str  # the path shown (a URL without credentials)
    contract: Contract
    part: Part
    summary: FileSummary  # empty, with the part's shard fields set
    hook: Any  # the item's hook relay: its conftest.py files' hooks and the plugins'
    failures: bool = False  # --tokaudit-failures: every finding at a record comes back too


@dataclass
class Result:
    """What came back: the summary, and the error its pass raised there, if any."""

    summary: FileSummary
    hook_error: str | None = None  # a HookError's message: the item fails as in process
    error: str | None = None  # any other exception in the pass, with its traceback
    retries: tuple[str, ...] = ()  # why each earlier attempt was lost (a worker died ...)
    failures: list[dict[str, Any]] | None = None  # with Task.failures: engine.observers.entries
    # The modules the audit loaded where it ran (names), for the cache (run/loaded.py): None
    # if the engine cannot say, and then its result is not stored.
    modules: list[str] | None = None


class Engine(Protocol):
    def start(self, tasks: Sequence[Task]) -> None: ...

    def result(self, key: str) -> Result | None: ...

    def close(self) -> None: ...


# The engine of this run, on the process that runs the items; absent for the local engine.
ENGINE = pytest.StashKey[Engine]()
