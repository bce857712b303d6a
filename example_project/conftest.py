"""Project-specific checks, added through the same hooks as the built-in ones."""

from pytest_tokaudit import Finding


def pytest_tokaudit_check_record(record):
    # A response the API cut off at max_tokens is no training example, whatever its counts.
    if record.data.get("finish_reason") == "length":
        return Finding("finish_reason", "response cut off by the API (finish_reason=length)")
