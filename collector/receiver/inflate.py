"""Streaming decompression of HTTP request bodies (Content-Encoding), bounded by a size limit.

The limit applies to the decompressed bytes, and ``decompress`` is never asked for more than
the room left, so a small compression bomb is refused (413) without being inflated. A gzip body
may hold several members (RFC 1952 2.2; ``gzip -c a b``, some agents' appends): each is read in
turn and the body is their concatenation. What follows the end of a compressed stream must be
another valid member: anything else is refused (400), so a body is read whole or not at all,
never half.
"""

from __future__ import annotations

import zlib

from toolscore.collector.errors import RequestTooLarge, UnsupportedEncoding

ZLIB_OR_GZIP = 47  # 32 + 15: either header, detected per stream


def too_large(limit: int) -> str:
    return f"request body is larger than the limit of {limit} bytes (after decompression)"


class Inflater:
    """``feed`` compressed chunks, then ``finish``; ``held`` is what the caller has so far."""

    def __init__(self, encoding: str, limit: int) -> None:
        self._encoding = encoding
        self._limit = limit
        self._stream = zlib.decompressobj(wbits=ZLIB_OR_GZIP)
        self.members = 1

    def feed(self, data: bytes, held: int) -> bytes:
        parts: list[bytes] = []
        try:
            while data:
                if self._stream.eof:  # the previous member ended: another one starts here
                    self._stream = zlib.decompressobj(wbits=ZLIB_OR_GZIP)
                    self.members += 1
                room = self._limit + 1 - held
                if room <= 0:  # max_length 0 would mean "no limit"
                    raise RequestTooLarge(too_large(self._limit))
                piece = self._stream.decompress(data, room)
                held += len(piece)
                parts.append(piece)
                if self._stream.unconsumed_tail or held > self._limit:
                    raise RequestTooLarge(too_large(self._limit))
                data = self._stream.unused_data if self._stream.eof else b""
        except zlib.error as exc:
            raise self._invalid(exc) from exc
        return b"".join(parts)

    def finish(self, held: int) -> bytes:
        try:
            tail = self._stream.flush()
        except zlib.error as exc:  # pragma: no cover - flush after decompress rarely fails
            raise self._invalid(exc) from exc
        if not self._stream.eof:
            raise UnsupportedEncoding(f"truncated {self._encoding} body")
        if held + len(tail) > self._limit:
            raise RequestTooLarge(too_large(self._limit))
        return tail

    def _invalid(self, exc: zlib.error) -> UnsupportedEncoding:
        where = f" (member {self.members})" if self.members > 1 else ""
        return UnsupportedEncoding(f"body is not valid {self._encoding}{where}: {exc}")


class Identity:
    """No Content-Encoding: the bytes as they come, within the limit."""

    def __init__(self, limit: int) -> None:
        self._limit = limit

    def feed(self, data: bytes, held: int) -> bytes:
        if held + len(data) > self._limit:
            raise RequestTooLarge(too_large(self._limit))
        return data

    def finish(self, held: int) -> bytes:
        return b""


def inflater(content_encoding: str, limit: int) -> Inflater | Identity:
    """The decoder for a ``Content-Encoding`` header; UnsupportedEncoding (400) for others."""
    encoding = content_encoding.strip().lower()
    if encoding in ("", "identity"):
        return Identity(limit)
    if encoding in ("gzip", "x-gzip", "deflate"):
        return Inflater(encoding, limit)
    raise UnsupportedEncoding(f"unsupported Content-Encoding {encoding!r}: use gzip")
