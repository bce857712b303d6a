"""Codecs: inflated bytes of .gz and .zst streams in bounded chunks."""

from __future__ import annotations

import gzip
import zlib
from typing import BinaryIO, Iterator

from .base import ReadError

BUFFER = 1 << 20


# Compressed bytes handed to zstd per call. A zstd block can inflate ~32,000 times (a run
# of one byte), so this bounds one call's output to ~32 MiB; ordinary JSONL is not slower.
ZSTD_FEED = 1 << 10


def zstd_chunks(fh: BinaryIO, size: int) -> Iterator[bytes]:
    """Decompressed data of back-to-back zstd frames; notices truncation and corruption.

    Whatever inflated before an error is yielded first, so the lines of a good frame
    followed by garbage or a corrupt frame are still audited.
    """
    try:
        import zstandard
    except ImportError:
        raise ReadError(
            "reading .zst files needs the zstandard package: pip install 'pytest-tokaudit[zstd]'"
        ) from None
    new = zstandard.ZstdDecompressor().decompressobj
    obj = None  # None between frames
    out: list[bytes] = []
    held = 0
    while block := fh.read(BUFFER):
        for at in range(0, len(block), ZSTD_FEED):
            data = block[at : at + ZSTD_FEED]
            while data:
                if obj is None:
                    obj = new()
                try:
                    piece = obj.decompress(data)
                except zstandard.ZstdError as exc:
                    if out:
                        yield b"".join(out)
                    raise ReadError(f"corrupt zstd data: {exc}") from None
                data = b""
                if obj.eof:  # a file may hold several frames back to back
                    data, obj = obj.unused_data, None
                if piece:
                    out.append(piece)
                    held += len(piece)
            if held >= size:
                yield b"".join(out)
                out, held = [], 0
    if out:
        yield b"".join(out)
    if obj is not None:
        raise EOFError("compressed data ends before the end of the zstd frame")


def gzip_chunks(gz: gzip.GzipFile, size: int) -> Iterator[bytes]:
    """Inflated data in chunks of about `size`, gathered from read1 steps (~8 KiB of input
    each, so the data before an error is kept: it is yielded before the error is raised)."""
    out: list[bytes] = []
    held = 0
    while True:
        try:
            piece = gz.read1(size)
        except (EOFError, OSError, zlib.error):
            if out:
                yield b"".join(out)
            raise
        if not piece:
            break
        out.append(piece)
        held += len(piece)
        if held >= size:
            yield b"".join(out)
            out, held = [], 0
    if out:
        yield b"".join(out)


def inflate(fh: BinaryIO, name: str, size: int) -> Iterator[bytes]:
    """The inflated bytes of a .gz or .zst stream (by its name), in chunks of about `size`."""
    if name.endswith(".gz"):
        with gzip.GzipFile(fileobj=fh) as gz:
            yield from gzip_chunks(gz, size)
    else:
        yield from zstd_chunks(fh, size)
