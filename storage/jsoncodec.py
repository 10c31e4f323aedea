"""Fast JSON with the standard library's semantics: orjson where it reads and writes exactly what
``json`` would, the standard library where it would not.

Used for the JSON columns (``storage.engine``) and for the JSON inside span attributes that
reconstruction parses (``collector.conventions``), both on the scoring hot path.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

__all__ = ["json_dumps", "json_loads"]


def json_dumps(value: Any) -> str:
    """Fast JSON for JSON columns (orjson), falling back to the standard library for values
    orjson refuses (integers beyond 64 bits)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode("utf-8")
    except TypeError:
        return json.dumps(value, ensure_ascii=False)


# orjson reads integers beyond 64 bits as floats (silently): texts that may hold one (19 or more
# digits where a JSON number can start) go to the standard library. Digits inside a string, as in
# an id "run-1764491234567890123", do not count; a false alarm only costs speed.
_LONG_NUMBER = r"(?:^|[\[:,\s])-?[0-9]{19}"
_LONG_DIGITS = re.compile(_LONG_NUMBER)
_LONG_DIGITS_BYTES = re.compile(_LONG_NUMBER.encode())


def json_loads(text: str | bytes) -> Any:
    """Fast JSON for JSON columns (orjson), with the standard library's exact semantics: texts
    orjson refuses (NaN, lone surrogates) or would read differently (integers beyond 64 bits)
    are read by ``json.loads``."""
    if isinstance(text, str):
        if _LONG_DIGITS.search(text):
            return json.loads(text)
    elif _LONG_DIGITS_BYTES.search(text):
        return json.loads(text)
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)
