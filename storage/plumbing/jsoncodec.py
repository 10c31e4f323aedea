"""Fast JSON with the standard library's semantics: orjson where it reads and writes exactly what
``json`` would, the standard library where it would not.

Used for the JSON columns (``storage.plumbing.engine``) and for the JSON inside span attributes that
reconstruction parses (``toolscore.collector.reconstruction.conventions``), both on the scoring hot
path.
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


class LineCodec:
    """The same semantics for JSON Lines as bytes (``toolscore score``'s hot loop): the
    functions are attributes so that the loop looks them up once, and the long-number test
    can be made once for a whole chunk of lines, which then go straight to orjson."""

    def __init__(self) -> None:
        self.json_loads, self._json_dumps = json.loads, json.dumps
        self.orjson_loads, self.orjson_dumps = orjson.loads, orjson.dumps
        self.newline = orjson.OPT_APPEND_NEWLINE

    def has_long_numbers(self, data: bytes) -> bool:
        """Whether ``data`` may hold an integer that orjson would not read as ``json`` does."""
        return _LONG_RUN in data.translate(_DIGITS_AS_ZERO)

    def loads(self, data: bytes) -> Any:
        """Decode one line whatever it holds."""
        if self.has_long_numbers(data):
            return self.json_loads(data)
        try:
            return self.orjson_loads(data)
        except ValueError:
            pass  # NaN, Infinity, lone surrogates: json accepts them, as Ragas users' json does
        return self.json_loads(data)

    def dumps(self, row: Any) -> bytes:
        """One output line."""
        try:
            return self.orjson_dumps(row, None, self.newline)
        except TypeError:  # e.g. an integer id beyond 64 bits
            text: str = self._json_dumps(row, ensure_ascii=False)
            return text.encode("utf-8", "surrogatepass") + b"\n"
