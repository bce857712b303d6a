"""What a hook implementation does, as a digest: the code and the state it can reach.

A check is rarely just the function in conftest.py: a factory's closure
(``pytest_tokaudit_check_record = max_ids(100)``), a ``functools.wraps`` decorator from a
helper module, a plugin instance's attributes, a helper function or a constant imported
from another module. The digest follows all of it from the implementation:

- a function: its code (bytecode, constants, names; not its file name or line numbers,
  so another checkout is the same code), the source file it was defined in, its defaults,
  closure cells, attributes (``__wrapped__``) and every global its code names (a module
  named there brings the attributes the code names on it);
- a bound method: its function and its instance; a class: its module's source, its
  bases and its attributes; an instance: its class and its ``__dict__``/slots, or its
  pickle (with functions and classes inside it digested as above);
- plain values (numbers, strings, containers) exactly.

Library code (the standard library, site-packages) is named with its module's source and
its own code and state, without following its globals; this package's own code is named
only (the cache keys it by its source as a whole). What cannot be fingerprinted (a lock,
an open file, a generator) raises ``Unkeyable``: the cache is then not used for the items
the hook runs on.
"""

from __future__ import annotations

import functools
import hashlib
import io
import os
import pickle
import struct
import sys
import sysconfig
import types
from pathlib import Path, PurePath
from typing import Any

PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # pytest_tokaudit/


class Unkeyable(Exception):
    """A hook implementation whose behaviour cannot be fingerprinted: which, and why."""

    def __init__(self, where: str, why: str):
        super().__init__(f"{where}: {why}")
        self.where, self.why = where, why


def _library_roots() -> tuple[str, ...]:
    roots = set()
    for name in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(name)
        if path:
            roots.add(os.path.realpath(path) + os.sep)
    for path in sys.path:  # site-packages of a --user or system install
        if path.endswith(("site-packages", "dist-packages")):
            roots.add(os.path.realpath(path) + os.sep)
    return tuple(sorted(roots))


_ROOTS: tuple[str, ...] | None = None


def _kind(filename: str | None) -> str:
    """"own" (this package), "library" or "user" code, by the file it was defined in
    ("<c>": a module built into Python or compiled, which has none)."""
    global _ROOTS
    if filename == "<c>":
        return "library"
    if not filename or filename.startswith("<"):
        return "user"  # exec'd code: only its code object tells what it does
    real = os.path.realpath(filename)
    if real.startswith(PACKAGE + os.sep):
        return "own"
    if _ROOTS is None:
        _ROOTS = _library_roots()
    return "library" if real.startswith(_ROOTS) else "user"


_FILES: dict[str, bytes] = {}


def _source(filename: str | None) -> bytes:
    """A digest of a source file's bytes, once per process (b"" when there is no file)."""
    if not filename or not filename.endswith(".py"):
        return b""
    if filename not in _FILES:
        try:
            _FILES[filename] = hashlib.sha256(Path(filename).read_bytes()).digest()
        except (OSError, ValueError):
            _FILES[filename] = b""  # no source (a .pyc only): its code objects still count
    return _FILES[filename]


def _names(code: types.CodeType) -> set[str]:
    """Every global or attribute name a code object and the code nested in it use."""
    out = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            out |= _names(const)
    return out


_PRIMITIVES = (type(None), bool, int, float, complex, str, bytes)
_BUILTINS = (types.BuiltinFunctionType, types.BuiltinMethodType, types.WrapperDescriptorType,
             types.MethodWrapperType, types.MethodDescriptorType, types.ClassMethodDescriptorType)


class _Pickler(pickle.Pickler):
    """Pickles an object's state; functions, classes and modules inside it are digested
    (their code), not named (pickle's default would miss an edited body)."""

    def __init__(self, fh: Any, digest: Digest, root: Any):
        super().__init__(fh, protocol=4)
        self.digest, self.root = digest, root

    def persistent_id(self, obj: Any) -> Any:
        if obj is not self.root and isinstance(obj, (types.FunctionType, types.MethodType,
                                                     type, types.ModuleType, *_BUILTINS)):
            sub = Digest(self.digest.where, self.digest.root)
            sub.value(obj)
            return sub.hexdigest()
        return None


class Digest:
    """A SHA-256 over a walk of objects. Objects met again are written as a reference to
    their first visit (cycles: a method's class, a module's own functions)."""

    def __init__(self, where: str, root: str = ""):
        self.h = hashlib.sha256()
        self.where = where  # for messages: the hook implementation being keyed
        self.root = root  # the rootdir: a path under it is keyed relative to it
        self.seen: dict[int, int] = {}
        self.alive: list[Any] = []  # ids stay unique while the walk runs

    def hexdigest(self) -> str:
        return self.h.hexdigest()

    def put(self, tag: str, data: bytes = b"") -> None:
        self.h.update(tag.encode() + struct.pack("<Q", len(data)) + data)

    def text(self, tag: str, text: str) -> None:
        self.put(tag, text.encode("utf-8", "surrogatepass"))

    def _relative(self, text: str) -> str:
        """A path under the rootdir, as the same path in another checkout has it."""
        root = self.root
        if root and (text == root or text.startswith(root + os.sep)):
            return "<rootdir>" + text[len(root):]
        return text

    def _visit(self, obj: Any) -> bool:
        """False (and a reference written) when `obj` was walked already."""
        key = id(obj)
        if key in self.seen:
            self.put("ref", struct.pack("<Q", self.seen[key]))
            return False
        self.seen[key] = len(self.seen)
        self.alive.append(obj)
        return True

    def value(self, v: Any) -> None:
        t = type(v)
        if t is str:
            self.text("str", self._relative(v))
            return
        if t in _PRIMITIVES:
            self.text("prim:" + t.__name__, repr(v))
            return
        if isinstance(v, PurePath):  # `Path(__file__).parent / "allowed.txt"`
            self.text("path:" + t.__name__, self._relative(str(v)))
            return
        if not self._visit(v):
            return
        if t in (tuple, list):
            self.put(t.__name__, struct.pack("<Q", len(v)))
            for x in v:
                self.value(x)
        elif t is dict:
            self.put("dict", struct.pack("<Q", len(v)))
            for k, x in v.items():
                self.value(k)
                self.value(x)
        elif t in (set, frozenset):
            # Sorted by each element's own digest: iteration order follows the hash seed.
            subs = []
            for x in v:
                sub = Digest(self.where, self.root)
                sub.value(x)
                subs.append(sub.hexdigest())
            self.text(t.__name__, ",".join(sorted(subs)))
        elif isinstance(v, types.FunctionType):
            self.function(v)
        elif isinstance(v, types.MethodType):
            self.text("method", v.__func__.__qualname__)
            self.value(v.__func__)
            self.value(v.__self__)
        elif isinstance(v, _BUILTINS):
            self.text("builtin", f"{getattr(v, '__module__', None)}.{getattr(v, '__qualname__', '')}")
            owner = getattr(v, "__self__", None)
            if owner is not None and not isinstance(owner, types.ModuleType):
                self.value(owner)  # a bound builtin method (`limits.get`): its object too
        elif isinstance(v, functools.partial):
            self.put("partial")
            self.value(v.func)
            self.value(v.args)
            self.value(v.keywords)
        elif isinstance(v, types.ModuleType):
            self.module(v)
        elif isinstance(v, type):
            self.cls(v)
        elif isinstance(v, types.CodeType):
            self.code(v)
        elif isinstance(v, (staticmethod, classmethod)):
            self.put(t.__name__)
            self.value(v.__func__)
        elif isinstance(v, property):
            self.put("property")
            for f in (v.fget, v.fset, v.fdel):
                self.value(f)
        else:
            self.instance(v)

    def function(self, fn: types.FunctionType) -> None:
        code = fn.__code__
        kind = _kind(code.co_filename)
        self.text("function:" + kind, f"{fn.__module__}.{fn.__qualname__}")
        if kind == "own":
            return  # keyed by the package's whole source (cache.code_digest)
        self.put("source", _source(code.co_filename))
        self.code(code)
        self.value(fn.__defaults__)
        self.value(fn.__kwdefaults__)
        for cell in fn.__closure__ or ():
            try:
                contents = cell.cell_contents
            except ValueError:  # an empty cell (a name bound later)
                self.put("empty-cell")
                continue
            self.value(contents)
        self.value(dict(sorted(vars(fn).items())))  # __wrapped__, hookimpl options...
        if kind == "library":
            return  # its module's globals change with its version (its source, above)
        names = sorted(_names(code))
        namespace = fn.__globals__
        for name in names:
            if name not in namespace:
                continue  # a builtin, an attribute name, or not defined yet
            target = namespace[name]
            self.text("global", name)
            self.value(target)
            if isinstance(target, (types.ModuleType, type)):
                # `helpers.rule(...)`: the attributes the code names on a module or class.
                for attr in names:
                    if attr != name and attr in vars(target):
                        self.text("attr", attr)
                        self.value(vars(target)[attr])

    def code(self, code: types.CodeType) -> None:
        """What the code does, without where it is (file name, line numbers)."""
        self.put("code", code.co_code)
        self.text("code-name", code.co_name)
        self.put("code-shape", struct.pack(
            "<QQQQ", code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount,
            code.co_flags))
        self.put("code-exc", getattr(code, "co_exceptiontable", b""))
        for names in (code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars):
            self.text("names", "\0".join(names))
        self.put("consts", struct.pack("<Q", len(code.co_consts)))
        for const in code.co_consts:
            self.value(const)

    def module(self, module: types.ModuleType) -> None:
        filename = getattr(module, "__file__", None)
        self.text("module:" + _kind(filename), module.__name__)
        if _kind(filename) != "own":
            self.put("source", _source(filename))

    def cls(self, cls: type) -> None:
        filename = getattr(sys.modules.get(cls.__module__), "__file__", None)
        kind = _kind(filename)
        self.text("class:" + kind, f"{cls.__module__}.{cls.__qualname__}")
        if kind == "own" or cls.__module__ == "builtins":
            return
        self.put("source", _source(filename))
        if kind == "library":
            return
        for base in cls.__bases__:
            self.value(base)
        for name, attr in vars(cls).items():
            if name in ("__dict__", "__weakref__", "__doc__", "__module__", "__qualname__"):
                continue
            self.text("class-attr", name)
            self.value(attr)

    def instance(self, obj: Any) -> None:
        t = type(obj)
        self.value(t)
        wrapped = getattr(obj, "__wrapped__", None)
        if wrapped is not None:  # functools.lru_cache and other wrappers of a function
            self.put("wrapped")
            self.value(wrapped)
            return
        module = sys.modules.get(t.__module__)
        library = module is None or _kind(getattr(module, "__file__", None) or "<c>") == "library"
        builtin_base = any(k.__module__ == "builtins" and k is not object for k in t.__mro__)
        if library or builtin_base:
            # A library's object (a compiled pattern, an array, a logger), or one holding a
            # builtin's contents (a dict subclass): its class's own notion of its state,
            # pickled; functions and classes inside it are digested. One that does not
            # pickle (a lock, a file, pytest's config) is not followed into its internals:
            # it cannot be fingerprinted.
            buf = io.BytesIO()
            try:
                _Pickler(buf, self, obj).dump(obj)
            except Unkeyable:
                raise
            except Exception:  # noqa: BLE001
                raise Unkeyable(self.where, f"a {t.__module__}.{t.__qualname__} it uses "
                                "cannot be fingerprinted") from None
            self.put("pickle", buf.getvalue())
            return
        # An object of the project's own classes: its attributes.
        state = getattr(obj, "__dict__", None)
        slots = [s for k in t.__mro__ for s in getattr(k, "__slots__", ())
                 if isinstance(s, str) and s not in ("__dict__", "__weakref__")]
        if state is None and not slots:
            raise Unkeyable(self.where, f"a {t.__module__}.{t.__qualname__} it uses "
                            "cannot be fingerprinted")
        self.value(dict(sorted(state.items())) if state is not None else None)
        for name in slots:
            self.text("slot", name)
            self.value(getattr(obj, name, None))


_MEMO: dict[int, tuple[Any, str | Unkeyable]] = {}


def hookimpl_digest(function: Any, plugin: Any, where: str, root: str = "") -> str:
    """The digest of one hook implementation (and of the module it was registered from);
    Unkeyable if it cannot be known. Paths under `root` (the rootdir) are keyed relative
    to it: another checkout of the project is the same check. Once per process: hooks do
    not change during a run."""
    memo = _MEMO.get(id(function))
    if memo is None or memo[0] is not function:
        digest = Digest(where, root)
        try:
            digest.value(function)
            if isinstance(plugin, types.ModuleType):  # any edit of the conftest.py itself
                digest.value(plugin)
            result: str | Unkeyable = digest.hexdigest()
        except Unkeyable as exc:
            result = exc
        except RecursionError:
            result = Unkeyable(where, "what it uses is nested too deeply to fingerprint")
        memo = _MEMO[id(function)] = (function, result)
    if isinstance(memo[1], Unkeyable):
        raise memo[1]
    return memo[1]


def is_own(function: Any) -> bool:
    """A hook implementation of this package (a built-in check)."""
    code = getattr(getattr(function, "__func__", function), "__code__", None)
    return code is not None and _kind(code.co_filename) == "own"
