"""One pass over one file (or byte range): parse, check, summarise."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from ..base.findings import Finding, HookError, as_findings, named
from ..base.text import size_text
from ..model.contract import Contract
from ..model.records import SKIPPED, AuditedRecord, ErrorLine, Record, Rejected, Unusable, Skipped
from ..model.summary import FileSummary, SummaryView
from ..sources.base import LfsPointer, ReadError
from ..sources.frames import boundaries
from ..sources.jsonl import Lines, is_compressed
from ..sources.lines import rows_before
from ..sources.parse import parse_line
from .observers import NONE, Observers, Sink

# Records are checked in batches so batch hooks (the tokenizer round trip) amortise their
# calls; the id budget bounds the memory a batch of parsed ids may take.
BATCH_RECORDS = 256


BATCH_IDS = 1 << 18


class PlainPass:
    """The per-line path over one part: each line parsed, checked in batches, summarised.

    audit() feeds it every line; the columnar path (columnar.py) only the lines it does
    not handle natively, so both give the same findings, ids and counts for them.
    """

    def __init__(self, contract: Contract, hook: Any, summary: FileSummary,
                 observers: Observers = NONE):
        self.contract, self.hook, self.summary = contract, hook, summary
        self.sink = observers.sink
        self.batch: list[Record] = []
        self.pending: list[Finding] = []  # findings of unusable lines, in line order with the batch
        self.unusable: list[Unusable] = []
        self.batch_ids = 0
        self.flushes = 0  # batches checked so far (progress lines follow them)
        self.limit = contract.max_line_bytes

    def take(self, line: int, body: bytes | int) -> None:
        """One non-blank line: its body stripped of white space, or its size if too long."""
        if not isinstance(body, int):
            self.take_parsed(line, parse_line(body, line, self.contract))
            return
        # Longer than the limit: read past, never held or parsed.
        summary = self.summary
        summary.records += 1
        summary.unreadable += 1
        self.pending.append(Finding(
            "line_length",
            # No line number of its own: in a shard it would be the shard's, under the
            # file's line in the finding's location.
            f"the line is {body:,} bytes, over the limit of {size_text(self.limit)} "
            "(tokaudit_max_line_bytes)",
            line,
        ))
        self.unusable.append(Unusable(line, None, None))
        if len(self.batch) + len(self.unusable) >= BATCH_RECORDS or self.batch_ids >= BATCH_IDS:
            self.flush()

    def take_parsed(self, line: int, parsed: Record | Rejected | Skipped | ErrorLine) -> None:
        """One record as parse_line (or, for the public API's dicts, parse_object) made it."""
        summary = self.summary
        summary.records += 1
        if parsed is SKIPPED:
            summary.skipped += 1
            return
        if type(parsed) is ErrorLine:  # no bad record: counted apart, listed by the join
            summary.errors += 1
            self.unusable.append(Unusable(line, parsed.record_id, None, parsed.data))
        elif type(parsed) is Rejected:
            self.pending += parsed.findings
            if parsed.data is not None:  # an object: which required fields it lacks
                summary.audited += 1
                summary.add_unchecked(parsed.missing, parsed.data)
            else:  # not a JSON object: no record to audit
                summary.unreadable += 1
            if parsed.count is not None:  # spend is spend, checkable or not
                summary.billed_unusable += parsed.count
                summary.unusable_billed += 1
            self.unusable.append(Unusable(line, parsed.record_id, parsed.count, parsed.data))
        else:
            assert type(parsed) is not Skipped  # for mypy: SKIPPED is its one value
            assert type(parsed) is not ErrorLine
            summary.audited += 1
            self.batch.append(parsed)
            self.batch_ids += parsed.n_ids
        if len(self.batch) + len(self.unusable) >= BATCH_RECORDS or self.batch_ids >= BATCH_IDS:
            self.flush()

    def flush(self) -> None:
        check_batch(self.batch, self.pending, self.unusable, self.contract, self.hook,
                     self.summary, self.sink)
        self.batch, self.pending, self.unusable, self.batch_ids = [], [], [], 0
        self.flushes += 1


def audit_lines(
    path: Path,
    contract: Contract,
    hook: Any,
    summary: FileSummary,
    start: int = 0,
    end: int | None = None,
    observers: Observers = NONE,
) -> None:
    """Read every line once, run every per-record check, fill `summary` (the plain path,
    which the columnar path is held to). Line numbers are relative to `start`."""
    plain = PlainPass(contract, hook, summary, observers)
    take = plain.take
    lines = Lines(path, start, end, plain.limit)
    meter, flushed = observers.meter, 0
    try:
        for line, body in lines:
            take(line, body)
            if plain.flushes != flushed and meter is not None:  # a line every interval
                flushed = plain.flushes
                meter.tick(summary.records, lines.offset)
    except LfsPointer as exc:
        summary.read_error = str(exc)
    except ReadError as exc:
        summary.read_error = read_error_text(exc, path, start, end, lines.lines)
    finally:
        summary.lines = lines.lines
        summary.blank += lines.blank
    plain.flush()
    if summary.read_error:
        summary.add_finding(Finding("read", summary.read_error))


def read_error_text(exc: Exception, path: Any, start: int, end: int | None, line: int) -> str:
    """A read error and the file's line after which it happened: a shard's `line` is its
    own, so the lines before the shard are counted (only now: the shard fails anyway)."""
    later = ""
    if end is not None and is_compressed(path):
        bounds = boundaries(path) if isinstance(path, Path) else None
        if bounds is not None and end < bounds[-1]:  # other shards read the frames after
            later = ("; the lines of the rest of the damaged frame cannot be counted: later "
                     "shards number their lines without them")
    if start:
        try:
            return f"{exc} (after line {rows_before(path, start) + line}){later}"
        except (OSError, ReadError):  # not countable: say whose line it is
            return f"{exc} (after line {line} of the shard){later}"
    return f"{exc} (after line {line}){later}"


RECORD, BATCH, FILE = ("pytest_tokaudit_check_record", "pytest_tokaudit_check_batch",
                       "pytest_tokaudit_check_file")


def answer(result: Any, name: str, hook: Any) -> list[Finding]:
    """A hook's answer as findings; a HookError names the hook, where it is, and the value."""
    try:
        return as_findings(result, name)
    except HookError as exc:
        raise named(exc, name, getattr(hook, name)) from None


def check_batch(
    batch: Sequence[AuditedRecord], found: list[Finding], unusable: Sequence[Unusable],
    contract: Contract, hook: Any, summary: FileSummary, sink: Sink | None = None,
    counted: Sequence[Any] | None = None, hooked: Sequence[Any] | None = None,
) -> None:
    """Every check's hooks on a batch, its findings into the summary and the sink; the
    kernel (kernel.py) adds the counts of `counted` only and hooks `hooked` only."""
    if contract.text_template is not None and batch and counted is None:  # ids from the text
        # (first; the kernel's rows, `counted` given, had theirs encoded with the chunk)
        from .template import rebuild  # a text template's tokenizer work, only then

        found.extend(rebuild(batch, contract))
    for record in batch if counted is None else counted:
        summary.add_counts(record.line, record.id, record.count, record.n_ids)
    for record in batch if hooked is None else hooked:
        for result in hook.pytest_tokaudit_check_record(record=record, contract=contract):
            for f in answer(result, RECORD, hook):
                if f.line is None:
                    f = Finding(f.check, f.message, record.line, record.id, f.allowable)
                found.append(f)
    if batch or unusable:
        for result in hook.pytest_tokaudit_check_batch(
            records=batch, contract=contract, summary=SummaryView(summary), unusable=unusable
        ):
            for f in answer(result, BATCH, hook):
                if f.line is None:  # which record? Guessing would blame the wrong line
                    raise HookError(
                        f"pytest_tokaudit_check_batch returned a finding without a line: "
                        f"{f.check}: {f.message}. Make it with record.finding(check, message), "
                        "so that it names its record; file-level findings belong in "
                        "pytest_tokaudit_check_file")
                found.append(f)
    # Hooks answer in their own order; the bounded list keeps the first lines of the file.
    found.sort(key=lambda f: f.line or 0)
    if found and sink is not None:  # --tokaudit-failures: every one, uncapped
        at = getattr(batch, "at_lines", None)  # the kernel's light rows: made only where found
        sink.write(found, batch if at is None else at({f.line for f in found}), unusable)
    summary.add_record_findings(found)


def check_file(path: Path, contract: Contract, hook: Any, summary: FileSummary) -> None:
    """Judge each check's allowable findings against the allowance (here, not in a check a
    plugin could turn off: without it every allowable finding would be forgiven), then run
    the per-file checks on the complete (whole or merged) summary."""
    for check, n in sorted(summary.outliers.items()):
        allowance = contract.allowance(check)  # tokaudit_prompt_count_outliers for the prompt's
        allowed = allowance.of(summary.audited)
        if n > allowed:
            what = {"count": "the count tolerance", "prompt_count": "the prompt count tolerance"}.get(
                check, f"{check} (an allowable finding)")
            of = f"at most {allowed} allowed ({allowance} of {summary.audited:,} audited)"
            # The same check's findings no allowance forgives (for the count: beyond
            # tokaudit_count_outlier_max) are listed too: the numbers must add up.
            never = summary.by_check.get(check, 0) - n
            if never > 0:
                why = "beyond tokaudit_count_outlier_max" if check == "count" else "not allowable"
                text = (f"{n + never} records break {what}, {never} of them {why} (never "
                        f"allowed); of the other {n}, {of}")
            else:
                text = f"{n} record{'s break' if n != 1 else ' breaks'} {what}, {of}"
            summary.add_finding(Finding(f"{check}_outliers", text))
    view = SummaryView(summary)
    for result in hook.pytest_tokaudit_check_file(path=path, summary=view, contract=contract):
        for f in answer(result, FILE, hook):
            summary.add_finding(f if f.line is None else Finding(f.check, f.message))
