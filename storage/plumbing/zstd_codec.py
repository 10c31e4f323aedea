"""zstd (de)compressors kept per thread (zstandard's objects may not be shared between threads)
and, for compressing, per level: making one per call costs more than compressing a short string.
"""

from __future__ import annotations

import threading

import zstandard

_local = threading.local()


def compressor(level: int) -> zstandard.ZstdCompressor:
    """This thread's compressor at ``level``."""
    found: dict[int, zstandard.ZstdCompressor] | None = getattr(_local, "compressors", None)
    if found is None:
        found = _local.compressors = {}
    made = found.get(level)
    if made is None:
        made = found[level] = zstandard.ZstdCompressor(level=level)
    return made


def decompressor() -> zstandard.ZstdDecompressor:
    """This thread's decompressor (any level's frames)."""
    found: zstandard.ZstdDecompressor | None = getattr(_local, "decompressor", None)
    if found is None:
        found = _local.decompressor = zstandard.ZstdDecompressor()
    return found
