"""Reading a --tokaudit-json report back, from a path or a URL (the baseline, `merge`)."""

from __future__ import annotations

import os
from pathlib import Path

import orjson

from ..base.urls import display_url, is_url, scrub
from ..model.report import Report, ReportError, validate
from .remote import RemoteUnavailable, read_bytes


def load(path: str | os.PathLike, ids: bool = True) -> Report:
    """A report written by --tokaudit-json; ReportError says what is wrong with it.
    `ids=False`: without its record ids (the baseline compares per-file figures)."""
    # A URL is shown without what would be a credential in it (user:password@, a signature).
    shown = display_url(str(path)) if is_url(str(path)) else str(path)
    try:
        if is_url(str(path)):  # a report at a URL (s3://...): read through fsspec
            try:
                raw = read_bytes(str(path))
            except RemoteUnavailable as exc:
                raise ReportError(f"cannot read {shown}: {scrub(str(exc))}") from None
        else:
            raw = Path(path).read_bytes()
        data = orjson.loads(raw)
    except OSError as exc:
        raise ReportError(f"cannot read {shown}: {scrub(str(exc.strerror))}") from None
    except orjson.JSONDecodeError as exc:
        raise ReportError(f"{shown} is not JSON: {exc}") from None
    return validate(data, shown, ids)
