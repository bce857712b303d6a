"""Dataset-wide checks as plugins: what they judge (Dataset), how their verdicts are
gathered (evaluate), the built-in budget / unique ids / expected ids; merging shards.

A dataset check is declared by `pytest_tokaudit_dataset_checks` (so it is collected as
`pytest.ini::tokaudit::NAME` in every process) and judged by `pytest_tokaudit_check_dataset`
on the controller once every file is in, and by `python -m pytest_tokaudit merge`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..base.findings import implemented_by, shown
from ..base.hooks import hookimpl
from ..base.text import plural, printable
from ..model.contract import Contract, money
from ..model.outcome import Outcome
from ..model.records import columns_of
from ..model.summary import BUDGET, IDS, FileSummary, writable
from ..sources.remote import manifest_path

if TYPE_CHECKING:  # the id index loads only where ids are checked
    from ..model.idindex import IdIndex

MISSING_SHOWN = 10  # ranges of missing ids shown


DUPLICATES_SHOWN = 20


class Dataset:
    """What a dataset check judges (read-only): every file's summary, the ids, the coverage."""

    def __init__(self, files: list[FileSummary], ids: IdIndex | None, partial: str | None):
        self._files = tuple(files)
        self._ids = ids
        self._partial = partial

    @property
    def files(self) -> tuple[FileSummary, ...]:
        return self._files

    @property
    def ids(self) -> IdIndex | None:
        return self._ids

    @property
    def partial(self) -> str | None:
        """None when the run covered the whole dataset; else why not."""
        return self._partial

    def channel(self, name: str) -> list[tuple[str, list[Any]]]:
        """(path, values) of each file whose summary has values in channel `name`."""
        return [(s.path, s.channels[name]) for s in self._files if s.channels.get(name)]




def check_names(hook: Any, contract: Contract) -> list[str]:
    """The dataset checks the hooks declare, in order, each once (coverage not included)."""
    names: list[str] = []
    for result in reversed(hook.pytest_tokaudit_dataset_checks(contract=contract)):
        for name in [result] if isinstance(result, str) else result or ():
            if not isinstance(name, str) or not name.isidentifier():
                raise ValueError(f"pytest_tokaudit_dataset_checks: {name!r} is not a check name "
                                 "(letters, digits and _)")
            if name not in names and name != "coverage":
                names.append(name)
    return names


def outcome_problem(result: Outcome) -> str | None:
    """What of a check's Outcome cannot be reported; None when it can."""
    if result.outcome not in ("passed", "failed", "skipped"):
        return f"unknown outcome {shown(result.outcome)}; make it with Outcome.passed, .failed or .skipped"
    if type(result.message) is not str:
        return "its message must be a str"
    if type(result.lines) not in (list, tuple) or not all(type(line) is str for line in result.lines):
        return "its lines must be a list of str"
    return None


def evaluate(hook: Any, files: list[FileSummary], index: IdIndex | None, contract: Contract,
             partial: str | None) -> list[Outcome]:
    """Each declared dataset check's verdict. `partial` is None, or why the run is partial.

    A check judged on part of the dataset fails when the part alone breaks it, and is
    skipped otherwise: it never passes as if it had seen everything.
    """
    dataset = Dataset(files, index, partial)
    out = []
    for name in check_names(hook, contract):
        try:
            result = hook.pytest_tokaudit_check_dataset(name=name, dataset=dataset, contract=contract)
        except Exception as exc:  # a user's check: its error is its verdict, not a crash
            result = Outcome.failed(f"pytest_tokaudit_check_dataset raised {type(exc).__name__}: {exc}")
        if not isinstance(result, Outcome):
            result = Outcome.failed(
                "no pytest_tokaudit_check_dataset implementation returned an Outcome for it"
                if result is None else
                f"pytest_tokaudit_check_dataset returned {type(result).__name__}, not an Outcome")
        elif (problem := outcome_problem(result)) is not None:
            where = implemented_by(hook.pytest_tokaudit_check_dataset)
            result = Outcome.failed(f"pytest_tokaudit_check_dataset{f' (in {where})' if where else ''} "
                                    f"returned {shown(result)}: {problem}")
        # One line each, escaped: a check's message may quote data (a provider's name).
        result = Outcome(name, result.outcome, printable(result.message),
                         [printable(line) for line in result.lines])
        if partial and result.outcome == "passed":
            result = Outcome(name, "skipped",
                             f"partial run ({result.message} on the part audited): {partial}")
        out.append(result)
    return out


class BudgetCheck:
    """Billed tokens over every file under tokaudit_budget; unusable records' spend included."""

    @staticmethod
    def reads(contract: Contract) -> frozenset[str]:
        """What of a record its batch hook reads (engine/columnar.py hands light rows)."""
        return frozenset({"count"})

    @hookimpl
    def pytest_tokaudit_dataset_checks(self, contract):
        return [BUDGET] if contract.budget is not None else None

    @hookimpl
    def pytest_tokaudit_check_batch(self, records, unusable, summary):
        # Always filled (a few additions per batch), so a report written without a budget
        # can still be merged under one.
        values = writable(summary).channel(BUDGET)
        if not values:
            values.append([0, 0, 0])
        entry = values[-1]
        cols = columns_of(records)  # a columnar batch: one sum, no step per record
        entry[0] += sum(r.count for r in records) if cols is None else sum(cols.billed)
        for u in unusable:
            if u.billed is not None:  # spend is spend, checkable or not
                entry[1] += u.billed
                entry[2] += 1
        return None

    @hookimpl
    def pytest_tokaudit_check_dataset(self, name, dataset, contract):
        if name != BUDGET:
            return None
        spent = unusable = 0
        for _, values in dataset.channel(BUDGET):
            for billed, billed_unusable, n_unusable in values:
                spent += billed + billed_unusable
                unusable += n_unusable
        # A file that audited records but recorded no spend (its budget hook was turned
        # off, say) would make the sum too small: no verdict rather than a false pass.
        blind = [s.path for s in dataset.files if s.audited and not s.channels.get(BUDGET)]
        if blind:
            return Outcome.failed(f"no spend recorded for {plural(len(blind), 'file')}: "
                                  f"{', '.join(blind[:5])}{' ...' if len(blind) > 5 else ''}")
        cap = contract.budget
        share = f" ({spent / cap:.1%})" if cap else ""
        cost = f"; {money(spent, contract)} of {money(cap, contract)}" if money(1, contract) else ""
        message = f"billed {spent:,} of {cap:,} tokens{share}{cost}"
        if unusable:
            message += f", {plural(unusable, 'billed record')} with unusable ids included"
        if spent > cap:
            return Outcome.failed(f"over budget: {message}",
                                  [f"contract: {contract.describe(('budget',))}"])
        return Outcome.passed(message)


class IdsChannel:
    """Fills the IDS channel the id checks judge: each record's id and line, checkable or
    not (an unusable record's readable id still counts), one entry per part."""

    @staticmethod
    def reads(contract: Contract) -> frozenset[str]:
        """What of a record its batch hook reads (engine/columnar.py hands light rows)."""
        return frozenset({"line", "id"})

    @hookimpl
    def pytest_tokaudit_check_batch(self, records, unusable, contract, summary):
        if not (contract.unique_ids or contract.expected_ids):
            return None
        values = writable(summary).channel(IDS)
        if not values:
            values.append([summary.shard, [], []])
        _, ids, lines = values[-1]
        cols = columns_of(records)
        if cols is not None and not unusable and None not in cols.id:
            ids += cols.id  # a columnar batch: extended, no step per record
            lines += cols.line
            return None
        seen = [(r.line, r.id) for r in records if r.id is not None]
        if unusable:  # in line order, as the records came
            seen = sorted(seen + [(u.line, u.id) for u in unusable if u.id is not None])
        for line, record_id in seen:
            ids.append(record_id)
            lines.append(line)
        return None


class UniqueIdsCheck:
    """No record id twice across the dataset."""

    @hookimpl
    def pytest_tokaudit_dataset_checks(self, contract):
        return ["unique_ids"] if contract.unique_ids else None

    @hookimpl
    def pytest_tokaudit_check_dataset(self, name, dataset, contract):
        if name != "unique_ids":
            return None
        index = dataset.ids
        if index is None:
            return Outcome.skipped("no record ids were kept for this run")
        if index.overflow:
            return Outcome.failed(f"not judged: {index.overflow}")
        count = index.duplicate_count()
        if not count:
            return Outcome.passed(f"{plural(len(index), 'id')}, each once")
        # Each id named as its files' own contracts name it (a folder's may differ).
        names = {s.path: ".".join(s.id_path(contract.id_field)) for s in dataset.files}
        lines = []
        for (value, places), paths in zip(index.duplicates(DUPLICATES_SHOWN),
                                          index.duplicate_paths(DUPLICATES_SHOWN)):
            fields = [names.get(p, ".".join(contract.id_field)) for p in paths]
            if len(set(fields)) == 1:
                lines.append(f"{fields[0]}={value!r}: {len(places)} records: {', '.join(places)}")
            else:
                where = ", ".join(f"{place} ({name})" for place, name in zip(places, fields))
                lines.append(f"id {value!r}: {len(places)} records: {where}")
        if count > DUPLICATES_SHOWN:
            lines.append(f"... and {count - DUPLICATES_SHOWN:,} more duplicated ids")
        return Outcome.failed(
            f"{plural(count, 'id')} with more than one record "
            f"({plural(index.extra_records(), 'record')} counted twice)",
            lines,
        )


class ExpectedIdsCheck:
    """Every id of the tokaudit_expected_ids manifest has a record."""

    @hookimpl
    def pytest_tokaudit_dataset_checks(self, contract):
        return ["expected_ids"] if contract.expected_ids else None

    @hookimpl
    def pytest_tokaudit_check_dataset(self, name, dataset, contract):
        if name != "expected_ids":
            return None
        if dataset.partial:  # ids of files not audited would all look missing
            return Outcome.skipped(f"partial run: {dataset.partial}")

        from ..model.idindex import ranges, read_manifest

        path = manifest_path(contract.expected_ids)  # a Path, or a file at a URL
        try:
            expected = read_manifest(path, contract.id_field)
        except OSError as exc:
            return Outcome.failed(f"cannot read manifest {path}: {exc.strerror}")
        except ValueError as exc:  # a line without a usable id, or no ids at all
            return Outcome.failed(f"cannot use the manifest: {exc}")
        index = dataset.ids
        if index is not None and index.overflow:
            return Outcome.failed(f"not judged: {index.overflow}")
        missing = expected if index is None else index.missing(expected)
        if not missing:
            return Outcome.passed(f"all {len(expected):,} expected ids have a record")
        return Outcome.failed(
            f"{len(missing):,} of {len(expected):,} expected ids have no record",
            ["missing: " + ", ".join(ranges(missing, MISSING_SHOWN))
             + (" ..." if len(missing) > MISSING_SHOWN else "")],
        )
