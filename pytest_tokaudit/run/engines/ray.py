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
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any, Sequence

import pytest

from ...api import audit_part
from ...base.urls import display_url, scrub
from ...checks.standalone import standalone_hook
from ...engine.observers import Observers, Recorder
from ...engine.plain import HookError
from ...model.contract import Contract
from ...model.summary import FileSummary
from ..loaded import loaded_names
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
        # Ray's own log lines (its start, its token-authentication notice) and the workers'
        # output stay out of pytest's: TOKAUDIT_RAY_LOGS=1 shows them (docs/engines.md).
        shown = os.environ.get("TOKAUDIT_RAY_LOGS", "").strip() not in ("", "0")
        options: dict[str, Any] = dict(
            logging_level=logging.INFO if shown else logging.ERROR, log_to_driver=shown,
            configure_logging=True, runtime_env={"py_modules": [str(PACKAGE)]},
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
                      out.get("error"), tuple(lost), out.get("failures"), out.get("modules"))

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
    conftest.py files share one. A hook that cannot be pickled is a usage error.

    The hooks are the implementations pytest registered for the item (its hook relay's
    get_hookimpls: conftest.py files of its folder and the parents', `pytest_plugins`,
    entry-point plugins, plugins registered at run time), each with the hookimpl options
    pytest parsed (specname, tryfirst/trylast, wrapper/hookwrapper), never module attributes
    guessed by name. The workers register them, plugin by plugin in pytest's order, so each
    hook calls the same implementations in the same order (checked there)."""
    try:
        from ray import cloudpickle
    except ImportError:
        raise pytest.UsageError(f"{KEY} needs Ray on this machine: "
                                "pip install 'pytest-tokaudit[ray]'") from None
    pm = config.pluginmanager
    rank = {id(p): i for i, (_, p) in enumerate(pm.list_name_plugin())}
    # conftest.py files, and plugin modules of the project (`pytest_plugins`) under the rootdir.
    root = str(config.rootpath) + os.sep
    conftests = [p for _, p in pm.list_name_plugin()
                 if isinstance(p, ModuleType) and (
                     Path(getattr(p, "__file__", None) or "").name == "conftest.py"
                     or (os.path.realpath(getattr(p, "__file__", None) or "").startswith(root)
                         and "site-packages" not in (getattr(p, "__file__", None) or "")))]
    by_impls: dict[tuple[int, ...], tuple[str, bytes]] = {}
    out = {}
    # A conftest.py (or a module of the project) is not importable on the cluster: its
    # functions and classes travel by value.
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
            impls = [(name, impl) for name in HOOKS for impl in getattr(task.hook, name).get_hookimpls()]
            ids = tuple(id(impl) for _, impl in impls)
            if ids not in by_impls:
                plugins: dict[int, tuple[Any, list[Any]]] = {}
                for name, impl in impls:
                    plugins.setdefault(id(impl.plugin), (impl.plugin, []))[1].append((name, impl))
                order = sorted(plugins.values(), key=lambda p: rank.get(id(p[0]), len(rank)))
                parts = [pack(pm.get_name(p) or repr(p), p, found, cloudpickle) for p, found in order]
                expected = [[name, pm.get_name(impl.plugin) or repr(impl.plugin), attr_of(impl)]
                            for name, impl in impls]
                blob = cloudpickle.dumps((parts, expected))
                by_impls[ids] = (hashlib.sha256(blob).hexdigest(), blob)
            out[task.key] = by_impls[ids]
    finally:
        for module in registered.values():
            cloudpickle.unregister_pickle_by_value(module)
    return out


def attr_of(impl: Any) -> str:
    """The attribute a hook implementation was registered from (a specname'd function's own
    name, not the hook's)."""
    plugin, function = impl.plugin, impl.function
    names = vars(plugin) if isinstance(plugin, ModuleType) else {n: getattr(plugin, n, None) for n in dir(plugin)}
    for name, value in names.items():
        if value is function or (value == function and callable(value)):
            return name
    return getattr(function, "__name__", "hook")


def pack(name: str, plugin: Any, impls: list[tuple[str, Any]], cloudpickle: Any
         ) -> tuple[str, str, bytes]:
    """One plugin as a worker registers it: a module standing in for it (named as the
    plugin's module, so the checks' own code tells built-in from foreign as in pytest),
    holding each implementation under its own attribute name, with its hookimpl options,
    and the attributes the columnar path reads (DECLARED)."""
    try:
        module = plugin.__name__ if isinstance(plugin, ModuleType) else type(plugin).__module__
        attrs = {n: getattr(plugin, n) for n in DECLARED if hasattr(plugin, n)}
        hooks = {attr_of(impl): (impl.function, dict(impl.opts, specname=hook))
                 for hook, impl in impls}
        return module, name, cloudpickle.dumps((attrs, hooks))
    except Exception as exc:  # noqa: BLE001 - whatever pickling raises: name the plugin
        shown = display_url(name) if "://" in name else name
        raise pytest.UsageError(
            f"{KEY}: the hooks of {shown} cannot be sent to the Ray cluster "
            f"({type(exc).__name__}: {exc}); a hook must be a function or an object that "
            "pickles (no open files, locks or connections held)") from None


# -- the cluster's side ---------------------------------------------------------------------
_HOOKS: dict[str, Any] = {}  # digest -> hook relay: built once per worker process
_BEFORE: frozenset[str] | None = None  # the modules a worker had before its first task


def worker_hook(digest: str, blob: bytes) -> Any:
    hook = _HOOKS.get(digest)
    if hook is not None:
        return hook
    from ray import cloudpickle

    parts, expected = cloudpickle.loads(blob)
    plugins = []
    for module, name, data in parts:
        attrs, hooks = cloudpickle.loads(data)
        carrier = ModuleType(module)  # stands for the plugin: its module's name, its hooks
        vars(carrier).update(attrs)
        opts = {}
        for attr, (function, options) in hooks.items():
            setattr(carrier, attr, function)
            opts[attr] = options
        plugins.append((name, carrier, opts))
    hook = standalone_hook(checks={}, registered=plugins)
    got = [[name, impl.plugin_name, attr_of(impl)]
           for name in HOOKS for impl in getattr(hook, name).get_hookimpls()]
    if got != expected:  # never audit under another hook set than pytest's
        raise RuntimeError(f"the hooks registered on the Ray worker differ from pytest's: {got} != {expected}")
    _HOOKS[digest] = hook
    return hook


def worker_modules() -> list[str]:
    """The modules this worker loaded since before its first task (a hook's lazy import):
    the pytest process keys its cache entry by them (run/loaded.py)."""
    return loaded_names(_BEFORE or frozenset())


def audit_task(digest: str, blob: bytes, source: Any, contract: Contract, part: Part,
               summary: FileSummary, failures: bool = False) -> dict[str, Any]:
    """Runs on a Ray worker: the item's pass, as AuditItem.runtest would run it. With
    `failures`, every finding at a record comes back too (for --tokaudit-failures)."""
    global _BEFORE
    if _BEFORE is None:
        _BEFORE = frozenset(sys.modules)
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
    out["modules"] = worker_modules()
    return out


ENGINE = RayEngine  # what plugin.configure_engine makes
