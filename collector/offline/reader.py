"""What the input is, read as blocks of whole lines (nothing is scored here)."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any, TypeAlias

Item: TypeAlias = tuple[str, Any, str | None, int]  # where, decoded sample, problem, input bytes
Chunk: TypeAlias = tuple[int, list[bytes]]  # first line number, raw lines

CHUNK_LINES = 1000  # lines of a pipe scored at a time


def first_items(
    source: IO[bytes], loads: Callable[[bytes], Any]
) -> tuple[list[Item], tuple[int, Iterable[bytes]] | None]:
    """Items decided by the first non-blank line, and the remaining JSON Lines (if any).

    A first line starting with ``[`` (or a ``{`` that only parses together with the rest) means
    one JSON document: a Ragas dataset array, a ``{"samples": [...]}`` wrapper, or one sample.
    """
    lines = iter(source)
    number, first = 0, b""
    for raw in lines:
        number += 1
        first = raw.removeprefix(b"\xef\xbb\xbf") if number == 1 else raw
        if first.strip():
            break
    head = first.lstrip()
    if not head:
        return [], None
    if head.startswith(b"["):
        rest = source.read()
        try:
            document = loads(first + rest)
        except ValueError as exc:  # not one document: JSON Lines whose first line is bad
            return [bad_line(number, exc, len(first))], (
                number + 1,
                rest.splitlines(keepends=True),
            )
        return list(document_items(document, number, len(first) + len(rest))), None
    try:
        obj = loads(first)
    except ValueError as exc:
        if not head.startswith(b"{"):
            return [bad_line(number, exc, len(first))], (number + 1, lines)
        rest = source.read()  # maybe a pretty-printed document spanning lines
        try:
            whole = loads(first + rest)
        except ValueError:
            return [bad_line(number, exc, len(first))], (
                number + 1,
                rest.splitlines(keepends=True),
            )
        return list(document_items(whole, number, len(first) + len(rest))), None
    return list(document_items(obj, number, len(first))), (number + 1, lines)


def bad_line(number: int, exc: Exception, size: int) -> Item:
    return (f"line {number}", None, f"not valid JSON: {json_problem(exc)}", size)


def json_problem(exc: Exception) -> str:
    import json

    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at column {exc.colno}" if exc.lineno == 1 else str(exc)
    return str(exc)


def document_items(obj: Any, number: int, size: int) -> Iterator[Item]:
    """A JSON array of samples, a ``{"samples": [...]}`` wrapper, or one sample."""
    samples = obj.get("samples") if type(obj) is dict and "user_input" not in obj else obj
    if type(samples) is not list:
        yield (f"line {number}", obj, None, size)
        return
    share = size // max(1, len(samples))
    for index, sample in enumerate(samples, 1):
        yield (f"line {number}, sample {index}", sample, None, share)


def chunks(lines: Iterable[bytes], number: int) -> Iterator[Chunk]:
    batch: list[bytes] = []
    start = number
    for raw in lines:
        batch.append(raw)
        if len(batch) >= CHUNK_LINES:
            yield start, batch
            start += len(batch)
            batch = []
    if batch:
        yield start, batch


def is_regular(source: IO[bytes]) -> bool:
    try:
        return stat.S_ISREG(os.fstat(source.fileno()).st_mode)
    except (OSError, ValueError):
        return False


def segments(source: IO[bytes], number: int, size: int) -> Iterator[tuple[int, bytes]]:
    """Whole lines of a regular file in blocks of about ``size`` bytes, with the number of each
    block's first line."""
    data = source.read(size)
    while data:
        if not data.endswith(b"\n"):
            data += source.readline()
        yield number, data
        following = source.read(size)
        if following:  # lines are counted only when a block follows (the count takes time)
            number += data.count(b"\n")
        data = following
