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


def url_name(url: str) -> str:
    """The file name a URL ends in: for http(s) the path's last part (the query is no part
    of it), for a store the key's (a key may hold `?`: `c?versionId=1.jsonl`)."""
    if protocol(url) in ("http", "https"):
        url = urlsplit(url).path
    return url.rstrip("/").rsplit("/", 1)[-1]


def display_url(url: str) -> str:
    """The URL as node ids, findings, messages and reports show it: never a user:password@
    nor the value of a credential parameter (`sig=***`, `X-Amz-Signature=***`, ...), for
    http(s) no fragment. The rest of the query stays: `?versionId=1` and `?versionId=2`
    are two objects, so two items (two URLs that differ only in a credential's value show
    as one: run/remote.py refuses them)."""
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    if protocol(url) in ("http", "https"):
        url = urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))
    elif netloc != parts.netloc:
        url = url.replace(parts.netloc, netloc, 1)
    return _SECRET_PARAM.sub(r"\1=***", url) if "?" in url else url


# A query parameter whose value is a credential: Azure SAS `sig`, S3 / GCS presigned
# `X-Amz-Signature`, `X-Amz-Credential`, `X-Amz-Security-Token`, `X-Goog-Signature`, and
# any name holding signature, credential, token, secret, password or key.
_SECRET_PARAM = re.compile(
    r"(?i)(?<=[?&;])((?:[\w.\-]*(?:signature|credential|token|secret|password|key)[\w.\-]*)|sig)"
    r"=[^&#\s\"'<>]*")
def secret_params(url: str) -> list[str]:
    """The names of the query parameters of `url` whose values are credentials, in order."""
    if "?" not in url:
        return []
    return [m.group(1) for m in _SECRET_PARAM.finditer(url)]


# user:password@ (or a lone token@) after a scheme, anywhere in a text.
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]+://)[^/@\s\"'<>]+@")


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
    """`text` with every known credential value replaced by ***, and every URL in it without
    user:password@ and without the values of credential parameters (see display_url)."""
    for secret in sorted(_secrets(), key=len, reverse=True):
        text = text.replace(secret, "***")
    text = _USERINFO.sub(r"\1", text)
    # A value ends at & or white space, or at a colon before white space ("...: no such file").
    value = r"=[^&\s\"']+?(?=[&\s\"']|:\s|:?$)"
    text = re.sub(r"(?i)(signature|credential|token|key|password|secret)" + value, r"\1=***", text)
    return re.sub(r"(?i)(?<![a-z0-9])(sig)" + value, r"\1=***", text)
