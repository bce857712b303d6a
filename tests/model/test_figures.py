"""The plots' numbers in FileSummary (model/figures.py): bounded, mergeable, deterministic.

Shards merged, records in any order, summaries sent as JSON and read back all give the same
figures as one pass over the whole file; the columnar path's numpy twin gives the per-line
path's; malformed figures in a report are a ReportError naming them.
"""

from __future__ import annotations

import random

import orjson
import pytest

from pytest_tokaudit.model import figures as F
from pytest_tokaudit.model import report as jsonreport
from pytest_tokaudit.model.summary import FileSummary, merge_parts


def records(n: int, seed: int = 7) -> list[tuple[int, object, int, int]]:
    """(line, id, billed, counted): mostly close, some far off, a few string ids."""
    rnd = random.Random(seed)
    out = []
    for line in range(1, n + 1):
        billed = rnd.randint(1, 3000)
        counted = billed + rnd.choice((0, 0, 0, 1, -1, 2, -3, rnd.randint(-400, 400)))
        rid = line if line % 7 else f"s-{line:06d}"
        out.append((line, rid, billed, max(counted, 0)))
    return out


def summary_of(recs, path="data/a.jsonl", **kw) -> FileSummary:
    s = FileSummary(path=path, **kw)
    for line, rid, billed, counted in recs:
        s.add_counts(line, rid, billed, counted)
    return s


def test_histograms_count_every_record_in_the_bin_of_its_value():
    recs = records(5000)
    fig = summary_of(recs).figures
    assert sum(fig.diff) == sum(fig.length) == len(recs)
    for _, _, billed, counted in recs[:300]:
        lo, hi = F.diff_range(F.diff_bin(billed - counted))
        assert lo <= billed - counted <= hi
        lo, hi = F.length_range(F.length_bin(counted))
        assert lo <= counted <= hi
    assert F.diff_range(F.diff_bin(0)) == (0, 0)
    assert all(F.diff_range(F.diff_bin(d)) == (d, d) for d in range(-15, 16))


def test_the_summary_folds_each_record_as_figures_add_does():
    recs = records(4000, seed=11)
    fig = F.Figures()
    for line, rid, b, c in recs:
        fig.add(line, rid, b, c)
    assert summary_of(recs).figures == fig


def test_the_sample_is_the_least_priorities_and_the_tail_the_largest_diffs():
    recs = records(3000)
    fig = summary_of(recs).figures
    want = sorted((F.priority(b, c), line) for line, _, b, c in recs)[:F.SAMPLE]
    assert [(e[0], e[3]) for e in fig.sample] == want
    tail = sorted(((abs(b - c), -line) for line, _, b, c in recs if b != c))[-F.TAIL:]
    assert [(e[0], e[1]) for e in fig.tail] == tail


def test_order_shards_and_json_do_not_change_the_figures():
    recs = records(4000)
    whole = summary_of(recs)
    shuffled = recs[:]
    random.Random(1).shuffle(shuffled)
    assert summary_of(shuffled).figures == whole.figures
    # three shards with lines relative to each, rebased and merged as the controller does
    cuts = [0, 1300, 2900, 4000]
    parts = []
    for k in range(3):
        part = [(line - cuts[k], rid, b, c) for line, rid, b, c in recs[cuts[k]:cuts[k + 1]]]
        s = summary_of(part, shard=k, shards=3)
        parts.append(FileSummary.from_json(s.to_json()))  # as it travels from a worker
    merged = merge_parts(parts, {k: cuts[k] for k in range(3)})
    # a shard draws its own sample by its own lines: the tail and histograms are the whole
    # file's; the sample is the least priorities of the shards' samples, deterministically
    assert merged.figures.diff == whole.figures.diff
    assert merged.figures.length == whole.figures.length
    assert merged.figures.tail == whole.figures.tail
    assert len(merged.figures.sample) == F.SAMPLE
    again = merge_parts(list(reversed(parts)), {k: cuts[k] for k in range(3)})
    assert again.figures == merged.figures
    back = FileSummary.from_json(merged.to_json())
    assert back.figures == merged.figures and back.group_figures == merged.group_figures


def test_the_figures_are_bounded_whatever_the_number_of_records():
    small = len(orjson.dumps(summary_of(records(50)).figures.to_json()))
    large = len(orjson.dumps(summary_of(records(200_000)).figures.to_json()))
    assert large < 6000, large
    assert large < small + 3000


def test_groups_beyond_the_cap_share_one_bucket():
    groups = F.GroupFigures()
    for k in range(F.MAX_GROUPS + 10):
        groups.get((f"p{k}",)).add(k + 1, k, 10, 10)
    assert len(groups.groups) == F.MAX_GROUPS + 1
    assert groups.groups[tuple(F.OTHER)].records == 10


def test_the_columnar_fold_is_the_per_line_twin():
    np = pytest.importorskip("numpy")
    from pytest_tokaudit.engine.kernel import fold_figures

    recs = records(3000, seed=3)
    one = F.Figures()
    for line, rid, b, c in recs:
        one.add(line, rid, b, c)
    bulk = F.Figures()
    for lo in range(0, len(recs), 700):  # chunk by chunk, as the columnar path folds
        chunk = recs[lo:lo + 700]
        billed = np.array([r[2] for r in chunk], dtype=np.int64)
        lens = np.array([r[3] for r in chunk], dtype=np.int64)
        fold_figures(np, bulk, np.arange(len(chunk)), np.array([r[0] for r in chunk], dtype=np.int64),
                     billed, lens, np.abs(lens - billed), [r[1] for r in chunk])
    assert bulk == one


@pytest.mark.parametrize("figures", [
    {"bins": 1, "diff": [[999, 1]]},
    {"bins": 1, "diff": [["0", 1]]},
    {"bins": 1, "sample": [[1, 2, 3]]},
    {"bins": 1, "sample": [[1, 2, 3, 4, {"x": 1}]]},
    {"bins": 1, "tail": "no"},
    {"bins": 1, "finish": {"stop": -1}},
    [1, 2],
])
def test_malformed_figures_in_a_report_name_the_field(figures):
    entry = jsonreport.file_entry(summary_of(records(20)))
    entry["figures"] = figures
    data = {"tool": "pytest-tokaudit", "format": jsonreport.FORMAT, "contract": {},
            "files": [entry]}
    with pytest.raises(jsonreport.ReportError, match=r"files\[0\].*figures"):
        jsonreport.validate(data, "r.json")


def test_a_report_without_figures_reads_as_empty_figures():
    entry = jsonreport.file_entry(summary_of(records(20)))
    del entry["figures"], entry["group_figures"]
    data = {"tool": "pytest-tokaudit", "format": jsonreport.FORMAT, "contract": {},
            "files": [entry]}
    summary = jsonreport.validate(data, "old.json").files[0]
    assert summary.checked == 20 and summary.figures.records == 0
