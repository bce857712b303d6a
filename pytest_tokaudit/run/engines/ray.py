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


# Small items share a task: a Ray task's round trip (submit, schedule, return, the item
# waiting for it in run order) costs milliseconds, more than auditing a small file. Items of
# one hook set are taken in run order into a task until it holds GROUP_ITEMS items or the
# run's share of bytes per task (a total spread over twice the cluster's CPUs), at least
# GROUP_BYTES and at most GROUP_MAX_BYTES. A bigger item (a shard, a large file) or one of
# unknown size (an object listed without one) is a task of its own, as before.
GROUP_BYTES = 1 << 20
GROUP_MAX_BYTES = 16 << 20
GROUP_ITEMS = 256


def size_of(task: Task) -> int | None:
    """The bytes an item's audit reads at most: its byte range, else its file's size from
    the range's start (a columnar part: the whole file); None if unknown."""
    start, end = task.part.byte_range
    if end is not None and task.part.groups is None:
        return max(0, end - start)
    if isinstance(task.source, Path):
        try:
            size: int | None = task.source.stat().st_size
        except OSError:
            return None
    else:
        size = getattr(task.source, "size", None)
    if not isinstance(size, int):
        return None
    return size if task.part.groups is not None else max(0, size - start)


def grouped(tasks: Sequence[Task], digests: dict[str, str], cpus: int) -> list[list[str]]:
    """The tasks' keys cut into Ray tasks, in run order (see GROUP_BYTES)."""
    sizes = {t.key: size_of(t) for t in tasks}
    total = sum(s for s in sizes.values() if s is not None)
    target = min(GROUP_MAX_BYTES, max(GROUP_BYTES, total // max(1, 2 * cpus)))
    groups: list[list[str]] = []
    held = 0  # bytes of the last group, while it may take more
    open_digest: str | None = None
    for task in tasks:
        size = sizes[task.key]
        if size is None or size >= target:
            groups.append([task.key])
            open_digest = None
            continue
        if (open_digest == digests[task.key] and len(groups[-1]) < GROUP_ITEMS
                and held + size <= target):
            groups[-1].append(task.key)
            held += size
        else:
            groups.append([task.key])
            held, open_digest = size, digests[task.key]
    return groups


class RayEngine:
    """Submits the items' tasks in run order (small items several to a task), at most
    `limit` tasks in flight (twice the cluster's CPUs), and hands each item its result when
    its runtest asks."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.ray: Any = None
        self.remote: Any = None  # the remote function
        self.tasks: dict[str, Task] = {}  # given, until their result is taken
        self.given: dict[str, Task] = {}  # every task, for an item that runs again
        self.groups: list[list[str]] = []  # the keys of each Ray task, in run order
        self.group_of: dict[str, int] = {}
        self.next = 0  # the next group to submit
        self.running: dict[int, Any] = {}  # group -> ObjectRef
        self.finished: set[int] = set()  # groups whose results (or error) are in
        self.outs: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {}  # key -> (out, lost)
        self.failed: dict[int, str] = {}  # group -> why none of its items was audited
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
        for keys in grouped(tasks, {k: d for k, (d, _) in self.hooks.items()}, self.limit // 2):
            self.add_group(keys)
        self.fill()

    def add_group(self, keys: list[str]) -> int:
        self.groups.append(keys)
        g = len(self.groups) - 1
        for key in keys:
            self.group_of[key] = g
        return g

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
        self.remote = ray.remote(audit_tasks)

    def submit(self, g: int) -> None:
        keys = self.groups[g]
        first = self.tasks[keys[0]]
        digest, hooks = self.hooks[keys[0]]
        more = f" (+{len(keys) - 1} more)" if len(keys) > 1 else ""
        # The display path: a URL's credentials never reach the task's name.
        self.running[g] = self.remote.options(
            name=f"tokaudit {first.display}"[:190] + more, max_retries=0,
        ).remote(digest, hooks, [(t.source, t.contract, t.part, t.summary, t.failures)
                                 for t in (self.tasks[k] for k in keys)])

    def fill(self) -> None:
        while len(self.running) < self.limit and self.next < len(self.groups):
            g = self.next
            self.next += 1
            if g not in self.running and g not in self.finished:
                self.submit(g)

    def result(self, key: str) -> Result | None:
        """The item's result (waiting for its task), None if it was not given to this
        engine. An item run again (pytest-rerunfailures, a second --count) is given again,
        as a task of its own: its audit runs where the first one did, with the same hooks
        and credentials."""
        if key not in self.tasks:
            if key not in self.given:
                return None
            self.tasks[key] = self.given[key]
            self.add_group([key])
        if self.gone:  # the cluster stopped answering: no item waits for it again
            del self.tasks[key]
            raise EngineError(self.gone)
        try:
            if key not in self.outs:
                g = self.group_of[key]
                if g in self.failed:
                    raise EngineError(self.failed[g])
                self.wait(g)
            out, lost = self.outs.pop(key)
        finally:
            del self.tasks[key]
            self.fill()
        return Result(FileSummary.from_json(out["summary"]), out.get("hook_error"),
                      out.get("error"), lost, out.get("failures"), out.get("modules"))

    def wait(self, g: int) -> None:
        """The results of group g's items into self.outs, submitting it again while its
        worker or node dies (at most RETRIES times); EngineError, for every item of it, if
        it cannot be done."""
        from ray import exceptions

        lost: list[str] = []
        while True:
            if g not in self.running:  # an item run out of order, or a task lost
                self.submit(g)
            try:
                outs = self.get(self.running[g])
                del self.running[g]
                break
            except exceptions.RayTaskError as exc:  # not the pass's error: the task's
                self.fail(g, f"the task failed on the cluster: {first_line(exc)}")
            except exceptions.TaskCancelledError:
                self.fail(g, "the task was cancelled")
            except exceptions.RayError as exc:  # a worker or node died, an object lost
                del self.running[g]
                lost.append(first_line(exc))
                if len(lost) > RETRIES:
                    self.fail(g, f"the task was lost {len(lost)} times (retried {RETRIES} "
                                 f"times); last: {lost[-1]}")
        self.finished.add(g)
        for key, out in zip(self.groups[g], outs):
            self.outs[key] = (out, tuple(lost))

    def fail(self, g: int, why: str) -> None:
        self.running.pop(g, None)
        self.finished.add(g)
        self.failed[g] = why
        raise EngineError(why) from None

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


def audit_tasks(digest: str, blob: bytes, jobs: list[tuple[Any, Contract, Part, FileSummary, bool]]
                ) -> list[dict[str, Any]]:
    """Runs on a Ray worker: the items of one task, one after the other, each as
    audit_task (its own summary, error and modules)."""
    return [audit_task(digest, blob, *job) for job in jobs]


ENGINE = RayEngine  # what plugin.configure_engine makes
