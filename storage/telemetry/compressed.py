"""Long strings stored compressed on SQLite: ``{"$zstd": base64 of the zstd frame of the UTF-8}``.

Model spans carry prompts, message histories and tool definitions as long strings, which
compress several-fold; short values (ids, names, numbers as text) stay readable in the JSON
columns. The tag is one more of ``storage.telemetry.spans``'s JSON tags, untagged on load.
"""

from __future__ import annotations

import base64

from sqlalchemy.engine import Dialect

from toolscore.storage.plumbing.dialect import compresses_large_values
from toolscore.storage.plumbing.zstd_codec import compressor, decompressor

# Strings at least this long (in characters) are stored compressed.
COMPRESS_AT = 512
TAG = "$zstd"
LEVEL = 1


def compresses_values(dialect: Dialect) -> bool:
    """Whether rows for this database get their long strings packed. PostgreSQL compresses each
    large ``jsonb`` value whole (TOAST), which keeps more than packing its strings one by one
    (measured: bench_real_traffic.py); SQLite stores the JSON text as it is."""
    return not compresses_large_values(dialect)


def pack(text: str) -> dict[str, str]:
    """``text`` as its tagged, compressed JSON form."""
    frame = compressor(LEVEL).compress(text.encode("utf-8"))
    return {TAG: base64.b64encode(frame).decode("ascii")}


def unpack(encoded: str) -> str:
    """Inverse of :func:`pack` (given the tag's value)."""
    return decompressor().decompress(base64.b64decode(encoded)).decode("utf-8")
