"""A Parquet row over the record limit that shares its row group with small rows (issue #31
item 13): found from the row group's repetition levels, never decoded; its neighbours are
still read and checked, whatever the writer's encoding, page version and codec."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import TokProject, failure_section, summary_rows
from tables import BIG_ROW_SCRIPT, INI, SCHEMA, good, red_twins

from conftest import rec

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

THINK, END = 7, 8

SHARED_GROUP_SCRIPT = '''
import sys
import pyarrow as pa
import pyarrow.parquet as pq
n = int(sys.argv[2])
small = [[1, 2, 3], [4, 5], [6]]
lengths = [3, 2, n, 1, 3]
offsets = [0]
for k in lengths:
    offsets.append(offsets[-1] + k)
values = pa.concat_arrays([pa.array([1, 2, 3, 4, 5], pa.int64()), pa.repeat(pa.scalar(7, pa.int64()), n),
                           pa.array([6, 1, 2, 3], pa.int64())])
ids = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), values)
table = pa.table({"sample_id": [1, 2, 3, 4, 5], "completion_tokens": [3, 9, n, 1, 3], "output_ids": ids})
pq.write_table(table, sys.argv[1], row_group_size=100)  # one row group: the huge row in the middle
'''


def test_a_huge_row_sharing_its_row_group_is_never_decoded(tmp_path: Path):
    """A file of about 1 KB whose middle row holds 12M ids (96 MB as int64) in one row group
    with four small rows: the huge row is a line_length finding at its row, judged from
    the levels, and the four others are read and checked. Decoding the group raises the
    high-water mark by about 285 MB, past the bound; the old reader did (about 0.8 GB at
    30M ids). 12M, not more: writing the file is most of this test's time."""
    path = tmp_path / "shared.parquet"
    subprocess.run([sys.executable, "-c", SHARED_GROUP_SCRIPT, str(path), "12000000"], check=True,
                   timeout=300)
    assert path.stat().st_size < 1 << 20
    assert pq.ParquetFile(path).metadata.num_row_groups == 1
    tests = Path(__file__).parent.parent
    proc = subprocess.run([sys.executable, "-c", BIG_ROW_SCRIPT, str(path), str(tests)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    records, checked, shown, peak = json.loads(proc.stdout)
    assert (records, checked, shown) == (5, 4, [[3, "line_length"]])
    assert peak < 200 << 20, f"peak RSS {peak / 2**20:.0f} MiB"


# How a writer may lay out a list column: dictionary or plain values, page versions 1 and 2,
# codecs, small pages (a row's values cut across pages), a nullable or required element.
LAYOUTS = {
    "dictionary-v1-snappy": dict(),
    "plain-v2-zstd": dict(use_dictionary=False, data_page_version="2.0", compression="zstd"),
    "plain-v1-gzip-small-pages": dict(use_dictionary=False, compression="gzip", data_page_size=64),
    "dictionary-v2-none-small-pages": dict(data_page_version="2.0", compression="none",
                                           data_page_size=64),
}


# End to end the suite runs the writer's default layout and small pages; every layout is read
# in process below (test_the_source_yields_every_row_...), and end to end in full.
@pytest.mark.parametrize("layout", [
    l if l in ("dictionary-v1-snappy", "plain-v1-gzip-small-pages") else pytest.param(l, marks=pytest.mark.full)
    for l in LAYOUTS])
def test_the_neighbours_of_a_huge_row_get_the_verdicts_of_the_jsonl_twin(project: TokProject,
                                                                          layout: str):
    """Every row in one row group; row 5 is over the record limit. The rows before and
    after it, with their findings (a count, a forbidden id, a null list, a null id, an
    empty list, a null element), read as the JSONL twin's lines are."""
    rows = [good(i) for i in range(1, 13)]
    rows[1] = rec(2, 12, 13, once=[THINK], last=END, provider="api")  # count, before the huge row
    rows[4] = rec(5, 600, once=[THINK], last=END, provider="api")  # 600 ids: 4,800 bytes
    rows[6] = {**good(7), "output_ids": None}
    rows[7] = {**good(8), "output_ids": [THINK, None, END]}
    rows[8] = {**good(9), "output_ids": []}
    rows[9] = rec(10, 12, 15, once=[THINK], last=END, provider="api")  # count, after it
    rows[10] = {**good(11), "provider": None}  # skipped
    project.ini(**INI, tokaudit_max_line_bytes=1000, tokaudit_count_outliers=0)
    project.jsonl("data/twin.jsonl", rows)
    path = project.path / "pq/twin.parquet"
    path.parent.mkdir()
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), path, row_group_size=100,
                   **LAYOUTS[layout])
    assert pq.ParquetFile(path).metadata.num_row_groups == 1
    jsonl, parquet = red_twins(project)
    name = "pq/twin.parquet"
    section = failure_section(parquet, name)
    long = [line for line in section if "line_length" in line]
    assert len(long) == 1 and long[0].startswith(f"{name}:row 5: line_length: the row holds "), section
    twin = [line.replace(f"{name}:row ", "data/twin.jsonl:").replace(name, "data/twin.jsonl")
            .replace("unreadable row", "unreadable line") for line in section if "line_length" not in line]
    want = [line for line in failure_section(jsonl, "data/twin.jsonl") if "line_length" not in line]
    assert twin == want
    assert any(":2: sample_id=2: count: billed 13" in line for line in want)
    assert any(":10: sample_id=10: count: billed 15" in line for line in want)
    assert summary_rows(parquet)[name] == summary_rows(jsonl)["data/twin.jsonl"]


@pytest.mark.parametrize("layout", [*LAYOUTS, "lz4-hadoop", "uint32-required-large-list"])
def test_the_source_yields_every_row_in_order_with_the_long_one_left_out(tmp_path: Path, layout: str):
    """The source's own answer: the rows around a long row as pyarrow reads them, in order,
    an Oversized in place of each long one (its bytes); a layout parquet_pages does not
    decode (LZ4 in Hadoop's framing) is read by pyarrow whole, as before, the Arrow pass
    then measuring each row."""
    from pytest_tokaudit.sources.parquet import SOURCE, Oversized

    kw = LAYOUTS.get(layout, {"compression": "lz4"} if layout == "lz4-hadoop" else {})
    element = pa.field("item", pa.uint32(), nullable=False) if layout.startswith("uint32") else pa.int64()
    kind = pa.large_list if layout.endswith("large-list") else pa.list_
    schema = pa.schema([("sample_id", pa.int64()), ("output_ids", kind(element))])
    sizes = [3, 0, 700, 5, None, 1, 200, 650, 2]  # None: a null list; 700 and 650 over 2,000 bytes
    rows = [{"sample_id": i, "output_ids": None if n is None else [(i * 31 + k) % 97 for k in range(n)]}
            for i, n in enumerate(sizes)]
    path = tmp_path / "t.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path, row_group_size=100, **kw)
    table = SOURCE.open_table(path)
    try:
        out = list(table.batches(None, None, 4, 2000))
    finally:
        table.close()
    seq: list = []
    for item in out:
        seq += [item] if isinstance(item, Oversized) else item.to_pylist()
    width = 4 if layout.startswith("uint32") else 8
    if layout == "lz4-hadoop":
        assert seq == rows
        return
    assert seq == [Oversized(1, n * width + 8) if n and n * width + 8 > 2000 else row
                   for n, row in zip(sizes, rows)]
