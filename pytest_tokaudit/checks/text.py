"""The checks of records read with a text template: ids that match their text, responses cut at max_tokens."""

from __future__ import annotations

from typing import Any

import pytest

from ..base.fields import MISSING, get_path
from ..base.findings import Finding
from ..engine.template import first_difference, template_text
from ..model.records import Record, TextRecord
from ..model.summary import writable


class IdsMatchTextCheck:
    """Records with both ids and a template: the stored ids equal the encoded text."""

    @staticmethod
    def reads(contract: Any) -> frozenset[str]:
        """What of a record its batch hook reads: its text, with a text template."""
        return frozenset({"texts", "ids"} if contract.text_template is not None else ())

    @pytest.hookimpl
    def pytest_tokaudit_check_batch(self, records, contract):
        if contract.text_template is None:
            return None
        out = []
        tok = None
        for record in records:
            rebuilt = getattr(record, "rebuilt", None)
            if rebuilt is None:
                continue
            ids = record.ids
            if ids == rebuilt:
                continue
            tok = tok or contract.tokenizer_object()
            text = template_text(record, contract, tok)
            out.append(record.finding(
                "ids_match_text",
                f"stored ids ({len(ids)}) differ from the encoded text ({len(rebuilt)}); "
                + first_difference(tok, ids, rebuilt, text)))
        return out


class FinishReasonCheck:
    """The API's finish reason is one of the allowed ones (a record without one is not judged)."""

    @staticmethod
    def native(contract: Any) -> bool:
        """Idle without tokaudit_finish_reason (the columnar path then has nothing to do)."""
        return not contract.finish_reason

    @staticmethod
    def reads(contract: Any) -> frozenset[str]:
        """Its batch hook counts the finish reasons where records are read whole anyway."""
        return frozenset({"data"} if _tallied(contract) else ())

    @pytest.hookimpl
    def pytest_tokaudit_check_batch(self, records, contract, summary):
        """Finish reasons per file, for the HTML report (with tokaudit_finish_reason or
        tokaudit_group_by: the records' fields are read then anyway)."""
        if not _tallied(contract):
            return None
        figures = writable(summary).figures
        for record in records:
            value = _reason(record, contract.finish_reason_field)
            if value is not None:
                figures.add_finish(value if type(value) is str else repr(value))
        return None

    @pytest.hookimpl
    def pytest_tokaudit_check_record(self, record, contract):
        allowed = contract.finish_reason
        if not allowed:
            return None

        field = contract.finish_reason_field
        if not field:
            return None
        value = _reason(record, field)
        if value is None or value in allowed:
            return None
        name = ".".join(field)
        want = " or ".join(allowed)
        cut = " (the response was cut at max_tokens)" if value == "length" else ""
        return Finding("finish_reason", f"{name} {value!r}, expected {want}{cut}")


def _tallied(contract: Any) -> bool:
    return bool((contract.finish_reason or contract.group_by) and contract.finish_reason_field)


def _reason(record: Any, field: tuple[str, ...]) -> Any:
    """The record's finish reason, or None. A JSONL record's _data: its ids stay unparsed
    (the fast path never cuts this field out); a Parquet row builds its data."""
    data = record._data if type(record) in (Record, TextRecord) else record.data
    value = get_path(data, field)
    return None if value is MISSING else value
