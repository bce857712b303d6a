"""What the run covered: the dataset walked (stat only) and the coverage verdict."""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path

import pytest

from ..base.formats import data_suffixes
from ..base.text import plural
from ..model.contract import Contract
from ..model.outcome import Outcome
from ..model.result import Coverage
from .items import (
    display_path,
)

DATA_SUFFIXES = data_suffixes()  # named when a run audits nothing


def coverage_outcome(cov: Coverage, contract: Contract) -> Outcome:
    where = ", ".join("the rootdir" if r == "." else r for r in cov.roots)
    if cov.partial:
        return Outcome("coverage", "skipped", f"partial run: {cov.partial}")
    if cov.empty_roots:  # a URL prefix with nothing under it may as well be mistyped
        glob = " ".join(contract.glob)
        message = (f"no data file under {', '.join(cov.empty_roots)}: tokaudit_glob ({glob}) "
                   "matched nothing there")
        there = [u for u in cov.unmatched if any(u.startswith(r) for r in cov.empty_roots)]
        lines = [f"present but not matched by tokaudit_glob: {', '.join(there[:10])}"] if there else []
        return Outcome("coverage", "failed", message, lines)
    if not cov.records and not (cov.audited and contract.allow_empty):
        glob = " ".join(contract.glob)
        if cov.audited:
            n = len(cov.audited)
            message = (f"no record audited: {plural(n, 'file')} under {where} matched by "
                       f"tokaudit_glob ({glob}) {'holds' if n == 1 else 'hold'} none")
        else:
            message = f"no data audited: tokaudit_glob ({glob}) matched no file under {where}"
            if cov.named and cov.named != cov.roots:
                message += f" (paths named: {', '.join(cov.named)})"
        lines = []
        if cov.unmatched:
            shown = ", ".join(cov.unmatched[:10]) + (" ..." if len(cov.unmatched) > 10 else "")
            lines.append(f"present but not matched by tokaudit_glob: {shown}")
        return Outcome("coverage", "failed", message, lines)
    return Outcome(
        "coverage", "passed",
        f"{plural(len(cov.audited), 'data file')} ({plural(cov.records, 'record')}) "
        f"audited to the end under {where}",
    )


def walk_dataset(config: pytest.Config, patterns: tuple[str, ...]) -> tuple[list[str], list[str], list[str]]:
    """(roots, data files, other files) of the dataset: what a bare `pytest --tokaudit`
    collects: `testpaths` when set, else the rootdir. Stats only; never reads a file."""
    import glob

    root = config.rootpath
    testpaths = config.getini("testpaths")
    paths: list[Path] = []
    for entry in testpaths or []:
        if "://" in entry:  # a URL: listed by run/remote.py
            continue
        matches = sorted(glob.glob(str(root / entry), recursive=True)) or [str(root / entry)]
        paths += [Path(m) for m in matches]
    if not paths and not testpaths:
        paths = [root]
    norecurse = config.getini("norecursedirs")
    ignore = {Path(p).resolve() for p in (config.getoption("ignore", None) or [])}
    ignore_glob = config.getoption("ignore_glob", None) or []
    seen_dirs: set[str] = set()
    seen_files: set[str] = set()
    data, other = [], []

    def skip(path: Path) -> bool:
        return path.resolve() in ignore or any(fnmatch.fnmatch(str(path), g) for g in ignore_glob)

    def consider(path: Path) -> None:
        real = os.path.realpath(path)
        if real in seen_files or skip(path):
            return
        seen_files.add(real)
        rel = display_path(path, root)
        if any(fnmatch.fnmatch(path.name, p) for p in patterns):
            data.append(rel)
        elif DATA_SUFFIXES & {s.lower() for s in path.suffixes}:
            other.append(rel)  # data not collected: worth naming when nothing was audited

    for top in paths:
        if top.is_file():
            consider(top)
            continue
        for dirpath, dirnames, filenames in os.walk(top, followlinks=True):
            real = os.path.realpath(dirpath)
            if real in seen_dirs:  # a symlink loop, or a directory reached twice
                dirnames[:] = []
                continue
            seen_dirs.add(real)
            dirnames[:] = sorted(
                d for d in dirnames
                if not any(fnmatch.fnmatch(d, p) for p in norecurse)
                and not skip(Path(dirpath, d))
                and not Path(dirpath, d, "pyvenv.cfg").exists()
            )
            for name in sorted(filenames):
                if not name.endswith((".py", ".pyc")) and name != "conftest.py":
                    consider(Path(dirpath, name))
    roots = [display_path(p, root) for p in paths]
    return roots, sorted(data), sorted(other)
