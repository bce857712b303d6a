"""What the process loaded, as the cache's key of the code: no guess at what a hook uses.

A check's behaviour comes from code, and code comes from modules. Instead of following the
names a hook's code refers to (which cannot be complete in Python: lazy imports, attribute
chains, a library's sibling modules, state built at import), the key holds every module the
process loaded from outside the standard library and this package (keyed by its source as a
whole, cache.code_digest):

- a module of an installed distribution (under a site-packages folder): the distribution's
  name and version (importlib.metadata), so an upgrade changes the key;
- any other module (a conftest.py, a helper beside it, a package of the project, an editable
  install): a SHA-256 of its file, named by its path (relative to the rootdir: another
  checkout is the same code).

Two parts, because modules load during a run (an import inside a hook's body, a tokenizer's
library on its first use):

- the **base**, taken once per process before its first audit item looks up its entry (after
  collection: conftest.py files, plugins and their imports at any depth): the files, and the
  distributions outside this plugin's own dependencies (a newly installed pytest plugin
  changes it). Part of every entry's key: it must match exactly.
- the **loaded** set, taken after each item's audit: every module loaded then that the base
  does not hold (a helper imported lazily, the plugin's own dependencies, a library a hook
  uses), each with its fingerprint. Stored in the entry and checked on reuse: each module is
  found again (without importing it) and must give the same fingerprint. A module that cannot
  be found again makes the entry a miss.

Two xdist workers, or two runs, reach the same base (the same collection), and an entry
records what its own audit had loaded, so entries are consistent across workers.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import os
import re
import sys
import sysconfig
from pathlib import Path
from types import ModuleType
from typing import Any, Iterable

import orjson

from .. import __version__
from ..base.atomic import replacing

PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # pytest_tokaudit/
OWN = "pytest_tokaudit"
STDLIB = frozenset(getattr(sys, "stdlib_module_names", ()))
# The launcher (`pytest`, `python -m pytest`, an xdist worker's bootstrap) is no code of the run.
SKIPPED = frozenset({"__main__", "__mp_main__"})
# This plugin's extras for developing it, not for running it: their distributions are in the
# base like any other, not among "the plugin's own dependencies".
DEV_EXTRAS = frozenset({"test", "docs"})


def _real(path: str) -> str:
    """os.path.realpath(path), resolving each folder once per process: a module's file that
    is no symlink itself lies in its folder's real path (one lstat instead of one per part
    of the path, for each of the hundreds of modules a run loads)."""
    head, tail = os.path.split(path)
    if not head or tail in ("", ".", "..") or os.path.islink(path):
        return os.path.realpath(path)
    real = _FOLDERS.get(head)
    if real is None:
        real = _FOLDERS[head] = os.path.realpath(head)
    return os.path.join(real, tail)


_FOLDERS: dict[str, str] = {}


def _roots() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(standard library folders, site-packages folders), each ending with a separator."""
    paths = sysconfig.get_paths()
    stdlib = {_real(paths[k]) + os.sep for k in ("stdlib", "platstdlib") if paths.get(k)}
    site = {_real(paths[k]) + os.sep for k in ("purelib", "platlib") if paths.get(k)}
    for entry in sys.path:  # a --user or system install, a folder on PYTHONPATH
        if entry.endswith(("site-packages", "dist-packages")):
            site.add(_real(entry) + os.sep)
    stdlib -= site  # a venv's site-packages lies under its lib/pythonX.Y
    return tuple(sorted(stdlib)), tuple(sorted(site))


def _sources() -> list[list[Any]]:
    """[path in the package, size, mtime_ns] of each of this package's .py files, sorted."""
    out: list[list[Any]] = []
    for folder, dirs, names in os.walk(PACKAGE):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in names:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                st = os.stat(path)
                out.append([os.path.relpath(path, PACKAGE).replace(os.sep, "/"), st.st_size,
                            st.st_mtime_ns])
    return sorted(out)


def _mtime(path: str) -> int | None:
    try:
        return os.stat(path or ".").st_mtime_ns
    except OSError:
        return None


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


class Environment:
    """The installed distributions as this process sees them: which one a top-level module
    comes from, its version, and this plugin's own dependencies. Computed once per process."""

    def __init__(self, memo: Path | None = None) -> None:
        from importlib import metadata

        self.metadata = metadata
        self.stdlib, self.site = _roots()
        self._packages: dict[str, list[str]] | None = None
        self._versions: dict[str, str] = {}
        self._own: frozenset[str] | None = None
        self._new_versions = False  # versions read since the memo was: save them
        self._code: list[Any] | None = None  # [version, each source file's state, digest]
        # Which distribution installs which top-level module, and the plugin's own
        # dependencies, read from every installed distribution's metadata (~0.15 s): kept in
        # a file, for as long as no site-packages folder changed (installing, removing or
        # upgrading a distribution creates or removes its .dist-info folder there).
        self.memo = memo
        self.stamp = [sys.version, sys.prefix, *([p, _mtime(p)] for p in self.site)]
        if memo is not None:
            try:
                data = orjson.loads(memo.read_bytes())
                if data["stamp"] == orjson.loads(orjson.dumps(self.stamp)):
                    self._packages = {k: list(v) for k, v in data["packages"].items()}
                    self._own = frozenset(data["own"])
                    # Versions too (~0.3 ms each to read): upgrading a distribution
                    # replaces its .dist-info folder, which changes the stamp.
                    self._versions = {str(k): str(v) for k, v in data.get("versions", {}).items()}
                    self._code = data.get("code")
            except Exception:  # noqa: BLE001,S110 - missing or unreadable: read the metadata
                pass

    def _save(self) -> None:
        if self.memo is None or self._packages is None or self._own is None:
            return
        try:
            self.memo.parent.mkdir(parents=True, exist_ok=True)
            with replacing(self.memo, sync=False) as fh:
                fh.write(orjson.dumps({"stamp": self.stamp, "packages": self._packages,
                                       "own": sorted(self._own), "versions": self._versions,
                                       "code": self._code}))
            self._new_versions = False
        except OSError:
            pass

    def code(self, version: str) -> str:
        """This plugin's version and source as one digest: an edited checkout is another
        version. Kept in the memo with each source file's size and mtime: a file changed,
        added or removed is read and hashed again (each state taken before its bytes)."""
        states = _sources()
        if self._code is not None and self._code[:2] == [version, states]:
            return str(self._code[2])
        h = hashlib.sha256(version.encode())
        for rel, _, _ in states:
            h.update(rel.encode() + b"\0" + Path(PACKAGE, rel).read_bytes())
        self._code = [version, states, h.hexdigest()]
        self._save()
        return self._code[2]

    def save_versions(self) -> None:
        """Keep the versions read since the memo was, for the next process."""
        if self._new_versions:
            self._save()

    def packages(self) -> dict[str, list[str]]:
        if self._packages is None:
            self._packages = dict(self.metadata.packages_distributions())
            self.own()
            self._save()
        return self._packages

    def version(self, dist: str) -> str:
        if dist not in self._versions:
            try:
                self._versions[dist] = self.metadata.version(dist) or ""
            except self.metadata.PackageNotFoundError:
                self._versions[dist] = ""  # gone: no stored version matches it
            self._new_versions = True
        return self._versions[dist]

    def own(self) -> frozenset[str]:
        """This plugin's dependencies at any depth (its extras' too, not its dev extras), by
        normalised name."""
        if self._own is None:
            seen: set[str] = set()
            todo = ["pytest-tokaudit"]
            while todo:
                name = _normal(todo.pop())
                if name in seen:
                    continue
                seen.add(name)
                try:
                    requires = self.metadata.requires(name) or []
                except self.metadata.PackageNotFoundError:
                    continue
                for req in requires:
                    extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", req)
                    if name == "pytest-tokaudit" and extra and extra.group(1) in DEV_EXTRAS:
                        continue
                    found = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
                    if found:
                        todo.append(found.group(1))
            self._own = frozenset(seen)
            if self._packages is not None:
                self._save()
        return self._own


class Fingerprints:
    """A fingerprint per module: ("dist", name, version), ("file", path, sha256), or None
    (the standard library, this package, a module with no file of its own)."""

    def __init__(self, root: str, env: Environment | None = None):
        self.root = root.rstrip(os.sep)
        self.env = env if env is not None else Environment()
        self._files: dict[str, str] = {}

    def shown(self, path: str) -> str:
        root = self.root
        if root and path.startswith(root + os.sep):
            return "<rootdir>" + path[len(root):].replace(os.sep, "/")
        return path

    def digest(self, path: str) -> str:
        if path not in self._files:
            try:
                self._files[path] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
            except OSError:
                self._files[path] = ""  # unreadable: no stored digest matches it
        return self._files[path]

    def of_file(self, name: str, file: str | None) -> list[tuple[str, str, str]] | None:
        """The fingerprints of module `name` loaded from `file` (several when more than one
        distribution installs its top-level package)."""
        top = name.partition(".")[0]
        if not file:
            return None  # built in, frozen, a namespace package: no code of its own
        if not os.path.isabs(file):
            file = os.path.abspath(file)
        real = _real(file)
        if top == OWN and real.startswith(PACKAGE + os.sep):
            return None
        if real.startswith(self.env.site):
            # By where the file lies, not the module's name: a library may vendor modules
            # under its own folder (ray/thirdparty_files/psutil) and put it on sys.path.
            site = max((r for r in self.env.site if real.startswith(r)), key=len)
            first = real[len(site):].split(os.sep, 1)[0].split(".", 1)[0]
            packages = self.env.packages()
            dists = packages.get(first) or packages.get(top)
            if dists:
                return [("dist", _normal(d), self.env.version(d)) for d in sorted(set(dists))]
        elif real.startswith(self.env.stdlib):
            return None  # the standard library (private modules too, lib-dynload)
        return [("file", self.shown(real), self.digest(real))]

    def of_module(self, name: str, module: Any) -> list[tuple[str, str, str]] | None:
        if name in SKIPPED or module is None:
            return None
        top = name.partition(".")[0]
        file = getattr(module, "__file__", None)
        if not isinstance(file, str):
            return None
        if top in STDLIB and not file:
            return None
        return self.of_file(name, file)

    def find(self, name: str) -> list[tuple[str, str, str]] | None | bool:
        """The fingerprints of module `name` as an import now would find it, without
        importing anything; False if it cannot be found."""
        module = sys.modules.get(name)
        if module is not None:
            return self.of_module(name, module)
        spec = self._spec(name)
        if spec is None:
            return False
        origin = spec.origin if spec.has_location else None
        return self.of_file(name, origin)

    def _spec(self, name: str) -> Any:
        module = sys.modules.get(name)
        if module is not None:
            return getattr(module, "__spec__", None)
        parent, _, _ = name.rpartition(".")
        if not parent:
            return importlib.machinery.PathFinder.find_spec(name)
        spec_parent = self._spec(parent)
        if spec_parent is None or not spec_parent.submodule_search_locations:
            return None
        return importlib.machinery.PathFinder.find_spec(name, list(spec_parent.submodule_search_locations))


def _modules() -> list[tuple[str, Any]]:
    return list(sys.modules.items())  # a copy: another thread may import meanwhile


class Loaded:
    """One process's view: the base (taken once), and the modules loaded since."""

    def __init__(self, root: str, plugins: Iterable[Any] = (), memo: Path | None = None):
        self.prints = Fingerprints(root, Environment(memo))
        self.names: set[str] = set()  # every module name the base looked at
        files: dict[str, str] = {}  # path shown -> digest
        dists: dict[str, str] = {}
        own = self.prints.env.own()
        self.extra: dict[str, str] = {}  # the plugin's dependencies loaded at the base
        # The registered plugin modules too: two conftest.py files of different folders are
        # both `conftest`, and sys.modules holds one of them.
        modules = _modules() + [(getattr(p, "__name__", ""), p) for p in plugins
                                if isinstance(p, ModuleType)]
        for name, module in modules:
            self.names.add(name)
            for kind, what, value in self.prints.of_module(name, module) or ():
                if kind == "file":
                    files[what] = value
                elif what in own:
                    self.extra[what] = value
                else:
                    dists[what] = value
        self.base = {"files": dict(sorted(files.items())), "dists": dict(sorted(dists.items()))}
        self.digest = hashlib.sha256(repr(sorted(files.items()) + sorted(dists.items()))
                                     .encode()).hexdigest()
        self.code = self.prints.env.code(__version__)  # this plugin's own source
        self.prints.env.save_versions()
        self._seen: dict[str, list[Any] | None] = {}
        self._memo: dict[str, tuple[Any, list[tuple[str, str, str]] | None]] = {}

    def since(self, names: Iterable[str] = ()) -> dict[str, Any] | None:
        """The modules loaded since the base (and `names`, modules another process loaded
        for this item: a Ray worker's), with the plugin's own dependencies: {"files":
        {module: [path, digest]}, "dists": {name: version}}. None if one of `names` cannot
        be found in this environment."""
        files: dict[str, list[Any]] = {}
        dists = dict(self.extra)
        for name, module in _modules():
            if name in self.names:
                continue
            memo = self._memo.get(name)
            if memo is None or memo[0] is not module:
                memo = self._memo[name] = (module, self.prints.of_module(name, module))
            self._add(name, memo[1], files, dists)
        for name in names:
            if name in self.names or name in files:
                continue
            found = self.prints.find(name)
            if found is False or found is True:
                return None
            self._add(name, found, files, dists)
        return {"files": dict(sorted(files.items())), "dists": dict(sorted(dists.items()))}

    def _add(self, name: str, prints: list[tuple[str, str, str]] | None,
             files: dict[str, list[Any]], dists: dict[str, str]) -> None:
        for kind, what, value in prints or ():
            if kind == "file":
                files[name] = [what, value]
            else:
                dists[what] = value

    def holds(self, recorded: Any) -> bool:
        """Whether every module an entry recorded (`since`'s value) is as it was: found
        again the same way, with the same source or distribution version."""
        if not isinstance(recorded, dict):
            return False
        try:
            for dist, version in recorded["dists"].items():
                if self.prints.env.version(dist) != version:
                    return False
            for name, print_ in recorded["files"].items():
                if name not in self._seen:
                    found = self.prints.find(name)
                    self._seen[name] = [list(p) for p in found] if isinstance(found, list) else None
                now = self._seen[name]
                if now is None or ["file", *print_] not in now:
                    return False
        except (AttributeError, KeyError, TypeError, ValueError, ImportError):
            return False
        return True


def loaded_names(before: frozenset[str]) -> list[str]:
    """The modules a process loaded since `before` (names), without the standard library's
    and this package's: what a Ray worker sends back for the runner to fingerprint."""
    return sorted(name for name in list(sys.modules) if name not in before
                  and name.partition(".")[0] not in STDLIB
                  and name.partition(".")[0] != OWN and name not in SKIPPED)
