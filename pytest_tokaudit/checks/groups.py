"""tokaudit_group_by: split the counts by the values of some fields (e.g. provider model).

A plugin on the public hooks: each batch folds its records' counts into the file's
`groups` channel (one entry per group: [values, records, billed, counted, |diff|]), so the
JSON report carries them and shards merge by concatenation. The file check judges the mean
|diff| ratio per group (when there is more than one), and the terminal summary gets a table
by group over all files: a provider that drifts shows even when the file as a whole passes.
"""

from __future__ import annotations

from typing import Any

from ..base.fields import MISSING
from ..base.findings import Finding
from ..base.hooks import hookimpl
from ..base.text import plural
from ..model.records import field_value
from ..model.summary import GROUPS as CHANNEL
from ..model.summary import label, totals, writable

NONE = "(none)"


def group_text(value: Any) -> str:
    """A group field's value as a group's key names it: its text, NONE when there is none."""
    if value is MISSING or value is None:
        return NONE
    return value if type(value) is str else repr(value)


class GroupCheck:
    """tokaudit_group_by: counts and sums per group of field values, the mean check per group."""

    @staticmethod
    def reads(contract: Any) -> frozenset[Any]:
        """What of a record its batch hook reads, when groups are configured: its line, id,
        counts, and the group fields and finish reason (paths: their values)."""
        if not contract.group_by:
            return frozenset()
        finish = contract.finish_reason_field
        return frozenset({"line", "id", "count", "n_ids",
                          *(tuple(f.split(".")) for f in contract.group_by),
                          *([finish] if finish else [])})

    @hookimpl
    def pytest_tokaudit_check_batch(self, records, contract, summary):
        if not contract.group_by:
            return None
        paths = [tuple(f.split(".")) for f in contract.group_by]
        channel = writable(summary).channel(CHANNEL)
        index = {tuple(entry[0]): entry for entry in channel}
        # the HTML report's plots per group, when an output draws them
        figures = writable(summary).group_figures if writable(summary).plotted else None
        finish = contract.finish_reason_field
        for r in records:
            key = tuple(group_text(field_value(r, p)) for p in paths)
            entry = index.get(key)
            if entry is None:
                entry = index[key] = [list(key), 0, 0, 0, 0]
                channel.append(entry)
            entry[1] += 1
            entry[2] += r.count
            entry[3] += r.n_ids
            entry[4] += abs(r.n_ids - r.count)
            if figures is None:
                continue
            fig = figures.get(key)
            fig.add(r.line, r.id, r.count, r.n_ids)
            if finish:
                reason = group_text(field_value(r, finish))
                if reason != NONE:
                    fig.add_finish(reason)
        return None

    @hookimpl
    def pytest_tokaudit_check_file(self, summary, contract):
        limit = contract.count_mean_rel
        if not contract.group_by or limit is None:
            return None
        groups = totals(summary.channels.get(CHANNEL, []))
        if len(groups) < 2:
            return None  # the file's own mean check says it
        out = []
        for key, (n, billed, _, absdiff) in sorted(groups.items()):
            why = contract.mean_breach(n, billed, absdiff)
            if why:
                out.append(Finding("count_mean", f"[{label(contract.group_by, key)}] {why} ({plural(n, 'record')})"))
        return out
