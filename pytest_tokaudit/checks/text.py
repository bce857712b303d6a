"""The checks of records read with a text template: ids that match their text, responses cut at max_tokens."""

from __future__ import annotations

from typing import Any

from ..base.fields import MISSING, get_path
from ..base.findings import Finding
from ..base.hooks import hookimpl
from ..model.records import field_value
from ..model.summary import writable


class IdsMatchTextCheck:
    """Records with both ids and a template: the stored ids equal the encoded text."""

    @staticmethod
    def reads(contract: Any) -> frozenset[str]:
        """What of a record its batch hook reads, with a text template: `rebuilt`, the ids
        rebuilt beside stored ones (then its ids and texts too). The chunk engine hands a
        record storing ids beside the template to the per-line path: its light rows have none."""
        return frozenset({"rebuilt"} if contract.text_template is not None else ())

    @hookimpl
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
            from ..engine.template import first_difference, template_text

            tok = tok or contract.tokenizer_object()
            text = template_text(record, contract, tok)
            out.append(record.finding(
                "ids_match_text",
                f"stored ids ({len(ids)}) differ from the encoded text ({len(rebuilt)}); "
                + first_difference(tok, ids, rebuilt, text)))
        return out


class FinishReasonCheck:
    """The API's finish reason is one of the allowed ones (a record without one is not judged)."""

    # The columnar path (engine/columnar.py) reads the finish reason of each record and
    # hands one it judges to the per-line path, where this hook words it.
    native_key = "finish_reason"
    native = staticmethod(lambda contract: True)

    @staticmethod
    def reads(contract: Any) -> frozenset[Any]:
        """Its batch hook reads one field of each record: its finish reason, to count them
        (HTML report) and to judge those of records that cannot be checked."""
        field = contract.finish_reason_field
        return frozenset({field} if field and (_tallied(contract) or contract.finish_reason)
                         else ())

    @hookimpl
    def pytest_tokaudit_check_record(self, record, contract):
        if not contract.finish_reason or not contract.finish_reason_field:
            return None
        why = self.judge(field_value(record, contract.finish_reason_field), contract)
        return Finding("finish_reason", why) if why else None

    @hookimpl
    def pytest_tokaudit_check_batch(self, records, contract, summary, unusable):
        """Finish reasons per file, for the HTML report (with tokaudit_finish_reason or
        tokaudit_group_by: the records' fields are read then anyway); and records that cannot
        be checked still say why the API stopped (null content cut at max_tokens is both a
        schema finding and this one)."""
        if _tallied(contract) and writable(summary).plotted:
            figures = writable(summary).figures
            for record in records:
                value = field_value(record, contract.finish_reason_field)
                if value is not MISSING and value is not None:
                    figures.add_finish(value if type(value) is str else repr(value))
        if not contract.finish_reason or not contract.finish_reason_field:
            return None
        out, field = [], contract.finish_reason_field
        for u in unusable:
            why = self.judge(get_path(u.data, field), contract) if u.data is not None else None
            if why:
                out.append(Finding("finish_reason", why, u.line, u.id))
        return out

    @staticmethod
    def judge(value: Any, contract: Any) -> str | None:
        if value is MISSING or value is None or value in contract.finish_reason:
            return None
        name = ".".join(contract.finish_reason_field)
        want = " or ".join(contract.finish_reason)
        cut = " (the response was cut at max_tokens)" if value == "length" else ""
        return f"{name} {value!r}, expected {want}{cut}"


def _tallied(contract: Any) -> bool:
    return bool((contract.finish_reason or contract.group_by) and contract.finish_reason_field)
