"""Hooks of pytest-tokaudit. Implement them in a conftest.py; the built-in checks do too.

A conftest.py applies to the files below its directory, as for ordinary tests.
Implementations may take fewer arguments than the spec lists.
"""

from __future__ import annotations

import pytest


@pytest.hookspec(firstresult=True)
def pytest_tokaudit_contract(path, contract):
    """Adjust the contract for one file; return a new Contract, or None to keep it.

    ``data/local/conftest.py``::

        def pytest_tokaudit_contract(path, contract):
            if path.name.startswith("retry_"):
                return contract.replace(count_abs=16, count_outliers=5)
    """


@pytest.hookspec
def pytest_tokaudit_check_record(record, contract):
    """Check one well-formed audited record; return findings (None, a str, a Finding or a list).

    ``record`` has ``line``, ``id``, ``count`` (billed), ``ids``, ``n_ids``, ``last_id``,
    ``occurrences(token)``, ``count_each(tokens)`` and ``data`` (the whole JSON object).
    Prefer ``n_ids``, ``last_id`` and the counts to ``ids``: they read the array's text,
    where ``ids`` builds a Python int per token. ``conftest.py``::

        from pytest_tokaudit import Finding

        def pytest_tokaudit_check_record(record):
            if record.data.get("finish_reason") == "length":
                return Finding("finish_reason", "response cut off (finish_reason=length)")
    """


@pytest.hookspec
def pytest_tokaudit_check_batch(records, contract, summary):
    """Check a batch of well-formed records at once (for batched work such as a tokenizer).

    Return findings made with ``record.finding(check, message)`` so each names its line.
    ``conftest.py``::

        def pytest_tokaudit_check_batch(records):
            texts = my_fast_decoder([r.ids for r in records])
            return [r.finding("empty_text", "decodes to nothing")
                    for r, t in zip(records, texts) if not t.strip()]
    """


@pytest.hookspec
def pytest_tokaudit_check_file(path, summary, contract):
    """Check a whole file once all its records are read; return file-level findings.

    ``summary`` is a FileSummary (``checked``, ``billed``, ``counted``, ``absdiff``,
    ``mean_ratio``, ``by_check`` ...). ``conftest.py``::

        def pytest_tokaudit_check_file(path, summary):
            if summary.checked < 100:
                return f"only {summary.checked} records; a shard should hold at least 100"
    """


def register(pluginmanager: pytest.PytestPluginManager) -> None:
    """Add these specs once, whichever of the plugin's entry points comes first."""
    caller = getattr(pluginmanager.hook, "pytest_tokaudit_check_record", None)
    if caller is None or not caller.has_spec():
        import sys

        pluginmanager.add_hookspecs(sys.modules[__name__])
