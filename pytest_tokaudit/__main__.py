"""`python -m pytest_tokaudit merge a.json b.json`: one verdict from several runs' reports.

For audits split over CI jobs: each job writes --tokaudit-json; this combines them, prints
the summary table and evaluates the dataset checks on the union. Exit 0 passed, 1 failed,
2 usage error.
"""

from __future__ import annotations

import argparse
import sys

from . import jsonreport
from .contract import Contract, ContractError
from .dataset import evaluate
from .ids import IdIndex
from .report import summary_lines


def merge(paths: list[str], out: str | None) -> int:
    reports = [jsonreport.load(p) for p in paths]
    contract = Contract.from_json(reports[0]["contract"])
    for path, report in zip(paths[1:], reports[1:]):
        if report["contract"] != reports[0]["contract"]:
            print(f"warning: {path} was made with another contract than {paths[0]}; "
                  f"using the first", file=sys.stderr)
    files, seen = [], {}
    for path, report in zip(paths, reports):
        for summary in jsonreport.summaries(report):
            if summary.path in seen:
                raise ValueError(f"{summary.path} is in both {seen[summary.path]} and {path}")
            seen[summary.path] = path
            files.append(summary)
    files.sort(key=lambda s: s.path)
    index = None
    if contract.unique_ids or contract.expected_ids:
        index = IdIndex()
        for summary in files:
            index.add(summary)
    partial = "; ".join(f"{p}: {r['partial']}" for p, r in zip(paths, reports) if r.get("partial"))
    outcomes = evaluate(files, index, contract, partial or None)
    print("\n".join(summary_lines(files, contract)))
    # A whole file's summary already holds its file-level verdicts (outliers, mean, ...).
    failed_files = [s.path for s in files if s.bad_records or s.file_findings]
    print()
    for path in failed_files:
        print(f"FAILED {path}")
    for o in outcomes:
        print(f"{o.outcome.upper()} tokaudit::{o.name} - {o.message}")
        if o.outcome == "failed":
            for line in o.lines:
                print(f"    {line}")
    if out:
        jsonreport.write(out, jsonreport.build(files, outcomes, contract, partial or None))
    return 1 if failed_files or any(o.outcome == "failed" for o in outcomes) else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_tokaudit")
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("merge", help="combine --tokaudit-json reports of several runs")
    m.add_argument("reports", nargs="+", metavar="REPORT.json")
    m.add_argument("--json", metavar="PATH", help="write the combined report here")
    args = parser.parse_args(argv)
    try:
        return merge(args.reports, args.json)
    except (ValueError, ContractError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
