"""The Ray engine (`--tokaudit-engine=ray`): each selected data item's audit is a Ray task
on the cluster, near the data; only its summary comes back. pytest stays the gate.

The cluster is found as Ray users expect: RAY_ADDRESS (`host:port`, or `ray://host:10001`
for Ray Client), else a local instance started for the run and shut down after it. Tasks
are submitted ahead of the items that report them, a bounded number in flight; a worker
lost mid-task is retried by Ray (TASK_RETRIES); a task that keeps failing makes its item an
error naming the cause, and the run partial. On the workers, the check hooks are the
built-in checks (less those blocked with -p no:NAME) and the rootdir's conftest.py files,
shipped by value; the package itself is shipped with the task (runtime_env py_modules).
"""

from __future__ import annotations

import os
import socket
import sys
import types
from pathlib import Path
from typing import Any

import orjson
import pytest

from ...base.urls import scrub
from ...checks import DATASET, RECORD, builtin
from ...checks.dataset import IdsChannel
from ...checks.standalone import standalone_hook
from ...engine.passes import audit
from ...model.contract import Contract
from ...model.summary import FileSummary
from ...sources.base import Part
from . import EngineError

# Per worker process: the hooks of a run (built-in checks and conftest modules), built once.
STANDALONE_HOOKS: dict[str, Any] = {}
TASK_RETRIES = 2  # a worker process lost mid-task (killed, out of memory): tried again
IN_FLIGHT_PER_CPU = 2


class RayTaskFailed(EngineError):
    """The item's task failed on the cluster (after Ray's retries); the message says why."""


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise pytest.UsageError("--tokaudit-engine=ray needs Ray: pip install 'pytest-tokaudit[ray]'") from None
    return ray


def conftest_sources(root: Path) -> list[tuple[str, str]]:
    """(path relative to the rootdir, source) of every conftest.py under it (not in hidden
    folders or virtual environments): the hooks a worker must run."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "__"))
                             and not Path(dirpath, d, "pyvenv.cfg").exists())
        if "conftest.py" in filenames:
            path = Path(dirpath, "conftest.py")
            out.append((path.relative_to(root).as_posix(), path.read_text(encoding="utf-8")))
    return out


def _audit(payload: bytes) -> bytes:
    """On a Ray worker: one item's audit, its summary as JSON."""
    job = orjson.loads(payload)
    key = job["hooks_key"]
    hook = STANDALONE_HOOKS.get(key)
    if hook is None:  # once per worker process and run: the hooks and their modules
        modules = []
        for k, (rel, source) in enumerate(job["conftests"]):
            module = types.ModuleType(f"tokaudit_conftest_{k}")
            module.__file__ = rel
            sys.modules[module.__name__] = module
            exec(compile(source, rel, "exec"), module.__dict__)  # noqa: S102 - the run's own conftest
            modules.append(module)
        checks = {n: c for n, c in builtin().items() if n not in job["blocked"]}
        checks["tokaudit.ids"] = IdsChannel  # the ids the id checks read (never blocked)
        hook = STANDALONE_HOOKS[key] = standalone_hook(modules, checks, plugins_first=True)
    contract = Contract.from_json(job["contract"], origin=job["contract_origin"]).resolve_tokens()
    summary = FileSummary(path=job["display"], max_shown=contract.max_shown,
                          id_field=".".join(contract.id_field))  # as the item makes it
    if job["shard"]:
        summary.shard, summary.shards = job["shard"]
        summary.start = job["byte_range"][0]
    location: Any = Path(job["path"])
    audit(location, contract, hook, summary, Part(tuple(job["byte_range"]), job["groups"] and tuple(job["groups"])))
    return summary.to_json().encode()


class RayEngine:
    """Registered on the pytest process that runs the items when the engine is ray."""

    def __init__(self, config: pytest.Config):
        self.config = config
        ray = _ray()
        self.ray = ray
        address = os.environ.get("RAY_ADDRESS")
        root = config.rootpath
        package = Path(__file__).resolve().parents[2]
        if address:
            _probe(address)  # a cluster that is not there fails now, not after Ray's retries
        try:
            ray.init(address=address or "local", log_to_driver=False, logging_level="ERROR",
                     include_dashboard=False if not address else None,
                     runtime_env={"py_modules": [str(package)]} if address else None)
        except Exception as exc:  # noqa: BLE001 - an unreachable cluster, a version mismatch
            where = scrub(address) if address else "a local instance"
            raise pytest.UsageError(
                f"--tokaudit-engine=ray: cannot reach the Ray cluster at {where}: "
                f"{' '.join(str(exc).split())[:300]} (set RAY_ADDRESS to a running cluster, "
                "or unset it to start a local one)") from None
        self.started_here = not address
        self.task = ray.remote(max_retries=TASK_RETRIES, retry_exceptions=False)(_audit)
        cpus = int(ray.cluster_resources().get("CPU", 1))
        self.limit = max(1, cpus * IN_FLIGHT_PER_CPU)
        self.conftests = conftest_sources(root)
        self.blocked = sorted(n for n in _names() if config.pluginmanager.is_blocked(n))
        self.queue: list[Any] = []
        self.refs: dict[str, Any] = {}
        self.retries: dict[str, int] = {}

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.queue = [i for i in session.items if hasattr(i, "part") and hasattr(i, "contract")]
        self._top_up()

    def _payload(self, item: Any) -> bytes:
        contract = item.contract
        return orjson.dumps({
            "path": str(item.source), "display": item.display, "shard": item.shard,
            "byte_range": list(item.byte_range), "groups": item.groups,
            "contract": contract.to_json(), "contract_origin": "ray",
            "conftests": self.conftests, "blocked": self.blocked,
            "hooks_key": f"{os.getpid()}:{id(self)}",
        })

    def _submit(self, item: Any) -> None:
        if item.nodeid not in self.refs:
            self.refs[item.nodeid] = self.task.remote(self._payload(item))

    def _top_up(self) -> None:
        pending = [r for r in self.refs.values() if r is not None]
        ready, _ = self.ray.wait(pending, num_returns=len(pending), timeout=0) if pending else ([], [])
        running = len(pending) - len(ready)
        while self.queue and running < self.limit:
            item = self.queue.pop(0)
            if item.nodeid not in self.refs:
                self._submit(item)
                running += 1

    def summary(self, item: Any) -> FileSummary:
        if not isinstance(item.source, Path):
            raise RayTaskFailed("--tokaudit-engine=ray audits local paths the cluster shares; "
                                f"{item.display} is a URL")
        self._submit(item)
        self._top_up()
        ref = self.refs[item.nodeid]
        try:
            data = self.ray.get(ref)
        except Exception as exc:  # noqa: BLE001 - RayTaskError, WorkerCrashedError...
            cause = getattr(exc, "cause", None) or exc
            raise RayTaskFailed(f"its Ray task failed after {TASK_RETRIES} retries: "
                                f"{type(cause).__name__}: {scrub(' '.join(str(cause).split()))[:300]}") from None
        finally:
            self.refs[item.nodeid] = None
            self._top_up()
        return FileSummary.from_json(data.decode() if isinstance(data, bytes) else data)

    def pytest_unconfigure(self) -> None:
        for ref in self.refs.values():
            if ref is not None:
                try:
                    self.ray.cancel(ref, force=True)
                except Exception:  # noqa: BLE001 - done already, or the cluster is gone
                    pass
        if self.ray.is_initialized():
            self.ray.shutdown()


def _probe(address: str) -> None:
    """UsageError unless something listens at RAY_ADDRESS's host:port (within 5 s)."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=5):
            return
    except (OSError, ValueError) as exc:
        raise pytest.UsageError(
            f"--tokaudit-engine=ray: cannot reach the Ray cluster at {scrub(address)}: "
            f"{getattr(exc, 'strerror', None) or exc} (set RAY_ADDRESS to a running cluster, "
            "or unset it to start a local one)") from None


def _names() -> list[str]:
    return [*RECORD, *DATASET]

ENGINE = RayEngine  # what plugin.configure_engine makes
