"""OTLP attribute values (AnyValue, KeyValue lists) -> Python values, within limits.

String and bytes values over the size limit are truncated and values nested deeper than the
depth limit are cut there (the too-deep part becomes None); the keys so changed are listed in
the attribute ``toolscore.truncated``. Pure functions, used by collector/otlp/decode.py.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

TRUNCATED_ATTRIBUTE = "toolscore.truncated"
# Arrays / key-value lists inside one value. Under the JSON encoder's limit (254 levels, with
# the attributes and events around the value) and Python's recursion limit; protobuf's own
# parser already stops near 47 levels of AnyValue.
DEFAULT_MAX_VALUE_DEPTH = 64


class Truncation:
    """Collects truncations while one item's values are converted."""

    __slots__ = ("limit", "max_depth", "total")

    def __init__(self, limit: int, max_depth: int = DEFAULT_MAX_VALUE_DEPTH) -> None:
        self.limit = limit
        self.max_depth = max_depth
        self.total = 0

    def text(self, value: str) -> tuple[str, bool]:
        if len(value) * 4 <= self.limit:  # cannot be over, whatever its characters
            return value, False
        encoded = value.encode("utf-8")
        if len(encoded) <= self.limit:
            return value, False
        self.total += 1
        return encoded[: self.limit].decode("utf-8", "ignore"), True

    def raw(self, value: bytes) -> tuple[bytes, bool]:
        if len(value) <= self.limit:
            return value, False
        self.total += 1
        return value[: self.limit], True


def any_value(value: AnyValue, trunc: Truncation, depth: int = 1) -> tuple[Any, bool]:
    """Decode one AnyValue (every OTLP type) -> (python value, was anything truncated).

    ``depth`` counts the arrays / key-value lists around ``value``; one nested deeper than
    ``trunc.max_depth`` becomes None (counted as a truncation)."""
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return trunc.text(value.string_value)
    if kind == "int_value":
        return value.int_value, False
    if kind == "bool_value":
        return value.bool_value, False
    if kind == "double_value":
        return value.double_value, False
    if kind == "bytes_value":
        return trunc.raw(value.bytes_value)
    if kind in ("array_value", "kvlist_value") and depth > trunc.max_depth:
        trunc.total += 1
        return None, True
    if kind == "array_value":
        out_list: list[Any] = []
        cut = False
        for item in value.array_value.values:
            decoded, c = any_value(item, trunc, depth + 1)
            out_list.append(decoded)
            cut = cut or c
        return out_list, cut
    if kind == "kvlist_value":
        out_map: dict[str, Any] = {}
        cut = False
        for kv in value.kvlist_value.values:
            decoded, c = any_value(kv.value, trunc, depth + 1)
            out_map[kv.key] = decoded
            cut = cut or c
        return out_map, cut
    return None, False  # an empty AnyValue


def attributes(kvs: Any, trunc: Truncation) -> dict[str, Any]:
    """Flat attribute mapping; keys whose value was truncated are listed under TRUNCATED."""
    out: dict[str, Any] = {}
    cut_keys: list[str] = []
    short = trunc.limit // 4  # a string this long cannot be over the limit in UTF-8
    kv: KeyValue
    for kv in kvs:
        key = kv.key
        value = kv.value
        # Hot path (most attributes are scalars): inlined, no call per value. A non-empty
        # string_value can only be the oneof's string (saves WhichOneof for most values).
        text = value.string_value
        if text:
            if len(text) > short:
                text, cut = trunc.text(text)
                if cut:
                    cut_keys.append(key)
            out[key] = text
            continue
        kind = value.WhichOneof("value")
        if kind == "string_value":
            out[key] = text
        elif kind == "int_value":
            out[key] = value.int_value
        elif kind == "bool_value":
            out[key] = value.bool_value
        elif kind == "double_value":
            out[key] = value.double_value
        else:
            decoded, cut = any_value(value, trunc)
            out[key] = decoded
            if cut:
                cut_keys.append(key)
    if cut_keys:
        out[TRUNCATED_ATTRIBUTE] = cut_keys
    return out
