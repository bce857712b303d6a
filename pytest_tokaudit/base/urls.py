"""URLs as the plugin shows them: recognised, worded without credentials."""

from __future__ import annotations

import os
import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

# scheme:// (two letters at least: a Windows drive letter is not a scheme)
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]+://")


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
