"""Collection: a data file becomes one audit item, or several byte-range shards."""

from __future__ import annotations

import fnmatch
import os
import math
from pathlib import Path
from typing import Any, Iterator

import pytest

from .audit import audit, check_file
from .contract import Contract
from .reader import is_compressed
from .report import failure_text
from .summary import PROPERTY, FileSummary

CONTRACT = pytest.StashKey[Contract]()
COLLECTED = pytest.StashKey[int]()


class AuditFailure(Exception):
    """A file (or shard) broke its contract; repr_failure turns it into the section text."""

    def __init__(self, summary: FileSummary):
        super().__init__(summary.path)
        self.summary = summary


class Collector:
    """Registered only with --tokaudit: makes data files into test items."""

    def __init__(self, contract: Contract):
        self.patterns = contract.glob

    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector):
        if any(fnmatch.fnmatch(file_path.name, p) for p in self.patterns):
            return DataFile.from_parent(parent, path=file_path)
        return None

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]):
        # Before -k / --lf deselect anything: lets the controller tell a partial run.
        config.stash[COLLECTED] = sum(isinstance(i, AuditItem) for i in items)


class DataFile(pytest.File):
    def collect(self) -> Iterator[AuditItem]:
        base = self.config.stash[CONTRACT]
        try:
            contract = self.ihook.pytest_tokaudit_contract(path=self.path, contract=base) or base
        except ValueError as exc:  # ContractError, TokenizerError: a message, not a traceback
            raise self.CollectError(f"pytest_tokaudit_contract: {exc}") from None
        # Stat, never parse: every xdist worker collects every file and must agree.
        size = self.path.stat().st_size
        if is_compressed(self.path) or size <= contract.shard_size or contract.shard_size == 0:
            yield AuditItem.from_parent(self, name="tokaudit", contract=contract)
            return
        # Equal shards, none over the size: a short last shard would leave a worker idle.
        n = math.ceil(size / contract.shard_size)
        for i in range(n):
            yield AuditItem.from_parent(
                self,
                name=f"tokaudit[shard {i + 1} of {n}]",
                contract=contract,
                shard=(i, n),
                byte_range=(i * size // n, (i + 1) * size // n),
            )


class AuditItem(pytest.Item):
    """Streams its file (or byte range) once and runs every check in that pass."""

    def __init__(
        self,
        *,
        contract: Contract,
        shard: tuple[int, int] | None = None,
        byte_range: tuple[int, int | None] = (0, None),
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.contract = contract
        self.shard = shard
        self.byte_range = byte_range
        self.display = os.path.relpath(self.path, self.config.rootpath)

    def runtest(self) -> None:
        contract = self.contract
        summary = FileSummary(
            path=self.display,
            max_shown=contract.max_shown,
            collected=self.config.stash.get(COLLECTED, 0),
        )
        if self.shard:
            summary.shard, summary.shards = self.shard
        try:
            audit(self.path, contract, self.ihook, summary, *self.byte_range)
            if self.shard is None:
                check_file(self.path, contract, self.ihook, summary)
        finally:
            # Reports (with user_properties) travel from xdist workers; config.stash does not.
            self.user_properties.append((PROPERTY, summary.to_json()))
        # A shard's allowable findings are judged with the whole file, on the controller.
        if summary.failing or summary.file_findings:
            raise AuditFailure(summary)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, AuditFailure):
            offset = 0
            if self.shard and self.byte_range[0]:
                offset = count_lines_before(self.path, self.byte_range[0])
            return failure_text(excinfo.value.summary, self.contract, offset)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        label = f"tokaudit: {self.display}"
        if self.shard:
            label += f" [shard {self.shard[0] + 1} of {self.shard[1]}]"
        return self.path, None, label


def count_lines_before(path: Path, offset: int) -> int:
    """Lines that start before `offset`; only paid when a shard has something to show."""
    n = 0
    with open(path, "rb") as fh:
        fh.seek(offset - 1)
        at_line_start = fh.read(1) == b"\n"
        fh.seek(0)
        left = offset
        while left > 0:
            chunk = fh.read(min(left, 1 << 22))
            if not chunk:
                break
            n += chunk.count(b"\n")
            left -= len(chunk)
    # A line straddling the offset started before it and belongs to the previous range.
    return n if at_line_start else n + 1
