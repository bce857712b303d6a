"""Reference audit in DuckDB SQL over a Parquet file: read_parquet + the same contract.

    python ref_duckdb_parquet.py FILE.parquet [--threads N]

The file is the typed twin `generate.py --parquet` writes: provider string,
completion_tokens int64, output_ids list<int64>. Unusable values are nulls, so
a null count or list, or a null or negative id, is a finding; a null or empty
provider is a local run and skipped. Output matches ref_duckdb.py.
"""

import argparse
import sys

ONCE, LAST, FORBID = 163607, 163586, 163606

SQL = """
WITH checked AS (
    -- Only the three columns the contract reads are read from the file.
    SELECT
        provider IS NULL OR provider = '' AS skipped,
        coalesce(completion_tokens >= 0, false) AS billed_ok,
        completion_tokens AS billed,
        len(output_ids) AS n,
        -- list_count skips nulls, list_min too (it is NULL for [])
        coalesce(len(output_ids) = list_count(output_ids)
            AND coalesce(list_min(output_ids) >= 0, true), false) AS ids_ok,
        coalesce(len(list_filter(output_ids, lambda x: x = $once)) = 1
            AND output_ids[-1] = $last
            AND NOT list_contains(output_ids, $forbid), false) AS tokens_ok
    FROM read_parquet($file)
), verdict AS (
    SELECT
        skipped,
        CASE WHEN ids_ok AND billed_ok THEN abs(billed - n) END AS diff,
        CASE WHEN ids_ok AND billed_ok THEN billed END AS billed,
        NOT ids_ok OR NOT billed_ok OR NOT tokens_ok
            -- diff > billed // 50 is 50 * diff > billed without overflow
            OR (abs(billed - n) > 8 AND abs(billed - n) > billed // 50) AS bad
    FROM checked
)
SELECT
    count(*) AS records,
    count(*) FILTER (WHERE NOT skipped) AS checked,
    count(*) FILTER (WHERE NOT skipped AND bad) AS findings,
    coalesce(sum(diff) FILTER (WHERE NOT skipped), 0) AS sum_diff,
    coalesce(sum(billed) FILTER (WHERE NOT skipped), 0) AS sum_billed
FROM verdict
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("file")
    ap.add_argument("--threads", type=int, help="DuckDB threads (default: all cores)")
    ap.add_argument("--once", type=int, default=ONCE)
    ap.add_argument("--last", type=int, default=LAST)
    ap.add_argument("--forbid", type=int, default=FORBID)
    a = ap.parse_args()
    try:
        import duckdb
    except ImportError:
        sys.exit("duckdb is not installed (pip install duckdb)")

    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")  # keep stdout to the one result line
    if a.threads:
        con.execute(f"SET threads = {a.threads}")
    params = {"file": a.file, "once": a.once, "last": a.last, "forbid": a.forbid}
    records, checked, findings, sum_diff, sum_billed = con.execute(SQL, params).fetchone()
    file_bad = sum_diff * 200 > sum_billed  # mean |diff| / mean billed > 0.5%
    mean_rel = sum_diff / sum_billed if sum_billed else 0.0
    print(f"records={records} checked={checked} findings={findings + file_bad} mean_rel={mean_rel:.5f}")


if __name__ == "__main__":
    main()
