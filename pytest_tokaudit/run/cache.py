"""Incremental runs: an audit item's summary, reused while nothing it depends on changed.

An entry is keyed by everything the item's summary depends on, each part checked on read:

- the bytes the item reads: a SHA-256 of them (never a modification time: a fresh CI
  checkout changes those), and the file's size; a shard's range plus the byte before it
  (which says whether its first line is its own) and the rest of its last line, not the
  file's size (a line appended leaves the shards before the last ones as they were,
  sources.base.shard_cuts); a compressed
  shard's frames, the data frame before them and the frames up to the first newline after
  them (``frames.span``), and their size. A remote object is keyed by the version its
  store gives it on every write (S3's or GCS's ETag, a Hugging Face file's SHA-256:
  remote.VERSIONS) and its size, and stored only if the store still names that version
  after the audit; a URL whose server gives none (https) is audited every run;
- the contract as resolved for its file (after ``pytest_tokaudit_contract`` hooks), every
  key but ``tokaudit_cache_dir``;
- the tokenizer, if one is set: a SHA-256 of every file in its directory's whole tree, and
  the versions of transformers and tokenizers;
- the code: this plugin's version and a hash of its source files, the versions of the
  parsers (orjson, pyarrow), which per-record and batch hook implementations run on the item
  (their plugins' names, functions and hookimpl options), and what the process loaded
  (loaded.py): the source of every module loaded from outside the standard library, the
  versions of the installed distributions modules come from. Modules loaded during the
  audit (an import inside a hook) are recorded in the entry after it, and checked on reuse;
- what the project declares its checks read at run time (``tokaudit_cache_inputs``): the
  bytes of the files its patterns match, the values of its variables (hashed);
- the item itself: its path, shard and byte range or row groups.

The value is the item's FileSummary JSON *before* the per-file checks, which run again on
every hit (they read the summary only, and follow a changed baseline); a summary whose
audit skipped the figures (no output drew them) is a miss for a run that draws. An entry is one
file, written to a temporary name and moved into place (``os.replace``), holding its own
key and a digest of its summary: an entry that is corrupt, half written, from another
version or for another key is a miss, never trusted. Two processes writing the same entry
(xdist workers, two CI jobs sharing the folder) write the same bytes; the last one wins.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
from functools import partial
from pathlib import Path
from typing import Any, Callable

import orjson
import pytest

from ..base.atomic import replacing
from ..base.formats import source_of
from ..base.urls import is_url
from ..checks.join import request_files
from ..model.contract import KEYS, KEYS_BY_ATTR, Contract
from ..model.summary import FileSummary
from ..sources.digest import digest_file, file_state
from ..tokenizers.tiktoken import locate as locate_tiktoken
from .config import CONTRACT
from .loaded import Loaded

FORMAT = 2


FOLDER = "tokaudit"  # under pytest's cache directory: .pytest_cache/d/tokaudit


NOT_KEYED = ("cache_dir", "engine", "cache_inputs")  # contract attributes that do not shape an item's summary


STORE = pytest.StashKey["Store | None"]()


# Hooks that run inside an item's audit. Per-file hooks are not keyed: they run on every hit.
AUDIT_HOOKS = ("pytest_tokaudit_check_record", "pytest_tokaudit_check_batch")


_VERSIONS: dict[str, str] = {}


def _versions(*names: str) -> dict[str, str]:
    """Installed versions, once per process (an item asks for the parsers' on every key)."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in names:
        if name not in _VERSIONS:
            try:
                _VERSIONS[name] = version(name)
            except PackageNotFoundError:
                _VERSIONS[name] = ""
        out[name] = _VERSIONS[name]
    return out


_TOKENIZERS: dict[str, dict[str, Any]] = {}


def tokenizer_digest(directory: str) -> dict[str, Any]:
    """Every file of a tokenizer directory's whole tree (a vocabulary in a subfolder, a
    remote-code module), hashed by its path in the tree, and the libraries that read them."""
    if directory not in _TOKENIZERS and directory.startswith("tiktoken:"):
        _, path, _ = locate_tiktoken(directory)  # an encoding: its rank file's bytes
        _TOKENIZERS[directory] = {"files": {path.name: digest_file(path)}, **_versions("tiktoken")}
    if directory not in _TOKENIZERS:
        files = {}
        for folder, dirs, names in os.walk(directory, followlinks=True):
            dirs.sort()
            rel = os.path.relpath(folder, directory)
            for name in sorted(names):
                one = os.path.join(folder, name)
                if os.path.isfile(one):
                    files[name if rel == "." else f"{Path(rel).as_posix()}/{name}"] = digest_file(one)
        _TOKENIZERS[directory] = {"files": files, **_versions("transformers", "tokenizers")}
    return _TOKENIZERS[directory]


def contract_key(contract: Contract) -> dict[str, str]:
    """The resolved contract, as text: each key's parsed value, and the resolved token ids.
    Paths are not keyed as written (a checkout in another folder is the same contract): the
    tokenizer by its files, the manifest by whether there is one (items only keep ids)."""
    out = {}
    for key in KEYS:
        if key.attr in NOT_KEYED:
            continue
        value = getattr(contract, key.attr)
        if key.attr == "tokenizer":
            value = tokenizer_digest(value) if value else None
        elif key.attr == "expected_ids":
            value = bool(value)
        elif key.attr in ("chat_template", "prices") and value:  # by their bytes (whole-bill)
            value = digest_file(value)
        elif key.attr == "requests" and value:  # each request file's bytes, by name
            value = [(os.path.basename(f), digest_file(f)) for f in request_files(value)]
        out[key.name] = repr(value)
    for attr in ("require_once_ids", "require_last_ids", "forbid_ids"):
        out[attr] = repr(getattr(contract, attr))
    return out


def contract_files(contract: Contract) -> dict[str, str]:
    """A digest of what each path key of the contract names (its bytes, not where it is),
    by key name: the JSON report carries it, so the merge command tells one contract
    written from checkouts in other folders (absolute paths) from another."""
    out = {}
    if contract.tokenizer:
        files = tokenizer_digest(contract.tokenizer)["files"]
        out[KEYS_BY_ATTR["tokenizer"].name] = hashlib.sha256(
            orjson.dumps(files, option=orjson.OPT_SORT_KEYS)).hexdigest()
    manifest = contract.expected_ids
    if manifest and not is_url(manifest):  # a URL is the same wherever it is read from
        with contextlib.suppress(OSError):
            out[KEYS_BY_ATTR["expected_ids"].name] = digest_file(manifest)
    for attr in ("chat_template", "prices"):  # the whole bill's files (docs/whole-bill.md)
        if getattr(contract, attr):
            with contextlib.suppress(OSError):
                out[KEYS_BY_ATTR[attr].name] = digest_file(getattr(contract, attr))
    if contract.requests:
        with contextlib.suppress(OSError):
            files = [(os.path.basename(f), digest_file(f)) for f in request_files(contract.requests)]
            out[KEYS_BY_ATTR["requests"].name] = hashlib.sha256(orjson.dumps(files)).hexdigest()
    return out


def hook_set(ihook: Any, root: Path) -> list[list[Any]]:
    """The per-record and batch hook implementations that run on an item, in call order:
    the hook, its plugin's name (a conftest.py by its path relative to the rootdir: another
    checkout is the same project), the function's module and name, and its hookimpl options.
    What their code does is keyed by the modules the process loaded (loaded.py); this says
    which of them run here, and how. The Ray engine rebuilds the same set on its workers."""
    out = []
    for name in AUDIT_HOOKS:
        for impl in getattr(ihook, name).get_hookimpls():
            plugin = impl.plugin_name
            if os.path.isabs(plugin):
                with contextlib.suppress(ValueError):
                    plugin = Path(plugin).relative_to(root).as_posix()
            function = getattr(impl.function, "__func__", impl.function)
            opts = {k: v for k, v in sorted(impl.opts.items()) if v}
            out.append([name, plugin, f"{getattr(function, '__module__', None)}."
                        f"{getattr(function, '__qualname__', repr(function))}", opts])
    return out


LOADED = pytest.StashKey[Loaded]()


def loaded_for(config: pytest.Config) -> Loaded:
    """This process's view of the modules it loaded: the base, taken at the first call
    (before the first audit item looks up its entry)."""
    if LOADED not in config.stash:
        store = store_for(config)
        memo = store.directory / "environment.memo" if store is not None else None  # no entry
        config.stash[LOADED] = Loaded(str(config.rootpath), config.pluginmanager.get_plugins(), memo)
    return config.stash[LOADED]


INPUTS = pytest.StashKey["Inputs"]()


class Inputs:
    """What tokaudit_cache_inputs names, as a key: each pattern's matching files (their
    bytes), each $VARIABLE's value (hashed: a secret is never written to the cache). Taken
    once per process, with each file's state, which must hold when an entry is stored."""

    def __init__(self, patterns: tuple[str, ...], base: Path):
        import glob

        self.key: dict[str, Any] = {}
        self.states: list[tuple[str, Any]] = []
        self.variables: dict[str, str | None] = {}
        for pattern in patterns:
            if pattern.startswith("$"):
                value = os.environ.get(pattern[1:])
                self.variables[pattern[1:]] = value
                self.key[pattern] = (None if value is None
                                     else hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest())
                continue
            files: dict[str, str] = {}
            where = pattern if os.path.isabs(pattern) else str(base / pattern)
            for path in sorted(glob.glob(where, recursive=True)):
                paths = [path] if os.path.isfile(path) else sorted(
                    str(p) for p in Path(path).rglob("*") if p.is_file())
                for one in paths:
                    try:
                        self.states.append((one, file_state(one)))
                        files[os.path.relpath(one, base) if not os.path.isabs(pattern) else one] = digest_file(one)
                    except OSError:
                        files[one] = ""
            self.key[pattern] = files

    def unchanged(self) -> bool:
        """No declared file written, no variable changed, since the key was taken."""
        if any(os.environ.get(name) != value for name, value in self.variables.items()):
            return False
        for path, before in self.states:
            try:
                if before is None or file_state(path) != before:
                    return False
            except OSError:
                return False
        return True


def inputs_for(config: pytest.Config) -> Inputs:
    """The declared inputs' key, taken once per process (before its first audit)."""
    if INPUTS not in config.stash:
        base = config.inipath.parent if config.inipath else config.rootpath
        config.stash[INPUTS] = Inputs(config.stash[CONTRACT].cache_inputs, base)
    return config.stash[INPUTS]


class Store:
    """A folder of entries, `<key[:2]>/<key>.json`. `read` is False under --cache-clear:
    every item is audited again and its entry rewritten."""

    def __init__(self, directory: Path, read: bool = True):
        self.directory = directory
        self.read = read

    def path(self, name: str) -> Path:
        return self.directory / name[:2] / f"{name}.json"

    def load(self, name: str, key: dict[str, Any], loaded: Loaded | None = None) -> FileSummary | None:
        """The entry's summary, if it is whole, for this key, and every module its audit had
        loaded since the base is as it was then."""
        if not self.read:
            return None
        try:
            data = orjson.loads(self.path(name).read_bytes())
            text = data["summary"]
            if (data.get("format") != FORMAT or data.get("key") != key
                    or data.get("digest") != hashlib.sha256(
                        (text + _canonical(data.get("loaded"))).encode()).hexdigest()):
                return None
            if loaded is not None and not loaded.holds(data.get("loaded")):
                return None
            summary = FileSummary.from_json(text)
        except Exception:  # noqa: BLE001 - missing, unreadable, corrupt: audit the item
            return None
        summary.cached = True
        return summary

    def save(self, name: str, key: dict[str, Any], summary_json: str,
             loaded: dict[str, Any] | None = None) -> None:
        entry = orjson.dumps({
            "format": FORMAT, "key": key,
            "digest": hashlib.sha256((summary_json + _canonical(loaded)).encode()).hexdigest(),
            "summary": summary_json, "loaded": loaded,
        })
        target = self.path(name)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            with replacing(target, sync=False) as fh:  # a reader sees the old entry or the new
                fh.write(entry)
        except OSError:
            pass  # a read-only or full cache: the next run audits the item again


def _canonical(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def store_for(config: pytest.Config) -> Store | None:
    """This process's store: None with --tokaudit-no-cache, or with no cache directory
    (`-p no:cacheprovider` and no tokaudit_cache_dir)."""
    if STORE not in config.stash:
        config.stash[STORE] = _make_store(config)
    return config.stash[STORE]


def _make_store(config: pytest.Config) -> Store | None:
    if config.getoption("tokaudit_no_cache", False):
        return None
    read = not config.getoption("cacheclear", False)
    folder = config.stash[CONTRACT].cache_dir
    if folder:
        return Store(Path(folder), read)
    cache = getattr(config, "cache", None)
    if cache is None:  # -p no:cacheprovider
        return None
    try:
        return Store(Path(cache.mkdir(FOLDER)), read)
    except OSError:
        return None


class Entry:
    """One audit item's entry: its key, and its file's state (a local file's stat, a remote
    object's version) taken *before* the key's bytes were hashed, which must still hold
    after the audit for the summary to be stored: any write in between changes it, so no
    interleaving of writes with a run stores a verdict under bytes it did not judge. A
    state of None (a file changed too recently for its stat to show a further write:
    digest.file_state) is never stored under."""

    def __init__(self, store: Store, key: dict[str, Any], state: Callable[[], Any],
                 before: Any, item: Any = None):
        self.store = store
        self.item = item  # its AuditItem: the modules loaded for it, its declared inputs
        self.key = orjson.loads(orjson.dumps(key))  # as read back: tuples become lists
        self.name = hashlib.sha256(orjson.dumps(key, option=orjson.OPT_SORT_KEYS)).hexdigest()
        self.state = state
        self.before = before

    def load(self) -> FileSummary | None:
        loaded = loaded_for(self.item.config) if self.item is not None else None
        return self.store.load(self.name, self.key, loaded)

    def save(self, summary: FileSummary) -> None:
        """Store an audit that ran to the end on bytes that did not change meanwhile."""
        if summary.read_error or self.before is None:
            return
        try:
            after = self.state()
        except OSError:  # gone: whatever it held, the audit is not for a key
            return
        if after != self.before:
            return
        loaded: dict[str, Any] | None = None
        if self.item is not None:
            config = self.item.config
            if not inputs_for(config).unchanged():
                return  # a declared input was written during the run
            # Another engine's audit (a Ray worker's): the modules it loaded there, found in
            # this environment; an engine that cannot say is not stored.
            remote = getattr(self.item, "remote", None)
            names: tuple[str, ...] = ()
            if remote is not None:
                if getattr(remote, "modules", None) is None:
                    return
                names = tuple(remote.modules)
            loaded = loaded_for(config).since(names)
            if loaded is None:
                return  # a module loaded there cannot be found here: not keyable
        self.store.save(self.name, self.key, summary.to_json(), loaded)


def entry_for(item: Any) -> Entry | None:
    """The cache entry of an AuditItem, or None: the cache is off, or the file cannot be
    fingerprinted (unreadable, or remote with no version that changes on every write)."""
    store = store_for(item.config)
    source = item.source
    if store is None:
        return None
    config = item.config
    base = loaded_for(config)  # before the first audit of this process
    kind = source_of(source)
    state: Callable[[], Any]
    if not isinstance(source, Path):
        # A remote object: the store's version of it (remote.VERSIONS), not its bytes,
        # which would have to be downloaded to be hashed.
        if source.version is None:
            return None
        fingerprint = ["version", source.version, source.size]
        state, before = source.current_version, source.version
    else:
        try:
            # The state first: a write while the bytes are hashed, or after, changes it.
            state = partial(file_state, source)
            before = state()
            # The source's own view of the bytes the part reads (a frame run's frames, a
            # Parquet shard's whole file, whose footer it reads too).
            fingerprint = kind.fingerprint(source, item.part, item.shard is None)
        except OSError:
            return None  # unreadable: the audit says why
    key = {
        # The shard's place, not how many there are: appending adds shards after it.
        "item": [item.display, None if item.shard is None else item.shard[0], list(item.byte_range),
                 None if item.groups is None else list(item.groups)],
        "data": fingerprint,
        "contract": contract_key(item.contract),
        "hooks": hook_set(item.ihook, config.rootpath),
        "loaded": base.digest,
        "inputs": inputs_for(config).key,
        "code": base.code,
        "python": list(sys.version_info[:2]),
        "libraries": {name: base.prints.env.version(name)
                      for name in ("orjson", *(("pyarrow",) if kind.kind == "arrow" else ()))},
    }
    return Entry(store, key, state, before, item)


def reuse(entry: Entry | None, records_needed: bool = False,
          figures_needed: bool = True) -> FileSummary | None:
    """The cached summary of an item, if it may stand for an audit. Not when every finding
    at a record is needed (--tokaudit-failures) and the entry had some: it does not hold
    them, so such an item is audited again. Nor when the figures are needed (an output
    draws them) and the entry's audit skipped them; its audit again stores them, and an
    entry with figures serves a run that does not draw."""
    summary = entry.load() if entry is not None else None
    if summary is None:
        return None
    if records_needed and summary.findings > len(summary.file_findings):
        return None
    if figures_needed and not summary.plotted:
        return None
    return summary


def cached_items(summaries: dict[str, FileSummary]) -> list[str]:
    """Node ids of the audit items whose summary came from the cache."""
    return sorted(nodeid for nodeid, s in summaries.items() if s.cached)


def report(config: pytest.Config, summaries: dict[str, FileSummary]) -> dict[str, Any]:
    """The JSON report's "cache": whether it was on, and which items it served."""
    store = store_for(config)
    return {
        "enabled": store is not None,
        "dir": None if store is None else str(store.directory),
        "items": cached_items(summaries),
        "audited": sorted(n for n, s in summaries.items() if not s.cached),
    }


def summary_line(config: pytest.Config, summaries: dict[str, FileSummary]) -> str | None:
    store = store_for(config)
    if store is None or not summaries:
        return None
    hits = len(cached_items(summaries))
    if not hits:  # a cold run says nothing: the table marks what was reused
        return None
    try:
        where = os.path.relpath(store.directory, config.invocation_params.dir)
    except ValueError:  # another drive on Windows
        where = str(store.directory)
    return (f"tokaudit cache: {hits:,} of {len(summaries):,} audit items reused unchanged "
            f"results ({where})")
