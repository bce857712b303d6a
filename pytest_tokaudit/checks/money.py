"""Money by component: each part's token counts by component and group, and the
`budget_money` dataset check on their cost (model/spend.py prices them).

A plugin on the public hooks: each batch folds its records' billed prompt tokens, their
cached part and the billed completion tokens into the part's `spend` channel, per group of
the `tokaudit_group_by` fields and the price table's; unusable records' counts included
(spend is spend). The prices apply once, on the controller (or in `merge`).
"""

from __future__ import annotations

import functools
from typing import Any

from ..base.fields import MISSING, count_paths, get_path
from ..base.hooks import hookimpl
from ..base.text import plural
from ..model.outcome import Outcome
from ..model.records import field_value
from ..model.spend import CHANNEL, PriceError, amount, priced, spend, table_fields
from ..model.summary import writable
from .prompt import billed_prompt, group_key

NAME = "budget_money"


def _count(value: Any) -> int:
    return value if type(value) is int and value >= 0 else 0


class MoneyCheck:
    """Spend by component and group; tokaudit_budget_money over every file."""

    @staticmethod
    def reads(contract: Any) -> frozenset[Any]:
        """A record's billed count and the fields it is priced by (values at paths): its
        groups, its billed prompt count and their cached part."""
        if not priced(contract):
            return frozenset()
        paths = [*(tuple(f.split(".")) for f in table_fields(contract)),
                 *count_paths(contract.prompt_count_field)]
        if contract.cached_tokens_field:
            paths.append(contract.cached_tokens_field)
        return frozenset({"count", *paths} if all(paths) else {"data"})

    @hookimpl
    def pytest_tokaudit_dataset_checks(self, contract):
        return [NAME] if contract.budget_money is not None else None

    @hookimpl
    def pytest_tokaudit_check_batch(self, records, unusable, contract, summary):
        if not priced(contract):
            return None
        fields = table_fields(contract)
        paths = [tuple(f.split(".")) for f in fields]
        channel = writable(summary).channel(CHANNEL)
        entries = {tuple(e[1]): e for e in channel if tuple(e[0]) == fields}
        # Each record's values at paths: a light row's declared fields, an unusable one's object.
        rows: list[tuple[Any, Any]] = [(functools.partial(field_value, r), r.count) for r in records]
        rows += [(None if u.data is None else functools.partial(get_path, u.data), u.billed)
                 for u in unusable if u.data is not None or u.billed is not None]
        cached_field = contract.cached_tokens_field
        for get, output in rows:
            key = group_key(get, paths) if get is not None else ("(none)",) * len(paths)
            entry = entries.get(key)
            if entry is None:
                entry = entries[key] = [list(fields), list(key), 0, 0, 0, 0, 0]
                channel.append(entry)
            prompt = billed_prompt(get, contract.prompt_count_field) if get is not None else None
            if type(prompt) is not int:  # no billed prompt count: counted apart, not as 0 silently
                entry[6] += 1
                prompt = 0
            cached = get(cached_field) if get is not None and cached_field else MISSING
            entry[2] += 1
            entry[3] += prompt
            entry[4] += min(_count(cached), prompt)
            entry[5] += output or 0
        return None

    @hookimpl
    def pytest_tokaudit_check_dataset(self, name, dataset, contract):
        if name != NAME:
            return None
        try:
            result = spend(dataset.channel(CHANNEL), contract)
        except PriceError as exc:
            return Outcome.failed(str(exc))
        blind = [s.path for s in dataset.files if s.audited and CHANNEL not in s.channels]
        if blind:
            return Outcome.failed(f"no spend recorded for {len(blind)} file(s): {', '.join(blind[:5])}")
        cap, total = contract.budget_money, result["total"]
        share = f" ({total / cap:.1%})" if cap else ""
        message = f"spent {amount(total)} of {amount(cap)}{share}"
        if result["unpriced_records"]:
            message += f"; {plural(result['unpriced_records'], 'record')} with a component that has no price"
        if total > cap:
            return Outcome.failed(f"over budget: {message}",
                                  [f"contract: {contract.describe(('budget_money',))}"])
        return Outcome.passed(message)
