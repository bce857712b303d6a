"""Reference audit in DuckDB SQL: read_ndjson_objects + the same contract.

    python ref_duckdb.py FILE [--threads N]

Each line is read as raw JSON (malformed lines become NULL via ignore_errors),
so non-objects and bad types are findings rather than load errors. Needs
duckdb >= 1.3 (lambda syntax). Output matches ref_orjson_loop.py.
"""

import argparse
import sys

ONCE, LAST, FORBID = 163607, 163586, 163606

SQL = """
WITH lines AS (
    SELECT json AS j FROM read_ndjson_objects($file, ignore_errors = true)
), fields AS (
    -- One multi-path extract: every separate j -> '$.x' would re-parse the line.
    SELECT
        j IS NULL OR json_type(j) <> 'OBJECT' AS not_object,
        json_extract(j, ['$.provider', '$.completion_tokens', '$.output_ids']) AS v
    FROM lines
), typed AS (
    SELECT
        not_object,
        -- falsy provider (missing, null, "", false, 0, [], {}) means a local run: skip
        NOT not_object
            AND (v[1] IS NULL OR v[1] IN ('null', '""', 'false', '0', '0.0', '[]', '{}')) AS skipped,
        coalesce(json_type(v[2]) = 'UBIGINT', false) AS billed_ok,
        CASE WHEN json_type(v[2]) = 'UBIGINT' THEN v[2]::UBIGINT::BIGINT END AS billed,
        -- json_structure is '["UBIGINT"]' only for arrays of non-negative ints and
        -- '["NULL"]' for [] (both merge away nulls, hence the count check below)
        CASE WHEN json_structure(v[3]) IN ('["UBIGINT"]', '["NULL"]') THEN v[3]::UBIGINT[] END AS ids
    FROM fields
), checked AS (
    -- All list checks in one projection over `ids`, so DuckDB builds each list once.
    SELECT
        not_object, skipped, billed, billed_ok,
        len(ids) AS n,
        ids IS NOT NULL AND len(ids) = list_count(ids) AS ids_ok,
        coalesce(len(list_filter(ids, lambda x: x = $once)) = 1
            AND ids[-1] = $last
            AND NOT list_contains(ids, $forbid), false) AS tokens_ok
    FROM typed
), verdict AS (
    SELECT
        skipped,
        CASE WHEN ids_ok AND billed_ok THEN abs(billed - n) END AS diff,
        CASE WHEN ids_ok AND billed_ok THEN billed END AS billed,
        not_object OR NOT ids_ok OR NOT billed_ok OR NOT tokens_ok
            OR (abs(billed - n) > 8 AND 50 * abs(billed - n) > billed) AS bad
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
