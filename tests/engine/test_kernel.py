"""The audit core (engine/kernel.py): a batch's columns checked and folded as the per-line
path checks and folds each record.

The columnar JSONL path runs through it: with a sink (--tokaudit-failures, the API's
findings) a record the count or structure rule fails is worded by the checks' hooks on its
light record, never parsed again, and the sink gets what the per-line path writes.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("simdjson")
pytest.importorskip("numpy")

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


def audited_with_sink(path, contract, mode, monkeypatch, extra=()):
    """(summary JSON, the sink's entries) of one file through the path `mode` selects
    (`extra`: plugins besides the built-in checks)."""
    with monkeypatch.context() as mp:
        mp.setenv(columnar.ENV, mode)
        mp.setattr(columnar, "CHUNK", 64)
        summary = FileSummary(path="data/x.jsonl", max_shown=contract.max_shown)
        hook = builtin_hook(*extra)  # the built-in checks, each once
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


# -- the Arrow pass (Parquet, Arrow IPC) through the same kernel ---------------------------

class _FirstIds:
    """A user's per-record and batch hooks reading the whole record (the full-record mode)."""

    @pytest.hookimpl
    def pytest_tokaudit_check_record(self, record):
        if record.data.get("provider") == "q" and record.occurrences(9):
            return record.finding("mine", f"first {record.ids[:1]}, last {record.last_id}")

    @pytest.hookimpl
    def pytest_tokaudit_check_batch(self, records):
        return [r.finding("mine_batch", str(r.count_each((3, 1000)))) for r in records
                if r.data["provider"] == "q" and r.n_ids > 11]


def arrow_rows() -> list[dict]:
    """Typed rows a Parquet or Arrow IPC column can hold: clean ones, one of every finding
    of the count and structure rules, and every unusable value of a typed column."""
    rows = [rec(i, 10 + i % 3, once=[3], last=7 + i % 2, provider="p") for i in range(40)]
    rows[1] = rec(1, 10, billed=50, once=[3], last=7, provider="q")  # count
    rows[2] = rec(2, 10, once=[3, 3], last=8, provider="p")  # require_once
    rows[3] = rec(3, 10, once=[3, 0], last=7, provider="q")  # forbid
    rows[4] = rec(4, 10, once=[3], last=9, provider="q")  # require_last
    rows[5] = {**rows[5], "output_ids": []}
    rows[6] = {**rows[6], "output_ids": None}
    rows[7] = {**rows[7], "output_ids": [3, -4, 7]}
    rows[8] = {**rows[8], "output_ids": [3, None, 7]}
    rows[9] = {**rows[9], "completion_tokens": None}
    rows[10] = {**rows[10], "completion_tokens": -3}
    rows[11] = {**rows[11], "provider": None}  # skipped
    rows[12] = {**rows[12], "provider": ""}  # skipped
    rows[13] = {**rows[13], "sample_id": None}
    rows[14] = {**rows[14], "sample_id": 20}  # a repeated id
    rows[15] = rec(15, 12, billed=13, once=[3, 9], last=7, provider="q")
    return rows * 9  # past a batch of rows, row groups cut across the findings


@pytest.mark.parametrize("kind", ["parquet-7", "parquet-1000", "arrow"])
@pytest.mark.parametrize("mine", [False, True], ids=["builtin", "user-hooks"])
@pytest.mark.parametrize("kernel", [True, False], ids=["kernel", "per-row"])
def test_arrow_files_audit_as_their_jsonl_twin_on_the_per_line_path(tmp_path, monkeypatch, kind,
                                                                     mine, kernel):
    """The same records as Parquet or Arrow IPC and as JSONL read line by line: the same
    summary (findings, worst records, figures, ids) and the same --tokaudit-failures lines,
    through the kernel and row by row (as without numpy)."""
    pa = pytest.importorskip("pyarrow")
    from pytest_tokaudit.engine import arrow

    if not kernel:
        monkeypatch.setattr(arrow, "_plan", lambda contract, hook: None)
    pq = pytest.importorskip("pyarrow.parquet")
    rows = arrow_rows()
    table = pa.Table.from_pylist(rows, schema=pa.schema([
        ("sample_id", pa.int64()), ("provider", pa.string()), ("completion_tokens", pa.int64()),
        ("output_ids", pa.list_(pa.int64()))]))
    twin = tmp_path / "x.jsonl"
    twin.write_bytes(jsonl_bytes(rows))
    if kind == "arrow":
        import pyarrow.feather as feather

        path = tmp_path / "x.arrow"
        feather.write_feather(table, path, compression="uncompressed", chunksize=100)
    else:
        path = tmp_path / "x.parquet"
        pq.write_table(table, path, row_group_size=int(kind.split("-")[1]))
    extra = (_FirstIds(),) if mine else ()
    contract = dataclasses.replace(CONTRACT, unique_text=True)  # light rows carry their ids
    got = [audited_with_sink(p, contract, "0", monkeypatch, extra) for p in (path, twin)]
    assert got[0][1] and got[0][0]["findings"] > 100
    assert got[0] == got[1]
