"""Codecs: inflated bytes of .gz and .zst streams in bounded chunks."""

from __future__ import annotations

import functools
import gzip
from typing import BinaryIO, Iterator

from .base import ReadError

BUFFER = 1 << 20


# Compressed bytes handed to zstd per call. A zstd block can inflate ~32,000 times (a run
# of one byte), so this bounds one call's output to ~32 MiB; ordinary JSONL is not slower.
ZSTD_FEED = 1 << 10


def gathered(pieces: Iterator[bytes], size: int) -> Iterator[bytes]:
    """`pieces` joined into chunks of about `size`; whatever came before an error is
    yielded first, then the error raised (the lines before a corrupt part are audited)."""
    out: list[bytes] = []
    held = 0
    try:
        for piece in pieces:
            out.append(piece)
            held += len(piece)
            if held >= size:
                yield b"".join(out)
                out, held = [], 0
    except Exception:
        if out:
            yield b"".join(out)
        raise
    if out:
        yield b"".join(out)


def zstd_pieces(fh: BinaryIO) -> Iterator[bytes]:
    """Decompressed data of back-to-back zstd frames, as it comes; notices truncation and
    corruption."""
    try:
        import zstandard
    except ImportError:
        raise ReadError(
            "reading .zst files needs the zstandard package: pip install 'pytest-tokaudit[zstd]'"
        ) from None
    new = zstandard.ZstdDecompressor().decompressobj
    obj = None  # None between frames
    while block := fh.read(BUFFER):
        for at in range(0, len(block), ZSTD_FEED):
            data = block[at : at + ZSTD_FEED]
            while data:
                if obj is None:
                    obj = new()
                try:
                    piece = obj.decompress(data)
                except zstandard.ZstdError as exc:
                    raise ReadError(f"corrupt zstd data: {exc}") from None
                data = b""
                if obj.eof:  # a file may hold several frames back to back
                    data, obj = obj.unused_data, None
                if piece:
                    yield piece
    if obj is not None:
        raise EOFError("compressed data ends before the end of the zstd frame")


def inflate(fh: BinaryIO, name: str, size: int) -> Iterator[bytes]:
    """The inflated bytes of a .gz or .zst stream (by its name), in chunks of about `size`;
    whatever inflated before an error first (see gathered): gzip's read1 steps take ~8 KiB
    of input each."""
    if name.endswith(".gz"):
        with gzip.GzipFile(fileobj=fh) as gz:
            yield from gathered(iter(functools.partial(gz.read1, size), b""), size)
    else:
        yield from gathered(zstd_pieces(fh), size)
