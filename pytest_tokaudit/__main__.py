"""`python -m pytest_tokaudit merge a.json b.json`: one verdict from several runs' reports.

For audits split over CI jobs: each job writes --tokaudit-json; this combines them, prints
the summary table and evaluates the dataset checks on the union. Exit 0 passed, 1 failed,
2 usage error (a report that is not valid, a --json or --html target that cannot be written).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Sequence

from .api import judge
from .base.atomic import check_writable
from .base.atomic import write as write_report
from .base.urls import display_url, is_url
from .checks.standalone import standalone_hook
from .model import report as jsonreport
from .model.contract import KEYS_BY_ATTR, Contract
from .model.outcome import Outcome
from .model.result import Coverage
from .outputs import html as html_report
from .outputs.terminal import summary_lines
from .run.cache import contract_files, digest_file
from .run.coverage import coverage_outcome
from .sources.reports import load as load_report

# The dataset checks in the order evaluate() reports them.
CHECK_ORDER = ("budget", "unique_ids", "expected_ids")


def contract_differences(a: jsonreport.Report, b: jsonreport.Report) -> list[str]:
    """The keys two reports' contracts differ in, each as `key (a's value vs b's)`. A path
    key (the tokenizer, the manifest) is compared by the bytes it named where both reports
    say (another checkout's folder is the same contract), else as written."""
    ta, tb = a.contract.to_json(), b.contract.to_json()
    fa, fb = a.contract_files or {}, b.contract_files or {}
    out = []
    for key in sorted(set(ta) | set(tb)):
        if key in fa and key in fb:
            if fa[key] != fb[key]:
                out.append(f"{key} (other bytes at {display(ta.get(key))} and {display(tb.get(key))})")
        elif ta.get(key) != tb.get(key):
            out.append(f"{key} ({display(ta.get(key))} vs {display(tb.get(key))})")
    return out


def display(value: Any) -> str:
    text = "unset" if value in (None, "") else str(value)
    return display_url(text) if is_url(text) else text


def one_contract(reports: list[jsonreport.Report]) -> Contract:
    """The contract every report was written under; ValueError (a usage error, exit 2)
    naming the first pair that differs and how. Every pair is compared, so the answer does
    not depend on the order the reports are given in."""
    ordered = sorted(reports, key=lambda r: r.name)  # the same message in any order
    for i, a in enumerate(ordered):
        for b in ordered[i + 1:]:
            keys = contract_differences(a, b)
            if keys:
                raise ValueError(
                    f"{a.name} and {b.name} were written under different contracts: "
                    f"{'; '.join(keys)}. Their verdicts were made by different rules and the "
                    "union has no one contract to be judged by: merge the reports of one "
                    "contract (run every part with the same configuration)")
    return reports[0].contract


def same_files(reports: list[jsonreport.Report], contract: Contract) -> None:
    """The files the contract names (the manifest the merge reads again, the tokenizer a
    plugin's check may load) must hold the bytes each report recorded it was written under;
    ValueError (a usage error, exit 2) naming the key and the file. Otherwise the union would
    be judged by a manifest no part was judged by. A file not on this machine is not
    compared (a missing manifest fails expected_ids by itself; the merge loads no tokenizer)."""
    try:
        now = contract_files(contract)
    except (OSError, ValueError):  # the tokenizer is not here
        manifest = contract.expected_ids
        now = ({KEYS_BY_ATTR["expected_ids"].name: digest_file(manifest)}
               if manifest and not is_url(manifest) and os.path.isfile(manifest) else {})
    named = contract.to_json()
    for key, digest in sorted(now.items()):
        other = sorted(r.name for r in reports
                       if (r.contract_files or {}).get(key, digest) != digest)
        if other:
            raise ValueError(
                f"{key}: {display(named.get(key))} holds other bytes than when "
                f"{' and '.join(other)} {'was' if len(other) == 1 else 'were'} written: the "
                "reports were judged under another file; merge them with the file they were "
                "written under, or audit the parts again")


def union_coverage(cov: Coverage, contract: Contract) -> Outcome:
    """The coverage verdict of the final merge: the last word on the dataset, so a union
    that did not audit all of it (a folder no part audits, a part stopped or deselected)
    fails, where a part's own partial run only skips."""
    outcome = coverage_outcome(cov, contract)
    if outcome.outcome != "skipped":
        return outcome
    missing = [f"{path}: {why}" for path, why in sorted(cov.missing.items())]
    return Outcome("coverage", "failed",
                   f"the reports together did not audit the whole dataset: {cov.partial}",
                   missing[:20] + ([f"... and {len(missing) - 20} more"] if len(missing) > 20 else []))


def merge(paths: list[str], out: str | None, plugins: Sequence[str] = (),
          html: str | None = None) -> int:
    hook = standalone_hook(list(plugins))  # the built-in dataset checks, and the plugins
    if out:
        check_writable(out, "--json")  # before any work, not after the verdict
    if html:
        check_writable(html, "--html")
    reports = [load_report(p) for p in paths]
    contract = one_contract(reports)
    same_files(reports, contract)
    files = []
    seen: dict[str, str] = {}  # path -> the report that has it
    for report in reports:
        for summary in report.files:
            if summary.path in seen:
                raise ValueError(f"{summary.path} is in both {seen[summary.path]} and {report.name}")
            seen[summary.path] = report.name
            files.append(summary)
    files.sort(key=lambda s: s.path)
    cov = None
    coverages = [r.coverage for r in reports if r.coverage is not None]
    if len(coverages) == len(reports):
        # The union is judged as one run: complete when, together, the reports audited
        # every file of the dataset to the end.
        cov = Coverage.union(coverages)
        partial = cov.unjudgeable
        outcomes = [union_coverage(cov, contract)]
    else:  # a report of a version that did not record coverage
        lacking = ", ".join(r.name for r in reports if r.coverage is None)
        partial = f"{lacking} record no coverage"
        outcomes = [Outcome("coverage", "failed", (
            f"cannot tell whether the reports cover the dataset: {partial} (written by an "
            "older pytest-tokaudit); audit the parts again with this one"))]
    outcomes += judge(hook, contract, files, partial)  # the public API's judge_dataset
    order = ("coverage", *CHECK_ORDER)
    outcomes.sort(key=lambda o: order.index(o.name) if o.name in order else len(order))
    print("\n".join(summary_lines(files, contract)))
    # A whole file's summary already holds its file-level verdicts (outliers, mean, ...).
    failed_files = [s.path for s in files if s.failed]
    print()
    for path in failed_files:
        print(f"FAILED {path}")
    for o in outcomes:
        print(f"{o.outcome.upper()} tokaudit::{o.name} - {o.message}")
        if o.outcome == "failed":
            for line in o.lines:
                print(f"    {line}")
    if out:
        data = jsonreport.build(files, outcomes, contract, partial)
        if cov is not None:
            data["coverage"] = cov.to_json()  # so the merged report can be merged again
        if all(r.contract_files is not None for r in reports):
            data["contract_files"] = reports[0].contract_files
        problem = write_report(out, data)
        if problem:
            print(f"error: {problem}", file=sys.stderr)
            return 2
    status = 1 if failed_files or any(o.outcome == "failed" for o in outcomes) else 0
    if html:
        page = html_report.build(files, outcomes, contract, status, partial,
                                 title=" + ".join(r.name for r in reports))
        problem = html_report.write_page(Path(html), page)
        if problem:
            print(f"error: {problem}", file=sys.stderr)
            return 2
    return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_tokaudit")
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("merge", help="combine --tokaudit-json reports of several runs")
    m.add_argument("reports", nargs="+", metavar="REPORT.json")
    m.add_argument("--json", metavar="PATH", help="write the combined report here")
    m.add_argument("--html", metavar="PATH",
                   help="write the combined audit as one self-contained HTML page with plots")
    m.add_argument("--plugin", metavar="MODULE_OR_FILE", action="append", default=[],
                   help="also run the dataset checks of this module or .py file (a conftest.py)")
    args = parser.parse_args(argv)
    try:
        return merge(args.reports, args.json, args.plugin, args.html)
    except ValueError as exc:  # ReportError, ContractError, check_writable's Unwritable
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
