"""The built-in checks, implemented through the same hooks a user's conftest.py uses.

Each is its own plugin, registered as ``tokaudit.<name>``, so ``-p no:tokaudit.count``
turns one off.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from ..base.findings import Finding
from ..base.hooks import hookimpl
from ..model.rules import beyond_outlier_max, count_within, difference_text, tolerance_text
from ..model.summary import writable
from ..tokenizers.hf import roundtrip

if TYPE_CHECKING:
    from ..model.contract import Contract
    from ..model.records import AuditedRecord
    from ..model.summary import SummaryView


def _label(spec: str, token: int) -> str:
    """The token as written, with its id when it was a name."""
    return spec if spec.isdigit() else f"{spec} ({token})"


def count_finding(check: str, billed: int, counted: int, contract: Contract) -> Finding | None:
    """The count rule (model/rules.py) as a finding: counted off billed by more than the
    contract's count tolerance (allowable, unless beyond tokaudit_count_outlier_max). The
    prompt audit (checks/prompt.py) applies it with its own tolerances."""
    if count_within(contract, billed, counted):
        return None
    beyond = beyond_outlier_max(contract, billed, counted)
    return Finding(
        check,
        f"billed {billed}, counted {counted} ({difference_text(billed, counted)}) "
        f"> {tolerance_text(contract)}"
        + (f", beyond tokaudit_count_outlier_max = {contract.count_outlier_max}: never an "
           "allowed outlier" if beyond else ""),
        allowable=not beyond,
    )


class CountCheck:
    """Billed count vs number of token ids, per record and on average per file."""

    native_key = "count"  # the columnar path (engine/columnar.py) does this check natively
    native = staticmethod(lambda contract: True)

    @hookimpl
    def pytest_tokaudit_check_record(
        self, record: AuditedRecord, contract: Contract
    ) -> Finding | None:
        return count_finding("count", record.count, record.n_ids, contract)

    @hookimpl
    def pytest_tokaudit_check_file(self, summary: SummaryView, contract: Contract) -> list[Finding]:
        why = contract.mean_breach(summary.checked, summary.billed, summary.absdiff)
        return [Finding("count_mean", why)] if why else []


class StructureCheck:
    """Special tokens: required exactly once, required last, forbidden."""

    native_key = "structure"
    native = staticmethod(lambda contract: True)

    @hookimpl
    def pytest_tokaudit_check_record(
        self, record: AuditedRecord, contract: Contract
    ) -> list[Finding] | None:
        once, forbid = contract.require_once_ids, contract.forbid_ids
        counts = record.count_each(once + forbid) if once or forbid else ()
        out = []
        for spec, token, n in zip(contract.require_once, once, counts):
            if n != 1:
                out.append(Finding("require_once", f"expected {_label(spec, token)} once, found {n} times"))
        if contract.require_last_ids:
            last = record.last_id
            if last not in contract.require_last_ids:
                want = " or ".join(map(_label, contract.require_last, contract.require_last_ids))
                found = "no tokens" if last is None else contract.token_label(last)
                out.append(Finding("require_last", f"expected last token {want}, found {found}"))
        for spec, token, n in zip(contract.forbid, forbid, counts[len(once):]):
            if n:
                out.append(Finding("forbid", f"expected no {_label(spec, token)}, found {n}"))
        return out or None  # pluggy drops None: nothing for the caller to unpack


class RoundTripCheck:
    """decode -> encode through the real tokenizer changes few tokens, in batches."""

    @staticmethod
    def reads(contract: Contract) -> frozenset[str]:
        """What of a record its batch hook reads: the ids, when the round trip is on."""
        return frozenset({"ids"} if contract.roundtrip_rel is not None else ())

    @hookimpl
    def pytest_tokaudit_check_batch(
        self, records: Sequence[AuditedRecord], contract: Contract, summary: SummaryView
    ) -> list[Finding] | None:
        rel = contract.roundtrip_rel
        if rel is None or not records:
            return None

        results = roundtrip(contract.tokenizer_object(), [r.ids for r in records], rel)
        out = []

        figures = writable(summary)  # the round trip's own figures, kept in the summary
        for record, rt in zip(records, results):
            figures.add_roundtrip(rt.ratio)
            if rt.ratio > rel:
                # Past the limit the distance was not measured (tokenizers.hf.roundtrip).
                changed, ratio = ((f"more than {rt.changed - 1:,}", "")
                                  if rt.at_least else (f"{rt.changed:,}", f"{rt.ratio:.2%} "))
                out.append(record.finding(
                    "roundtrip",
                    f"{changed} of {record.n_ids:,} tokens change ({ratio}> {rel:.2%}); "
                    f"{rt.detail}",
                ))
        return out


class EmptyCheck:
    """A file with no audited record is suspicious unless allowed."""

    @hookimpl
    def pytest_tokaudit_check_file(self, summary: SummaryView, contract: Contract) -> Finding | None:
        if summary.audited or summary.unreadable or summary.errors or contract.allow_empty \
                or summary.read_error:
            return None
        if summary.records == 0:
            return Finding("empty", "no records: the file is empty")
        return Finding(
            "empty",
            f"no audited records: all {summary.records} skipped by tokaudit_where",
        )
