"""The audit without pytest: a contract, a stream of records or a file, a dataset's verdicts.

The same checks and messages as ``pytest --tokaudit``, for a program that buys responses
and wants to stop spending the moment billing drifts, not after the dataset is bought::

    from pytest_tokaudit import api

    contract = api.Contract.from_dict({"tokaudit_require_last": "151645", "tokaudit_count_abs": 8})
    audit = api.audit_records(contract, responses())  # dicts, or JSON lines (str / bytes)
    for finding in audit:  # yielded as each record is checked
        print(finding.line, finding.id, finding.check, finding.message)
        if audit.summary.mean_diff > 2:
            break

``audit_file`` audits a whole file (JSONL, .gz/.zst, Parquet, Arrow IPC, or a URL through
fsspec) and returns its summary with every finding; ``judge_dataset`` runs the dataset
checks (budget, unique ids, expected ids, a plugin's own) over files' summaries.

pytest's items, the Ray engine's tasks and ``python -m pytest_tokaudit merge`` run the
audit through the functions of this module (``audit_part``, ``finish_file``, ``judge``),
so there is one workflow. Importing it does not import pytest (tests/test_api.py checks).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
from collections import Counter, deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import islice
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .base.findings import Finding
from .base.formats import data_suffixes
from .base.urls import display_url, is_url, scrub
from .checks import DATASET, RECORD, load
from .checks.dataset import IdsChannel, evaluate
from .checks.join import request_files
from .checks.standalone import standalone_hook
from .engine.observers import NONE, Observers, Recorder
from .engine.passes import audit
from .engine.plain import PlainPass, check_file
from .model import contract as _contract
from .model.contract import KEYS, KEYS_BY_ATTR, PATH_ATTRS, TOKEN_ATTRS, ContractError, Key, money, source_text
from .model.outcome import Outcome
from .model.spend import PriceError, load_table
from .model.summary import FileSummary
from .sources.base import WHOLE, Part
from .sources.jsonl import JSON_WS
from .sources.parquet import ParquetUnavailable
from .sources.parse import parse_object
from .sources.remote import (
    CHANGED,
    UNCHECKED,
    RemoteFile,
    RemoteUnavailable,
    Unlistable,
    describe,
    filesystem,
    list_root,
)
from .tokenizers.hf import TokenizerError, require_roundtrip
from .tokenizers.tiktoken import TiktokenError
from .tokenizers.tiktoken import locate as locate_tiktoken

__all__ = [
    "AuditFinding", "Contract", "ContractError", "FileAudit", "FileSummary", "Outcome",
    "RecordAudit", "Totals", "audit_file", "audit_records", "judge_dataset",
]


# -- the contract -----------------------------------------------------------------------------
class Contract(_contract.Contract):
    """The contract: every tolerance and field name, validated as pytest.ini is and with its
    token names resolved through its tokenizer when it is made. Make one with
    ``Contract.from_dict``, ``Contract.from_ini`` or ``Contract.from_json``; ``replace``
    changes values (validated again). A bad value raises ContractError naming the key.

    However it is made (``Contract(...)``, ``replace``, ``dataclasses.replace``), its token
    specs are resolved to ids when it is: the structure check never runs without them."""

    def __post_init__(self) -> None:
        super().__post_init__()
        for attr, ids in self.token_ids().items():
            object.__setattr__(self, attr, ids)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any], *, base_dir: str | os.PathLike[str] | None = None,
                  origin: str = "dict") -> Contract:
        """A contract from the ini's key names: ``{"tokaudit_count_abs": 8,
        "tokaudit_require_last": "<|im_end|>", "tokaudit_tokenizer": "tok/"}``. A value is
        written as in pytest.ini (``"2%"``) or as TOML holds it (``0.02``, ``true``, a list of
        words). Relative paths are relative to `base_dir` (default: the working directory).
        An unknown key is an error naming the closest known one."""
        if not isinstance(values, Mapping):
            raise ContractError(f"expected a mapping of tokaudit_* keys, got {values!r}")
        known = {k.name for k in KEYS}
        for name in values:
            if name not in known:
                import difflib  # here: only a misspelt key's message needs it (start-up)

                close = difflib.get_close_matches(str(name), sorted(known), n=1, cutoff=0.6)
                hint = f"did you mean {close[0]}?" if close else "see the Configuration reference"
                raise ContractError(f"{name} ({origin}): not a key of the contract; {hint}")
        folder = Path(base_dir) if base_dir is not None else Path.cwd()
        raw = {name: (value, origin, folder) for name, value in values.items()}
        return _resolved(cls, raw, check_remote=True)

    @classmethod
    def from_ini(cls, path: str | os.PathLike[str]) -> Contract:
        """The contract of an ini file's ``tokaudit_*`` keys: pytest.ini or tox.ini
        (``[pytest]``), setup.cfg (``[tool:pytest]``), pyproject.toml
        (``[tool.pytest.ini_options]``, or pytest 9's native ``[tool.pytest]``) or pytest.toml
        (``[pytest]``). Paths are relative to the file's folder, as in pytest. Keys that are
        not the contract's (the ``tokaudit`` switch, the outputs' settings) are not read."""
        path = Path(path)
        try:
            values = _ini_values(path)
        except Exception as exc:  # noqa: BLE001 - unreadable, not valid TOML or INI: say why
            raise ContractError(f"cannot read {path}: {exc}") from None
        raw = {k.name: (values[k.name], path.name, path.parent.absolute())
               for k in KEYS if k.name in values}
        return _resolved(cls, raw, check_remote=True)

    @classmethod
    def from_json(cls, texts: Any, origin: str = "report") -> Contract:
        """The contract a JSON report was written under (its ``contract`` object), resolved:
        token names need the tokenizer the report names."""
        try:
            return _as_api(_contract.Contract.from_json(texts, origin).resolve_tokens(), cls)
        except ValueError as exc:  # ContractError, or a tokenizer that cannot be loaded
            raise ContractError(scrub(str(exc))) from None


def _resolved(cls: type[Contract], raw: Mapping[str, tuple[Any, str, Path]],
              check_remote: bool) -> Contract:
    try:
        return _as_api(contract_from_values(raw, check_remote=check_remote), cls)
    except ValueError as exc:  # ContractError; TokenizerError, TiktokenError: cannot be used
        raise ContractError(scrub(str(exc))) from None


def _as_api(contract: _contract.Contract, cls: type[Contract] = Contract) -> Contract:
    """The same values as the public class (which adds the constructors alone)."""
    if isinstance(contract, cls):
        return contract
    values = {f.name: getattr(contract, f.name) for f in dataclasses.fields(contract)}
    new = object.__new__(cls)
    for name, value in values.items():
        object.__setattr__(new, name, value)
    return new


def _ini_values(path: Path) -> dict[str, Any]:
    """The keys of the pytest section of an ini or TOML file, as pytest reads them."""
    if path.suffix == ".toml":
        if sys.version_info >= (3, 11):
            import tomllib
        else:  # pytest's own dependency on 3.10
            import tomli as tomllib
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        if path.name == "pyproject.toml" or "tool" in data:
            tool = data.get("tool", {}).get("pytest", {})
            table = tool.get("ini_options", tool)
        else:  # pytest.toml, .pytest.toml
            table = data.get("pytest", {})
        return dict(table) if isinstance(table, dict) else {}
    import iniconfig  # what pytest reads ini files with (its dependency)

    ini = iniconfig.IniConfig(str(path), data=path.read_text(encoding="utf-8"))
    section = "tool:pytest" if path.name == "setup.cfg" else "pytest"
    return dict(ini[section].items()) if section in ini else {}


def contract_from_values(raw: Mapping[str, tuple[Any, str, Path]], *,
                         check_remote: bool = True) -> _contract.Contract:
    """The contract from each key's (value as written, where it came from, the folder a
    relative path in it is relative to); a key not given takes its default. The one
    validation of every way a contract is configured: the pytest plugin's (run/config.py,
    which makes the errors usage errors) and this module's constructors.

    A bad value is a ContractError `key (origin): why`; a tokenizer that cannot be loaded a
    ValueError (TokenizerError). `check_remote`: whether a manifest at a URL must exist now
    (an xdist worker never reads it)."""
    values: dict[str, Any] = {}
    sources: dict[str, tuple[str, str]] = {}
    for key in KEYS:
        value_raw, origin, folder = raw.get(key.name, (None, "default", Path.cwd()))
        if value_raw is None:
            value_raw, origin = key.default, "default"
        try:
            value = key.parse(value_raw)
            if key.attr == "expected_ids" and value and "://" in value:
                _check_url(value, check_remote)  # a manifest at a URL: read through fsspec
            elif key.attr == "requests" and is_url(value):  # read by offset: local files only
                raise ContractError(f"request files are read from local files only, not "
                                    f"{display_url(value)}: copy them next to the ini file")
            elif key.attr == "tokenizer" and value and value.startswith("tiktoken:"):
                name = value[len("tiktoken:"):].strip()  # an encoding, or a .tiktoken file
                if "/" in name or name.endswith(".tiktoken"):
                    value = "tiktoken:" + str(_relative_to(folder, name))
                try:
                    locate_tiktoken(value)  # there, or an error saying where to put it
                except TiktokenError as exc:
                    raise ContractError(str(exc)) from None
            elif key.attr in PATH_ATTRS and value:
                value = str(_relative_to(folder, value))
                _check_path(key, Path(value))
        except ContractError as exc:
            raise ContractError(f"{key.name} ({origin}): {exc}") from None
        values[key.attr] = value
        text = source_text(key, value_raw, value)
        if is_url(text):  # as shown in failure text and stored in reports: no credential
            text = display_url(text)
        sources[key.name] = (text, origin)
    contract = _contract.Contract(**values, sources=sources)
    if contract.roundtrip_rel is not None:
        require_roundtrip(contract.tokenizer)
    if contract.needs_tokenizer:
        contract.tokenizer_object()  # a bad directory is an error now, not per file
    if contract.text_template is not None:
        from .engine.template import check_literals  # here: a run without a template skips it

        check_literals(contract.text_template, contract.tokenizer_object())
    if contract.audits_prompts:  # no chat template: an error now, not per file
        from .tokenizers.chat import check_template  # here: a run without prompts skips it

        check_template(contract.tokenizer, contract.chat_template)
    if contract.prices:  # a table that cannot be used: an error now, not a crash per file
        try:
            load_table(contract.prices)
        except PriceError as exc:
            name = KEYS_BY_ATTR["prices"].name
            why = str(exc).removeprefix(f"{name}: ")
            raise ContractError(f"{name} ({sources[name][1]}): {why}") from None
    return contract.resolve_tokens()


def check_tokenizer(contract: _contract.Contract) -> None:
    """TokenizerError unless the contract's tokenizer loads where a check needs it (else: is
    there) and the round trip's library is installed where it is on: what a contract
    adjusted after the ini's (a folder's pytest_tokaudit_contract) is held to."""
    if contract.roundtrip_rel is not None:
        require_roundtrip(contract.tokenizer)
    if not contract.tokenizer:
        return
    if contract.needs_tokenizer:
        contract.tokenizer_object()  # loaded once per process
    elif contract.tokenizer.startswith("tiktoken:"):
        try:
            locate_tiktoken(contract.tokenizer)
        except TiktokenError as exc:
            raise TokenizerError(str(exc)) from None
    else:
        try:
            _check_path(KEYS_BY_ATTR["tokenizer"], Path(contract.tokenizer).expanduser())
        except ContractError as exc:
            raise TokenizerError(str(exc)) from None


def _check_path(key: Key, path: Path) -> None:
    """A configured directory or manifest that is not there: say so before auditing.

    Only a stat: the tokenizer itself (and transformers) is loaded when a check needs it.
    """
    if key.attr == "tokenizer" and not path.is_dir():
        what = "is not a directory" if path.exists() else "does not exist"
        raise ContractError(f"tokenizer directory {path} {what}; give a local directory "
                            "holding tokenizer.json / tokenizer_config.json")
    if key.attr == "cache_dir" and path.exists() and not path.is_dir():
        raise ContractError(f"cache folder {path} is not a directory")
    if key.attr == "requests" and not request_files(str(path)):
        raise ContractError(f"no request file matches {path}")
    if key.attr in ("chat_template", "prices", "expected_ids") and not path.is_file():
        what = "is not a file" if path.exists() else "does not exist"
        raise ContractError(f"{'manifest ' if key.attr == 'expected_ids' else ''}{path} {what}")


def _check_url(url: str, exists: bool) -> None:
    """A manifest URL: fsspec and its protocol installed (else name the extra) and, with
    `exists`, the file there (one request)."""
    try:
        fs, path = filesystem(url)
    except RemoteUnavailable as exc:
        raise ContractError(str(exc)) from None
    if not exists:
        return
    try:
        found = fs.isfile(path)
    except Exception as exc:  # noqa: BLE001 - any storage error: say which, no traceback
        raise ContractError(f"manifest {display_url(url)}: {describe(exc)}") from None
    if not found:
        raise ContractError(f"manifest {display_url(url)} does not exist")


def _relative_to(folder: Path, value: str) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() else folder / path


def ensure_resolved(contract: _contract.Contract) -> _contract.Contract:
    """The contract with its token specs resolved to ids: a contract made some other way
    (``dataclasses.replace``, the model's own ``from_json``) may not be, and its structure
    check would then pass every record."""
    for attr in TOKEN_ATTRS:
        if len(getattr(contract, attr + "_ids")) != len(getattr(contract, attr)):
            return contract.resolve_tokens()
    return contract


# -- the hooks --------------------------------------------------------------------------------
def check_hook(plugins: Sequence[Any] = (), disable: Iterable[str] = ()) -> Any:
    """The check hooks outside pytest: the built-in checks, registered under their names
    and in the order the plugin registers them (``disable``: names such as
    ``"tokaudit.roundtrip"`` left out, as ``-p no:tokaudit.roundtrip`` does), then `plugins`:
    objects or modules with ``pytest_tokaudit_*`` hook functions (a conftest.py module, an
    instance of a class), module names or paths of .py files."""
    if not plugins:  # the built-in checks keep no state: one relay serves every audit
        return _builtin_hook(frozenset(disable))
    return _check_hook(plugins, disable)


@functools.lru_cache(maxsize=8)
def _builtin_hook(disable: frozenset[str]) -> Any:
    # Building it registers ~20 hook implementations (~10 ms): a pipeline that audits each
    # batch of responses it buys would pay that every call.
    return _check_hook((), disable)


def _check_hook(plugins: Sequence[Any], disable: Iterable[str]) -> Any:
    off = set(disable)
    checks = {name: cls for name, cls in {**load(RECORD), **load(DATASET)}.items()
              if name not in off}
    checks["tokaudit.ids"] = IdsChannel  # not optional: the id checks read it
    named = [(f"plugin-{i}", p) for i, p in enumerate(plugins)
             if not isinstance(p, (str, os.PathLike))]
    paths = [os.fspath(p) for p in plugins if isinstance(p, (str, os.PathLike))]
    return standalone_hook(paths, checks=checks, named=named)


# -- one part of one file: what every engine runs ---------------------------------------------
def audit_part(source: Any, contract: _contract.Contract, hook: Any, summary: FileSummary,
               part: Part = WHOLE, observers: Observers = NONE) -> FileSummary:
    """Read one part of one file once through every per-record check into `summary`: what
    an audit item runs in the pytest process, on an xdist worker or as a Ray task."""
    audit(source, ensure_resolved(contract), hook, summary, part, observers)
    return summary


# What a summary's read error starts with when the file was not read to its end.
UNREAD = ("cannot open", "read failed", str(ParquetUnavailable()), CHANGED, UNCHECKED)


def finish_file(source: Any, contract: _contract.Contract, hook: Any, summary: FileSummary,
                whole: bool = True) -> FileSummary:
    """After the pass: a whole file's per-file checks (the allowances, the mean, a plugin's
    pytest_tokaudit_check_file), and whether it was read to its end. A file that could not
    be opened (deleted mid-run, say), a remote file whose connection failed or that changed
    since it was listed, was not audited to its end: the data may be fine, the audit did
    not see all of it."""
    if whole:
        check_file(source, contract, hook, summary)
    summary.complete = not (summary.read_error or "").startswith(UNREAD)
    return summary


def changed_since_listing(source: Any, summary: FileSummary) -> None:
    """A remote file is read by the size it was listed with: if the object is another one
    now (grown, shrunk, rewritten), what was read is not the object, whatever the reader
    made of it; the summary says so (a `read` finding), and the file counts as not audited
    to its end."""
    if (summary.read_error or "").startswith(("cannot open: no such file", "cannot open: access denied")):
        return  # deleted or denied before any byte was read: that finding says it
    why = source.changed()
    if why:
        summary.read_error = why
        summary.add_finding(Finding("read", why))
        # First: what the reader made of another object's bytes (a range past its end, a
        # footer that is not one) follows from it.
        summary.file_findings.insert(0, summary.file_findings.pop())


def new_summary(contract: _contract.Contract, display: str,
                base: _contract.Contract | None = None, figures: bool = True) -> FileSummary:
    """The empty summary of a file's audit; `base`: the run's contract, whose keys this
    file's contract changes are kept in the summary; `figures`: whether the audit computes
    the HTML report's figures (FileSummary.plotted)."""
    return FileSummary(path=display, max_shown=contract.max_shown,
                       id_field=".".join(contract.id_field),
                       contract=contract.differences(base) if base is not None else {},
                       plotted=figures)


# -- findings and totals ----------------------------------------------------------------------
@dataclass(frozen=True)
class AuditFinding:
    """One thing wrong: at a record (``line``, its 1-based position in the stream or file;
    ``id``; ``billed`` and ``counted`` when they could be read) or of the whole file
    (``line`` None). ``allowable``: the outlier allowance may forgive it."""

    line: int | None
    id: str | int | None
    check: str
    message: str
    billed: int | None = None
    counted: int | None = None
    allowable: bool = False

    @classmethod
    def of_entry(cls, entry: Mapping[str, Any]) -> AuditFinding:
        return cls(entry["line"], entry["id"], entry["check"], entry["message"],
                   entry["billed"], entry["counted"], entry["allowable"])

    @classmethod
    def of_file(cls, finding: Finding) -> AuditFinding:
        return cls(None, None, finding.check, finding.message, allowable=finding.allowable)


@dataclass(frozen=True)
class Totals:
    """The counts so far. ``billed`` includes records whose ids could not be checked (spend
    is spend); ``counted`` and the differences are over checked records."""

    records: int  # records read (non-blank lines, dicts)
    audited: int  # records the tokaudit_where filter let through
    skipped: int
    checked: int  # audited records well-formed enough to check
    billed: int
    counted: int
    findings: int  # findings so far (at records and, once the stream ends, of the file)
    bad_records: int  # records with a finding no allowance forgives
    mean_diff: float  # mean |billed - counted| per checked record
    drift: float  # sum |billed - counted| / billed tokens of checked records
    spend: float | None  # billed * tokaudit_price_per_mtok / 1e6, when priced
    spend_text: str  # spend as the summary table shows it ("$1.25"), or ""
    unreadable: int = 0  # lines that are no record (not a JSON object, over the line limit)
    errors: int = 0  # error answers counted apart (OpenAI Batch error lines, with tokaudit_requests)

    @classmethod
    def of(cls, summary: FileSummary, contract: _contract.Contract) -> Totals:
        billed = summary.billed_total
        price = contract.price_per_mtok
        return cls(summary.records, summary.audited, summary.skipped, summary.checked, billed,
                   summary.counted, summary.findings, summary.bad_records, summary.mean_absdiff,
                   summary.mean_ratio, None if price is None else billed * price / 1e6,
                   money(billed, contract), summary.unreadable, summary.errors)


# -- a stream of records ----------------------------------------------------------------------
class RecordAudit(Iterator[AuditFinding]):
    """The findings of a stream of records, yielded as each record is checked (the records
    are read only as the findings are asked for); ``summary`` is readable at any time. Once
    the stream ends, the per-file checks run (the mean, the outlier allowance) and their
    findings follow, with ``line`` None; ``file_summary`` is then what a pytest item of the
    same records reports."""

    def __init__(self, contract: _contract.Contract, records: Iterable[Any], hook: Any,
                 name: str, batch: int, figures: bool = True):
        self.contract = ensure_resolved(contract)
        self.file_summary = new_summary(self.contract, name, figures=figures)
        self._hook = hook
        self._found: deque[AuditFinding] = deque()
        self._recorder = _Collect(self._found)
        self._pass = PlainPass(self.contract, hook, self.file_summary, Observers(sink=self._recorder))
        self._limit = self.contract.max_line_bytes
        self._records = iter(records)
        self._batch = max(1, batch)
        self._pending = 0
        self._done = False
        # The built-in checks over batches of dicts (engine/kernel.py), where they are
        # all that reads a record: the per-record hooks then run only on records that fail.
        # Imported here: a pytest run of files never streams dicts (the kernel's import,
        # ~6 ms, is then paid by the chunk engine only, for the parts it takes).
        from .engine.dicts import DictPass
        from .engine.dicts import plan as dict_plan

        how = dict_plan(self.contract, hook)
        self._items: list[Any] = []
        self._dicts = None if how is None else DictPass(
            self.contract, how, self._pass, self.file_summary, hook, self._take_one)

    @property
    def summary(self) -> Totals:
        return Totals.of(self.file_summary, self.contract)

    def __next__(self) -> AuditFinding:
        found = self._found
        while not found:
            if self._done:
                raise StopIteration
            self._step()
        return found.popleft()

    def add(self, record: Any) -> list[AuditFinding]:
        """Check one more record now (a dict, or a JSON line), after those read so far: its
        findings. For a loop that buys responses one at a time (audit_records(contract)
        with no records, then add each); ``finish()`` once it is done."""
        if self._done:
            raise ValueError("the audit is finished: start another to add records")
        self._take(record)
        self._flush()
        return self._taken()

    def finish(self) -> list[AuditFinding]:
        """End the stream: the per-file checks (the mean, the outlier allowance) run; their
        findings, and any not yet taken."""
        if not self._done:
            self._finish()
        return self._taken()

    def _taken(self) -> list[AuditFinding]:
        found = list(self._found)
        self._found.clear()
        return found

    def _step(self) -> None:
        if self._dicts is not None:  # a batch's items at once
            items = list(islice(self._records, self._batch - len(self._items)))
            if not items:
                self._finish()
                return
            self._items += items
            if len(self._items) >= self._batch:
                self._flush()
            return
        try:
            item = next(self._records)
        except StopIteration:
            self._finish()
            return
        self._take(item)

    def _take(self, item: Any) -> None:
        if self._dicts is not None:
            self._items.append(item)
            if len(self._items) >= self._batch:
                self._flush()
            return
        summary = self.file_summary
        summary.lines += 1
        self._take_one(summary.lines, item)
        self._pending += 1
        if self._pending >= self._batch:
            self._flush()

    def _take_one(self, line: int, item: Any) -> None:
        """One item through the per-line path (its line counted already)."""
        summary, take = self.file_summary, self._pass
        if isinstance(item, (str, bytes, bytearray, memoryview)):
            raw = _encoded(item) if isinstance(item, str) else bytes(item)
            body = raw.strip(JSON_WS)
            if not body:
                summary.blank += 1
                return
            # Too long: its size, as the file reader gives it (the line without its newline).
            take.take(line, len(raw) if len(raw) > self._limit else body)
        else:  # a dict; a list, a number...: no record, as the JSON line `[1, 2]` is none
            take.take_parsed(line, parse_object(item, line, self.contract))

    def _flush(self) -> None:
        if self._items:
            assert self._dicts is not None
            items, self._items = self._items, []
            self._dicts.fold(items)
        if self._pass.batch or self._pass.unusable:
            self._pass.flush()
        self._pending = 0

    def _finish(self) -> None:
        self._flush()
        self._done = True
        summary = self.file_summary
        before = len(summary.file_findings)
        finish_file(Path(summary.path), self.contract, self._hook, summary)
        self._found += [AuditFinding.of_file(f) for f in summary.file_findings[before:]]

    def close(self) -> None:
        """Stop reading (the records' iterator is closed if it is a generator)."""
        self._done = True
        closer = getattr(self._records, "close", None)
        if closer is not None:
            closer()


def _encoded(text: str) -> bytes:
    """A JSON line given as text, as bytes: a str decoded with errors="surrogateescape" gets
    its bytes back (the reader then words their invalid UTF-8 as for the file); any other
    lone surrogate is encoded as such, and is invalid UTF-8 too."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


class _Collect(Recorder):
    """A pass's sink that turns its entries into AuditFindings as they come."""

    def __init__(self, out: deque[AuditFinding]):
        super().__init__()
        self.out = out

    def write_entries(self, found: Sequence[dict[str, Any]]) -> None:
        self.out += [AuditFinding.of_entry(e) for e in found]


def audit_records(contract: _contract.Contract, records: Iterable[Any] = (), *,
                  plugins: Sequence[Any] = (), disable: Iterable[str] = (),
                  name: str = "<records>", batch: int | None = None,
                  figures: bool = False) -> RecordAudit:
    """Audit a stream of records: dicts (a parsed response) or JSON lines (str or bytes;
    a blank one is no record but keeps its place). Returns an iterator of AuditFindings,
    each yielded once its record is checked, whose ``summary`` (Totals) is readable at any
    time: stop reading it (``break``) when drift or spend passes your limit, and no more
    records are read. Or give no records and ``add`` each as it comes. ``plugins``: objects or modules with ``pytest_tokaudit_*`` hooks (as a
    conftest.py has); ``batch``: records checked together (a batch hook such as the round
    trip amortises its calls over them; findings and the summary then lag by at most that
    many records); by default, for a list or tuple, ``auto_batch``: about 256K ids, 128 to
    1,024 records (in memory: nothing is bought by reading it ahead), and 1 for any other
    iterable (each record checked as it comes); ``figures=True``: the summary's figures
    (the HTML report's plots) are computed too (only that report reads them)."""
    if batch is None:
        batch = auto_batch(contract, records) if isinstance(records, (list, tuple)) else 1
    return RecordAudit(contract, records, check_hook(plugins, disable), name, batch, figures)


# audit_records' batch for records already in memory: AUTO_BATCH_IDS ids, between
# AUTO_BATCH_MIN and AUTO_BATCH records. Enough to amortise each hook and numpy call, few
# enough that the batch's copies of its ids (~13 bytes an id, ~3 MB) stay in the caches'
# reach: measured, ~220 ids a record 4.5 us at 1,024 against 5.3 at 256 (25 one at a
# time), ~2,600 ids 36 us at 128 against 38 at 1,024.
AUTO_BATCH, AUTO_BATCH_MIN, AUTO_BATCH_IDS = 1024, 128, 1 << 18


def auto_batch(contract: _contract.Contract, records: Sequence[Any]) -> int:
    """The batch for a list of records: from the mean number of ids of its first dicts."""
    field = contract.ids_field[0] if len(contract.ids_field) == 1 else None
    sizes = [len(ids) for r in records[:32] if type(r) is dict
             and type(ids := r.get(field)) is list]
    if not sizes:
        return AUTO_BATCH
    fit = AUTO_BATCH_IDS * len(sizes) // max(1, sum(sizes))
    return max(AUTO_BATCH_MIN, min(AUTO_BATCH, fit))


# -- a file -----------------------------------------------------------------------------------
@dataclass
class FileAudit:
    """A file's audit: its summary (what the pytest item reports, shown in the summary
    table and the JSON report) and every finding, uncapped (``summary.shown`` keeps the
    first ``tokaudit_max_shown``), the file-level ones last."""

    summary: FileSummary
    findings: list[AuditFinding]
    contract: _contract.Contract

    @property
    def failed(self) -> bool:
        """Whether the pytest item of this file would fail."""
        return self.summary.failed

    @property
    def totals(self) -> Totals:
        return Totals.of(self.summary, self.contract)


def open_source(path_or_url: str | os.PathLike[str]) -> tuple[Any, str]:
    """(what the reader opens, the path shown): a local Path, or a RemoteFile (a URL read
    through fsspec, shown without credentials)."""
    text = os.fspath(path_or_url)
    if not is_url(text):
        return Path(text), text
    try:
        listing = list_root(text, ("*",), [], data_suffixes())
    except (RemoteUnavailable, Unlistable) as exc:
        raise ContractError(f"{display_url(text)}: {exc}") from None
    files = [f for f in listing.files if f[0] == text]
    if not files:
        raise ContractError(f"{display_url(text)}: not a file")
    url, size, tag = files[0]
    source = RemoteFile(url, size, tag)
    return source, source.display


def audit_file(contract: _contract.Contract, path_or_url: str | os.PathLike[str], *,
               plugins: Sequence[Any] = (), disable: Iterable[str] = (),
               figures: bool = False) -> FileAudit:
    """Audit one file as ``pytest --tokaudit`` audits it (one item, never sharded): JSONL,
    .jsonl.gz / .jsonl.zst, Parquet, Arrow IPC, or a URL (s3://, https://...: the extras
    of fsspec). Returns its summary with every finding; a URL that cannot be listed is a
    ContractError. ``figures=True``: as for audit_records."""
    contract = ensure_resolved(contract)
    source, display = open_source(path_or_url)
    hook = check_hook(plugins, disable)
    summary = new_summary(contract, display, figures=figures)
    recorder = Recorder()
    audit_part(source, contract, hook, summary, WHOLE, Observers(sink=recorder))
    if not isinstance(source, Path):
        changed_since_listing(source, summary)
    finish_file(source, contract, hook, summary)
    findings = [AuditFinding.of_entry(e) for e in recorder.entries]
    findings += [AuditFinding.of_file(f) for f in summary.file_findings]
    return FileAudit(summary, findings, contract)


# -- the dataset ------------------------------------------------------------------------------
def judge(hook: Any, contract: _contract.Contract, files: Sequence[FileSummary],
          partial: str | None = None) -> list[Outcome]:
    """The dataset checks' outcomes over whole files' summaries (each file once): what the
    merge command and judge_dataset run. `partial`: None, or why the files are not the
    whole dataset (a passing check is then skipped)."""
    index = None
    if contract.unique_ids or contract.expected_ids:
        from .model.idindex import IdIndex

        index = IdIndex()
        for summary in files:
            index.add(summary)
    return evaluate(hook, list(files), index, contract, partial)


def judge_dataset(contract: _contract.Contract,
                  summaries: Iterable[FileSummary | FileAudit | RecordAudit], *,
                  plugins: Sequence[Any] = (), disable: Iterable[str] = (),
                  partial: str | None = None) -> list[Outcome]:
    """The dataset checks (tokaudit_budget, tokaudit_unique_ids, tokaudit_expected_ids,
    tokaudit_unique_text, and a plugin's own) over files' audits: FileSummaries, FileAudits
    or finished RecordAudits, each a different file. Returns one Outcome per check
    (``name``, ``outcome``: "passed", "failed" or "skipped", ``message``, ``lines``)."""
    files = []
    for s in summaries:
        files.append(s.summary if isinstance(s, FileAudit)
                     else s.file_summary if isinstance(s, RecordAudit) else s)
    seen = Counter(f.path for f in files)
    twice = sorted(p for p, n in seen.items() if n > 1)
    if twice:
        raise ContractError(f"{twice[0]} is given twice: each summary is one file's")
    return judge(check_hook(plugins, disable), ensure_resolved(contract), files, partial)
