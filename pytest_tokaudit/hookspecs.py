"""Hooks of pytest-tokaudit. Implement them in a conftest.py; the built-in checks do too.

A conftest.py applies to the files below its directory, as for ordinary tests.
Implementations may take fewer arguments than the spec lists.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from .base.hooks import hookspec

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

    from .checks.dataset import Dataset
    from .model.contract import Contract
    from .model.records import AuditedRecord, Unusable
    from .model.summary import SummaryView


@hookspec(firstresult=True)
def pytest_tokaudit_contract(path: Path, contract: Contract):
    """Adjust the contract for one file; return a new Contract, or None to keep it.

    ``data/local/conftest.py``::

        def pytest_tokaudit_contract(path, contract):
            if path.name.startswith("retry_"):
                return contract.replace(count_abs=16, count_outliers=5)
    """


@hookspec
def pytest_tokaudit_check_record(record: AuditedRecord, contract: Contract):
    """Check one well-formed audited record; return findings (None, a str, a Finding or a list).

    ``record`` (an ``AuditedRecord``, read-only) has ``line``, ``id``, ``count`` (billed),
    ``ids``, ``n_ids``, ``last_id``, ``occurrences(token)``, ``count_each(tokens)``,
    ``finding(check, message)`` and ``data`` (the whole JSON object).
    Prefer ``n_ids``, ``last_id`` and the counts to ``ids``: they read the array's text,
    where ``ids`` builds a Python int per token. ``conftest.py``::

        from pytest_tokaudit import Finding

        def pytest_tokaudit_check_record(record):
            if record.data.get("finish_reason") == "length":
                return Finding("finish_reason", "response cut off (finish_reason=length)")
    """


@hookspec
def pytest_tokaudit_check_batch(records: Sequence[AuditedRecord], contract: Contract,
                                summary: SummaryView, unusable: Sequence[Unusable]):
    """Check a batch of well-formed records at once (for batched work such as a tokenizer).

    ``unusable`` lists the batch's records that could not be checked (``line``, and ``id``
    and ``billed`` when readable, else None; ``data``, the record's fields when it was an
    object), for a check that must see every record, like the id checks or the finish
    reason of a response whose text is null; ``records`` may then be empty.

    Return findings made with ``record.finding(check, message)`` so each names its line: a
    finding without a line is an error of the item (file-level verdicts belong in
    ``pytest_tokaudit_check_file``).
    ``conftest.py``::

        def pytest_tokaudit_check_batch(records):
            texts = my_fast_decoder([r.ids for r in records])
            return [r.finding("empty_text", "decodes to nothing")
                    for r, t in zip(records, texts) if not t.strip()]
    """


@hookspec
def pytest_tokaudit_check_file(path: Path, summary: SummaryView, contract: Contract):
    """Check a whole file once all its records are read; return file-level findings.

    ``summary`` is a read-only view of the file's FileSummary (``checked``, ``billed``,
    ``counted``, ``absdiff``, ``mean_ratio``, ``by_check`` ...; ``channel(name)`` to fill).
    ``conftest.py``::

        def pytest_tokaudit_check_file(path, summary):
            if summary.checked < 100:
                return f"only {summary.checked} records; a shard should hold at least 100"
    """


@hookspec
def pytest_tokaudit_dataset_checks(contract: Contract):
    """Names of the dataset-wide checks to run; return a list of names, or None.

    Each name is collected as an item, ``pytest.ini::tokaudit::NAME``, run after every file
    (on the controller under xdist) and judged by ``pytest_tokaudit_check_dataset``. The
    built-in ``budget``, ``unique_ids`` and ``expected_ids`` are declared this way.
    """


@hookspec(firstresult=True)
def pytest_tokaudit_check_dataset(name: str, dataset: Dataset, contract: Contract):
    """Judge dataset check ``name``: return an ``Outcome``, or None if the name is not yours.

    ``dataset`` has ``files`` (one FileSummary per file, shards merged), ``ids`` (the record
    ids, when an id check is configured), ``partial`` (None, or why the run did not cover the
    whole dataset) and ``channel(name)`` ((path, values) of each file's ``summary.channel``).
    In a partial run a passing verdict is reported as skipped: a check that saw part of the
    data never passes for all of it. ``python -m pytest_tokaudit merge`` calls it too
    (``--plugin conftest`` loads yours). ``conftest.py``::

        from pytest_tokaudit import Outcome

        def pytest_tokaudit_dataset_checks():
            return ["providers"]

        def pytest_tokaudit_check_batch(records, summary):
            summary.channel("providers").extend({r.data["provider"] for r in records})

        def pytest_tokaudit_check_dataset(name, dataset):
            if name != "providers":
                return None
            seen = {p for _, values in dataset.channel("providers") for p in values}
            if len(seen) > 1:
                return Outcome.failed(f"{len(seen)} providers mixed: {sorted(seen)}")
            return Outcome.passed(f"one provider: {sorted(seen)}")
    """


def register(pluginmanager: pytest.PytestPluginManager) -> None:
    """Add these specs once, whichever of the plugin's entry points comes first."""
    caller = getattr(pluginmanager.hook, "pytest_tokaudit_check_record", None)
    if caller is None or not caller.has_spec():
        import sys

        pluginmanager.add_hookspecs(sys.modules[__name__])
