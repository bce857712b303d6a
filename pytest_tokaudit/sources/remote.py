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
from typing import Any

from ..base.urls import display_url, is_url, protocol, scrub, url_name
from .base import SourceError

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


class Unlistable(Exception):
    """A URL root that cannot be listed (no such bucket, access denied, no connection): the
    pytest run stops on it with a usage error, as for a local path not found."""


def extra_hint(url: str) -> str:
    extra, package = EXTRAS.get(protocol(url), (None, None))
    if extra is None:
        return f"fsspec and the package that implements {protocol(url)}:// (see fsspec's docs)"
    return f"fsspec and {package}: pip install 'pytest-tokaudit[{extra}]'"


# How an audit of an object that is no longer the one listed is worded (RemoteFile.changed):
# a `read` finding, and the file counts as not audited to the end.
CHANGED = "changed after it was listed"
UNCHECKED = "cannot check that it is unchanged since it was listed"


class RemoteUnavailable(Exception):
    """fsspec, or the package of the URL's protocol, is not installed; names the extra."""


def filesystem(url: str) -> tuple[Any, str]:
    """(fsspec filesystem, path within it). Options come from fsspec's configuration only.

    The URL is one store's URL, its path a key as listed: never an fsspec chain (`::` is
    legal in a key: `s3://b/a::b.jsonl`), and never an s3fs version (`?versionId=` is legal
    in a key too); an http(s) URL keeps its query (a presigned URL's signature)."""
    try:
        import fsspec
    except ImportError:
        raise RemoteUnavailable(f"reading {protocol(url)}:// URLs needs {extra_hint(url)}") from None
    name = protocol(url)
    try:
        cls = fsspec.get_filesystem_class(name)
    except ImportError:
        raise RemoteUnavailable(f"reading {name}:// URLs needs {extra_hint(url)}") from None
    except ValueError as exc:  # "Protocol not known: foo"
        raise RemoteUnavailable(f"{display_url(url)}: {scrub(str(exc))}") from None
    if name in ("s3", "s3a"):
        cls = _keys_as_listed(cls)
    options = cls._get_kwargs_from_urls(url) if name in ("http", "https") else {}
    return cls(**options), cls._strip_protocol(url)


_KEYS: dict[Any, Any] = {}
_HIDDEN = "\x00versionId\x00"  # stands in while s3fs splits: no key holds NUL around it


def _keys_as_listed(cls: Any) -> Any:
    """s3fs's filesystem, reading a path as bucket and key only: s3fs cuts `?versionId=...`
    off every key (a version to fetch, even when not version aware)."""
    if cls not in _KEYS:
        def split_path(self: Any, path: str) -> tuple[str, str, None]:
            bucket, key, _ = cls.split_path(self, path.replace("?versionId=", _HIDDEN))
            return bucket, key.replace(_HIDDEN, "?versionId="), None

        _KEYS[cls] = type(cls.__name__, (cls,), {"split_path": split_path,
                                                 "__module__": __name__})
    return _KEYS[cls]


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


class RemoteFile:
    """A data file at a URL, as the audit reads it. Hooks receive it as ``path``: it has
    ``url``, ``name``, ``suffix``, ``size`` and ``open()`` (a binary file object)."""

    def __init__(self, url: str, size: int | None = None, tag: str = ""):
        self.url = url
        self.display = display_url(url)
        self.size = size
        self.tag = tag  # ETag or modification time: a rewritten object is another file
        self.name = url_name(self.display)
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
        VERSIONS), else None: run/cache.py reuses a remote file's result only by it."""
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

    def changed(self) -> str | None:
        """Why the object is not the one listed, or None. The audit reads it by the
        listing's size (no request for it): an object rewritten since, larger, smaller or
        of the same size, was not read as it is. One metadata request."""
        try:
            fs, path = filesystem(self.url)
            fs.invalidate_cache(path)  # the listing's answer is cached: ask again
            info = fs.info(path)
        except FileNotFoundError:
            return f"{CHANGED} (deleted): run the audit again"
        except Exception as exc:  # noqa: BLE001 - unknown is not unchanged
            return f"{UNCHECKED}: {describe(exc)}"
        size, tag = info.get("size"), _tag(info)
        if self.size is not None and isinstance(size, int) and size != self.size:
            return f"{CHANGED} ({self.size:,} bytes then, {size:,} now): run the audit again"
        if self.tag and tag and tag != self.tag:
            return f"{CHANGED} (a new version of the same size): run the audit again"
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
# blob id), so an unchanged value means unchanged bytes, and run/cache.py may key a file by it.
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
              data_suffixes: frozenset[str] | set[str]) -> Listing:
    """List a URL root: a file, or every file below a prefix. Unlistable if it cannot be
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
        raise Unlistable(f"cannot list {display_url(url)}: {describe(exc)}") from None
    files, unmatched = [], []
    for name in sorted(infos):
        info = infos[name]
        if info.get("type", "file") != "file":
            continue
        if base is None:  # the root is the file (its name without an http query)
            file_url, rel = url, url_name(display_url(url))
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
