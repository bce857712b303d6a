"""tokaudit_unique_text: the same completion under different record ids (paid for twice).

A plugin on the public hooks: each batch adds a digest of every record's ids (stored, or
rebuilt from its text) to the file's `unique_text` channel; the dataset check groups them.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ..base.formats import location, place
from ..base.hooks import hookimpl
from ..base.text import plural
from ..model.fastids import canonical
from ..model.outcome import Outcome
from ..model.summary import UNIQUE_TEXT as CHANNEL
from ..model.summary import writable
from .dataset import DUPLICATES_SHOWN


def _digest(record: Any) -> str:
    """A digest of the ids as canonical text (",1,2,3,"): the fast path's bytes as they are."""
    text = record.ids_text() if hasattr(record, "ids_text") else canonical(record.ids)
    return hashlib.blake2b(text, digest_size=12).hexdigest()


class UniqueTextCheck:
    """No completion stored under two record ids, across the dataset."""

    @staticmethod
    def reads(contract: Any) -> frozenset[str]:
        """What of a record its batch hook reads: the ids, when the check is on."""
        return frozenset({"ids"} if contract.unique_text else ())

    @hookimpl
    def pytest_tokaudit_dataset_checks(self, contract):
        return [CHANNEL] if contract.unique_text else None

    @hookimpl
    def pytest_tokaudit_check_batch(self, records, contract, summary):
        if not contract.unique_text:
            return None
        values = writable(summary).channel(CHANNEL)
        shard = summary.shard if summary.shards > 1 else None
        for r in records:
            values.append([_digest(r), r.line, r.id, shard])
        return None

    @hookimpl
    def pytest_tokaudit_check_dataset(self, name, dataset, contract):
        if name != CHANNEL:
            return None
        groups: dict[str, list[tuple[str, Any, Any, Any]]] = {}
        total = 0
        for path, values in dataset.channel(CHANNEL):
            for digest, line, record_id, shard in values:
                groups.setdefault(digest, []).append((path, line, record_id, shard))
                total += 1
        dup = []
        for places in groups.values():
            distinct = {rid for _, _, rid, _ in places}
            if len(places) > 1 and (len(distinct) > 1 or None in distinct):
                dup.append(places)
        if not dup:
            return Outcome.passed(f"{plural(total, 'completion')}, none stored under two ids")
        names = {s.path: ".".join(s.id_path(contract.id_field)) for s in dataset.files}
        lines = []
        for places in dup[:DUPLICATES_SHOWN]:
            # the id named as its files' own contracts name it (a folder's may differ)
            fields = {names.get(path, ".".join(contract.id_field)) for path, _, _, _ in places}
            id_name = (fields.pop() if len(fields) == 1 else "") or "id"
            where = ", ".join(
                location(path, line) if shard is None else f"{path} (shard {shard}, {place(path, line)} of it)"
                for path, line, _, shard in places)
            ids = ", ".join(repr(rid) for rid in dict.fromkeys(rid for _, _, rid, _ in places))
            lines.append(f"{id_name} {ids}: the same completion: {where}")
        if len(dup) > DUPLICATES_SHOWN:
            lines.append(f"... and {len(dup) - DUPLICATES_SHOWN:,} more")
        extra = sum(len(p) - 1 for p in dup)
        return Outcome.failed(
            f"{plural(len(dup), 'completion')} stored under more than one id "
            f"({plural(extra, 'record')} paid for twice)", lines)
