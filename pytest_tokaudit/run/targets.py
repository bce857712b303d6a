"""Output paths that would write over the data: refused before anything is written.

Every option that names a file an output writes (each output module's PATH_OPTIONS, and
pytest's --junitxml) is held against the local paths the run collects (the paths named,
else ``testpaths``, else the invocation folder), symlinks followed. Refused, as a usage
error naming the option: a data file of the run (`--tokaudit-failures=data/a.jsonl` would
replace the data with its findings), any file under a data folder the run names, and,
under a data path that holds the project itself (the rootdir, when nothing narrower is
named), a name ``tokaudit_glob`` matches: the next run would audit it as data.
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path
from typing import Sequence

import pytest

from ..base.urls import is_url
from ..model.contract import Contract


def data_paths(config: pytest.Config) -> list[Path]:
    """The local paths the run collects, resolved (symlinks followed)."""
    out = []
    for arg in config.args:
        if is_url(arg):  # run/remote.py lists those; an output is never one
            continue
        out.append(Path(os.path.realpath(Path(config.invocation_params.dir, arg.split("::")[0]))))
    return out


def over_data(path: Path, roots: Sequence[Path], project: Path, glob: Sequence[str]) -> str | None:
    """Why writing `path` would write to the data, or None."""
    real = Path(os.path.realpath(path))
    collected = any(fnmatch.fnmatch(real.name, p) for p in glob)
    for root in roots:
        if real == root:
            return "is a data path of this run"
        if root not in real.parents:
            continue
        where = _shown(root, project)
        if collected:
            if real.exists():
                return "is a data file of this run"
            return (f"would be audited as data by the next run (tokaudit_glob matches its "
                    f"name, under {where}: name the data's folder in testpaths, or the file "
                    "otherwise)")
        if not (root == project or root in project.parents):  # a data folder: all of it
            return f"is under the data path {where}"
    return None


def _shown(root: Path, project: Path) -> str:
    rel = os.path.relpath(root, project)
    return "the rootdir" if rel == "." else root.as_posix() if rel.startswith("..") else rel


def check_targets(config: pytest.Config, contract: Contract,
                  options: Sequence[tuple[str, str]]) -> None:
    """UsageError naming the first option (flag, dest) whose path would write to the data."""
    roots = data_paths(config)
    project = Path(os.path.realpath(config.rootpath))
    for flag, dest in options:
        value = config.getoption(dest, None)
        if not value:
            continue
        why = over_data(Path(config.invocation_params.dir, value), roots, project, contract.glob)
        if why:
            raise pytest.UsageError(
                f"{flag}: {value} {why}: the plugin never writes to the data; write it "
                "outside the paths the run audits")
