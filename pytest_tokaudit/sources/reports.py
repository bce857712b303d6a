"""Reading a --tokaudit-json report back, from a path or a URL (the baseline, `merge`)."""

from __future__ import annotations

import os
from pathlib import Path

import orjson

from ..base.urls import display_url, is_url
from ..model.report import Report, ReportError, validate
from .remote import RemoteUnavailable, read_bytes


def load(path: str | os.PathLike) -> Report:
    """A report written by --tokaudit-json; ReportError says what is wrong with it."""
    try:
        if is_url(str(path)):  # a report at a URL (s3://...): read through fsspec
            path = str(path)
            try:
                raw = read_bytes(path)
            except RemoteUnavailable as exc:
                raise ReportError(f"cannot read {display_url(path)}: {exc}") from None
            path = display_url(path)
        else:
            raw = Path(path).read_bytes()
        data = orjson.loads(raw)
    except OSError as exc:
        raise ReportError(f"cannot read {path}: {exc.strerror}") from None
    except orjson.JSONDecodeError as exc:
        raise ReportError(f"{path} is not JSON: {exc}") from None
    return validate(data, str(path))
