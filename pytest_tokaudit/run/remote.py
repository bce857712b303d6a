"""Data at URLs (s3://, gs://, hf://, https://) collected as items, listed once on the controller."""

from __future__ import annotations

import fnmatch
from typing import Any, Callable
from urllib.parse import urlsplit

import pytest

from ..base.urls import display_url, is_url, secret_params
from ..sources.remote import Listing, RemoteFile, RemoteUnavailable, Unlistable, list_root
from .config import CONTRACT
from .coverage import DATA_SUFFIXES
from .items import AuditItem, FileItems, WholeFileItem, data_file_nodeid

WORKERINPUT = "tokaudit_remote"


PLUGIN = "tokaudit.remote"


FROM_TESTPATHS = pytest.StashKey[list]()


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
        if "@" in urlsplit(url_of(url)).netloc:
            raise pytest.UsageError(
                f"{display_url(url)}: a URL must not carry credentials (user:password@); "
                "configure them for fsspec instead"
            )
    for url in testpath_urls:
        secret = secret_params(url)
        if secret:  # refused before pytest's session header is printed
            raise pytest.UsageError(
                f"testpaths: {display_url(url)} carries a credential ({', '.join(secret)}), "
                "and pytest prints testpaths whole in its session header: give the storage its "
                "own credentials (fsspec's configuration, or its environment variables: "
                "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, HF_TOKEN, ...) and name the "
                "object by its store URL (s3://bucket/key), or pass the signed URL on the "
                "command line, which pytest does not print")
    config.pluginmanager.register(Remote(config, collected, testpath_urls, named), PLUGIN)


def url_of(arg: str) -> str:
    """The URL of a URL argument, which may end in one of the plugin's item names
    (`s3://b/a.jsonl::tokaudit[shard 1]`); any other `::` is the key's own
    (`s3://b/a::b.jsonl`)."""
    return data_file_nodeid(arg) or arg


def source_of(config: pytest.Config, display: str) -> Any:
    """The file a summary's path names: a RemoteFile for a URL, else a local Path."""
    from pathlib import Path

    remote = config.pluginmanager.get_plugin(PLUGIN)
    if remote is not None and is_url(display):
        found = remote.file(display)
        if found is not None:
            return found
    return Path(config.rootpath, display)


class Remote:
    """Lists the URL roots (on the controller), makes their items (everywhere), and tells the
    controller's coverage which remote files make up the dataset."""

    def __init__(self, config: pytest.Config, collected: list[str], testpaths: list[str],
                 named: list[str]):
        self.config = config
        # A URL argument may name an item: s3://b/a.jsonl::tokaudit[shard 1]
        self.collected = list(dict.fromkeys(url_of(a) for a in collected))
        self.selectors: dict[str, list[str]] = {url_of(a): [] for a in collected}
        for a in collected:
            if url_of(a) != a:  # matched against node ids, which show the URL (display_url)
                self.selectors[url_of(a)].append(display_url(url_of(a)) + a[len(url_of(a)):])
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
                first = self.files.setdefault(f.display, f)
                if first.url != url:
                    # Its items, reports and cache entry would be one file's: refused, not
                    # one of them audited in the other's name.
                    raise pytest.UsageError(
                        f"{f.display} names two URLs that differ only in the value of a "
                        "credential parameter, which is never shown: audit them in separate "
                        "runs, or name them apart by another parameter")

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
        contract = self.config.stash[CONTRACT]
        norecurse = self.config.getini("norecursedirs")
        ignore_glob = self.config.getoption("ignore_glob", None) or []
        ignore = [i for i in (self.config.getoption("ignore", None) or []) if is_url(i)]
        for root in self.roots:
            try:
                listing = list_root(root, contract.glob, norecurse, DATA_SUFFIXES)
            except RemoteUnavailable as exc:
                raise pytest.UsageError(f"{display_url(root)}: {exc}") from None
            except Unlistable as exc:  # the run stops, as for a local path not found
                raise pytest.UsageError(str(exc)) from None
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
        cov.named += [display_url(url_of(n)) for n in self.named]

    def make_whole_file(self, session: pytest.Session, display: str) -> pytest.Item | None:
        """The controller under xdist: a remote file's [file] item, from the listing."""
        source = self.files.get(display)
        if source is None:
            return None
        node = RemoteDataFile.from_parent(session, name=display, nodeid=display, source=source)
        for item in node.collect():
            if isinstance(item, WholeFileItem):
                return item
        return None


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
