"""Split a protobuf OTLP request into chunk requests before parsing it.

Parsing a whole request cost up to 89x its wire size (2 MiB of empty spans, 2 bytes each, parse
to 170 MB; nested empty values 19-26x), so no factor on the body bounded it. Here only the
framing of the three outer levels (resource, scope, item: span or log record) is read, in
Python, without parsing the items; each chunk is a complete request of at most ``max_items``
items and about ``max_bytes``, whose resource and scope fields are copied from the body, so
parsing and decoding it gives exactly what the whole request gives for those items. Only one
chunk is parsed at a time, and what that costs is estimated from its items and bytes before it
is parsed (``chunk_cost``); an item bigger than ``max_bytes`` is a chunk alone and its nested
values are counted (``item_cost``). Runs in a decoder thread.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from toolscore.collector.otlp.decode import DecodeError
from toolscore.collector.receiver.limits import (
    DECODE_BYTES_FACTOR,
    ITEM_COST,
    NESTED_COST,
    PARSE_BYTES_FACTOR,
)

_LEN = 2  # wire type of length-delimited fields
_ITEMS = 2  # field number of scope_spans / scope_logs, and of spans / log_records in a scope
# Submessage fields of spans and log records, by message: what one nested value costs to parse.
_SPAN, _EVENT, _LINK, _KV, _ANY, _ARRAY, _KVLIST, _LOG, _LEAF = range(9)
_NESTED: dict[int, dict[int, int]] = {
    _SPAN: {9: _KV, 11: _EVENT, 13: _LINK, 15: _LEAF},
    _LOG: {5: _ANY, 6: _KV},
    _EVENT: {3: _KV},
    _LINK: {5: _KV},
    _KV: {2: _ANY},
    _ANY: {5: _ARRAY, 6: _KVLIST},
    _ARRAY: {1: _ANY},
    _KVLIST: {1: _KV},
    _LEAF: {},
}


@dataclass(frozen=True, slots=True)
class Chunk:
    data: bytes  # a serialised request of the same type as the body
    items: int
    cost: int  # bytes of memory parsing and decoding it may take (an upper estimate)


def chunk_cost(items: int, wire_bytes: int) -> int:
    """Upper estimate of parsing and decoding ``items`` items in ``wire_bytes`` (limits.py)."""
    return items * ITEM_COST + wire_bytes * (PARSE_BYTES_FACTOR + DECODE_BYTES_FACTOR)


def split(
    body: bytes | bytearray, logs: bool, max_items: int, max_bytes: int, limit: int
) -> Iterator[Chunk]:
    """Chunks of ``body`` (an ExportTraceServiceRequest, or ExportLogsServiceRequest when
    ``logs``) in order; resources and scopes without items are dropped (they decode to nothing).
    Raises DecodeError when the framing is not valid protobuf. ``limit``: stop counting a big
    item's nested values once its cost is over this (it will be refused anyway)."""
    what = "ExportLogsServiceRequest" if logs else "ExportTraceServiceRequest"
    view = memoryview(body)
    try:
        yield from _Splitter(view, _LOG if logs else _SPAN, max_items, max_bytes, limit).run()
    except (IndexError, _Malformed) as exc:
        raise DecodeError(f"body is not a valid {what}: {exc or 'truncated message'}") from None


class _Malformed(Exception):
    pass


class _Splitter:
    def __init__(self, view: memoryview, kind: int, max_items: int, max_bytes: int, limit: int):
        self.view = view
        self.kind = kind
        self.max_items = max_items
        self.max_bytes = max_bytes
        self.limit = limit
        # the chunk being filled: [(resource fields, [(scope fields, [[item start, end]])])],
        # contiguous items as one range
        self.groups: list[tuple[bytes, list[tuple[bytes, list[list[int]]]]]] = []
        self.items = 0
        self.size = 0

    def run(self) -> Iterator[Chunk]:
        view = self.view
        for number, start, end, wire_type, _ in _fields(view, 0, len(view)):
            if number != 1:
                continue  # unknown top-level field: ignored, as decoding ignores it
            if wire_type != _LEN:
                raise _Malformed(f"field 1 has wire type {wire_type}")
            resource, scopes = _partition(view, start, end)
            for _, scope_start, scope_end in scopes:
                scope, items = _partition(view, scope_start, scope_end)
                yield from self._scope(resource, scope, items)
        if self.items:
            yield self._flush()

    def _scope(
        self, resource: bytes, scope: bytes, items: list[tuple[int, int, int]]
    ) -> Iterator[Chunk]:
        """Add one scope's items, flushing chunks as they fill (the hot loop: one pass per item)."""
        ranges: list[list[int]] | None = None  # this scope's ranges in the current chunk
        for field_start, value_start, end in items:
            size = end - field_start
            if self.items and (self.items >= self.max_items or self.size + size > self.max_bytes):
                yield self._flush()
                ranges = None
            if size > self.max_bytes:  # a big item: alone, its nested values counted
                cost = item_cost(self.view[value_start:end], self.kind, self.limit)
                data = _request([(resource, [(scope, [[field_start, end]])])], self.view)
                yield Chunk(data, 1, cost)
                continue
            if ranges is None:
                ranges = self._ranges(resource, scope)
            if ranges and ranges[-1][1] == field_start:
                ranges[-1][1] = end
            else:
                ranges.append([field_start, end])
            self.items += 1
            self.size += size

    def _ranges(self, resource: bytes, scope: bytes) -> list[list[int]]:
        if not self.groups or self.groups[-1][0] is not resource:
            self.groups.append((resource, []))
        scopes = self.groups[-1][1]
        if not scopes or scopes[-1][0] is not scope:
            scopes.append((scope, []))
        return scopes[-1][1]

    def _flush(self) -> Chunk:
        data = _request(self.groups, self.view)
        chunk = Chunk(data, self.items, chunk_cost(self.items, self.size))
        self.groups, self.items, self.size = [], 0, 0
        return chunk


def item_cost(item: memoryview, kind: int, limit: int) -> int:
    """Upper estimate of parsing and decoding one item: its bytes (parsed copy and decoded
    copies), plus NESTED_COST for each nested message (attribute, value, event, link...: 2 wire
    bytes each at least). Stops counting once over ``limit``."""
    cost = ITEM_COST + len(item) * (1 + DECODE_BYTES_FACTOR)
    stack = [(kind, 0, len(item))]
    while stack:
        message, start, end = stack.pop()
        nested = _NESTED[message]
        if not nested:
            continue
        for number, value_start, value_end, wire_type, _ in _fields(item, start, end):
            child = nested.get(number)
            if child is not None and wire_type == _LEN:
                cost += NESTED_COST
                stack.append((child, value_start, value_end))
        if cost > limit:
            break
    return cost


def _partition(view: memoryview, start: int, end: int) -> tuple[bytes, list[tuple[int, int, int]]]:
    """A resource's (or scope's) own fields, copied, and where its children (field 2) are:
    (field start, value start, value end)."""
    own: list[memoryview] = []
    children: list[tuple[int, int, int]] = []
    pos = start
    while pos < end:
        if view[pos] == _ITEMS << 3 | _LEN:  # a child with a one-byte key: inlined (hot)
            length, value_start = view[pos + 1], pos + 2
            if length >= 0x80:
                length, value_start = _varint(view, pos + 1)
            value_end = value_start + length
            if value_end > end:
                raise _Malformed("truncated message")
            children.append((pos, value_start, value_end))
            pos = value_end
            continue
        number, value_start, value_end, wire_type = _field_at(view, pos, end)
        if number == _ITEMS:
            if wire_type != _LEN:
                raise _Malformed(f"field {number} has wire type {wire_type}")
            children.append((pos, value_start, value_end))
        else:
            own.append(view[pos:value_end])
        pos = value_end
    return b"".join(own), children


_Field = tuple[int, int, int, int, int]


def _fields(view: memoryview, start: int, end: int) -> Iterator[_Field]:
    """(field number, value start, value end, wire type, field start) of each field in
    ``view[start:end]``."""
    pos = start
    while pos < end:
        number, value_start, value_end, wire_type = _field_at(view, pos, end)
        yield number, value_start, value_end, wire_type, pos
        pos = value_end


def _field_at(view: memoryview, pos: int, end: int) -> tuple[int, int, int, int]:
    """(field number, value start, value end, wire type) of the field at ``pos``."""
    key, pos = _varint(view, pos)
    wire_type = key & 7
    if wire_type == 0:
        _, value_end = _varint(view, pos)
        value_start = pos
    elif wire_type == _LEN:
        length, value_start = _varint(view, pos)
        value_end = value_start + length
    elif wire_type == 1:
        value_start, value_end = pos, pos + 8
    elif wire_type == 5:
        value_start, value_end = pos, pos + 4
    else:
        raise _Malformed(f"unsupported wire type {wire_type}")
    if value_end > end or key >> 3 == 0:
        raise _Malformed("truncated message" if value_end > end else "field number 0")
    return key >> 3, value_start, value_end, wire_type


def _varint(view: memoryview, pos: int) -> tuple[int, int]:
    byte = view[pos]
    if byte < 0x80:
        return byte, pos + 1
    result, shift = byte & 0x7F, 7
    while True:
        pos += 1
        byte = view[pos]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos + 1
        shift += 7
        if shift > 63:
            raise _Malformed("varint too long")


def _request(
    groups: list[tuple[bytes, list[tuple[bytes, list[list[int]]]]]], view: memoryview
) -> bytes:
    """A request holding ``groups`` of items (ranges of ``view``): field 1 per resource,
    field 2 per scope."""
    out: list[bytes | memoryview] = []
    for resource, scopes in groups:
        inner: list[bytes | memoryview] = [resource]
        for scope, ranges in scopes:
            body = b"".join([scope, *(view[start:end] for start, end in ranges)])
            inner += [_key_length(_ITEMS, len(body)), body]
        payload = b"".join(inner)
        out += [_key_length(1, len(payload)), payload]
    return b"".join(out)


def _key_length(number: int, length: int) -> bytes:
    return bytes([number << 3 | _LEN]) + _encode_varint(length)


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
