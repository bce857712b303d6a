"""The Ray engine (--tokaudit-engine=ray): each selected item's part audited as a Ray task.

The pytest process keeps collection, the cache and every verdict. A task gets the item's
source (a local path the cluster must share, or a URL), part, contract, its empty summary
and the check hooks that apply to the item (the built-in checks and plugins by reference,
its conftest.py files' hooks by value), runs the engine's pass there and returns the
summary as JSON: summaries cross the network, never records. The plugin's own package is
shipped with the job (runtime_env py_modules), so the workers run the controller's code.

This module is imported only when the engine is chosen; `ray` when the run starts.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import traceback
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any, Sequence

import pytest

from ...api import audit_part
from ...base.urls import display_url, scrub
from ...checks.standalone import standalone_hook
from ...engine.observers import Observers, Recorder
from ...engine.plain import HookError
from ...model.contract import Contract
from ...model.summary import FileSummary
from ...sources.base import Part
from . import EngineError, Result, Task

RETRIES = 2  # a task whose worker died runs again, at most this many times
WATCH = 5.0  # seconds between two checks that the cluster still answers, while waiting
HOOKS = ("pytest_tokaudit_check_record", "pytest_tokaudit_check_batch")  # what runs there
# What the columnar path reads from a plugin besides its hooks (checks/__init__.py).
DECLARED = ("native", "reads", "native_key")
PACKAGE = Path(__file__).resolve().parents[2]  # pytest_tokaudit/, shipped with the job
KEY = "tokaudit_engine = ray"


def hint() -> str:
    return ("set RAY_ADDRESS to a running cluster (host:port of `ray start --head`, or "
            "ray://host:10001), or unset it to start a local instance for the run")


class RayEngine:
    """Submits the items' tasks in run order, at most `limit` in flight (twice the
    cluster's CPUs), and hands each item its result when its runtest asks."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.ray: Any = None
        self.remote: Any = None  # the remote function
        self.tasks: dict[str, Task] = {}  # submitted or waiting, until their result is taken
        self.given: dict[str, Task] = {}  # every task, for an item that runs again
        self.order: list[str] = []
        self.next = 0
        self.running: dict[str, Any] = {}  # key -> ObjectRef
        self.hooks: dict[str, tuple[str, Any]] = {}  # key -> (digest, the hooks' ObjectRef)
        self.limit = 2
        self.address = ""  # RAY_ADDRESS, if the cluster is not one started for the run
        self.gone = ""  # why the cluster no longer answers

    # -- the controller's side -----------------------------------------------------------
    def start(self, tasks: Sequence[Task]) -> None:
        if not tasks:
            return
        packed = pack_all(self.config, tasks)  # a hook that cannot travel: before any task
        self.connect()
        ray = self.ray
        blobs: dict[str, Any] = {}
        for task in tasks:
            digest, blob = packed[task.key]
            if digest not in blobs:
                blobs[digest] = ray.put(blob)
            self.hooks[task.key] = (digest, blobs[digest])
            self.tasks[task.key] = self.given[task.key] = task
            self.order.append(task.key)
        self.fill()

    def connect(self) -> None:
        try:
            import ray
        except ImportError:
            raise pytest.UsageError(f"{KEY} needs Ray on this machine: "
                                    "pip install 'pytest-tokaudit[ray]'") from None
        address = self.address = os.environ.get("RAY_ADDRESS", "").strip()
        options: dict[str, Any] = dict(
            logging_level=logging.WARNING, log_to_driver=False, configure_logging=True,
            runtime_env={"py_modules": [str(PACKAGE)]},
        )
        try:
            if address:
                reachable(address)
                ray.init(address=address, **options)
            else:  # a local instance for this run, shut down after it
                ray.init(address="local", num_cpus=os.cpu_count() or 1,
                         include_dashboard=False, **options)
        except pytest.UsageError:
            raise
        except Exception as exc:  # noqa: BLE001 - version mismatch, timeout...: no traceback
            where = f"the Ray cluster at {display_url(address)}" if address else "a local Ray"
            raise pytest.UsageError(f"{KEY}: cannot start on {where}: {first_line(exc)}; "
                                    + hint()) from None
        self.ray = ray
        self.limit = max(2, 2 * int(ray.cluster_resources().get("CPU", 1)))
        self.remote = ray.remote(audit_task)

    def submit(self, key: str) -> None:
        task = self.tasks[key]
        digest, hooks = self.hooks[key]
        # The display path: a URL's credentials never reach the task's name.
        self.running[key] = self.remote.options(
            name=f"tokaudit {task.display}"[:200], max_retries=0,
        ).remote(digest, hooks, task.source, task.contract, task.part, task.summary,
                 task.failures)

    def fill(self) -> None:
        while len(self.running) < self.limit and self.next < len(self.order):
            key = self.order[self.next]
            self.next += 1
            if key in self.tasks and key not in self.running:
                self.submit(key)

    def result(self, key: str) -> Result | None:
        """The item's result (waiting for it), None if it was not given to this engine. An
        item run again (pytest-rerunfailures, a second --count) is given again: its audit
        runs where the first one did, with the same hooks and credentials."""
        if key not in self.tasks:
            if key not in self.given:
                return None
            self.tasks[key] = self.given[key]
        if self.gone:  # the cluster stopped answering: no item waits for it again
            del self.tasks[key]
            raise EngineError(self.gone)
        ray = self.ray
        from ray import exceptions

        lost: list[str] = []
        try:
            while True:
                if key not in self.running:  # an item run out of order
                    self.submit(key)
                try:
                    out = self.get(self.running.pop(key))
                    break
                except exceptions.RayTaskError as exc:  # not the pass's error: the task's
                    raise EngineError(f"the task failed on the cluster: {first_line(exc)}") from None
                except exceptions.TaskCancelledError:
                    raise EngineError("the task was cancelled") from None
                except exceptions.RayError as exc:  # a worker or node died, an object lost
                    lost.append(first_line(exc))
                    if len(lost) > RETRIES:
                        raise EngineError(f"the task was lost {len(lost)} times (retried "
                                          f"{RETRIES} times); last: {lost[-1]}") from None
        finally:
            if key not in self.running:
                del self.tasks[key]
            self.fill()
        return Result(FileSummary.from_json(out["summary"]), out.get("hook_error"),
                      out.get("error"), tuple(lost), out.get("failures"))

    def get(self, ref: Any) -> Any:
        """ray.get, asking every WATCH seconds whether the cluster still answers: a head that
        died would leave ray.get waiting until Ray ends this process, a minute later, with
        no report. EngineError (and every later item too) once it does not."""
        while not self.ray.wait([ref], timeout=WATCH)[0]:
            if self.address:
                try:
                    reachable(self.address)
                except pytest.UsageError:
                    self.gone = (f"the Ray cluster at {display_url(self.address)} stopped "
                                 "answering during the run")
                    raise EngineError(self.gone) from None
        return self.ray.get(ref)

    def close(self) -> None:
        """Cancel what is left (Ctrl-C, -x), then leave the cluster (or shut down the local
        instance started for the run)."""
        ray = self.ray
        if ray is None:
            return
        self.ray = None
        for ref in self.running.values() if not self.gone else ():
            try:
                ray.cancel(ref, force=True)
            except Exception:  # noqa: BLE001,S110 - already finished, or the cluster is gone
                pass
        self.running.clear()
        ray.shutdown()


def reachable(address: str) -> None:
    """A quick TCP check of host:port (ray.init would wait about a minute)."""
    if address in ("auto", "local"):
        return
    hostport = address.split("://", 1)[-1].rsplit("@", 1)[-1].split("/", 1)[0]
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise pytest.UsageError(f"{KEY}: RAY_ADDRESS={display_url(address)} is not host:port "
                                "or ray://host:port")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=5).close()
    except OSError as exc:
        raise pytest.UsageError(f"{KEY}: the Ray cluster at {display_url(address)} is not "
                                f"reachable ({exc.strerror or exc}); " + hint()) from None


def first_line(exc: BaseException) -> str:
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    text = lines[0].strip() if lines else ""
    if len(text) > 300:
        text = text[:300] + "..."
    return scrub(f"{type(exc).__name__}: {text}" if text else type(exc).__name__)


# -- the hooks, shipped ---------------------------------------------------------------------
def pack_all(config: pytest.Config, tasks: Sequence[Task]) -> dict[str, tuple[str, bytes]]:
    """Each task's check hooks, pickled: key -> (digest, bytes). Items under the same
    conftest.py files share one. A hook that cannot be pickled is a usage error."""
    try:
        from ray import cloudpickle
    except ImportError:
        raise pytest.UsageError(f"{KEY} needs Ray on this machine: "
                                "pip install 'pytest-tokaudit[ray]'") from None
    pm = config.pluginmanager
    rank = {id(p): i for i, (_, p) in enumerate(pm.list_name_plugin())}
    conftests = [p for _, p in pm.list_name_plugin()
                 if isinstance(p, ModuleType) and Path(getattr(p, "__file__", None) or "").name == "conftest.py"]
    by_plugins: dict[tuple[int, ...], tuple[str, bytes]] = {}
    out = {}
    # A conftest.py is not importable on the cluster: its functions and classes travel by value.
    # Registered by name: conftest.py files of several folders may all be `conftest`.
    registered: dict[str, ModuleType] = {}
    for module in conftests:
        if module.__name__ in registered:
            continue
        try:
            cloudpickle.register_pickle_by_value(module)
            registered[module.__name__] = module
        except (ValueError, TypeError):  # not in sys.modules under its name: by value anyway
            pass
    try:
        for task in tasks:
            found: dict[int, Any] = {}
            for name in HOOKS:
                for impl in getattr(task.hook, name).get_hookimpls():
                    found[id(impl.plugin)] = impl.plugin
            plugins = sorted(found.values(), key=lambda p: rank.get(id(p), len(rank)))
            ids = tuple(id(p) for p in plugins)
            if ids not in by_plugins:
                parts = [pack(pm.get_name(p) or repr(p), p, cloudpickle) for p in plugins]
                blob = cloudpickle.dumps(parts)
                by_plugins[ids] = (hashlib.sha256(blob).hexdigest(), blob)
            out[task.key] = by_plugins[ids]
    finally:
        for module in registered.values():
            cloudpickle.unregister_pickle_by_value(module)
    return out


def pack(name: str, plugin: Any, cloudpickle: Any) -> tuple[str, str, bytes]:
    try:
        if isinstance(plugin, ModuleType):  # a conftest.py or a plugin module: its hooks
            attrs = {n: getattr(plugin, n) for n in (*HOOKS, *DECLARED) if hasattr(plugin, n)}
            return "module", name, cloudpickle.dumps(attrs)
        return "object", name, cloudpickle.dumps(plugin)
    except Exception as exc:  # noqa: BLE001 - whatever pickling raises: name the plugin
        shown = display_url(name) if "://" in name else name
        raise pytest.UsageError(
            f"{KEY}: the hooks of {shown} cannot be sent to the Ray cluster "
            f"({type(exc).__name__}: {exc}); a hook must be a function or an object that "
            "pickles (no open files, locks or connections held)") from None


# -- the cluster's side ---------------------------------------------------------------------
_HOOKS: dict[str, Any] = {}  # digest -> hook relay: built once per worker process


def worker_hook(digest: str, blob: bytes) -> Any:
    hook = _HOOKS.get(digest)
    if hook is not None:
        return hook
    from ray import cloudpickle

    plugins = [(name, SimpleNamespace(**cloudpickle.loads(data)) if kind == "module"
                else cloudpickle.loads(data)) for kind, name, data in cloudpickle.loads(blob)]
    hook = _HOOKS[digest] = standalone_hook(checks={}, named=plugins)
    return hook


def audit_task(digest: str, blob: bytes, source: Any, contract: Contract, part: Part,
               summary: FileSummary, failures: bool = False) -> dict[str, Any]:
    """Runs on a Ray worker: the item's pass, as AuditItem.runtest would run it. With
    `failures`, every finding at a record comes back too (for --tokaudit-failures)."""
    out: dict[str, Any] = {}
    recorder = Recorder() if failures else None
    if recorder is not None:
        out["failures"] = recorder.entries
    try:  # the public API's pass, as an audit item runs it in process
        audit_part(source, contract, worker_hook(digest, blob), summary, part, Observers(sink=recorder))
    except HookError as exc:
        out["hook_error"] = str(exc)
    except Exception as exc:  # noqa: BLE001 - the item fails naming it, as in process
        out["error"] = (f"{type(exc).__name__}: {exc} (on the Ray worker, pid {os.getpid()})\n"
                        + scrub(traceback.format_exc()))
    out["summary"] = summary.to_json()
    return out


ENGINE = RayEngine  # what plugin.configure_engine makes
