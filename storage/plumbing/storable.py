"""Text and JSON the databases can hold, made from whatever reconstruction and scoring produced.

Neither database stores every Python string: a lone surrogate (``"\\ud800"``, which JSON's
``\\ud800`` escape decodes to) has no UTF-8 form, so SQLite's and PostgreSQL's drivers both refuse
it; PostgreSQL also refuses NUL in ``text`` and ``\\u0000`` in ``jsonb``. One such value used to
fail the write of a whole scoring round, on every retry. The rule, the same on both dialects so
that both store the same rows: each NUL and each lone surrogate becomes U+FFFD (a valid surrogate
pair becomes the character it encodes), and the caller is told that something was replaced so it
can record the fact. JSON nested deeper than ``MAX_ARGUMENT_DEPTH`` levels is not stored at all
(the JSON encoders recurse, and the scorer refuses such arguments anyway).
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from toolscore.scorer.nesting import MAX_ARGUMENT_DEPTH, depth_exceeds

__all__ = ["TOO_DEEP", "escaped_json", "storable_json", "storable_text", "text_needs_fixing"]

REPLACEMENT = "\ufffd"
TOO_DEEP = f"nested deeper than {MAX_ARGUMENT_DEPTH} levels"


def text_needs_fixing(text: str) -> bool:
    """Whether ``text`` holds a NUL or a surrogate code point."""
    if "\x00" in text:
        return True
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def storable_text(text: str) -> str:
    """``text`` with NUL and lone surrogates replaced by U+FFFD (the same object when clean)."""
    if not text_needs_fixing(text):
        return text
    # UTF-16 with surrogatepass pairs up what can be paired; "replace" turns the rest into U+FFFD.
    fixed = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return fixed.replace("\x00", REPLACEMENT)


def storable_json(value: Any) -> tuple[Any, str | None]:
    """``value`` made storable, and ``None`` or why it changed (``"text replaced"``: some NUL or
    lone surrogate in a key or string became U+FFFD; :data:`TOO_DEEP`: not stored, ``None``).

    Clean values (the usual case) come back as the same object after one orjson pass.
    """
    try:
        if b"\\u0000" not in orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS):
            return value, None
    except TypeError:  # lone surrogates, > 255 levels, integers beyond 64 bits
        pass
    if depth_exceeds(value):
        return None, TOO_DEEP
    fixed, changed = _rebuild(value)
    return fixed, ("text replaced" if changed else None)


def _rebuild(value: Any) -> tuple[Any, bool]:
    """A copy of a JSON value with every key and string made storable (iterative)."""
    changed = False
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(value, root, 0)]  # (value, container, slot)
    while stack:
        item, container, slot = stack.pop()
        if isinstance(item, str):
            new = storable_text(item)
            changed = changed or new is not item
            container[slot] = new
        elif isinstance(item, dict):
            out: dict[Any, Any] = {}
            container[slot] = out
            for key, child in item.items():
                safe = storable_text(key) if isinstance(key, str) else key
                changed = changed or safe is not key or safe in out
                out[safe] = None  # the slot, in the original key order
                stack.append((child, out, safe))
        elif isinstance(item, list | tuple):
            seq: list[Any] = [None] * len(item)
            container[slot] = seq
            stack.extend((child, seq, i) for i, child in enumerate(item))
        else:
            container[slot] = item
    return root[0], changed


def escaped_json(value: Any) -> str | None:
    """Loss-free ASCII JSON of ``value`` (NUL and lone surrogates as ``\\u`` escapes), or
    ``None`` when it nests too deep to encode."""
    if depth_exceeds(value):
        return None
    try:
        return json.dumps(value, ensure_ascii=True, default=str)
    except (TypeError, ValueError, RecursionError):
        return None
