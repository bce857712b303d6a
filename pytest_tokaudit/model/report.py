"""The machine-readable audit (--tokaudit-json), reading it back, and the baseline.

`write` never raises for a file-system problem and never writes through a stale temporary
file; `load` validates a report fully, for the baseline and the merge command alike, and
says which file, which entry and which field is wrong.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from itertools import islice
from typing import Any, Iterator, NoReturn, TypeGuard

import orjson

from .. import __version__
from ..base.findings import shown
from ..base.formats import location
from .contract import Contract
from .rules import signed_difference
from .summary import BUDGET, IDS, FileSummary, sums
from .values import MAX_SHOWN, ContractError

# 2: record ids moved into channels.ids; 3: runs of ids and lines packed (pack_runs).
# Older formats are still read.
FORMAT = 3


MIN_RUN = 3  # shorter runs stay literal values


def _counter(value: Any) -> tuple[str, int, int] | None:
    """(prefix, number, digits) of an id that counts: 41, "sample-000041"; else None."""
    if type(value) is int:
        return ("", value, 0) if value >= 0 else None
    if type(value) is not str:
        return None
    head = value.rstrip("0123456789")
    digits = value[len(head):]
    if not digits or not digits.isascii():
        return None
    return head, int(digits), len(digits)


def _nth(first: Any, k: int) -> Any:
    """The k-th value of a run that starts at `first` (an int, or prefix + zero-padded digits)."""
    if type(first) is int:
        return first + k
    head, number, width = _counter(first)  # type: ignore[misc]  # checked when read
    return head + str(number + k).zfill(width)


def pack_runs(values: list[Any]) -> list[Any]:
    """Record ids or line numbers, with each run of MIN_RUN or more values counting up by
    one (1, 2, 3 or "s-0007", "s-0008", ...) written as {"from": first, "n": length}.

    Counter ids and the lines of a file are such runs: 1.8M records pack into a few
    objects instead of 114 MB of lists. Other values stay as they are (an id is never an
    object, so the two cannot be confused)."""
    out: list[Any] = []
    i, n = 0, len(values)
    while i < n:
        first = values[i]
        j = i + 1
        counter = _counter(first)
        if type(first) is int and counter is not None:
            while j < n and type(values[j]) is int and values[j] == first + (j - i):
                j += 1
        elif counter is not None:
            head, number, width = counter
            while j < n and values[j] == head + str(number + j - i).zfill(width):
                j += 1
        if j - i >= MIN_RUN:
            out.append({"from": first, "n": j - i})
        else:
            out.extend(values[i:j])
        i = j
    return out


def unpack(packed: list[Any], name: str = "report") -> list[Any]:
    """The values of a packed channel (ids or lines); ReportError names what is malformed."""
    return unpack_runs(packed, name, _Checker(name))


def unpack_runs(packed: list[Any], at: str, v: _Checker) -> list[Any]:
    """The values pack_runs packed; a plain list reads as itself."""
    out: list[Any] = []
    for k, item in enumerate(packed):
        if type(item) is not dict:
            out.append(item)
            continue
        first, n = item.get("from"), item.get("n")
        if item.keys() != {"from", "n"} or _counter(first) is None:
            v.fail(f"{at}[{k}]", '{"from": a counter id or line, "n": length}', item)
        v.count(f"{at}[{k}].n", n, hi=2**40)
        assert isinstance(n, int)  # checked just above
        if type(first) is int:
            out.extend(range(first, first + n))
        else:
            out.extend(_nth(first, m) for m in range(n))
    return out


def iter_runs(packed: list[Any]) -> Iterator[Any]:
    """The values of a packed (validated) list, one at a time: nothing is built whole."""
    for item in packed:
        if type(item) is not dict:
            yield item
        elif type(item["from"]) is int:
            yield from range(item["from"], item["from"] + item["n"])
        else:
            first = item["from"]
            for m in range(item["n"]):
                yield _nth(first, m)


def is_packed(values: list[Any]) -> bool:
    return any(type(v) is dict for v in values)


def unpacked_chunks(ids: list[Any], lines: list[Any], size: int) -> Iterator[tuple[list[Any], list[Any]]]:
    """(ids, lines) of a packed ids channel entry, `size` at a time (the id index folds a
    report's millions of ids so, without a list of them all)."""
    each_id, each_line = iter_runs(ids), iter_runs(lines)
    while True:
        chunk = list(islice(each_id, size))
        if not chunk:
            return
        yield chunk, list(islice(each_line, len(chunk)))


class ReportError(ValueError):
    """A report that cannot be used; the message names the report and what is wrong in it."""


def file_entry(s: FileSummary) -> dict[str, Any]:
    """The summary as it travels, plus the derived figures people read."""
    entry = orjson.loads(s.to_json())
    entry.update(
        mean_billed=s.mean_billed,
        mean_counted=s.mean_counted,
        mean_absdiff=s.mean_absdiff,
        mean_ratio=s.mean_ratio,
        rt_ratio_mean=s.rt_ratio_mean,
        records_with_findings=s.bad_records + s.outlier_records,
        worst_records=[
            {"line": line, "location": location(s.path, line), "id": rid, "billed": billed,
             "counted": counted, "diff": signed_difference(billed, counted)}
            for _, line, rid, billed, counted in s.worst_records()
        ],
    )
    ids = entry.get("channels", {}).get(IDS)
    if ids:  # the one channel that grows with the records: counters and lines as runs
        entry["channels"][IDS] = [[shard, pack_runs(values), pack_runs(lines)]
                                  for shard, values, lines in ids]
    return entry


def build(
    files: list[FileSummary], outcomes: list[Any], contract: Contract, partial: str | None,
    baseline: dict[str, Any] | None = None,
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "tool": "pytest-tokaudit",
        "version": __version__,
        "format": FORMAT,
        "contract": contract.to_json(),
        "partial": partial,
        "totals": {"files": len(files), **sums(files, "records", "audited", "unreadable", "errors",
                                                 "billed", "counted", "findings")},
        "files": [file_entry(s) for s in files],
        "dataset": [o.to_json() for o in outcomes],
    }
    if baseline is not None:
        data["baseline"] = baseline
    return data


@dataclass
class Report:
    """A validated report: its contract, whole-file summaries and the baseline figures."""

    name: str  # the path as given, for messages
    contract: Contract
    files: list[FileSummary]
    partial: str | None
    metrics: dict[str, dict[str, float]]  # file path -> METRICS figures
    coverage: dict[str, Any] | None = None  # what the run covered (None: an older report)
    # A digest of the bytes each path key names, by key (None: an older report)
    contract_files: dict[str, str] | None = None


_COUNTS = (
    "lines", "blank", "records", "audited", "skipped", "unreadable", "errors", "checked", "billed",
    "counted", "absdiff", "max_absdiff", "findings", "allowable", "bad_records", "outlier_records",
    "rt_checked", "rt_changed", "collected", "records_with_findings",
)


_RATIOS = (
    "rt_ratio_sum", "rt_ratio_max", "mean_billed", "mean_counted", "mean_absdiff",
    "mean_ratio", "rt_ratio_mean",
)


_FINDING_KEYS = {"check", "message", "line", "record_id", "allowable"}


def validate(data: Any, name: str, ids: bool = True) -> Report:
    """Every field the merge command and the baseline read, checked; ReportError names it.

    Packed id runs stay packed (the id index unpacks them a chunk at a time); `ids=False`
    (the baseline, which compares per-file figures) drops them once their counts are
    checked. A file's ids may not outnumber its records, nor name lines past its end."""
    if not isinstance(data, dict) or data.get("tool") != "pytest-tokaudit":
        raise ReportError(f"{name} is not a pytest-tokaudit JSON report (--tokaudit-json)")
    v = _Checker(name)
    fmt = data.get("format")
    if not _is_int(fmt):
        v.fail("format", "an integer", fmt)
    if fmt > FORMAT:
        raise ReportError(f"{name}: written in report format {fmt} by a newer pytest-tokaudit; "
                          f"this one reads format {FORMAT}")
    if "contract" not in data:
        raise ReportError(f"{name}: contract is missing")
    try:
        contract = Contract.from_json(data["contract"])
    except ContractError as exc:
        raise ReportError(f"{name}: contract: {exc}") from None
    partial = data.get("partial")
    if partial is not None and not isinstance(partial, str):
        v.fail("partial", "null or a string", partial)
    v.list("files", data.get("files"))
    if "totals" in data:
        totals = v.object("totals", data["totals"])
        for key, value in totals.items():
            v.count(f"totals.{key}", value)
    if "dataset" in data and not isinstance(data["dataset"], list):
        v.fail("dataset", "a list", data["dataset"])
    files, metrics = [], {}
    where: dict[str, str] = {}  # path -> the entry that has it
    for i, entry in enumerate(data["files"]):
        summary, figures = _file(v, f"files[{i}]", entry, fmt == 1, ids)
        if summary.path in where:
            raise ReportError(f"{name}: files[{i}].path {summary.path!r} is also "
                              f"{where[summary.path]}.path")
        where[summary.path] = f"files[{i}]"
        files.append(summary)
        metrics[summary.path] = figures
    coverage = data.get("coverage")
    if coverage is not None and not _coverage_ok(coverage):
        raise ReportError(f"{name}: coverage is not a coverage section of a report")
    digests = data.get("contract_files")
    if digests is not None and not (isinstance(digests, dict) and all(
            isinstance(k, str) and isinstance(d, str) for k, d in digests.items())):
        v.fail("contract_files", "an object of digests by key", digests)
    return Report(name, contract, files, partial, metrics, coverage, digests)


def _coverage_ok(cov: Any) -> bool:
    lists = ("roots", "dataset", "audited", "unmatched")
    return (
        isinstance(cov, dict)
        and all(isinstance(cov.get(k), list) and all(isinstance(x, str) for x in cov[k]) for k in lists)
        and isinstance(cov.get("missing"), dict)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in cov["missing"].items())
        and type(cov.get("records")) is int and type(cov.get("errors")) is int
        and isinstance(cov.get("stopped"), str)
    )


def _file(v: _Checker, at: str, entry: Any, fmt_1: bool, keep_ids: bool = True
          ) -> tuple[FileSummary, dict[str, float]]:
    entry = v.object(at, entry)
    if "path" not in entry:
        raise ReportError(f"{v.name}: {at}.path is missing")
    if not isinstance(entry["path"], str) or not entry["path"]:
        v.fail(f"{at}.path", "a non-empty string", entry["path"])
    for key in _COUNTS:
        if key in entry:
            v.count(f"{at}.{key}", entry[key])
    if "max_shown" in entry:
        v.count(f"{at}.max_shown", entry["max_shown"], hi=MAX_SHOWN)
    for key in _RATIOS:
        if key in entry:
            v.ratio(f"{at}.{key}", entry[key])
    if entry.get("shard") is not None or entry.get("shards", 1) != 1:
        v.fail(f"{at}.shard", "null and shards 1 (a report holds whole files)",
               entry.get("shard"))
    if entry.get("read_error") is not None and not isinstance(entry["read_error"], str):
        v.fail(f"{at}.read_error", "null or a string", entry["read_error"])
    for key, n in v.object(f"{at}.by_check", entry.get("by_check", {})).items():
        v.count(f"{at}.by_check.{key}", n)
    for k, worst in enumerate(v.list(f"{at}.worst", entry.get("worst", []))):
        here = f"{at}.worst[{k}]"
        if not isinstance(worst, list) or len(worst) != 5:
            v.fail(here, "[absdiff, -line, id, billed, counted]", worst)
        v.count(f"{here}[0]", worst[0])
        if not _is_int(worst[1]) or worst[1] >= 0:
            v.fail(f"{here}[1]", "a line number, negated", worst[1])
        v.record_id(f"{here}[2]", worst[2])
        v.count(f"{here}[3]", worst[3])
        v.count(f"{here}[4]", worst[4])
    for key in ("shown", "shown_allowable", "shown_more", "file_findings"):
        for k, finding in enumerate(v.list(f"{at}.{key}", entry.get(key, []))):
            _finding(v, f"{at}.{key}[{k}]", finding)
    if "worst_records" in entry:
        v.list(f"{at}.worst_records", entry["worst_records"])
    own = entry.get("contract", {})
    if not (isinstance(own, dict) and all(isinstance(k, str) and isinstance(t, str)
                                          for k, t in own.items())):
        v.fail(f"{at}.contract", "an object of the file's own tokaudit_* keys", own)
    channels = entry.get("channels", {})
    if type(channels) is not dict or not all(type(c) is list for c in channels.values()):
        v.fail(f"{at}.channels", "an object of lists (per-check channels)", channels)
    if BUDGET not in channels and fmt_1:  # format 1 had no spend channel: its counts are it
        channels[BUDGET] = [[entry.get("billed", 0), entry.get("billed_unusable", 0),
                             entry.get("unusable_billed", 0)]]
        entry["channels"] = channels
    if "ids" in entry:  # format 1 kept the record ids beside the channels
        channels[IDS] = [[None, v.list(f"{at}.ids", entry.pop("ids")),
                          v.list(f"{at}.id_lines", entry.pop("id_lines", []))]]
        entry["channels"] = channels
    records, last = entry.get("records"), entry.get("lines")
    total = 0
    for e, chunk in enumerate(v.list(f"{at}.channels.{IDS}", channels.get(IDS, []))):
        here = f"{at}.channels.{IDS}[{e}]"
        if type(chunk) is not list or len(chunk) != 3 or chunk[0] is not None:
            v.fail(here, "[null, ids, lines] (a report holds whole files)", chunk)
        # Counted, never unpacked: a few bytes of runs may claim billions of ids.
        n_ids = _claimed(v, f"{here}[1]", v.list(f"{here}[1]", chunk[1]), "id")
        if records is not None and n_ids > records:
            raise ReportError(f"{v.name}: {here} claims {n_ids:,} ids for {records:,} records")
        n_lines = _claimed(v, f"{here}[2]", v.list(f"{here}[2]", chunk[2]), "line", last)
        if n_ids != n_lines:
            raise ReportError(f"{v.name}: {here} has {n_lines:,} lines for {n_ids:,} ids")
        total += n_ids
    if records is not None and total > records:
        raise ReportError(f"{v.name}: {at}.channels.{IDS} claims {total:,} ids for {records:,} records")
    if not keep_ids:
        channels.pop(IDS, None)
    known = {f.name for f in fields(FileSummary)}
    try:
        summary = FileSummary.from_json(orjson.dumps({k: entry[k] for k in known if k in entry}))
    except (TypeError, ValueError) as exc:  # a field FileSummary has and this check lacks
        raise ReportError(f"{v.name}: {at}: {exc}") from None
    figures = {name: entry[name] if name in entry else get(summary)
               for name, _, get, _ in METRICS}
    return summary, figures


def _claimed(v: _Checker, at: str, packed: list[Any], kind: str, last: int | None = None) -> int:
    """How many ids (or lines) a packed list holds, its runs and values checked, lines up
    to `last`; nothing unpacked."""
    total = 0
    for k, item in enumerate(packed):
        if type(item) is dict:
            first, n = item.get("from"), item.get("n")
            if item.keys() != {"from", "n"} or _counter(first) is None or (
                    kind == "line" and type(first) is not int):
                v.fail(f"{at}[{k}]", '{"from": a counter id or line, "n": length}', item)
            v.count(f"{at}[{k}].n", n)
            assert isinstance(n, int) and isinstance(first, (int, str))  # checked just above
            total += n
            top = first + n - 1 if type(first) is int else None
        else:
            if kind == "line":
                v.count(f"{at}[{k}]", item)
            else:
                v.record_id(f"{at}[{k}]", item, allow_none=False)
            total += 1
            top = item if kind == "line" else None
        if kind == "line" and last is not None and top is not None and top > last:
            raise ReportError(f"{v.name}: {at} names line {top:,} of a file of {last:,} lines")
    return total


def _finding(v: _Checker, at: str, finding: Any) -> None:
    finding = v.object(at, finding)
    extra = sorted(finding.keys() - _FINDING_KEYS)
    if extra:
        v.fail(at, f"a finding ({', '.join(sorted(_FINDING_KEYS))})", f"also {', '.join(extra)}")
    for key in ("check", "message"):
        if not isinstance(finding.get(key), str):
            v.fail(f"{at}.{key}", "a string", finding.get(key))
    if finding.get("line") is not None:
        v.count(f"{at}.line", finding["line"])
    v.record_id(f"{at}.record_id", finding.get("record_id"))
    if not isinstance(finding.get("allowable", False), bool):
        v.fail(f"{at}.allowable", "true or false", finding["allowable"])


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


class _Checker:
    """Type checks that raise ReportError('NAME: files[3].billed must be an integer')."""

    def __init__(self, name: str):
        self.name = name

    def fail(self, at: str, what: str, value: Any) -> NoReturn:
        raise ReportError(f"{self.name}: {at} must be {what}, got {shown(value, 60)}")

    def object(self, at: str, value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.fail(at, "an object", value)
        return value

    def list(self, at: str, value: Any) -> list[Any]:
        if not isinstance(value, list):
            self.fail(at, "a list", value)
        return value

    def count(self, at: str, value: Any, hi: int = 2**64 - 1) -> None:
        if not _is_int(value):
            self.fail(at, "an integer", value)
        if not 0 <= value <= hi:
            self.fail(at, f"an integer from 0 to {hi:,}", value)

    def ratio(self, at: str, value: Any) -> None:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            self.fail(at, "a number", value)
        if not math.isfinite(value) or value < 0:
            self.fail(at, "a non-negative number", value)

    def record_id(self, at: str, value: Any, allow_none: bool = True) -> None:
        if value is None and allow_none:
            return
        if not isinstance(value, str) and not _is_int(value):
            self.fail(at, "a record id (a string or an integer)", value)


METRICS = (
    ("mean_ratio", "mean |diff| / mean billed", lambda s: s.mean_ratio, "{:.3%}"),
    ("records_with_findings", "records with findings",
     lambda s: s.bad_records + s.outlier_records, "{:,}"),
    ("rt_ratio_mean", "mean round-trip ratio", lambda s: s.rt_ratio_mean, "{:.3%}"),
)


def regressions(current: FileSummary, base: dict[str, float], rel: float) -> list[str]:
    """What got worse than the baseline by more than `rel`."""
    out = []
    for name, label, get, fmt in METRICS:
        now, before = get(current), base[name]
        if now > before and now > before * (1 + rel) + 1e-12:
            out.append(f"{label} {fmt.format(before)} -> {fmt.format(now)}")
    return out
