"""Reference audit with pyarrow.compute and numpy over a Parquet file, batch by batch.

    python ref_pyarrow.py FILE.parquet [--once ID --last ID --forbid ID]

What a user writes with pyarrow: per record batch (one thread, like `pytest
--tokaudit -n 0`), the list lengths, the flat ids with each id's row, and
numpy.bincount for the per-row token counts. Same contract, input and output
as ref_duckdb_parquet.py.
"""

import argparse

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq

ONCE, LAST, FORBID = 163607, 163586, 163606


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("file")
    ap.add_argument("--once", type=int, default=ONCE)
    ap.add_argument("--last", type=int, default=LAST)
    ap.add_argument("--forbid", type=int, default=FORBID)
    a = ap.parse_args()

    records = checked = findings = sum_diff = sum_billed = 0
    columns = ["provider", "completion_tokens", "output_ids"]
    for batch in pq.ParquetFile(a.file).iter_batches(columns=columns, use_threads=False):
        records += batch.num_rows
        # a null or empty provider is a local run: skipped
        batch = batch.filter(pc.fill_null(pc.not_equal(batch.column("provider"), ""), False))
        n = batch.num_rows
        checked += n
        ids = batch.column("output_ids")
        lengths = pc.fill_null(pc.list_value_length(ids), -1).to_numpy()  # -1: null list
        rows = pc.list_parent_indices(ids).to_numpy()
        vals = pc.fill_null(pc.list_flatten(ids), -1).to_numpy()  # -1: null id
        billed = pc.fill_null(batch.column("completion_tokens"), -1).to_numpy()
        ids_ok = lengths >= 0
        ids_ok[rows[vals < 0]] = False
        ok = ids_ok & (billed >= 0)
        once = np.bincount(rows[vals == a.once], minlength=n)
        forbid = np.bincount(rows[vals == a.forbid], minlength=n)
        last = np.full(n, -1)
        nonempty = lengths > 0
        last[nonempty] = vals[np.cumsum(np.maximum(lengths, 0))[nonempty] - 1]
        diff = np.abs(billed - lengths)
        bad = ~ok | ((diff > 8) & (diff > billed // 50)) | (once != 1) | (last != a.last) | (forbid > 0)
        findings += int(bad.sum())
        sum_diff += sum(diff[ok].tolist())  # Python ints: an int64 sum can overflow
        sum_billed += sum(billed[ok].tolist())
    file_bad = sum_diff * 200 > sum_billed  # mean |diff| / mean billed > 0.5%
    mean_rel = sum_diff / sum_billed if sum_billed else 0.0
    print(f"records={records} checked={checked} findings={findings + file_bad} mean_rel={mean_rel:.5f}")


if __name__ == "__main__":
    main()
