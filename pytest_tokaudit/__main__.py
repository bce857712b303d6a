"""`python -m pytest_tokaudit merge a.json b.json`: one verdict from several runs' reports.

For audits split over CI jobs: each job writes --tokaudit-json; this combines them, prints
the summary table and evaluates the dataset checks on the union. Exit 0 passed, 1 failed,
2 usage error (a report that is not valid, a --json or --html target that cannot be written).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Sequence

import pytest

from . import hookspecs
from .base.atomic import check_writable
from .base.atomic import write as write_report
from .checks import DATASET, load
from .checks.dataset import evaluate
from .checks.ids import IdIndex
from .model import report as jsonreport
from .model.contract import Contract
from .model.outcome import Outcome
from .model.result import Coverage
from .outputs import html as html_report
from .outputs.terminal import summary_lines
from .run.coverage import coverage_outcome
from .sources.reports import load as load_report

# The dataset checks in the order evaluate() reports them; the last two need record ids.
CHECK_ORDER = ("budget", "unique_ids", "expected_ids")


ID_CHECKS = ("unique_ids", "expected_ids")


def id_checks(reports: list[jsonreport.Report]) -> tuple[Contract, list[Outcome]]:
    """The contract to judge the union with, and the id checks no verdict can be given for.

    A report keeps its files' record ids only when its run configured an id check. An id
    check that any report configured is judged when every report kept its ids (whichever
    comes first on the command line), and skipped, naming the reports, when one did not:
    a verdict on some of the ids would pass duplicates it never saw.
    """
    contract = reports[0].contract
    wanted = [name for name in ID_CHECKS if any(getattr(r.contract, name) for r in reports)]
    lacking = [r.name for r in reports if not r.keeps_ids]
    if lacking:
        reason = "; ".join(f"{name} was written with tokaudit_unique_ids = false: its ids "
                           "were not kept" for name in lacking)
        skipped = [Outcome(name, "skipped", reason) for name in wanted]
        # The merged report must not claim ids it lacks: a later merge skips these too.
        want = {"unique_ids": False, "expected_ids": ""}
    else:
        skipped = []
        manifest = next((r.contract.expected_ids for r in reports if r.contract.expected_ids), "")
        want = {"unique_ids": "unique_ids" in wanted, "expected_ids": manifest}
    changes = {k: v for k, v in want.items() if getattr(contract, k) != v}
    return (contract.replace_from("merge", **changes) if changes else contract), skipped


def standalone_hook(plugins: Sequence[str] = ()) -> Any:
    """The dataset hooks outside pytest (the merge command): the built-in checks and the
    given plugins, each a module name or a .py file such as a conftest.py."""
    import importlib
    import importlib.util

    import pluggy


    class Manager(pluggy.PluginManager):
        def parse_hookimpl_opts(self, plugin: Any, name: str) -> Any:
            # As pytest does for conftest.py: a function named like a hook is an implementation.
            opts = super().parse_hookimpl_opts(plugin, name)
            if opts is None and name.startswith("pytest_tokaudit_") and callable(getattr(plugin, name)):
                return {}
            return opts

    pm = Manager("pytest")
    pm.add_hookspecs(hookspecs)
    for name, check in load(DATASET).items():
        pm.register(check(), name)
    for spec in plugins:
        try:
            if spec.endswith(".py"):
                found = importlib.util.spec_from_file_location(
                    f"tokaudit_plugin_{len(pm.get_plugins())}", spec)
                if found is None or found.loader is None:  # not for a .py path: a file loader
                    raise ImportError(f"no loader for {spec}")
                module = importlib.util.module_from_spec(found)
                found.loader.exec_module(module)
            else:
                module = importlib.import_module(spec)
        except Exception as exc:  # noqa: BLE001 - the user's module: a usage error, not a traceback
            raise ValueError(f"--plugin {spec}: {type(exc).__name__}: {exc}") from None
        pm.register(module, spec)
    return pm.hook


def merge(paths: list[str], out: str | None, plugins: Sequence[str] = (),
          html: str | None = None) -> int:
    hook = standalone_hook(list(plugins))
    if out:
        check_writable(out, "--json")  # before any work, not after the verdict
    if html:
        check_writable(html, "--html")
    reports = [load_report(p) for p in paths]
    for report in reports[1:]:
        if report.contract_json != reports[0].contract_json:
            print(f"warning: {report.name} was made with another contract than {paths[0]}; "
                  f"using the first", file=sys.stderr)
    files = []
    seen: dict[str, str] = {}  # path -> the report that has it
    for report in reports:
        for summary in report.files:
            if summary.path in seen:
                raise ValueError(f"{summary.path} is in both {seen[summary.path]} and {report.name}")
            seen[summary.path] = report.name
            files.append(summary)
    files.sort(key=lambda s: s.path)
    contract, skipped = id_checks(reports)
    index = None
    if contract.unique_ids or contract.expected_ids:
        index = IdIndex()
        for summary in files:
            index.add(summary)
    cov = None
    coverages = [r.coverage for r in reports if r.coverage is not None]
    if len(coverages) == len(reports):
        # The union is judged as one run: complete when, together, the reports audited
        # every file of the dataset to the end.
        cov = Coverage.union(coverages)
        partial = cov.unjudgeable
        outcomes = [coverage_outcome(cov, contract)]
    else:  # a report of a version that did not record coverage
        partial = "; ".join(f"{r.name}: {r.partial}" for r in reports if r.partial) or None
        outcomes = []
    outcomes += evaluate(hook, files, index, contract, partial) + skipped
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
    except (ValueError, pytest.UsageError) as exc:  # ReportError, ContractError, check_writable
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
