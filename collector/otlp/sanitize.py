"""What the database schema cannot hold, checked per item before it reaches a transaction.

One value the database refuses fails the whole group commit it is part of, so decode rejects the
item that carries it (OTLP partial success) and keeps its neighbours:

- times beyond the signed 64-bit columns (``fixed64`` allows up to 2^64-1, i.e. after 2262);
- an attribute that names a conversation or a reference (a key: conversation ids are primary
  keys and btree-indexed) holding NUL, which PostgreSQL text refuses, or longer than
  ``max_key_bytes``, under the btree entry limit (~2700 bytes). Such a value is never changed
  to fit: a shortened or escaped id could merge two conversations.

Other text is made safe where it is stored (storage/telemetry/spans.py: NUL in JSON values tagged,
in plain columns replaced), and nesting is cut at a depth limit in decode.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from toolscore.collector.reconstruction.conversation_keys import (
    DEFAULT_CONVERSATION_KEYS,
    DEFAULT_REFERENCE_KEY,
    expand,
    names_any,
)

MAX_INT64 = 2**63 - 1
DEFAULT_MAX_KEY_BYTES = 1024
#: Attributes whose value the conversation hook turns into ids (collector/pipeline/assign.py).
DEFAULT_KEY_ATTRIBUTES: tuple[str, ...] = (*DEFAULT_CONVERSATION_KEYS, DEFAULT_REFERENCE_KEY)


def time_problem(value: int, field: str) -> str | None:
    """Why the time ``field`` (Unix nanoseconds) cannot be stored, or None."""
    if value > MAX_INT64:
        return f"{field} is beyond the signed 64-bit range (after the year 2262)"
    return None


def key_problem(attrs: Mapping[str, Any], keys: Sequence[str], max_bytes: int) -> str | None:
    """Why one of the id-naming attributes ``keys`` in ``attrs`` cannot be used as an id, or None.

    Mirrors how collector/reconstruction/conversation_keys.py reads them: only non-empty scalar
    values count,
    as their stripped text (numbers are short, so only strings need checking).
    """
    named = tuple(keys)
    if not names_any(named, attrs):
        return None  # the usual span: it carries none of them
    for key in expand(named, attrs):
        value = attrs.get(key)
        if type(value) is not str:
            continue
        if "\x00" in value:
            return f"attribute {key} contains a NUL character; it names an id and is not altered"
        if len(value) * 4 > max_bytes and len(value.strip().encode("utf-8")) > max_bytes:
            return f"attribute {key} is longer than the {max_bytes}-byte limit for ids"
    return None


__all__ = [
    "DEFAULT_KEY_ATTRIBUTES",
    "DEFAULT_MAX_KEY_BYTES",
    "MAX_INT64",
    "key_problem",
    "time_problem",
]
