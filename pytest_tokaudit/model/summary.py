"""FileSummary: what one audit item saw, small enough to travel in a test report."""

from __future__ import annotations

import ast
import base64
import bisect
import re
from array import array
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Mapping

import orjson

from ..base.fields import closest_paths, paths_of
from ..base.findings import Finding, HookError
from ..base.text import printable
from .figures import Figures, GroupFigures, rt_bin


def merge_parts(parts: list[FileSummary],
                offsets: dict[int | None, int] | None = None) -> FileSummary:
    """Shards of one file made into a summary of the whole file (or of the shards given).

    `offsets` maps a shard to the lines before it; without it the shards must be
    contiguous from the first, and each starts where the one before ended.
    """
    parts = sorted(parts, key=lambda s: s.shard or 0)
    whole = FileSummary.from_json(parts[0].to_json())
    whole.rebase(offsets.get(whole.shard, 0) if offsets else 0)
    for part in parts[1:]:
        part = FileSummary.from_json(part.to_json())
        part.rebase(offsets[part.shard] if offsets else whole.lines)
        whole.merge(part)
    whole.shard, whole.shards = None, 1
    whole.complete = all(p.complete for p in parts) and len(parts) == parts[0].shards
    return whole


WORST = 5


SEEN_PATHS = 200  # field paths kept from records that lack a required field


PROPERTY = "tokaudit"  # the user_properties name a summary travels under


# The channel of record ids (dataset.IdsChannel fills it; idindex.IdIndex reads it): entries
# [shard, ids, lines], lines relative to the shard until rebase() makes them the file's.
# The controller folds them into its id index and drops them, or, for --tokaudit-json,
# keeps them packed as runs (jsonreport.pack_runs).
IDS = "ids"
GROUPS = "groups"  # per group of field values: [values, records, billed, counted, |diff|]
BUDGET = "budget"  # channel: per part [billed, billed of unusable records, how many of them]
UNIQUE_TEXT = "unique_text"  # per record: [digest of its ids, line, id, shard]
# Filled by the built-in checks alone (through writable(summary)), read in these shapes.
# The whole bill's (checks/prompt.py, join.py, money.py): "prompt", "join", "spend".
BUILT_IN = frozenset({IDS, GROUPS, BUDGET, UNIQUE_TEXT, "prompt", "join", "spend"})


BIG_INT = re.compile(rb"\d{20}")


def _shifted(lines: list[Any], offset: int) -> list[Any]:
    """Line numbers `offset` later; runs packed by jsonreport.pack_runs ({"from", "n"},
    which the controller keeps for the JSON report) shift their first line."""
    return [v + offset if type(v) is int else {"from": v["from"] + offset, "n": v["n"]}
            for v in lines]


def _RANK(entry: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(entry[:2])


@dataclass
class FileSummary:
    """Counts, sums, the worst records and a bounded list of findings for one file or shard.

    Lines in `shown` and `worst` are relative to `first_line` - 1 until `rebase` for shards.
    """

    path: str
    shard: int | None = None  # shard index; None for a whole file
    shards: int = 1
    max_shown: int = 20
    lines: int = 0  # physical lines read
    blank: int = 0
    records: int = 0  # non-blank lines
    audited: int = 0  # records the `where` filter let through (valid or not)
    skipped: int = 0
    # Non-blank lines (rows) that could not be read as a record at all: not JSON, not an
    # object, over tokaudit_max_line_bytes. records = audited + skipped + unreadable + errors.
    unreadable: int = 0
    errors: int = 0  # an API's error lines (with tokaudit_requests): answers, not bad records
    checked: int = 0  # audited records well-formed enough to check
    billed: int = 0
    # Records that could not be checked (ids unusable, say) but whose billed count is valid:
    # their spend, and how many. The budget must see it: see billed_total.
    billed_unusable: int = 0
    unusable_billed: int = 0
    counted: int = 0
    absdiff: int = 0
    max_absdiff: int = 0
    # (absdiff, -line, record id, billed, counted) of the worst, least bad first (worst_records)
    worst: list[tuple[Any, ...]] = field(default_factory=list)
    findings: int = 0
    allowable: int = 0
    # Allowable findings per check: each check's allowance is judged on its own, so one
    # check's outliers never use up another's (checks/record.py: <check>_outliers).
    outliers: dict[str, int] = field(default_factory=dict)
    bad_records: int = 0  # records with a finding no allowance forgives
    outlier_records: int = 0  # records whose only findings are allowable
    by_check: dict[str, int] = field(default_factory=dict)
    shown: list[Finding] = field(default_factory=list)  # first `max_shown`, not allowable
    shown_allowable: list[Finding] = field(default_factory=list)
    # Findings past `max_shown` that are not "missing field" ones (the first `max_shown`):
    # a field no record has fills `shown`, and its findings are said once for the file;
    # these are the file's other findings shown in their place (shown_findings).
    shown_more: list[Finding] = field(default_factory=list)
    file_findings: list[Finding] = field(default_factory=list)
    rt_checked: int = 0
    rt_changed: int = 0
    rt_ratio_sum: float = 0.0
    rt_ratio_max: float = 0.0
    read_error: str | None = None
    complete: bool = False  # the audit ran to the end (not timed out, crashed, interrupted)
    # A shard's first byte (JSONL) or the rows before it (Parquet); its lines are relative
    # to its part until rebased.
    start: int = 0
    # Per-check channels: name -> JSON-able values a check's batch hook fills for its
    # dataset check (IDS: the record ids, for unique_ids and expected_ids).
    channels: dict[str, list[Any]] = field(default_factory=dict)
    cached: bool = False  # reused from the cache (run/cache.py); merged: every part was
    # What the HTML report plots (model/figures.py): bounded histograms, a sample and the
    # outliers of the file, and of each group with tokaudit_group_by.
    figures: Figures = field(default_factory=Figures)
    group_figures: GroupFigures = field(default_factory=GroupFigures)
    # Whether the audit computed them: not when no output draws them (run/keys.FIGURES);
    # such a summary never stands in for one that must (run/cache.reuse).
    plotted: bool = True
    # The id field the file was audited with (its own contract's, after any
    # pytest_tokaudit_contract hook), dotted; "" when its records have no id. Every view
    # labels the file's ids with it. None: a report from before it was kept.
    id_field: str | None = None
    # The keys of the file's own contract that differ from the run's (a folder's
    # pytest_tokaudit_contract hook), as an ini file writes them: every view judges and
    # shows the file by its own contract (own_contract).
    contract: dict[str, str] = field(default_factory=dict)
    # Records that parsed as objects but could not be checked; per required field, how many
    # of them lacked it; and the paths of the first few such records. A field that every
    # object lacks is a typo or a wrong contract, said once for the file (absent_fields).
    unchecked: int = 0
    missing: dict[str, int] = field(default_factory=dict)
    seen_paths: list[str] = field(default_factory=list)

    # -- accumulation ------------------------------------------------------------------
    def id_path(self, fallback: tuple[str, ...]) -> tuple[str, ...]:
        """The id field the file's records were read with; `fallback` (the run's) when the
        summary does not say."""
        if self.id_field is None:
            return fallback
        return tuple(self.id_field.split(".")) if self.id_field else ()

    def add_counts(self, line: int, record_id: Any, billed: int, counted: int) -> None:
        self.checked += 1
        self.billed += billed
        self.counted += counted
        if self.plotted:
            diff = self.figures.add(line, record_id, billed, counted)  # |billed - counted|
        else:
            diff = billed - counted if billed >= counted else counted - billed
        self.absdiff += diff
        if diff > self.max_absdiff:
            self.max_absdiff = diff
        if diff:
            self.rank(diff, line, record_id, billed, counted)

    def rank(self, diff: int, line: int, record_id: Any, billed: int, counted: int) -> None:
        """Offer a record with |diff| > 0 to the worst records (add_counts does)."""
        self._offer((diff, -line, record_id, billed, counted))

    def _offer(self, entry: tuple[Any, ...]) -> None:
        # Kept sorted on (diff, -line), least bad first: the earliest line wins a tie, as in
        # a stable sort, and the list is the same whatever order records came in (the
        # columnar path offers them chunk by chunk, shards merge in any order).
        worst = self.worst
        if len(worst) >= WORST:
            if entry[:2] <= worst[0][:2]:
                return
            del worst[0]
        bisect.insort(worst, entry, key=_RANK)

    def add_finding(self, finding: Finding) -> None:
        self.findings += 1
        self.by_check[finding.check] = self.by_check.get(finding.check, 0) + 1
        if finding.line is None:
            self.file_findings.append(finding)
            return
        if finding.allowable:
            self.allowable += 1
            self.outliers[finding.check] = self.outliers.get(finding.check, 0) + 1
            if len(self.shown_allowable) < self.max_shown:
                self.shown_allowable.append(finding)
        elif len(self.shown) < self.max_shown:
            self.shown.append(finding)
        elif len(self.shown_more) < self.max_shown and not is_missing(finding):
            self.shown_more.append(finding)

    def add_record_findings(self, found: list[Finding]) -> None:
        """Findings of a run of records, in line order."""
        bad = {f.line for f in found if not f.allowable}
        self.bad_records += len(bad)
        self.outlier_records += len({f.line for f in found if f.allowable} - bad)
        for f in found:
            self.add_finding(f)

    def add_unchecked(self, missing: tuple[str, ...], data: Any) -> None:
        """A record that parsed as an object but could not be checked (model.records.Rejected)."""
        self.unchecked += 1
        for name in missing:
            self.missing[name] = self.missing.get(name, 0) + 1
        if missing and len(self.seen_paths) < SEEN_PATHS and data is not None:
            known = set(self.seen_paths)
            self.seen_paths += [p for p in paths_of(data) if p not in known][:SEEN_PATHS - len(known)]

    def add_roundtrip(self, ratio: float) -> None:
        self.rt_checked += 1
        if self.plotted:
            self.figures.rt[rt_bin(ratio)] += 1
        if ratio:
            self.rt_changed += 1
            self.rt_ratio_sum += ratio
            if ratio > self.rt_ratio_max:
                self.rt_ratio_max = ratio

    # -- derived -------------------------------------------------------------------------
    @property
    def failing(self) -> int:
        """Findings that fail the file, before the outlier allowance is applied."""
        return self.findings - self.allowable - len(self.file_findings)

    @property
    def failed(self) -> bool:
        """The verdict, the one rule every view uses: a finding no allowance can forgive,
        or a file-level finding (among them `<check>_outliers`: an allowance exceeded)."""
        return bool(self.failing or self.file_findings)

    def forgiven(self, check: str) -> bool | None:
        """Whether `check`'s allowable findings are forgiven: None for a shard, whose
        allowances are judged with the whole file (its [file] item)."""
        if self.shard is not None:
            return None
        return not any(f.check == f"{check}_outliers" for f in self.file_findings)

    def worst_records(self) -> list[tuple[int, int, Any, int, int]]:
        """(absdiff, line, id, billed, counted), worst first."""
        rows = [(d, -neg, i, b, c) for d, neg, i, b, c in self.worst]
        return sorted(rows, key=lambda r: (-r[0], r[1]))

    def absent_fields(self) -> list[tuple[str, int]]:
        """(field, records) of each required field that no record has (every record that
        parsed as an object lacks it): one file-level finding, not one per record."""
        objects = self.checked + self.unchecked
        return [(name, n) for name, n in self.missing.items() if n == objects]

    def absent_findings(self) -> list[Finding]:
        """The file-level findings absent_fields() gives, naming the closest paths seen."""
        out = []
        for name, n in self.absent_fields():
            close = closest_paths(name, self.seen_paths)
            top = [p for p in self.seen_paths if "." not in p]
            hint = (f"closest in the records: {', '.join(map(repr, close))}" if close else
                    f"the records have {', '.join(map(repr, top[:12]))}"
                    + (f" and {len(top) - 12} more fields" if len(top) > 12 else ""))
            out.append(Finding("schema", f"no record has field {name!r} (all {n:,} lack it: a "
                                         f"typo in the contract?); {hint}"))
        return out

    def shown_findings(self) -> list[Finding]:
        """The first `max_shown` findings at records that no allowance forgives, in line
        order, without the "missing field" ones of a field no record has (absent_fields)."""
        absent = {name for name, _ in self.absent_fields()}
        if not absent:
            return list(self.shown)
        keep = [f for f in self.shown if missing_name(f) not in absent]
        return (keep + self.shown_more)[:self.max_shown]  # both in line order, `more` later

    @property
    def billed_total(self) -> int:
        """Every valid billed count, including records whose ids were unusable."""
        return self.billed + self.billed_unusable

    @property
    def mean_billed(self) -> float:
        return self.billed / self.checked if self.checked else 0.0

    @property
    def mean_counted(self) -> float:
        return self.counted / self.checked if self.checked else 0.0

    @property
    def mean_absdiff(self) -> float:
        return self.absdiff / self.checked if self.checked else 0.0

    @property
    def mean_ratio(self) -> float:
        """mean |diff| / mean billed."""
        return self.absdiff / self.billed if self.billed else 0.0

    @property
    def rt_ratio_mean(self) -> float:
        return self.rt_ratio_sum / self.rt_checked if self.rt_checked else 0.0

    def channel(self, name: str) -> list[Any]:
        """A list a check of your own fills with JSON-able values (in its batch or file
        hook) for its dataset check, which reads it as `dataset.channel(name)`. A sharded
        file's lists are joined in shard order; lines in them stay relative to the shard
        (add `summary.start` rows for Parquet; JSONL shards start at byte `summary.start`)."""
        return self.channels.setdefault(name, [])

    # -- shards --------------------------------------------------------------------------
    def rebase(self, offset: int) -> None:
        """Make a shard's relative line numbers absolute: `offset` lines come before it."""
        if IDS in self.channels:
            self.channels[IDS] = [[None, ids, _shifted(lines, offset) if offset else lines]
                                  for _, ids, lines in self.channels[IDS]]
        if not offset:
            return
        self.figures.rebase(offset)
        self.group_figures.rebase(offset)
        for name in ("shown", "shown_allowable", "shown_more"):
            setattr(self, name, [replace(f, line=f.line + offset) for f in getattr(self, name)])
        self.worst = [(d, neg - offset, *rest) for d, neg, *rest in self.worst]

    def merge(self, other: FileSummary) -> None:
        """Fold a later shard of the same file into this one (lines already absolute)."""
        for name in (
            "lines", "blank", "records", "audited", "skipped", "unreadable", "errors", "checked",
            "billed", "counted", "absdiff", "findings", "allowable", "bad_records", "outlier_records",
            "rt_checked", "rt_changed", "billed_unusable", "unusable_billed", "unchecked",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.rt_ratio_sum += other.rt_ratio_sum
        self.max_absdiff = max(self.max_absdiff, other.max_absdiff)
        self.rt_ratio_max = max(self.rt_ratio_max, other.rt_ratio_max)
        known = set(self.seen_paths)
        self.seen_paths += [p for p in other.seen_paths if p not in known][:max(SEEN_PATHS - len(known), 0)]
        for mine, theirs in ((self.by_check, other.by_check), (self.outliers, other.outliers),
                             (self.missing, other.missing)):
            for check, n in theirs.items():
                mine[check] = mine.get(check, 0) + n
        for entry in other.worst:
            self._offer(tuple(entry))
        self.figures.merge(other.figures)
        self.group_figures.merge(other.group_figures)
        both = self.shown + other.shown
        self.shown = both[: self.max_shown]
        spilt = [f for f in both[self.max_shown:] if not is_missing(f)]
        self.shown_more = (self.shown_more + spilt + other.shown_more)[: self.max_shown]
        self.shown_allowable = (self.shown_allowable + other.shown_allowable)[: self.max_shown]
        self.file_findings += other.file_findings
        for name, values in other.channels.items():
            self.channels.setdefault(name, []).extend(values)
        self.read_error = self.read_error or other.read_error
        self.cached = self.cached and other.cached
        self.plotted = self.plotted and other.plotted
        self.shard, self.shards = None, 1

    # -- travel --------------------------------------------------------------------------
    def to_json(self) -> str:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        for name in ("shown", "shown_allowable", "shown_more", "file_findings"):
            data[name] = [f.to_json() for f in getattr(self, name)]
        data["figures"] = self.figures.to_json()
        data["group_figures"] = self.group_figures.to_json()
        if self.plotted:  # said only when not: reports and entries as before
            del data["plotted"]
        try:
            return orjson.dumps(data, default=_packed).decode()
        except TypeError:  # a sum past 64 bits (two counts near 2**64): Python ints hold it
            import json

            return json.dumps(data, default=_packed)

    @classmethod
    def from_json(cls, text: str | bytes) -> FileSummary:
        if BIG_INT.search(text if isinstance(text, bytes) else text.encode()):
            import json  # orjson would read an integer past 64 bits as a float

            data = json.loads(text)
        else:
            data = orjson.loads(text)
        known = {f.name for f in fields(cls)}
        data = {k: v for k, v in data.items() if k in known}
        for name in ("shown", "shown_allowable", "shown_more", "file_findings"):
            data[name] = [Finding.from_json(f) for f in data.get(name, [])]
        data["worst"] = [tuple(w) for w in data.get("worst", [])]
        data["figures"] = Figures.from_json(data.get("figures"))
        data["group_figures"] = GroupFigures.from_json(data.get("group_figures", []))
        return cls(**data)


def _packed(value: Any) -> str:
    """An array in a channel (a check's 64-bit values, grown over a part) as it travels:
    base64 of its bytes, which the check reads back with numpy.frombuffer."""
    if isinstance(value, array):
        return base64.b64encode(value.tobytes()).decode()
    raise TypeError(f"{type(value).__name__} is not JSON-able")


_MISSING = re.compile(r"(?:text_template: )?missing field ('(?:[^'\\]|\\.)*'|\"[^\"]*\")(?: \(|$)")


_RECORDS = re.compile(r'"records":(\d+)')


def records_of(text: str) -> int:
    """A summary's record count from its JSON (to_json) without reading the rest: the
    counts come before the findings and channels, which may be large."""
    m = _RECORDS.search(text, 0, 2000)
    return int(m.group(1)) if m else 0


def missing_name(finding: Finding) -> str | None:
    """The field a record's "missing field" finding names (sources/parse.py words them),
    else None."""
    if finding.check != "schema":
        return None
    m = _MISSING.match(finding.message)
    if m is None:
        return None
    return str(ast.literal_eval(m.group(1)))


def is_missing(finding: Finding) -> bool:
    return finding.check == "schema" and missing_name(finding) is not None


_HIDDEN = frozenset({"add_counts", "add_finding", "add_record_findings", "add_roundtrip",
                     "add_unchecked",
                     "rebase", "merge", "from_json"})


class SummaryView:
    """What the check hooks see of a FileSummary: every figure, read-only (lists come as
    tuples, dicts as read-only mappings), and `channel(name)`, the one thing a hook fills."""

    __slots__ = ("_summary",)
    _summary: FileSummary

    def __init__(self, summary: FileSummary):
        object.__setattr__(self, "_summary", summary)

    def channel(self, name: str) -> list[Any]:
        """See FileSummary.channel: a JSON-able list for your dataset check. The built-in
        checks' channels (BUILT_IN) are theirs alone: one filled by another hook would be
        read in their shape by the controller and the merge command."""
        if name in BUILT_IN:
            raise HookError(f"summary.channel({name!r}) is a channel of tokaudit's own built-in "
                            f"checks; name yours differently (e.g. 'my_{name}'). Built-in: "
                            f"{', '.join(sorted(BUILT_IN))}")
        return self._summary.channel(name)

    def __repr__(self) -> str:
        return f"<tokaudit summary of {self._summary.path}>"

    if TYPE_CHECKING:  # the figures, read-only to a type checker
        @property
        def path(self) -> str: ...
        @property
        def shard(self) -> int | None: ...
        @property
        def shards(self) -> int: ...
        @property
        def start(self) -> int: ...
        @property
        def lines(self) -> int: ...
        @property
        def records(self) -> int: ...
        @property
        def audited(self) -> int: ...
        @property
        def skipped(self) -> int: ...
        @property
        def unreadable(self) -> int: ...
        @property
        def errors(self) -> int: ...
        @property
        def checked(self) -> int: ...
        @property
        def billed(self) -> int: ...
        @property
        def counted(self) -> int: ...
        @property
        def absdiff(self) -> int: ...
        @property
        def max_absdiff(self) -> int: ...
        @property
        def findings(self) -> int: ...
        @property
        def allowable(self) -> int: ...
        @property
        def by_check(self) -> Mapping[str, int]: ...
        @property
        def outliers(self) -> Mapping[str, int]: ...
        @property
        def shown(self) -> tuple[Finding, ...]: ...
        @property
        def file_findings(self) -> tuple[Finding, ...]: ...
        @property
        def channels(self) -> Mapping[str, list[Any]]: ...
        @property
        def billed_total(self) -> int: ...
        @property
        def mean_billed(self) -> float: ...
        @property
        def mean_counted(self) -> float: ...
        @property
        def mean_absdiff(self) -> float: ...
        @property
        def mean_ratio(self) -> float: ...
        @property
        def rt_checked(self) -> int: ...
        @property
        def rt_ratio_mean(self) -> float: ...
        @property
        def read_error(self) -> str | None: ...
        @property
        def complete(self) -> bool: ...
        @property
        def failed(self) -> bool: ...
        def forgiven(self, check: str) -> bool | None: ...
        def worst_records(self) -> list[tuple[int, int, Any, int, int]]: ...
        def to_json(self) -> str: ...
    else:
        def __getattr__(self, name: str) -> Any:
            if name.startswith("_") or name in _HIDDEN:
                raise AttributeError(f"the summary handed to hooks has no {name!r} (read-only)")
            value = getattr(self._summary, name)
            if name == "channels":  # to read; summary.channel(name) is how one is filled
                return MappingProxyType({k: tuple(v) for k, v in value.items()})
            if type(value) is list:
                return tuple(value)
            if type(value) is dict:
                return MappingProxyType(value)
            return value

        def __setattr__(self, name: str, value: Any) -> None:
            raise AttributeError(f"the summary handed to hooks is read-only (cannot set "
                                 f"{name!r}); a hook fills summary.channel(name)")

        __delattr__ = __setattr__


def writable(summary: FileSummary | SummaryView) -> FileSummary:
    """The summary behind a view: for the built-in round trip, whose figures it keeps."""
    return summary._summary if isinstance(summary, SummaryView) else summary




def totals(values: list[Any]) -> dict[tuple[str, ...], list[int]]:
    """A channel's entries folded by group: values -> the sums of their numbers ([records,
    billed, counted, |diff|] for GROUPS; the prompt audit's add the uncountable records)."""
    out: dict[tuple[str, ...], list[int]] = {}
    for key, *numbers in values:
        acc = out.setdefault(tuple(key), [0] * len(numbers))
        for i, n in enumerate(numbers):
            acc[i] += n
    return out


def sums(files: list[FileSummary], *names: str) -> dict[str, int]:
    """Each named count summed over files, by name (the reports' totals)."""
    return {name: sum(getattr(s, name) for s in files) for name in names}


def label(fields: tuple[str, ...], key: tuple[str, ...]) -> str:
    return printable(", ".join(f"{f}={v}" for f, v in zip(fields, key)))
