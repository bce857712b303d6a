"""In-process audits of one file, as pytest would run them, for the reader and engine tests:
the built-in checks in a pluggy PluginManager with the plugin's hook specs, the contracts
they run under, and hypothesis strategies for JSONL-ish files.

Helpers only (no fixtures, no tests), imported by name: `from audits import run_audit`.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Iterator

import pluggy
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from conftest import examples, rec
from pytest_tokaudit import checks, hookspecs
from pytest_tokaudit.checks.dataset import IdsChannel
from pytest_tokaudit.engine.passes import audit
from pytest_tokaudit.engine.plain import check_file
from pytest_tokaudit.model.contract import KEYS, Contract
from pytest_tokaudit.model.records import SKIPPED, Rejected
from pytest_tokaudit.model.summary import PROPERTY, FileSummary
from pytest_tokaudit.run.controller import Controller
from pytest_tokaudit.sources.base import Part
from pytest_tokaudit.sources.jsonl import BUFFER, line_range, read_chunks
from pytest_tokaudit.sources.parse import parse_line

SETTINGS = settings(
    max_examples=examples(150),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def default_contract(**changes: Any) -> Contract:
    """The contract an empty pytest.ini gives, with `changes`."""
    contract = Contract(**{k.attr: k.parse(k.default) for k in KEYS})
    return dataclasses.replace(contract, **changes).resolve_tokens()


class Spy:
    """Remembers the line of every record handed to the per-record checks."""

    def __init__(self) -> None:
        self.lines: list[int] = []

    @pytest.hookimpl
    def pytest_tokaudit_check_record(self, record):
        self.lines.append(record.line)


def builtin_hook(*extra: Any):
    """pm.hook with the plugin's hook specs and its built-in checks (plus `extra` plugins)."""
    pm = pluggy.PluginManager("pytest")
    pm.add_hookspecs(hookspecs)
    for name, check in checks.builtin().items():
        pm.register(check(), name)
    pm.register(IdsChannel())  # the record ids, as the plugin registers it
    for plugin in extra:
        pm.register(plugin)
    return pm.hook


def physical_lines(data: bytes) -> list[bytes]:
    """The file's lines as a binary file iterates them: split after each b'\\n' only."""
    out, start = [], 0
    while start < len(data):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end + 1
        out.append(data[start:end])
        start = end
    return out


# -- strategies: JSONL-ish files ---------------------------------------------------------------

json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=6),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=8,
)
id_elements = st.one_of(
    st.integers(-3, 2**70), st.floats(), st.text(max_size=2), st.booleans(), st.none(),
)
field_values = st.one_of(
    st.integers(-5, 2**70), st.floats(), st.text(max_size=5), st.booleans(), st.none(),
    st.lists(id_elements, max_size=6), st.lists(st.integers(0, 50), max_size=30),
)
record_like = st.fixed_dictionaries(
    {},
    optional={
        "sample_id": st.one_of(st.text(max_size=4), st.integers(), st.none(), st.lists(st.integers(), max_size=2)),
        "completion_tokens": field_values,
        "output_ids": field_values,
        "provider": st.one_of(st.none(), st.text(max_size=3), st.booleans()),
    },
)
valid_records = st.builds(
    lambda i, n, delta, provider: rec(f"s{i}", n, max(0, n + delta), **({"provider": provider} if provider else {})),
    st.integers(0, 999), st.integers(0, 40), st.integers(-20, 20), st.sampled_from(["", "p"]),
)


def _dump(obj: Any) -> bytes:
    try:
        return json.dumps(obj).encode()  # may write NaN / Infinity: invalid JSON, a finding
    except (ValueError, OverflowError):
        return b"{"


lines = st.one_of(
    st.binary(max_size=30),
    st.text(max_size=20).map(lambda t: t.encode("utf-8", "surrogatepass")),
    record_like.map(_dump),
    json_values.map(_dump),
    valid_records.map(_dump),
    valid_records.map(lambda r: b"\xef\xbb\xbf" + _dump(r)),  # a UTF-8 BOM
    st.sampled_from([b"", b"  ", b"\t", b"\r"]),
)


@st.composite
def jsonl_files(draw, max_lines: int = 25) -> bytes:
    """Bytes of a JSONL-ish file: mostly lines of the kinds above, LF or CRLF endings."""
    body = b""
    for line in draw(st.lists(lines, max_size=max_lines)):
        body += line + draw(st.sampled_from([b"\n", b"\n", b"\r\n"]))
    if body and draw(st.booleans()):
        body = body.rstrip(b"\r\n")  # no newline after the last line
    return body


CONTRACTS = {
    "default": default_contract(max_shown=10**6),
    "where": default_contract(max_shown=10**6, where=("provider",)),
    "structure": default_contract(
        max_shown=10**6, require_once=("3",), require_last=("7", "8"), forbid=("0",),
    ),
    "no-id": default_contract(max_shown=10**6, id_field=()),
}


def run_audit(path: Path, contract: Contract, *extra: Any) -> FileSummary:
    summary = FileSummary(path=path.name, max_shown=contract.max_shown)
    hook = builtin_hook(*extra)
    audit(path, contract, hook, summary)
    check_file(path, contract, hook, summary)
    return summary


def _parsed(result: Any) -> Any:
    if result is SKIPPED or type(result) is Rejected:
        return result
    tokens = sorted(set(result.ids[:4] + [0, 6, 7, 8, 9]))
    return (
        "record", result.line, result.id, result.count, result.n_ids, result.ids,
        result.last_id, [result.occurrences(t) for t in tokens], result.data,
    )


def audited_summary(path: Path, contract: Contract, start: int = 0, end: int | None = None,
                    shard: tuple[int, int] | None = None) -> FileSummary:
    summary = FileSummary(path="data/x.jsonl", max_shown=contract.max_shown)
    if shard:
        summary.shard, summary.shards = shard
    audit(path, contract, builtin_hook(), summary, Part((start, end)))
    return summary


def merged_by_controller(parts: list[FileSummary], contract: Contract) -> FileSummary:
    """Shard summaries through the controller, as they arrive in reports (any order)."""
    controller = Controller(config=None, contract=contract)
    for i, part in reversed(list(enumerate(parts))):
        report = SimpleNamespace(
            when="call",
            nodeid=f"data/x.jsonl::tokaudit[shard {i + 1}]",
            user_properties=[("other", 1), (PROPERTY, part.to_json())],
        )
        controller.pytest_runtest_logreport(report)
        assert report.user_properties == [("other", 1)]  # the summary is taken out
    (merged,) = controller.files()
    return merged


def audit_both(path: Path, contract: Contract, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """The summary of `path` through the fast path and through the plain path, as JSON."""
    import pytest_tokaudit.engine.plain as audit_module

    fast = run_audit(path, contract).to_json()
    monkeypatch.setattr(
        audit_module, "parse_line", lambda raw, line, c: parse_line(raw, line, c, fast=False)
    )
    plain = run_audit(path, contract).to_json()
    monkeypatch.undo()
    return fast, plain


def iter_lines(path: Path, start: int = 0, end: int | None = None) -> Iterator[bytes]:
    """Raw lines (with their endings) of the whole file, or of those starting in [start, end):
    a plain reference of the byte ranges (read_chunks, line_range) that keeps each line
    whole, blank or not. The audit reads with sources.lines.Lines."""
    pending = bytearray()
    chunks = read_chunks(path, start, BUFFER, None, end)
    start, end = line_range(path, start, end)
    offset = start - 1 if start else 0  # file offset of pending[0]
    skipping = bool(start)  # the line straddling `start` belongs to the range before
    for chunk in chunks:
        pending += chunk
        at = 0
        if skipping:
            at = pending.find(b"\n") + 1
            if not at:
                offset += len(pending)
                pending.clear()
                continue
            skipping = False
        while end is None or offset + at < end:
            nl = pending.find(b"\n", at)
            if nl < 0:
                break
            yield bytes(pending[at : nl + 1])
            at = nl + 1
        else:
            return
        offset += at
        del pending[:at]
    if pending and not skipping and (end is None or offset < end):
        yield bytes(pending)
