"""Write the benchmark table of a results file into docs/performance.md.

    python -m benchmarks.table RESULTS.json [MORE.json ...]   # replace the table between the markers
    python -m benchmarks.table RESULTS.json --print            # print it only

Several results files (one run per case, say) give one section each, in the order given.

The table goes between `<!-- bench-table:start -->` and `<!-- bench-table:end -->`; what
is around the markers is left as it is. A dry run's results (`run --dry`) are refused.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "performance.md"
START, END = "<!-- bench-table:start -->", "<!-- bench-table:end -->"

# Issue #32's targets: (case, row, at least this ratio against its reference, what it is)
TARGETS = [
    ("short", "pytest --tokaudit -n 0", 1.5, "`-n 0` vs the bare orjson loop, short records"),
    ("long", "pytest --tokaudit -n 0", 1.6, "`-n 0` vs the bare orjson loop, long records"),
    ("short", "pytest --tokaudit -n 2", 1.7, "`-n 2` vs `-n 0`, short records"),
    ("long", "pytest --tokaudit -n 2", 1.7, "`-n 2` vs `-n 0`, long records"),
]


def _num(x, digits=2) -> str:
    return "" if x is None else f"{x:.{digits}f}"


def _input(info: dict) -> str:
    parts = [info.get("file", "")]
    if "mb" in info:
        parts.append(f"{info['mb']:g} MB")
    if "records" in info:
        parts.append(f"{info['records']:,} records")
    return ", ".join(p for p in parts if p)


def render(results: dict) -> str:
    compare = results.get("compare")
    load = results["load_before"][0], results["load_after"][0]
    head = (results.get("git") or {}).get("head") or "?"
    lines = [
        f"Measured {results['date']} on {results['machine']['cpus']} cores, Python "
        f"{results['machine']['python']}, code {head[:9]}"
        + (" (uncommitted changes)" if (results.get("git") or {}).get("dirty") else "")
        + f"; size `{results['size']}`, medians of {results['repeat']} interleaved rounds; load average "
        f"{load[0]:.2f} before, {load[1]:.2f} after"
        + (" (a shared machine: read the ratios and CPU seconds, not the wall times)" if max(load) > 1.5 else "")
        + (f"; compared with {compare['rev']} ({compare['sha'][:9]})" if compare else "") + ".",
        "",
    ]
    header = ["case", "row", "wall s", "CPU s", "x ref", "x ref, CPU", "findings", "peak RSS MiB"]
    if compare:
        header += ["base wall s", "x base", "x base, CPU"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    rows = [r for r in results["rows"] if r["code"] == "tree"]
    base = {(r["case"], r["name"]): r for r in results["rows"] if r["code"] == "base"}
    seen = set()
    for r in rows:
        case = r["case"]
        if case not in seen:
            seen.add(case)
            label = f"**{case}** ({_input(r['input'])})" if r["input"] else f"**{case}**"
        else:
            label = ""
        name = r["name"] + (" (ref)" if r["is_ref"] else f" (vs {r['ref']})" if r["ref"] != _ref_of(rows, case) else "")
        if r["error"]:
            cells = [label, name, f"failed: {r['error'][:80]}", "", "", "", "", ""]
        else:
            cells = [label, name, _num(r["wall_s"]), _num(r["cpu_s"]), _num(r["ratio"]) + "x" * (r["ratio"] is not None),
                     _num(r["ratio_cpu"]) + "x" * (r["ratio_cpu"] is not None), r["findings"] or "",
                     _num(r.get("rss_mib"), 0)]
        if compare:
            b = base.get((case, r["name"]))
            cells += [_num(b["wall_s"]) if b else "", _num(r.get("vs_base")) + "x" * ("vs_base" in r),
                      _num(r.get("vs_base_cpu")) + "x" * ("vs_base_cpu" in r)]
        lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
    for name, why in results.get("skipped", {}).items():
        lines.append(f"| **{name}** | skipped: {why} |" + " |" * (len(header) - 2))
    targets = []
    for case, name, goal, what in TARGETS:
        r = next((r for r in rows if r["case"] == case and r["name"] == name), None)
        if r and r["ratio"] is not None:
            targets.append(f"| {what} | >= {goal}x | {r['ratio']:.2f}x | {'met' if r['ratio'] >= goal else '**missed**'} |")
    if targets:
        lines += ["", "| target (issue #32) | goal | measured | |", "|---|---|---|---|", *targets]
    if results.get("disagree"):
        lines += ["", "Rows that disagree on the findings: " + json.dumps(results["disagree"])]
    return "\n".join(lines)


def _ref_of(rows: list[dict], case: str) -> str | None:
    return next((r["name"] for r in rows if r["case"] == case and r["is_ref"]), None)


def write(doc: Path, table: str) -> None:
    text = doc.read_text()
    if START not in text or END not in text:
        raise SystemExit(f"{doc} has no {START} ... {END} markers")
    before, rest = text.split(START, 1)
    _, after = rest.split(END, 1)
    doc.write_text(f"{before}{START}\n{table}\n{END}{after}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+", help="JSON files written by python -m benchmarks.run")
    ap.add_argument("--doc", default=str(DOC), help="the Markdown file holding the markers")
    ap.add_argument("--print", action="store_true", help="print the table, write nothing")
    args = ap.parse_args(argv)
    every = [json.loads(Path(path).read_text()) for path in args.results]
    table = "\n\n".join(render(results) for results in every)
    if args.print:
        print(table)
        return 0
    dry = [path for path, results in zip(args.results, every) if results.get("dry")]
    if dry:
        print(f"{', '.join(dry)}: a dry run (run --dry), not a measurement: not written", file=sys.stderr)
        return 2
    write(Path(args.doc), table)
    print(f"wrote the table of {', '.join(args.results)} into {args.doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
