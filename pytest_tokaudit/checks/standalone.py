"""A plugin manager for the check hooks outside a pytest process: the merge command's
dataset checks, a Ray worker's record and batch checks (with the run's conftest.py files)."""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType
from typing import Any, Sequence

import pluggy

from .. import hookspecs
from . import DATASET, load


def standalone_hook(plugins: Sequence[Any] = (), checks: dict[str, type[Any]] | None = None,
                    named: Sequence[tuple[str, Any]] = (),
                    registered: Sequence[tuple[str, Any, dict[str, dict[str, Any]]]] = ()) -> Any:
    """The hooks outside pytest (the merge command, a Ray worker): the built-in checks
    (the dataset ones unless `checks` says which), the given plugins, each a module name, a
    .py file such as a conftest.py, or a module object, then `named` plugin objects as
    they are, then `registered` plugins with the hookimpl options pytest parsed for each
    attribute (a Ray worker's: the pytest process's registrations, in its order; no other
    attribute of them is an implementation)."""

    given = {id(plugin): opts for _, plugin, opts in registered}

    class Manager(pluggy.PluginManager):
        def parse_hookimpl_opts(self, plugin: Any, name: str) -> Any:
            if id(plugin) in given:
                found = given[id(plugin)].get(name)
                return dict(found) if found is not None else None
            # As pytest does for conftest.py: a function named like a hook is an implementation.
            opts = super().parse_hookimpl_opts(plugin, name)
            if opts is None and name.startswith("pytest_tokaudit_") and callable(getattr(plugin, name)):
                return {}
            return opts

    pm = Manager("pytest")
    pm.add_hookspecs(hookspecs)
    for name, check in (load(DATASET) if checks is None else checks).items():
        pm.register(check(), name)
    for spec in plugins:
        if isinstance(spec, ModuleType):
            pm.register(spec, spec.__name__)
            continue
        try:
            if spec.endswith(".py"):
                found = importlib.util.spec_from_file_location(
                    f"tokaudit_plugin_{len(pm.get_plugins())}", spec)
                if found is None or found.loader is None:  # not for a .py path: a file loader
                    raise ImportError(f"no loader for {spec}")
                module = importlib.util.module_from_spec(found)
                found.loader.exec_module(module)
            else:
                module = importlib.import_module(spec)
        except Exception as exc:  # noqa: BLE001 - the user's module: a usage error, not a traceback
            raise ValueError(f"--plugin {spec}: {type(exc).__name__}: {exc}") from None
        pm.register(module, spec)
    for name, plugin in named:
        pm.register(plugin, name)
    for name, plugin, _ in registered:
        pm.register(plugin, name)
    return pm.hook
