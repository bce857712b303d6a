"""The audit core (engine/kernel.py): a batch's columns checked and folded as the per-line
path checks and folds each record.

The columnar JSONL path runs through it: with a sink (--tokaudit-failures, the API's
findings) a record the count or structure rule fails is worded by the checks' hooks on its
light record, never parsed again, and the sink gets what the per-line path writes.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("simdjson")
pytest.importorskip("numpy")

from pytest_tokaudit.checks import DATASET, load  # noqa: E402
from pytest_tokaudit.engine import columnar  # noqa: E402
from pytest_tokaudit.engine import plain as plain_module  # noqa: E402
from pytest_tokaudit.engine.observers import Observers, Recorder  # noqa: E402
from pytest_tokaudit.engine.passes import audit  # noqa: E402
from pytest_tokaudit.engine.plain import check_file  # noqa: E402
from pytest_tokaudit.model.summary import FileSummary  # noqa: E402
from pytest_tokaudit.sources.base import Part  # noqa: E402

from audits import builtin_hook, default_contract  # noqa: E402
from conftest import jsonl_bytes, rec  # noqa: E402

CONTRACT = default_contract(max_shown=10**6, unique_ids=True, require_once=("3",), forbid=("0",),
                            require_last=("7", "8"), where=("provider",), count_rel=0.1)


def audited_with_sink(path, contract, mode, monkeypatch):
    """(summary JSON, the sink's entries) of one file through the path `mode` selects."""
    with monkeypatch.context() as mp:
        mp.setenv(columnar.ENV, mode)
        mp.setattr(columnar, "CHUNK", 64)
        summary = FileSummary(path="data/x.jsonl", max_shown=contract.max_shown)
        hook = builtin_hook(*(check() for check in load(DATASET).values()))
        sink = Recorder()
        audit(path, contract, hook, summary, Part((0, None)), Observers(sink=sink))
        check_file(path, contract, hook, summary)
    return json.loads(summary.to_json()), sink.entries


def test_failed_records_with_a_sink_stay_in_the_kernel(tmp_path, monkeypatch):
    """--tokaudit-failures: the count and structure findings come from the columns (no
    record reaches the per-line path), with the counts the per-line path writes."""
    lines = [rec(f"r{i}", 10, once=[3], last=7, provider="p") for i in range(30)]
    lines[4] = rec("r4", 10, once=[3], last=9, provider="p")  # require_last
    lines[9] = rec("r9", 10, billed=50, once=[3], last=7, provider="p")  # count
    lines[20] = rec("r20", 10, once=[3, 3], last=8, provider="p")  # require_once
    path = tmp_path / "x.jsonl"
    path.write_bytes(jsonl_bytes(lines))
    seen: list[int] = []
    take = plain_module.PlainPass.take

    def spy(self, line, body):
        seen.append(line)
        return take(self, line, body)

    monkeypatch.setattr(plain_module.PlainPass, "take", spy)
    fast = audited_with_sink(path, CONTRACT, "1", monkeypatch)
    assert seen == []
    seen.clear()
    plain = audited_with_sink(path, CONTRACT, "0", monkeypatch)
    assert len(seen) == 30
    assert fast == plain
    assert [(e["line"], e["check"], e["billed"], e["counted"]) for e in fast[1]] == [
        (5, "require_last", 10, 10), (10, "count", 50, 10), (21, "require_once", 10, 10)]


ids = st.lists(st.one_of(st.sampled_from([0, 3, 7, 8, 9, 1000]), st.integers(-2, 2**64),
                         st.booleans(), st.floats(allow_nan=False), st.none()), max_size=8)


@given(data=st.lists(st.tuples(ids, st.integers(-1, 12), st.sampled_from(["p", "", None])),
                     max_size=25))
def test_files_with_a_sink_audit_the_same_on_both_paths(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("k") / "x.jsonl"
    path.write_bytes(b"".join(
        json.dumps({"sample_id": f"r{i}", "completion_tokens": billed if billed >= 0 else len(x),
                    "output_ids": x, "provider": provider}).encode() + b"\n"
        for i, (x, billed, provider) in enumerate(data)))
    with pytest.MonkeyPatch.context() as mp:
        assert (audited_with_sink(path, CONTRACT, "1", mp)
                == audited_with_sink(path, CONTRACT, "0", mp))
