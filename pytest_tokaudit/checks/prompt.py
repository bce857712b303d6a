"""The prompt audit: the billed prompt count against the tokenizer's chat template.

A record that carries its request (`tokaudit_prompt_messages`, `tokaudit_prompt_tools`), or
whose request is joined to it (`tokaudit_requests`), has its billed prompt count
(`tokaudit_prompt_count_field`) held to the length of the chat template applied to the
messages and tools with the generation prompt added (tokenizers/chat.py). The rules are the
completion count's (checks/record.count_finding, Contract.mean_breach), applied with the
`tokaudit_prompt_count_*` tolerances; each batch's conversations are rendered one by one and
encoded in one call.

The `prompt` channel holds per group of `tokaudit_group_by` values [values, records, billed,
counted, |diff|, uncountable]: the JSON report and the terminal show the difference by
provider/model, and shards merge by concatenation. A record whose messages hold a part the
template cannot count (an image, audio) is counted apart as uncountable, never passed.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable

from ..base.fields import MISSING, CountSum, count_paths, get_path
from ..base.findings import Finding
from ..base.hooks import hookimpl
from ..base.text import plural
from ..model.contract import Contract
from ..model.records import field_value
from ..model.summary import label, totals, writable
from ..sources.parse import sum_terms
from .groups import group_text
from .join import error_of, id_hash, index_for, record_data
from .record import count_finding

CHANNEL = "prompt"


@functools.lru_cache(maxsize=16)
def rules(contract: Contract) -> Contract:
    """The contract with the prompt's tolerances in the count's place: the count rule's own
    functions then judge the prompt (no second copy of them)."""
    return dataclasses.replace(
        contract, count_abs=contract.prompt_count_abs, count_rel=contract.prompt_count_rel,
        count_outliers=contract.prompt_count_outliers, count_outlier_max=None,
        count_mean_rel=contract.prompt_count_mean_rel, count_mean_abs=contract.prompt_count_mean_abs)


def billed_prompt(get: Callable[[tuple[str, ...]], Any], formula: tuple[str, ...] | CountSum) -> int | str:
    """The billed prompt count of a record (`get`: its value at a path, or MISSING), or
    what is wrong with it."""
    name = ".".join(formula) if isinstance(formula, tuple) else str(formula)
    if isinstance(formula, CountSum):
        problems: list[str] = []
        total = sum_terms([(t, get(t.path)) for t in formula.terms], formula, problems)
        return problems[0] if total is None else total
    value = get(formula)
    if value is MISSING or value is None:
        return f"missing field {name!r}"
    if type(value) is not int or value < 0:
        return f"{name} is {value!r}, not a count"
    return value


def group_key(get: Callable[[tuple[str, ...]], Any], paths: list[tuple[str, ...]]) -> tuple[str, ...]:
    """A record's group: the text of each `tokaudit_group_by` field (NONE when it has none),
    as the prompt audit and the money by component both key their tables."""
    return tuple(group_text(get(path)) for path in paths)


class PromptCheck:
    """Billed prompt tokens vs the chat template's, per record and on average per file."""

    @staticmethod
    def reads(contract: Any) -> frozenset[Any]:
        """Whole records where the messages are the record's own; joined to requests (the
        messages are the request's), its line, id, join id, billed prompt count and groups."""
        if not contract.audits_prompts:
            return frozenset()
        paths = [contract.join_field, *count_paths(contract.prompt_count_field),
                 *(tuple(f.split(".")) for f in contract.group_by)]
        return frozenset({"line", "id", *paths} if contract.requests and all(paths) else {"data"})

    @hookimpl
    def pytest_tokaudit_check_batch(self, records, unusable, contract, summary):
        if not contract.audits_prompts:
            return None
        from ..tokenizers.chat import chat_for, conversation

        chat = chat_for(contract.tokenizer, contract.trust_remote_code, contract.chat_template)
        judge = rules(contract)
        messages_path, tools_path = contract.prompt_fields
        index = index_for(contract) if contract.requests else None
        # (line, id, its values at paths, its object): a record's object only where the
        # messages are in it; joined, its fields are what reads() declared.
        rows: list[tuple[Any, Any, Any, Any]] = []
        for r in records:
            if index is not None:
                rows.append((r.line, r.id, functools.partial(field_value, r), None))
            else:
                data = record_data(r)
                rows.append((r.line, r.id, functools.partial(get_path, data), data))
        if unusable:  # in line order, as the records came
            rows += [(u.line, u.id, functools.partial(get_path, u.data), u.data)
                     for u in unusable if u.data is not None]
            rows.sort(key=lambda row: row[0])
        groups = [tuple(f.split(".")) for f in contract.group_by]
        channel = writable(summary).channel(CHANNEL)
        entries = {tuple(e[0]): e for e in channel}
        out: list[Finding] = []
        todo: list[tuple[Any, ...]] = []  # (line, id, billed, group, request place) to count
        conversations = []
        found: list[int] = []  # each row's request (its position in the index), or -1
        if index is not None:
            hashes = [id_hash(get(contract.join_field)) if not error_of(data) else None
                      for _, _, get, data in rows]
            known = [h for h in hashes if h is not None]
            at = iter(index.find(known) if known else [])
            found = [next(at) if h is not None else -1 for h in hashes]
        for k, (line, record_id, get, data) in enumerate(rows):
            source, place = data, ""
            if index is not None:
                pos = found[k]
                if pos < 0:
                    continue  # an error line (it bills nothing) or no request: the join says
                source, place = index.read(pos), f" (request {index.place(pos)})"
            billed = billed_prompt(get, contract.prompt_count_field)
            if type(billed) is str:
                out.append(Finding("prompt_count", f"{billed}{place}", line, record_id))
                continue
            key = group_key(get, groups)
            entry = entries.get(key)
            if entry is None:
                entry = entries[key] = [list(key), 0, 0, 0, 0, 0]
                channel.append(entry)
            messages = get_path(source, messages_path)
            if messages is MISSING or messages is None:
                out.append(Finding("prompt_count", f"missing field {'.'.join(messages_path)!r}{place}",
                                   line, record_id))
                continue
            tools = get_path(source, tools_path) if tools_path else None
            conv = conversation(messages, None if tools is MISSING else tools)
            if isinstance(conv, str):
                entry[5] += 1  # counted apart: the template cannot count it
                continue
            todo.append((line, record_id, billed, entry, place))
            conversations.append(conv)
        for (line, record_id, billed, entry, place), counted in zip(todo, chat.lengths(conversations)):
            if not isinstance(counted, int):  # the template refused the messages
                out.append(Finding("prompt_count", f"{counted}{place}", line, record_id))
                continue
            entry[1] += 1
            entry[2] += billed
            entry[3] += counted
            entry[4] += abs(counted - billed)
            breach = count_finding("prompt_count", billed, counted, judge)
            if breach is not None:
                out.append(Finding(breach.check, f"prompt {breach.message}{place}", line, record_id,
                                   breach.allowable))
        return out

    @hookimpl
    def pytest_tokaudit_check_file(self, summary, contract):
        if not contract.audits_prompts:
            return None
        groups = totals(summary.channels.get(CHANNEL, []))
        n, billed, _, absdiff, uncountable = (sum(v[i] for v in groups.values()) for i in range(5))
        out = []
        if not n and uncountable:
            out.append(Finding("prompt_count", f"no prompt could be counted: {uncountable:,} "
                                               "records hold parts the chat template cannot count"))
        judge = rules(contract)
        why = judge.mean_breach(n, billed, absdiff)
        if why:
            out.append(Finding("prompt_count_mean", f"prompt {why}"))
        if len(groups) > 1:
            for key, (gn, gb, _, gd, _) in sorted(groups.items()):
                why = judge.mean_breach(gn, gb, gd)
                if why:
                    out.append(Finding("prompt_count_mean",
                                       f"[{label(contract.group_by, key)}] prompt {why} ({plural(gn, 'record')})"))
        return out
