"""Small text helpers shared by every layer: sizes, plurals, record labels, tables."""

from __future__ import annotations

import re
import os
from pathlib import Path
from typing import Any

# Control characters (C0, DEL, C1) and the Unicode line and paragraph separators.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_UNPRINTABLE_BUT_BREAKS = re.compile("[\x00-\x09\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029]")


def printable(text: str, breaks: bool = False) -> str:
    """`text` on one line, without a control character: each is written as Python writes
    it in a string (`\\n`, `\\x1b`). Every data value that reaches output goes through
    this (ids are shown by repr already), so data can never start a line of its own (a
    GitHub workflow command such as `::stop-commands::`) nor move the terminal's cursor.

    `breaks`: keep \\n and \\r, for a writer that escapes them itself (a workflow command's
    %0A)."""
    pattern = _UNPRINTABLE_BUT_BREAKS if breaks else _UNPRINTABLE
    return pattern.sub(lambda m: repr(m.group())[1:-1], text)


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
