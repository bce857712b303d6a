"""Token ids rebuilt from a record's text (tokaudit_text_template), and the checks on them.

A template `{choices.0.message.reasoning?}</think>{choices.0.message.content}<|im_end|>` is
compiled once per tokenizer into runs of text separated by the special (added) tokens
written in it. A record's runs (literal text and field text joined) are encoded in one
batch through the fast backend with no added special tokens, and the ids of the template's
special tokens are spliced in between: the same ids as encoding the whole text, except that
text taken from a field never becomes a special token. A field holding such a token's
string is a `special_in_text` finding, and that run is encoded as plain text (normaliser,
pre-tokeniser and model, bypassing the added vocabulary).

`rebuild` runs on each batch before any check sees it (audit.check_batch): records
without the ids field get the rebuilt ids as their ids; records with both keep theirs and
get `rebuilt`, compared by the `ids_match_text` check.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

from ..base.fields import Placeholder
from ..base.findings import Finding
from ..model.records import TextRecord
from ..tokenizers.hf import difference, encoding_backend, is_fast
from ..tokenizers.tiktoken import TiktokenTokenizer


@dataclass(frozen=True)
class Plan:
    """A template compiled for one tokenizer.

    `runs[k]` is the k-th run of text: a tuple of literal strings and placeholder indexes;
    `specials[k]` is the id written after run k (one fewer than the runs)."""

    runs: tuple[tuple[str | int, ...], ...]
    specials: tuple[int, ...]
    added: Any  # a compiled regex finding any added token's string, or None


_plans: dict[tuple[str, int], Plan] = {}


def plan_for(template: Any, tok: Any) -> Plan:
    key = (template.text, id(tok))
    plan = _plans.get(key)
    if plan is None:
        plan = _plans[key] = _compile(template, tok)
    return plan


def _added_vocab(tok: Any) -> dict[str, int]:
    vocab = dict(tok.get_added_vocab())
    for name in getattr(tok, "all_special_tokens", ()):
        if name not in vocab:
            i = tok.convert_tokens_to_ids(name)
            if isinstance(i, int):
                vocab[name] = i
    return vocab


def _compile(template: Any, tok: Any) -> Plan:
    vocab = _added_vocab(tok)
    # Longest first: at one position the longest added token wins, as in the tokenizer.
    names = sorted(vocab, key=len, reverse=True)
    added = re.compile("|".join(map(re.escape, names))) if names else None
    runs: list[list[str | int]] = [[]]
    specials: list[int] = []
    index = 0
    for part in template.parts:
        if type(part) is Placeholder:
            runs[-1].append(index)
            index += 1
            continue
        at = 0
        for m in (added.finditer(part) if added else ()):
            if m.start() > at:
                runs[-1].append(part[at:m.start()])
            specials.append(vocab[m.group(0)])
            runs.append([])
            at = m.end()
        if at < len(part):
            runs[-1].append(part[at:])
    return Plan(tuple(map(tuple, runs)), tuple(specials), added)


_TAG = re.compile(r"<[^<>\s]{1,40}>")


def check_literals(template: Any, tok: Any) -> None:
    """Raise ValueError for a literal that looks like a misspelt special token
    (`<|im_ed|>`): it would silently be encoded as text."""
    import difflib

    vocab = _added_vocab(tok)
    for part in template.parts:
        if type(part) is not str:
            continue
        for m in _TAG.finditer(part):
            name = m.group(0)
            if name in vocab:
                continue
            close = difflib.get_close_matches(name, list(vocab), n=3, cutoff=0.75)
            if close or name.startswith("<|"):
                hint = f"closest: {', '.join(map(repr, close))}" if close else "no token is close"
                raise ValueError(f"tokaudit_text_template: {name!r} is not a token of the "
                                 f"tokenizer and would be encoded as text; {hint}")


def plain_ids(tok: Any, text: str) -> list[int]:
    """`text` encoded as if the tokenizer had no added tokens (so none of their strings
    becomes one): normaliser, pre-tokeniser and model of the fast backend, or a tiktoken
    Encoding's ordinary encoding."""
    if isinstance(tok, TiktokenTokenizer):
        return tok.encode_ordinary(text)
    backend = tok.backend_tokenizer
    if backend.normalizer is not None:
        text = backend.normalizer.normalize_str(text)
    pieces = (backend.pre_tokenizer.pre_tokenize_str(text) if backend.pre_tokenizer is not None
              else [(text, (0, len(text)))])
    model = backend.model
    return [t.id for piece, _ in pieces for t in model.tokenize(piece)]


def field_ids(tok: Any, text: str, plan: Plan) -> list[int]:
    """Text holding a special token's string, encoded so that it never becomes the special
    token, whatever the tokenizer's own flags do: the fast backend's model or tiktoken's
    ordinary encoding; any other tokenizer is asked with split_special_tokens and, where it
    ignores the flag (its own encode), each special string is encoded in two halves."""
    if getattr(tok, "is_fast", False) or isinstance(tok, TiktokenTokenizer):
        return plain_ids(tok, text)
    specials = set(plan.specials) | set(_added_vocab(tok).values())
    ids = list(tok.encode(text, add_special_tokens=False, split_special_tokens=True))
    if not specials.intersection(ids) or plan.added is None:
        return ids
    out: list[int] = []
    at = 0
    for m in plan.added.finditer(text):
        if m.start() > at:
            out += tok.encode(text[at:m.start()], add_special_tokens=False)
        name = m.group(0)
        out += tok.encode(name[:1], add_special_tokens=False)
        out += tok.encode(name[1:], add_special_tokens=False)
        at = m.end()
    if at < len(text):
        out += tok.encode(text[at:], add_special_tokens=False)
    return out


def _encode_runs(tok: Any, texts: list[str]) -> list[list[int]]:
    """Each text encoded without added special tokens, in one batch (fast backend)."""
    if isinstance(tok, TiktokenTokenizer):
        return [tok.encode_ordinary(t) for t in texts]
    if not is_fast(tok):
        return [list(tok.encode(t, add_special_tokens=False, split_special_tokens=True)) for t in texts]
    return [e.ids for e in encoding_backend(tok).encode_batch(texts, add_special_tokens=False)]


def rebuild(batch: Sequence[Any], contract: Any) -> list[Finding]:
    """Rebuild the ids of every TextRecord of `batch`; findings for special-token strings
    found in field text."""
    records = [r for r in batch if type(r) is TextRecord]
    if not records:
        return []
    tok = contract.tokenizer_object()
    plan = plan_for(contract.text_template, tok)
    placeholders = contract.text_template.placeholders
    found: list[Finding] = []
    if plan.added is not None:
        for record in records:
            for ph, text in zip(placeholders, record.texts):
                m = plan.added.search(text) if text else None
                if m:
                    found.append(record.finding(
                        "special_in_text",
                        f"{ph.name} holds the special token string {m.group(0)!r} at character "
                        f"{m.start()}: text never becomes a special token (encoded as plain text)"))
    for record, ids in zip(records, encode_texts(tok, plan, [r.texts for r in records])):
        record.set_ids(ids)  # its ids, or `rebuilt` beside stored ones
    return found


def encode_texts(tok: Any, plan: Plan, rows: Sequence[Sequence[str]]) -> list[list[int]]:
    """The ids of each row of placeholder texts: its runs encoded in one batch (a run
    holding an added token's string, by field_ids), the template's special ids between.
    The per-line path (rebuild) and the JSONL chunk engine (columnar.py) both call it."""
    batch_texts: list[str] = []  # runs without an added token's string
    slots: list[list[Any]] = []  # per row, per run: an index into batch_texts, or ids
    added = plan.added
    for texts in rows:
        mine: list[Any] = []
        for run in plan.runs:
            text = "".join(p if isinstance(p, str) else texts[p] for p in run)
            if not text:
                mine.append(())
            elif added is not None and added.search(text):
                mine.append(field_ids(tok, text, plan))
            else:
                mine.append(len(batch_texts))
                batch_texts.append(text)
        slots.append(mine)
    encoded = _encode_runs(tok, batch_texts) if batch_texts else []
    specials = plan.specials
    out = []
    for mine in slots:
        ids: list[int] = []
        for k, slot in enumerate(mine):
            ids += encoded[slot] if type(slot) is int else slot
            if k < len(specials):
                ids.append(specials[k])
        out.append(ids)
    return out


def template_text(record: Any, contract: Any, tok: Any) -> str:
    """The whole text the template builds for `record`, special tokens written out."""
    plan = plan_for(contract.text_template, tok)
    names = [tok.convert_ids_to_tokens(i) for i in plan.specials]
    out = []
    for k, run in enumerate(plan.runs):
        out += [p if type(p) is str else record.texts[p] for p in run]
        if k < len(names):
            out.append(names[k])
    return "".join(out)


def first_difference(tok: Any, ids: list[int], again: list[int], text: str) -> str:
    """Where two id lists first differ, the ids around it, and the text there (located by
    the ids the text gave, which match it)."""
    at, stored, rebuilt, snippet = difference(tok, ids, again, text, again)
    return f"first difference at token {at}: stored {stored}, text {rebuilt}; text {snippet}"
