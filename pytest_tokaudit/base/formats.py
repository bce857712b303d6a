"""The record-source registry: which source reads a file, by its name (or URL).

One line per format, as fsspec's `registry` and `datasets`' suffix table: the suffixes it
claims, the module that reads it (imported on first use), how a record's place is worded
(`line` or `row`) and the extra that installs its library. A new format is a module under
`sources/` plus one line here. Files the glob matches that no row format claims are JSONL.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from importlib import import_module
from typing import Any


@dataclass(frozen=True)
class Format:
    name: str
    suffixes: tuple[str, ...]  # lower case, what a file name ends with
    module: str  # its source module: a SOURCE object, imported on first use
    unit: str  # "line" (JSONL) or "row" (columnar files): how a location is worded
    extra: str | None = None  # pip install 'pytest-tokaudit[EXTRA]' brings its library
    library: str | None = None  # the module it needs beyond the core (from that extra)


FORMATS: tuple[Format, ...] = (
    Format("jsonl", (".jsonl", ".jsonl.gz", ".jsonl.zst"), "pytest_tokaudit.sources.jsonl", "line"),
    Format("parquet", (".parquet",), "pytest_tokaudit.sources.parquet", "row", "parquet", "pyarrow"),
    Format("feather", (".arrow", ".feather"), "pytest_tokaudit.sources.feather", "row", "parquet",
           "pyarrow"),
)

# Compression a name's last suffix says, beyond the standard library's: (module, extra).
CODECS = {".zst": ("zstandard", "zstd")}
JSONL = FORMATS[0]

# Data files the glob may not match: named when a run audits nothing (coverage).
OTHER_DATA = (".json", ".ndjson", ".dvc", ".gz", ".zst", ".bz2", ".xz", ".csv", ".tsv",
              ".avro", ".orc")


def format_of(path: Any) -> Format:
    """The format of a file (a Path, a URL or a display path): JSONL unless a row format
    claims its name."""
    name = str(path).lower()
    for fmt in FORMATS[1:]:
        if name.endswith(fmt.suffixes):
            return fmt
    return JSONL


def source_of(path: Any) -> Any:
    """The SOURCE object of the module that reads `path`."""
    return import_module(format_of(path).module).SOURCE


def missing_library(path: Any) -> str | None:
    """Why `path` cannot be read on this machine: the library its format or compression
    needs is not installed (the message names the extra that brings it); else None.
    A look-up, not an import."""
    name = str(path).lower()
    fmt = format_of(path)
    needs = [(fmt.library, fmt.extra, fmt.name.capitalize())] if fmt.library else []
    needs += [(module, extra, suffix) for suffix, (module, extra) in CODECS.items()
              if name.endswith(suffix)]
    for module, extra, what in needs:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return (f"reading {what} files needs {module}, which is not installed here: "
                    f"pip install 'pytest-tokaudit[{extra}]'")
    return None


def default_glob() -> str:
    """tokaudit_glob's default: every suffix a format claims."""
    return " ".join(f"*{s}" for fmt in FORMATS for s in fmt.suffixes)


def data_suffixes() -> frozenset[str]:
    """The last suffix of every data file name (a file's `path.suffixes` are checked)."""
    return frozenset({"." + s.rsplit(".", 1)[-1] for fmt in FORMATS for s in fmt.suffixes}
                     | set(OTHER_DATA))


def place(path: str, line: int) -> str:
    """A record's place within its file, said alone: `line N`, or `row N` in a columnar
    file (from 1): the Markdown summary's list, a row annotation's message."""
    return f"{format_of(path).unit} {line}"


def location(path: str, line: int) -> str:
    """Where a record is, the one wording of every output: `path:LINE`, or `path:row N`
    in a columnar file (rows from 1)."""
    return f"{path}:row {line}" if format_of(path).unit == "row" else f"{path}:{line}"


def has_lines(path: str) -> bool:
    """Whether a record's place is a line an editor (or an annotation's line=) can open."""
    return format_of(path).unit == "line"
