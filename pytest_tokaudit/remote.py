"""Remote data: fsspec URLs (s3://, gs://, hf://, https://) as data roots, manifests, baselines.

pytest resolves every positional argument as a local path, so a URL on the command line
(or in ``testpaths``) is taken out of ``config.args`` in ``pytest_configure`` and kept here.
The controller lists each URL root once, in ``pytest_sessionstart`` (a root that cannot be
listed is a usage error naming the URL), and hands the listing to xdist's workers in their
``workerinput``, so every process makes the identical items without listing again. Each
listed file becomes a ``RemoteDataFile`` collector under the session, collected and
reported in ``pytest_collection_modifyitems`` (as collect.py does for the dataset checks),
with node ids like ``s3://bucket/data/a.jsonl::tokaudit``.

Reading goes through ``fs.open`` with a bounded read-ahead block and the reader's own
chunk loop (gz/zst by suffix), so memory stays bounded; Parquet is read through
``pq.ParquetFile`` on the same file object. Every failure of the storage (no such key,
access denied, a connection dropped mid-file) becomes ``reader.SourceError``: a ``read``
finding of that file, never a traceback. Credentials come from fsspec's configuration
(``~/.config/fsspec``, ``FSSPEC_<PROTOCOL>_*`` variables, each backend's own: AWS
variables and profiles for s3fs...); no storage option is ever printed, and messages are
scrubbed of every credential value known to the process.

This module is imported for every ``--tokaudit`` run; fsspec is imported only when a URL
is actually used.
"""

from __future__ import annotations

import fnmatch
import io
import os
import re
from typing import Any, Callable
from urllib.parse import urlsplit, urlunsplit

import pytest

from .collect import AuditItem, FileItems, WholeFileItem
from .reader import SourceError

# scheme:// (two letters at least: a Windows drive letter is not a scheme)
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]+://")
# protocol -> (extra, the package fsspec needs for it)
EXTRAS = {
    "s3": ("s3", "s3fs"), "s3a": ("s3", "s3fs"),
    "gs": ("gcs", "gcsfs"), "gcs": ("gcs", "gcsfs"),
    "hf": ("hf", "huggingface_hub"),
    "http": ("http", "aiohttp"), "https": ("http", "aiohttp"),
}
# Read-ahead of a remote file: one request fetches this much past what the reader asks
# for (the reader asks for 1 MiB at a time), so memory stays about 5 MiB per open file.
BLOCK = 4 << 20
WORKERINPUT = "tokaudit_remote"
PLUGIN = "tokaudit.remote"
FROM_TESTPATHS = pytest.StashKey[list]()


def is_url(text: Any) -> bool:
    return isinstance(text, str) and bool(_URL.match(text))


def protocol(url: str) -> str:
    return url.split("://", 1)[0].lower()


def display_url(url: str) -> str:
    """The URL as node ids, findings and reports show it: never a user:password@, and for
    http(s) no query or fragment (a presigned URL's signature is a credential)."""
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    if protocol(url) in ("http", "https"):
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    if netloc != parts.netloc:
        return url.replace(parts.netloc, netloc, 1)
    return url


def extra_hint(url: str) -> str:
    extra, package = EXTRAS.get(protocol(url), (None, None))
    if extra is None:
        return f"fsspec and the package that implements {protocol(url)}:// (see fsspec's docs)"
    return f"fsspec and {package}: pip install 'pytest-tokaudit[{extra}]'"


class RemoteUnavailable(Exception):
    """fsspec, or the package of the URL's protocol, is not installed; names the extra."""


def filesystem(url: str) -> tuple[Any, str]:
    """(fsspec filesystem, path within it). Options come from fsspec's configuration only."""
    try:
        import fsspec.core
    except ImportError:
        raise RemoteUnavailable(f"reading {protocol(url)}:// URLs needs {extra_hint(url)}") from None
    try:
        return fsspec.core.url_to_fs(url)
    except ImportError:
        raise RemoteUnavailable(f"reading {protocol(url)}:// URLs needs {extra_hint(url)}") from None
    except ValueError as exc:  # "Protocol not known: foo"
        raise RemoteUnavailable(f"{display_url(url)}: {scrub(str(exc))}") from None


# -- credentials never printed -------------------------------------------------------------

_SECRET_WORDS = ("secret", "token", "password", "key", "credential", "session")


def _secrets() -> set[str]:
    """Every credential value this process knows of: fsspec's configured storage options
    and the usual variables (AWS_*, GOOGLE_*, HF_*...). Values of 6+ characters only."""
    found: set[str] = set()

    def walk(value: Any, secret: bool) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, secret or any(w in str(k).lower() for w in _SECRET_WORDS))
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v, secret)
        elif secret and isinstance(value, str) and len(value) >= 6:
            found.add(value)

    try:
        from fsspec.config import conf

        walk(conf, False)
    except ImportError:
        pass
    walk({k: v for k, v in os.environ.items()
          if k.startswith(("AWS_", "FSSPEC_", "GOOGLE_", "GCS", "HF_", "HUGGING"))}, False)
    return found


def scrub(text: str) -> str:
    """`text` with every known credential value replaced by ***."""
    for secret in sorted(_secrets(), key=len, reverse=True):
        text = text.replace(secret, "***")
    return re.sub(r"(?i)(signature|credential|token|key)=[^&\s\"']+", r"\1=***", text)


def describe(exc: BaseException) -> str:
    """A storage error in a few words, without credentials."""
    if isinstance(exc, FileNotFoundError):
        return "no such file or bucket"
    if isinstance(exc, PermissionError):
        return "access denied"
    first = str(exc).strip().splitlines()
    text = first[0] if first else ""
    if len(text) > 200:
        text = text[:200] + "..."
    return scrub(f"{type(exc).__name__}: {text}" if text else type(exc).__name__)


# -- a remote file ---------------------------------------------------------------------------

class RemoteFile:
    """A data file at a URL, as the audit reads it. Hooks receive it as ``path``: it has
    ``url``, ``name``, ``suffix``, ``size`` and ``open()`` (a binary file object)."""

    def __init__(self, url: str, size: int | None = None, tag: str = ""):
        self.url = url
        self.display = display_url(url)
        self.size = size
        self.tag = tag  # ETag or modification time: a rewritten object is another file
        self.name = self.display.rstrip("/").rsplit("/", 1)[-1]
        self.suffix = os.path.splitext(self.name)[1]

    def __str__(self) -> str:
        return self.display

    def __repr__(self) -> str:
        return f"RemoteFile({self.display!r})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, RemoteFile) and other.url == self.url

    def __hash__(self) -> int:
        return hash(self.url)

    @property
    def cache_key(self) -> tuple:
        return (self.url, self.size, self.tag)

    @property
    def version(self) -> str | None:
        """The listing's name for these bytes when the store changes it on every write (see
        VERSIONS), else None: cache.py reuses a remote file's result only by it."""
        if protocol(self.url) in ("http", "https") or self.size is None:
            return None
        return self.tag if self.tag.partition("=")[0] in VERSIONS else None

    def current_version(self) -> str | None:
        """The version the store names now (one metadata request), or None."""
        try:
            fs, path = filesystem(self.url)
            fs.invalidate_cache(path)  # the listing's answer is cached: ask again
            return _tag(fs.info(path))
        except Exception:  # noqa: BLE001 - unknown now: the result is not stored
            return None

    def open_stream(self) -> "Stream":
        """The file for reading; SourceError (at_open) if it cannot be opened."""
        try:
            fs, path = filesystem(self.url)
        except RemoteUnavailable as exc:
            raise SourceError(str(exc), at_open=True) from None
        try:
            kwargs: dict[str, Any] = {"block_size": BLOCK, "cache_type": "readahead"}
            if self.size is not None and protocol(self.url) not in ("http", "https"):
                kwargs["size"] = self.size  # known from the listing: no second request
            try:
                fh = fs.open(path, "rb", **kwargs)
            except TypeError:  # a backend that takes no size / cache options
                fh = fs.open(path, "rb", block_size=BLOCK)
        except Exception as exc:  # noqa: BLE001 - any storage error is a finding, not a crash
            raise SourceError(describe(exc), at_open=True) from None
        return Stream(fh)

    open = open_stream


class Stream(io.RawIOBase):
    """An fsspec file whose every failure is a SourceError (an OSError), worded without
    credentials: the reader turns it into a `read` finding, with the line it stopped at."""

    def __init__(self, fh: Any):
        super().__init__()
        self._fh = fh
        self._read = 0  # bytes delivered

    def _fail(self, exc: BaseException) -> SourceError:
        if isinstance(exc, SourceError):
            return exc
        at = self._fh_pos()
        if not self._read:
            return SourceError(describe(exc), at_open=True)
        return SourceError(f"read failed at byte {at:,}: {describe(exc)}")

    def _fh_pos(self) -> int:
        try:
            return self._fh.tell()
        except Exception:  # noqa: BLE001
            return 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        view = memoryview(b).cast("B")
        try:
            data = self._fh.read(view.nbytes)
        except Exception as exc:  # noqa: BLE001
            raise self._fail(exc) from None
        n = len(data)
        view[:n] = data
        self._read += n
        return n

    def read(self, size: int = -1) -> bytes:
        try:
            data = self._fh.read(size)
        except Exception as exc:  # noqa: BLE001
            raise self._fail(exc) from None
        self._read += len(data)
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        try:
            return self._fh.seek(offset, whence)
        except Exception as exc:  # noqa: BLE001
            raise self._fail(exc) from None

    def tell(self) -> int:
        return self._fh_pos()

    def close(self) -> None:
        if not self.closed:
            try:
                self._fh.close()
            except Exception:  # noqa: BLE001 - nothing was written; a failed close is moot
                pass
        super().close()


def open_url(url: str) -> io.BufferedReader:
    """A whole remote file (a manifest) for reading by lines; SourceError if it cannot be read."""
    return io.BufferedReader(RemoteFile(url).open_stream(), BLOCK)


def read_bytes(url: str) -> bytes:
    """A small remote file (a baseline report) whole; SourceError if it cannot be read."""
    with open_url(url) as fh:
        return fh.read()


class ManifestUrl(RemoteFile):
    """A manifest at a URL: printed as its display form, opened through fsspec."""


def manifest_path(value: str) -> Any:
    """What tokaudit_expected_ids names: a local Path, or a remote file."""
    from pathlib import Path

    return ManifestUrl(value) if is_url(value) else Path(value)


# -- listing ---------------------------------------------------------------------------------

class Listing:
    """The data files under one URL root: (url, size, tag) sorted by URL, and other files
    that look like data but are not matched by the glob (for the coverage message)."""

    def __init__(self, root: str, files: list[tuple[str, int | None, str]], unmatched: list[str]):
        self.root, self.files, self.unmatched = root, files, unmatched

    def to_json(self) -> list[Any]:
        return [self.root, [list(f) for f in self.files], self.unmatched]

    @classmethod
    def from_json(cls, data: list[Any]) -> Listing:
        return cls(data[0], [tuple(f) for f in data[1]], list(data[2]))


# Listing keys naming one version of an object's bytes: an object store gives a new value
# on every write (S3's and GCS's ETag, GCS's MD5, a Hugging Face file's LFS SHA-256 or git
# blob id), so an unchanged value means unchanged bytes, and cache.py may key a file by it.
# A modification time is not the bytes, and neither is an HTTP server's ETag (weak, or
# made of mtime and size): those only tell a rewritten file apart within one run.
VERSIONS = ("lfs.sha256", "blob_id", "ETag", "etag", "md5Hash")
_TIMES = ("LastModified", "mtime", "updated", "last_commit")


def _tag(info: dict[str, Any]) -> str:
    """`key=value` of the listing field that best names this version of the object."""
    lfs = info.get("lfs")
    if isinstance(lfs, dict) and lfs.get("sha256"):
        return f"lfs.sha256={lfs['sha256']}"
    for key in VERSIONS[1:] + _TIMES:
        if info.get(key) is not None:
            return f"{key}={info[key]}"
    return ""


def list_root(url: str, patterns: tuple[str, ...], norecurse: list[str],
              data_suffixes: set[str]) -> Listing:
    """List a URL root: a file, or every file below a prefix. UsageError if it cannot be
    listed (no such bucket, access denied, no connection); an empty prefix lists nothing."""
    fs, path = filesystem(url)
    try:
        if protocol(url) in ("http", "https"):  # a single file: no directory listing
            infos = {path: fs.info(path)}
            base = None
        else:
            info = None
            try:
                info = fs.info(path)
            except FileNotFoundError:
                pass  # a prefix with no object at its own name
            if info is not None and info.get("type") == "file":
                infos, base = {path: info}, None
            else:
                infos = fs.find(path, detail=True, withdirs=False)
                base = path.rstrip("/")
    except Exception as exc:  # noqa: BLE001 - any storage error: the root cannot be used
        # A usage error, as for a local path not found: the run stops before collecting.
        raise pytest.UsageError(f"cannot list {display_url(url)}: {describe(exc)}") from None
    files, unmatched = [], []
    for name in sorted(infos):
        info = infos[name]
        if info.get("type", "file") != "file":
            continue
        if base is None:  # the root is the file (its name without an http query)
            file_url, rel = url, display_url(url).rstrip("/").rsplit("/", 1)[-1]
        else:
            rel = name[len(base):].lstrip("/") if name.startswith(base) else name
            file_url = url.rstrip("/") + "/" + rel
        parts = rel.split("/")
        if any(fnmatch.fnmatch(d, p) for d in parts[:-1] for p in norecurse):
            continue
        leaf = parts[-1]
        if any(fnmatch.fnmatch(leaf, p) for p in patterns):
            size = info.get("size")
            files.append((file_url, size if isinstance(size, int) else None, _tag(info)))
        elif data_suffixes & {s.lower() for s in _suffixes(leaf)}:
            unmatched.append(display_url(file_url))
    files.sort()
    return Listing(url, files, sorted(unmatched))


def _suffixes(name: str) -> list[str]:
    stem = name.lstrip(".")
    return ["." + s for s in stem.split(".")[1:]]


# -- taking URLs out of pytest's hands ---------------------------------------------------------

def testpath_urls_as_args(early_config: pytest.Config, args: list[str]) -> None:
    """Called from ``pytest_load_initial_conftests`` with --tokaudit, before pytest decides
    its args: when ``testpaths`` applies (no path on the command line, run from the rootdir)
    and only its URL entries can match, hand those to pytest as arguments. Otherwise pytest
    would warn that testpaths matched nothing and collect the whole rootdir instead."""
    import glob

    ns = early_config.known_args_namespace
    if getattr(ns, "file_or_dir", None) or getattr(ns, "pyargs", False):
        return
    if not getattr(ns, "tokaudit", False):  # --tokaudit, or `tokaudit = true` in the ini
        try:
            if not early_config.getini("tokaudit"):
                return
        except (ValueError, pytest.UsageError):
            return  # a bad value: pytest_configure says so
    if early_config.invocation_params.dir != early_config.rootpath:
        return
    testpaths = early_config.getini("testpaths") or []
    urls = [t for t in testpaths if is_url(t)]
    if not urls:
        return
    if any(glob.glob(t, recursive=True) for t in testpaths if not is_url(t)):
        return  # pytest collects the local ones; pytest_configure adds the URLs
    args.extend(urls)
    early_config.stash[FROM_TESTPATHS] = urls


def configure(config: pytest.Config) -> None:
    """With --tokaudit: take the URLs out of ``config.args`` (every process) and register
    the plugin that lists and collects them."""
    args = list(config.args)
    named = [a for a in args if is_url(a)]
    from_testpaths = config.stash.get(FROM_TESTPATHS, None)
    if from_testpaths:
        named = [a for a in named if a not in from_testpaths]
        config.args_source = pytest.Config.ArgsSource.TESTPATHS
    elif config.args_source == pytest.Config.ArgsSource.TESTPATHS:
        from_testpaths = [t for t in config.getini("testpaths") or [] if is_url(t)]
    else:
        from_testpaths = []
    testpath_urls = [t for t in config.getini("testpaths") or [] if is_url(t)]
    collected = named + (from_testpaths or [])
    if not collected and not testpath_urls:
        return
    config.args[:] = [a for a in args if not is_url(a)]
    for url in collected + testpath_urls:
        if "@" in urlsplit(url.split("::")[0]).netloc:
            raise pytest.UsageError(
                f"{display_url(url)}: a URL must not carry credentials (user:password@); "
                "configure them for fsspec instead"
            )
    config.pluginmanager.register(Remote(config, collected, testpath_urls, named), PLUGIN)


def source_of(config: pytest.Config, display: str) -> Any:
    """The file a summary's path names: a RemoteFile for a URL, else a local Path."""
    from pathlib import Path

    remote = config.pluginmanager.get_plugin(PLUGIN)
    if remote is not None and is_url(display):
        found = remote.file(display)
        if found is not None:
            return found
    return Path(config.rootpath, display)


# -- the plugin --------------------------------------------------------------------------------

class Remote:
    """Lists the URL roots (on the controller), makes their items (everywhere), and tells the
    controller's coverage which remote files make up the dataset."""

    def __init__(self, config: pytest.Config, collected: list[str], testpaths: list[str],
                 named: list[str]):
        self.config = config
        # A URL argument may name an item: s3://b/a.jsonl::tokaudit[shard 1 of 2]
        self.collected = list(dict.fromkeys(a.split("::")[0] for a in collected))
        self.selectors: dict[str, list[str]] = {a.split("::")[0]: [] for a in collected}
        for a in collected:
            if "::" in a:
                self.selectors[a.split("::")[0]].append(a)
        self.testpaths = testpaths
        self.named = named
        self.listings: dict[str, Listing] = {}
        self.files: dict[str, RemoteFile] = {}  # display -> file

    # roots: what is collected, and what the dataset is (testpaths' URLs + URLs named)
    @property
    def roots(self) -> list[str]:
        return list(dict.fromkeys(self.testpaths + self.collected))

    def _index(self) -> None:
        for listing in self.listings.values():
            for url, size, tag in listing.files:
                f = RemoteFile(url, size, tag)
                self.files.setdefault(f.display, f)

    def file(self, display: str) -> RemoteFile | None:
        return self.files.get(display)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        workerinput = getattr(self.config, "workerinput", None)
        if workerinput is not None and WORKERINPUT in workerinput:
            self.listings = {r: Listing.from_json(d) for r, d in workerinput[WORKERINPUT].items()}
        else:
            self.list_roots()
        self._index()

    def list_roots(self) -> None:
        from .collect import CONTRACT
        from .controller import DATA_SUFFIXES

        contract = self.config.stash[CONTRACT]
        norecurse = self.config.getini("norecursedirs")
        ignore_glob = self.config.getoption("ignore_glob", None) or []
        ignore = [i for i in (self.config.getoption("ignore", None) or []) if is_url(i)]
        for root in self.roots:
            try:
                listing = list_root(root, contract.glob, norecurse, DATA_SUFFIXES)
            except RemoteUnavailable as exc:
                raise pytest.UsageError(f"{display_url(root)}: {exc}") from None
            listing.files = [
                f for f in listing.files
                if not any(fnmatch.fnmatch(display_url(f[0]), g) for g in ignore_glob)
                and not any(f[0] == i or f[0].startswith(i.rstrip("/") + "/") for i in ignore)
            ]
            self.listings[root] = listing

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """xdist: each worker gets the controller's listing, so all collect the same items."""
        node.workerinput[WORKERINPUT] = {r: l.to_json() for r, l in self.listings.items()}

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        seen: set[str] = set()
        for root in self.collected:
            listing = self.listings.get(root)
            if listing is None:
                continue
            wanted = self.selectors.get(root) or []
            for url, size, tag in listing.files:
                display = display_url(url)
                if display in seen:
                    continue
                seen.add(display)
                node = RemoteDataFile.from_parent(
                    session, name=display, nodeid=display, source=self.files[display]
                )
                report = node.ihook.pytest_make_collect_report(collector=node)
                if wanted and report.passed:
                    report.result = [i for i in report.result
                                     if any(i.nodeid == w or i.nodeid.startswith(w + "::")
                                            or i.nodeid.startswith(w + "[") for w in wanted)]
                node.ihook.pytest_collectreport(report=report)
                if report.passed:
                    items.extend(i for i in report.result if isinstance(i, pytest.Item))

    # coverage ----------------------------------------------------------------------------
    def extend_coverage(self, cov: Any, selected: set[str]) -> None:
        """Add the remote roots and their files to the controller's coverage; a root that
        lists no data file is named in ``cov.empty_roots`` (coverage fails)."""
        dataset = set(cov.dataset)
        for root in self.roots:
            listing = self.listings.get(root)
            if listing is None:
                continue
            shown = display_url(root)
            if shown not in cov.roots:
                cov.roots.append(shown)
            files = [display_url(u) for u, _, _ in listing.files]
            dataset.update(files)
            cov.unmatched = sorted(set(cov.unmatched) | set(listing.unmatched))
            if not files and shown not in cov.empty_roots:
                cov.empty_roots.append(shown)
        done = set(cov.audited)
        for path in sorted(dataset - set(cov.dataset)):
            if path not in done and path not in cov.missing:
                cov.missing[path] = (
                    "did not finish (failed to run, skipped, timed out, crashed or stopped)"
                    if path in selected else
                    "not selected (-k, -m, --lf, --deselect, or not under the paths named)"
                )
        cov.dataset = sorted(dataset)
        cov.named += [display_url(n.split("::")[0]) for n in self.named]

    def make_whole_file(self, session: pytest.Session, nodeid: str) -> pytest.Item | None:
        """The controller under xdist: a remote file's [file] item, from the listing."""
        display = nodeid.split("::")[0]
        source = self.files.get(display)
        if source is None:
            return None
        node = RemoteDataFile.from_parent(session, name=display, nodeid=display, source=source)
        for item in node.collect():
            if isinstance(item, WholeFileItem):
                return item
        return None


# -- nodes -------------------------------------------------------------------------------------

class _RemoteLocation:
    """A remote item's location is its URL, not a path under the rootdir."""

    source: RemoteFile
    label: Callable[[], str]  # the item's own (AuditItem.label ...)

    @property
    def location(self) -> tuple[str, int, str]:
        return (self.source.display, 0, self.label())

    def reportinfo(self):
        return self.source.display, 0, self.label()


class RemoteAuditItem(_RemoteLocation, AuditItem):
    pass


class RemoteWholeFileItem(_RemoteLocation, WholeFileItem):
    pass


class RemoteDataFile(FileItems):
    """A data file at a URL, under the session: its items as for a local file (FileItems).
    Its pytest ``path`` is the rootdir's, so the rootdir's conftest.py files apply."""

    audit_item = RemoteAuditItem
    whole_item = RemoteWholeFileItem

    def __init__(self, *, source: RemoteFile, **kwargs: Any):
        super().__init__(**kwargs)
        self._source = source

    @property
    def source(self) -> RemoteFile:
        return self._source

    def source_size(self) -> int | None:
        return self._source.size

    def reportinfo(self):
        return self.source.display, 0, self.nodeid
