"""The audit core: the built-in count and structure checks over one batch of records.

Every source that reads records into columns hands a batch here: the JSONL chunks of the
columnar path (columnar.py), the public API's dicts (dicts.py), the record batches of a
Parquet or Arrow IPC file (arrow.py). A batch is its rows
(0..n-1, one per line or dict) in three kinds:

- parsed rows: their token ids as one flat int64 array (each row's `n_ids` of them, in row
  order), their billed counts and ids as Python values;
- odd rows: anything else (a blank line, an invalid one, a field of another type): the
  source's `take_odd(row)` hands each to the per-line path (plain.PlainPass), which words
  every finding;
- skipped rows (tokaudit_where), counted only.

`Kernel.fold` applies the count rule (model/rules.py: the one rule, element-wise) and the
structure rule with numpy, folds the records that pass into the FileSummary in bulk
(totals, worst records, figures), and calls the checks' own hooks only where the
per-line path would find something: the per-record hooks on the records that fail, as
light records (model.records.ColumnRecord: count, n_ids, last_id, count_each over their
slice of the ids), and the batch hooks on light rows of all (model.records.LightRow: the
built-in ones declare that is all they read, columnar.LIGHT). In full mode
(`fold(data=...)`: a check of the user's on Arrow rows) every hook gets every parsed row
whole, its `data` read on demand. A parsed row whose ids
the per-line path refuses (a negative id) is handed back as odd. The order of findings,
batches and summary is the per-line path's.
"""

from __future__ import annotations

import bisect
import functools
from typing import Any, Callable, Iterator, Sequence

from ..model.contract import Contract
from ..model.figures import SAMPLE, TAIL, Figures, diff_bins, length_bins, priorities
from ..model.records import ColumnRecord, Columns, LightRow
from ..model.rules import count_tolerance, signed_difference
from ..model.summary import FileSummary
from .plain import check_batch

I64_MAX = 2**63 - 1


WORST = 5


class Kernel:
    """The count and structure checks of one part, batch by batch, into its summary.

    `how` says which built-in per-record checks are registered (columnar.Plan); `plain`
    is the part's per-line path (PlainPass), flushed before each run of parsed rows so
    findings and batches stay in row order; its `sink` (--tokaudit-failures, the API's
    findings) gets every finding of a run of parsed rows, as the per-line path writes it.
    """

    def __init__(self, contract: Contract, how: Any, plain: Any, summary: FileSummary,
                 hook: Any):
        import numpy

        self.np = numpy
        self.contract, self.how, self.plain, self.summary, self.hook = (
            contract, how, plain, summary, hook)
        # int64 holds every token id: a contract's are u32 (model/values.MAX_TOKEN_ID).
        self.tokens = (contract.require_once_ids + contract.forbid_ids) if how.structure_check else ()
        self.last = numpy.array(contract.require_last_ids, dtype=numpy.int64)
        # What a source may write in the cells of `flat` between two rows' ids.
        self.filler = next(v for v in range(len(self.tokens) + 1) if v not in self.tokens)

    def judge(self, flat: Any, lens: Any, billed: Any, ends: Any) -> tuple[Any, Any, Any, Any]:
        """(ok, readable, |diff|, hits) of each row: within every rule, its ids readable
        (no negative one: a schema finding, which the per-line path words), billed -
        counted, and how often each token checked occurs in it. A row's ids are the `lens`
        before its `ends` in `flat`; between two rows there may be cells that are no id
        (a source's headers), holding `self.filler`: never negative nor a token."""
        np, contract, how = self.np, self.contract, self.how
        hits: dict[int, Any] = {}
        # One pass over the ids: the candidates are the ids at or above the least token
        # checked, and the negative ones (above every token as unsigned); the rest of
        # the work is on those few. Where they are many (a token id as small as the
        # common ones), each token gets its own pass.
        floor = min(self.tokens, default=I64_MAX)
        cand = np.flatnonzero(flat.view(np.uint64) >= floor)
        if len(cand) * 8 > len(flat):
            cand = None
            vals = flat
        else:
            vals, row_of = flat[cand], np.searchsorted(ends, cand, side="right")

        def per_row(mask: Any) -> Any:
            """How many elements of each row the mask over the candidates marks."""
            at = np.flatnonzero(mask)
            if cand is not None:
                return np.bincount(row_of[at], minlength=len(lens))
            return np.bincount(np.searchsorted(ends, at, side="right"), minlength=len(lens))

        negative = vals < 0
        ok = per_row(negative) == 0 if negative.any() else np.ones(len(lens), bool)
        readable = ok.copy()
        diff = np.abs(signed_difference(billed, lens))
        if how.count_check:  # model.rules' count rule, element-wise
            ok &= diff <= count_tolerance(contract, billed.astype(np.float64), np.maximum)
        if how.structure_check:
            for token in self.tokens:
                if token not in hits:
                    hits[token] = per_row(vals == token)
            for token in contract.require_once_ids:
                ok &= hits[token] == 1
            for token in contract.forbid_ids:
                ok &= hits[token] == 0
            if contract.require_last_ids:
                last = flat[np.maximum(ends - 1, 0)] if len(flat) else np.zeros(len(lens), np.int64)
                last = np.where(lens > 0, last, -1)  # -1: no tokens, never a token id
                ok &= np.isin(last, self.last)
        return ok, readable, diff, hits

    def fold(self, n: int, line0: int, odd: list[int], rows: list[int], flat: Any,
             n_ids: list[int], counts: list[int], record_ids: list[Any], skipped: int,
             take_odd: Callable[[int], None], starts: Any = None,
             fields: list[dict[tuple[str, ...], Any]] | None = None,
             ids: list[Any] | None = None, data: Callable[[int], Any] | None = None,
             blank: int = 0) -> None:
        """One batch of n rows, numbered line0 + 1 on: the parsed `rows` (with their ids in
        `flat`, `n_ids` of each from its `starts`, else one after the other, their billed
        `counts` and `record_ids`) checked and folded, the `odd` rows (sorted) handed to
        `take_odd` in their place. `fields` and `ids` (per parsed row, when a batch hook
        reads field paths or the ids) ride on the light records. With `data` (a parsed
        row's whole record, by its index in `rows`) every record goes to every hook whole.
        `blank` rows are neither: blank lines the source counted itself."""
        np, summary = self.np, self.summary
        if rows:
            lens = np.array(n_ids, dtype=np.int64)
            billed = np.array(counts, dtype=np.int64)
            if starts is None:
                ends = np.cumsum(lens)
                starts = ends - lens
            else:
                ends = starts + lens
            ok, readable, diff, hits = self.judge(flat, lens, billed, ends)
            good = np.flatnonzero(ok)
            # A record the count or structure rule fails is a record all the same: its
            # findings come from the checks' own hooks, called on it as a light record
            # over its slice of the ids (in `run`), not from a second parse.
            unread = np.flatnonzero(~readable)
            failed = np.flatnonzero(readable & ~ok)
            if len(unread):
                odd = sorted(odd + [rows[k] for k in unread.tolist()])
            if len(good):
                self.fold_clean(good, line0, rows, billed, lens, diff, counts, n_ids, record_ids)
            # Each failed row's slice and token counts, read column by column (numpy's
            # scalars cost ~0.3 us each, taken one at a time).
            counted = {t: h[failed].tolist() for t, h in hits.items()}
            bad = {k: (flat, s, e, {t: c[j] for t, c in counted.items()}) for j, (k, s, e) in
                   enumerate(zip(failed.tolist(), starts[failed].tolist(), ends[failed].tolist()))}
            good_rows = sorted(good.tolist() + list(bad)) if bad else good.tolist()
            whole = None
            if data is not None:  # full mode: each row's slice and counts as Python ints
                whole = (flat, starts.tolist(), ends.tolist(),
                         {t: h.tolist() for t, h in hits.items()}, data)
        else:
            good_rows, bad, whole = [], {}, None
        summary.records += n - len(odd) - blank  # PlainPass counts its own
        summary.skipped += skipped
        summary.audited += len(good_rows)
        # The batch hooks (the ids and budget channels) get the parsed rows as light
        # records, in line order with the per-line path's batches: each run of parsed rows
        # between two odd rows goes after the per-line path has flushed the lines before it.
        clean_rows = [rows[k] for k in good_rows]
        line_col = [line0 + r + 1 for r in clean_rows]
        id_col = record_ids if len(good_rows) == len(rows) else [record_ids[k] for k in good_rows]
        count_col = counts if len(good_rows) == len(rows) else [counts[k] for k in good_rows]
        at = 0
        for row in [*odd, n]:
            stop = bisect.bisect_left(clean_rows, row, at)
            if stop > at:
                self.plain.flush()
                self.run(_Rows(Columns(line_col[at:stop], id_col[at:stop], count_col[at:stop]),
                               good_rows[at:stop], n_ids, bad, fields, ids, whole))
                at = stop
            if row < n:
                take_odd(row)

    def fold_clean(self, good: Any, line0: int, rows: list[int], billed: Any, lens: Any,
                   diff: Any, counts: list[int], n_ids: list[int], record_ids: list[Any]) -> None:
        """FileSummary.add_counts for every clean row at once: totals, worst records, figures."""
        np, summary = self.np, self.summary
        summary.checked += len(good)
        summary.billed += int(billed[good].sum())
        summary.counted += int(lens[good].sum())
        worse = diff[good]
        summary.absdiff += int(worse.sum())
        summary.max_absdiff = max(summary.max_absdiff, int(worse.max()))
        some = good[worse > 0]
        if len(some):
            d = diff[some]
            top = some[np.lexsort((some, -d))[:WORST]]  # |diff| down, earliest line first
            for k in top.tolist():
                summary.rank(int(diff[k]), line0 + rows[k] + 1, record_ids[k], counts[k], n_ids[k])
        if summary.plotted:
            fold_figures(np, summary.figures, good, np.array(rows, dtype=np.int64) + line0 + 1,
                         billed, lens, diff, record_ids)

    def run(self, records: _Rows) -> None:
        """A run of parsed records through plain.check_batch: the per-record hooks on those
        the columns failed (the clean ones are folded already; on every one in full mode),
        then the batch hooks on all."""
        failed = list(records.failed())
        check_batch(records, [], [], self.contract, self.hook, self.summary, self.plain.sink,
                    failed, failed if records.whole is None else records)


class _Rows(Sequence[Any]):
    """A run of parsed records for the hooks: light records made only when read, and
    their columns (model.records.Columns) for the built-in batch hooks."""

    def __init__(self, columns: Columns, keys: list[int], n_ids: list[int],
                 bad: dict[int, tuple[Any, int, int, dict[int, int]]],
                 fields: list[dict[tuple[str, ...], Any]] | None = None,
                 ids: list[Any] | None = None, whole: tuple[Any, ...] | None = None):
        self.columns, self.keys, self.n_ids, self.bad = columns, keys, n_ids, bad
        self.fields = fields or None  # per row (as n_ids): the values of Plan.fields
        self.ids = ids  # per row: its ids as an int64 buffer (Plan.ids), else None
        self.whole = whole  # full mode: (flat, starts, ends, hits, data) of every row, lists
        self.made: dict[int, ColumnRecord] = {}  # a record is one object to all its readers

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        cols, k = self.columns, self.keys[i]
        values = self.fields[k] if self.fields is not None else None
        if self.whole is not None:  # full mode: a whole record, its data read on demand
            made = self.made.get(i)
            if made is None:
                flat, starts, ends, hits, data = self.whole
                made = self.made[i] = ColumnRecord(
                    cols.line[i], cols.id[i], cols.billed[i], self.n_ids[k], flat, starts[k],
                    ends[k], {t: h[k] for t, h in hits.items()}, values, functools.partial(data, k))
            return made
        if k in self.bad:
            made = self.made.get(i)
            if made is None:
                made = self.made[i] = ColumnRecord(cols.line[i], cols.id[i], cols.billed[i],
                                                   self.n_ids[k], *self.bad[k], values)
            return made
        return LightRow(cols.line[i], cols.id[i], cols.billed[i], self.n_ids[k], values,
                        self.ids[k] if self.ids is not None else None)

    def __iter__(self) -> Iterator[Any]:
        return (self[i] for i in range(len(self.keys)))

    def failed(self) -> Iterator[ColumnRecord]:
        keys = self.keys  # ascending
        for k in sorted(self.bad):
            i = bisect.bisect_left(keys, k)
            if i < len(keys) and keys[i] == k:  # this run's
                yield self[i]

    def at_lines(self, lines: set[Any]) -> list[Any]:
        """The records at these lines (the columns' lines are ascending)."""
        col = self.columns.line
        out = []
        for line in sorted(x for x in lines if x is not None):
            i = bisect.bisect_left(col, line)
            if i < len(col) and col[i] == line:
                out.append(self[i])
        return out


def fold_figures(np: Any, fig: Figures, good: Any, line_of: Any, billed: Any, lens: Any,
                 absdiff: Any, record_ids: list[Any]) -> None:
    """Figures.add for every clean row at once, through the array twins of its functions."""
    b, c, lines = billed[good], lens[good], line_of[good]
    d = signed_difference(b, c)
    _add(np, fig.diff, diff_bins(np, d))
    _add(np, fig.length, length_bins(np, c))
    h = priorities(np, b, c)
    take = np.flatnonzero(h < np.uint64(fig.cut))
    if len(take) > SAMPLE:  # the least SAMPLE (priority, line) of the chunk may enter
        take = take[np.lexsort((lines[take], h[take]))[:SAMPLE]]
    for j in take.tolist():
        g = int(good[j])
        fig.offer([int(h[j]), int(b[j]), int(c[j]), int(lines[j]), record_ids[g]])
    some = np.flatnonzero(d != 0)
    if len(some):  # the largest |diff| (earliest line first on a tie), as the tail keeps
        top = some[np.lexsort((lines[some], -absdiff[good][some]))[:TAIL]]
        for j in top.tolist():
            g = int(good[j])
            fig.offer_tail([int(absdiff[g]), -int(lines[j]), record_ids[g], int(b[j]), int(c[j])])


def _add(np: Any, counts: list[int], bins: Any) -> None:
    hist = np.bincount(bins, minlength=len(counts))
    for i in np.flatnonzero(hist).tolist():
        counts[i] += int(hist[i])
