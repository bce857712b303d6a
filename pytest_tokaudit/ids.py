"""Record ids across a run: where each id was seen, which repeat, which a manifest expects."""

from __future__ import annotations

from array import array
from pathlib import Path
from typing import Any

import orjson

from .contract import MISSING
from .reader import get_path
from .summary import FileSummary


def id_key(value: Any) -> int:
    """A record id as one unsigned 64-bit int: ids that are ints as they are, others hashed.

    Only ever compared within one process (the controller, or the merge command), so
    Python's own string hash serves.
    """
    if type(value) is int and 0 <= value < 1 << 63:
        return value
    text = value if type(value) is str else f"\x00{value!r}"
    return (1 << 63) | (hash(text) & ((1 << 63) - 1))


class IdIndex:
    """Where each record id was seen, in about 16 bytes per id plus a set of the ids."""

    def __init__(self) -> None:
        self.sources: list[tuple[str, int | None]] = []  # (path, shard)
        self.keys: set[int] = set()
        self.key_at = array("Q")  # every id's key, in the order seen ...
        self.place_at = array("Q")  # ... and its place: source index << 32 | line
        self.names: dict[int, Any] = {}  # key -> id, for ids seen more than once
        # (path, shard) -> lines before the shard; set once every shard has reported
        self.offsets: dict[tuple[str, int | None], int] = {}

    def add(self, summary: FileSummary) -> None:
        fi = len(self.sources)
        self.sources.append((summary.path, summary.shard))
        keys, names = self.keys, self.names
        new = [id_key(v) for v in summary.ids]
        for key, value in zip(new, summary.ids):
            if key in keys:
                names[key] = value
            else:
                keys.add(key)
        self.key_at.extend(new)
        self.place_at.extend(fi << 32 | line for line in summary.id_lines)

    @property
    def dups(self) -> dict[int, list[int]]:
        """key -> every place of an id seen more than once."""
        out: dict[int, list[int]] = {key: [] for key in self.names}
        if out:
            for key, place in zip(self.key_at, self.place_at):
                if key in out:
                    out[key].append(place)
        return out

    def where(self, place: int) -> str:
        source = self.sources[place >> 32]
        return f"{source[0]}:{(place & 0xFFFFFFFF) + self.offsets.get(source, 0)}"

    def __len__(self) -> int:
        return len(self.keys)

    def __contains__(self, value: Any) -> bool:
        return id_key(value) in self.keys


def read_manifest(path: Path | str, id_field: tuple[str, ...]) -> list[Any]:
    """The ids of a manifest: JSON objects with the id field, or one id per line.

    A line is JSON (an object, a string or an int), or else bare text taken as a string id.
    ValueError names the line of anything else: an object without the id field, an id that
    is neither a string nor an int, broken JSON; and a manifest without ids.
    """
    name = ".".join(id_field)
    out: list[Any] = []
    with open(path, "rb") as fh:
        for n, raw in enumerate(fh, 1):
            raw = raw.strip()
            if not raw:
                continue
            try:
                value = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                if raw[:1] in (b"{", b"[", b'"'):
                    raise ValueError(f"{path}:{n}: not valid JSON: {exc}") from None
                try:
                    out.append(raw.decode("utf-8"))
                except UnicodeDecodeError:
                    raise ValueError(f"{path}:{n}: not UTF-8") from None
                continue
            if type(value) is dict:
                if not id_field:
                    raise ValueError(f"{path}:{n}: an object, but no id field is configured")
                value = get_path(value, id_field)
                if value is MISSING:
                    raise ValueError(f"{path}:{n}: no field {name!r}")
            if type(value) not in (str, int):
                what = "null" if value is None else type(value).__name__
                raise ValueError(f"{path}:{n}: {name or 'an id'} must be a string or integer, "
                                 f"found {what}: {raw.decode('utf-8', 'replace')[:80]}")
            out.append(value)
    if not out:
        raise ValueError(f"{path}: no ids")
    return out


def ranges(values: list[Any], limit: int) -> list[str]:
    """'1000-1099', '2000', ... for ints; the values themselves otherwise."""
    ints = sorted(v for v in values if type(v) is int)
    out: list[str] = []
    i = 0
    while i < len(ints) and len(out) < limit:
        j = i
        while j + 1 < len(ints) and ints[j + 1] == ints[j] + 1:
            j += 1
        out.append(str(ints[i]) if i == j else f"{ints[i]}-{ints[j]}")
        i = j + 1
    others = [repr(v) for v in values if type(v) is not int]
    return out + others[: max(0, limit - len(out))]
