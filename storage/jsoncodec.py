"""Fast JSON with the standard library's semantics: orjson where it reads and writes exactly what
``json`` would, the standard library where it would not.

Used for the JSON columns (``storage.engine``) and for the JSON inside span attributes that
reconstruction parses (``toolscore.collector.conventions``), both on the scoring hot path.
"""

from __future__ import annotations

import json
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


# orjson reads integers beyond 64 bits as floats (silently): texts with a run of 19 or more
# digits go to the standard library (digits inside strings raise false alarms: they cost only
# speed). The test maps every byte to "0" (a digit) or " " and looks for the run: about 1 us per KB,
# a fraction of the parse itself (a regular expression costs more than json.loads).
_DIGITS_AS_ZERO = bytes(0x30 if 0x30 <= i <= 0x39 else 0x20 for i in range(256))
_LONG_RUN = b"0" * 19


def json_loads(text: str | bytes) -> Any:
    """Fast JSON for JSON columns (orjson), with the standard library's exact semantics: texts
    orjson refuses (NaN, lone surrogates) or would read differently (integers beyond 64 bits)
    are read by ``json.loads``."""
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if _LONG_RUN in raw.translate(_DIGITS_AS_ZERO):
        return json.loads(text)
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)
