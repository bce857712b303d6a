"""Small text helpers shared by every layer: sizes, plurals, record labels, tables."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def size_text(n: int) -> str:
    """64 MiB, 512 KiB, or 1,000 bytes."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift:,} {unit}"
    return f"{n:,} bytes"


def plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def record_label(id_field: tuple[str, ...], record_id: Any) -> str:
    """`sample_id='x': ` before a finding, or nothing when there is no id."""
    if record_id is None or not id_field:
        return ""
    return f"{'.'.join(id_field)}={record_id!r}: "


def workspace_path(rootpath: Path, rel: str, workspace: str | None) -> str:
    """A rootdir-relative path as CI shows it: relative to `workspace` ($GITHUB_WORKSPACE, the
    repository) when set, else to the rootdir; always with `/`. A URL stays as it is."""
    if workspace and "://" not in rel:
        try:
            rel = os.path.relpath(Path(rootpath, rel), workspace)
        except ValueError:  # another drive
            rel = str(Path(rootpath, rel))
    return rel.replace(os.sep, "/")


def columns(header: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]

    def fmt(row: list[str]) -> str:
        cells = [str(c).rjust(w) if i in right else str(c).ljust(w)
                 for i, (c, w) in enumerate(zip(row, widths))]
        return "  ".join(cells).rstrip()

    return [fmt(header)] + [fmt(r) for r in rows]
