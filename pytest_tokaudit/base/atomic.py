"""Writing a report file safely: checked before any work, replaced atomically, never half-written."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path
from typing import Any, BinaryIO, Iterator

import orjson


class Unwritable(ValueError):
    """A report's target that cannot be written; the message names the option. The pytest
    plugin makes it a usage error, the merge command an exit status of 2."""


def check_writable(path: str | os.PathLike, option: str) -> None:
    """Unwritable (naming `option`) unless `write` could write `path`; call it before any work.

    Creates and removes a temporary file where the report would go: permission bits alone
    do not tell (root ignores them; a read-only mount does not).
    """
    path = Path(path)
    try:
        st = path.stat()
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise Unwritable(f"{option}: cannot write {path}: {exc.strerror}") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise Unwritable(f"{option}: cannot write {path}: it is a directory")
    if st is not None and not stat.S_ISREG(st.st_mode):
        if not os.access(path, os.W_OK):  # a FIFO or a device, written straight to
            raise Unwritable(f"{option}: cannot write {path}: permission denied")
        return
    directory = _target(path).parent
    if not directory.is_dir():
        what = "is not a directory" if directory.exists() else "does not exist"
        raise Unwritable(f"{option}: cannot write {path}: {directory} {what}")
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tokaudit-", suffix=".tmp")
    except OSError as exc:
        raise Unwritable(
            f"{option}: cannot write {path}: cannot create a file in {directory}: {exc.strerror}"
        ) from None
    os.close(fd)
    os.unlink(tmp)


def write(path: str | os.PathLike, data: dict[str, Any]) -> str | None:
    """Write the report; None, or a one-line message saying why it could not be written.

    Never raises for that: the caller prints the message, and the run's summary and verdict
    stand. A regular file at `path` (or none) is replaced atomically through a fresh
    temporary file in the same directory, so a reader (or a later --tokaudit-baseline)
    never sees half a file; a symlink is followed and its target replaced so; a FIFO or a
    device is written straight to.
    """
    try:
        payload = orjson.dumps(data, option=orjson.OPT_INDENT_2)
    except orjson.JSONEncodeError as exc:
        return f"cannot write the JSON report {path}: {exc}"
    return put(path, payload, "the JSON report")


def put(path: str | os.PathLike, payload: bytes, what: str) -> str | None:
    """Write `payload` to `path` through `replacing`; None, or why not (never raises for that)."""
    try:
        with replacing(Path(path)) as fh:
            fh.write(payload)
    except OSError as exc:
        return f"cannot write {what} {path}: {exc.strerror or exc}"
    return None


def _target(path: Path) -> Path:
    """The file a write to `path` lands in: a symlink's final target, else `path`."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


@contextlib.contextmanager
def replacing(path: Path, sync: bool = True) -> Iterator[BinaryIO]:
    """A binary file whose bytes stand for `path` once the block ends without an error.

    A FIFO or a device is written in place (never replaced: the plugin never swaps a
    special file for a regular one). A regular file, or none, is replaced whole through a
    fresh temporary file in its directory, keeping an existing file's mode; a symlink is
    followed and its target replaced so. A reader never sees half a file.
    """
    path = Path(path)
    try:
        st = path.stat()  # follows a symlink
    except FileNotFoundError:
        st = None  # nothing there, or a symlink to nothing yet: create it
    if st is not None and not stat.S_ISREG(st.st_mode):
        with open(path, "wb") as fh:  # a FIFO's reader gets the bytes; a directory raises
            yield fh
        return
    target = _target(path)
    # mkstemp: a new name, O_EXCL, mode 0600; nothing anyone left there is followed.
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            if sync:
                fh.flush()
                os.fsync(fh.fileno())
        os.chmod(tmp, stat.S_IMODE(st.st_mode) if st is not None else 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
