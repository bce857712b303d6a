"""Finding: one thing wrong with the data, from a built-in check or a user's."""

from __future__ import annotations

import os
import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Finding:
    """What is wrong, where.

    Checks return ``Finding("check_name", "expected X, found Y")``; the plugin fills in
    ``line`` and ``record_id`` for per-record checks. ``allowable`` findings may be
    forgiven by the file's outlier allowance (``tokaudit_count_outliers``).
    """

    check: str
    message: str
    line: int | None = None
    record_id: Any = None
    allowable: bool = False

    def to_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Finding:
        return cls(**data)


class HookError(Exception):
    """A hook answered something the audit cannot use: shown as its message, without a
    traceback (the message names the hook and the value)."""


def shown(value: Any, limit: int = 160) -> str:
    """A value as an error message quotes it: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def finding_problem(f: Finding) -> str | None:
    """What of a Finding the audit cannot place or print; None when it is usable."""
    if type(f.check) is not str or not f.check:
        return "its check must be a non-empty str"
    if type(f.message) is not str:
        return "its message must be a str"
    if f.line is not None and (type(f.line) is not int or f.line < 1):
        return "its line must be None or an int from 1"
    if f.record_id is not None and type(f.record_id) not in (str, int):
        return "its record_id must be None, a str or an int"
    if type(f.allowable) is not bool:
        return "allowable must be True or False"
    return None


def as_findings(result: Any, hook: str = "a tokaudit check", default_check: str = "custom") -> list[Finding]:
    """Normalise a hook's answer: a falsy value (None, False, "", []), a str, a Finding, or
    an iterable of those (falsy items skipped). Anything else is a HookError naming `hook`
    and the value: `return cond and "msg"` is no finding when cond is false, but `True`,
    a number, a dict or a Finding with a field of the wrong type is a mistake to say."""
    if isinstance(result, (str, Finding)):
        result = (result,)
    elif not _truthy(result, hook):
        return []
    elif isinstance(result, (Mapping, bytes, bytearray)) or not isinstance(result, Iterable):
        raise HookError(f"{hook} returned {shown(result)}: {_EXPECTED}")
    out = []
    for item in result:
        if isinstance(item, str):
            if not item:
                continue
            item = Finding(default_check, item)
        elif isinstance(item, Finding):
            problem = finding_problem(item)
            if problem:
                raise HookError(f"{hook} returned {shown(item)}: {problem}")
        elif not _truthy(item, hook):
            continue
        else:
            raise HookError(f"{hook} returned {shown(item)} in its answer: {_EXPECTED}")
        out.append(item)
    return out


_EXPECTED = "return None, a str, a Finding, or a list of them (a falsy value is no finding)"


def _truthy(value: Any, hook: str) -> bool:
    try:
        return bool(value)
    except Exception:  # noqa: BLE001 - an array's ambiguous truth, say: name it
        raise HookError(f"{hook} returned {shown(value)}: {_EXPECTED}") from None


def foreign(caller: Any) -> list[Any]:
    """The implementations of a hook (a pluggy caller) outside this package: a conftest.py's,
    another plugin's."""
    out = []
    for impl in caller.get_hookimpls():
        plugin = impl.plugin
        module = plugin.__name__ if isinstance(plugin, types.ModuleType) else type(plugin).__module__
        if module.split(".")[0] != "pytest_tokaudit":
            out.append(impl)
    return out


def implemented_by(caller: Any) -> str:
    """Where the implementations of a hook outside this package are (conftest.py files,
    plugins), for an error about one's answer: pluggy drops None answers, so which one
    answered cannot be told."""
    places = []
    for impl in foreign(caller):
        plugin = impl.plugin
        file = getattr(plugin, "__file__", None)
        if file:
            rel = os.path.relpath(file)
            file = file if rel.startswith("..") else rel
        places.append(file or impl.plugin_name)
    return ", ".join(dict.fromkeys(places))


def named(exc: HookError, hook: str, caller: Any) -> HookError:
    """`exc` (raised by as_findings for `hook`) with where the hook is implemented."""
    where = implemented_by(caller)
    text = str(exc)
    return HookError(text.replace(hook, f"{hook} (in {where})", 1) if where else text)
