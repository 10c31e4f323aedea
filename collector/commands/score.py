"""``toolscore score [FILE|-] [--config FILE]``: score Ragas samples offline.

Reads JSON Lines of Ragas ``MultiTurnSample`` (or Ragas's exported dataset as one JSON array or a
``{"samples": [...]}`` document) and writes one JSON object per sample, in order, to stdout:
``{"id": ..., "<instance>": <float|null>, ..., "details": {...}}`` plus ``"errors"`` when a metric
could not score, or ``"error"`` (naming the input line) when the line itself is unusable. Blank
lines are skipped. Exit status: 0 all scored, 1 if any line failed, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

_FLUSH_EVERY = 512


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "score",
        help="score Ragas MultiTurnSample JSON Lines (ToolCallAccuracy, ToolCallF1, ...)",
        description=(
            "Score JSON Lines of Ragas MultiTurnSamples; writes one JSON line per sample to "
            "stdout. Exit status 1 if any line failed, 2 on usage errors."
        ),
    )
    parser.add_argument(
        "file",
        nargs="?",
        default="-",
        metavar="FILE|-",
        help="JSON Lines (or a Ragas dataset JSON document); '-' or nothing reads stdin",
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        default=None,
        help="metric instances (YAML or JSON); default: tool_call_accuracy and tool_call_f1",
    )
    parser.add_argument(
        "--no-details", action="store_true", help="omit the explanations (smaller, faster output)"
    )
    parser.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    from scorer import ConfigError, default_config, load_config

    try:
        config = default_config() if args.config is None else load_config(args.config)
    except ConfigError as exc:
        print(f"toolscore score: {exc}", file=sys.stderr)
        return 2
    try:
        source: IO[bytes] = sys.stdin.buffer if args.file == "-" else open(args.file, "rb")  # noqa: SIM115
    except OSError as exc:
        print(f"toolscore score: cannot read {args.file}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    total = _size(source)
    progress = _Progress(sys.stderr, total) if sys.stderr.isatty() else None
    try:
        return run(
            config, source, sys.stdout.buffer, details=not args.no_details, progress=progress
        )
    finally:
        if progress is not None:
            progress.close()
        if source is not sys.stdin.buffer:
            source.close()


def _size(source: IO[bytes]) -> int | None:
    import os

    try:
        return os.fstat(source.fileno()).st_size or None
    except (OSError, ValueError):
        return None


def run(
    config: Any,
    source: IO[bytes],
    out: IO[bytes],
    *,
    details: bool = True,
    progress: _Progress | None = None,
) -> int:
    """Score every sample of ``source`` into ``out``; 1 if any failed, else 0."""
    from scorer.rows import error_row, score_row

    loads, dumps = _codec()
    failed = False
    buffer: list[bytes] = []
    for where, obj, problem, size in _items(source, loads):
        if problem is not None:
            row, ok = error_row(config, f"{where}: {problem}"), False
        else:
            row, ok = score_row(config, obj, where=where, details=details)
        failed = failed or not ok
        buffer.append(dumps(row))
        if len(buffer) >= _FLUSH_EVERY:
            out.write(b"".join(buffer))
            buffer.clear()
        if progress is not None:
            progress.advance(size)
    out.write(b"".join(buffer))
    out.flush()
    return 1 if failed else 0


def _codec() -> tuple[Callable[[bytes], Any], Callable[[Any], bytes]]:
    """orjson where it gives exactly what Python's ``json`` gives, ``json`` otherwise."""
    import json

    import orjson

    # orjson turns integers beyond 64 bits into floats (str() differs); let json read any line
    # with a run of 19+ digits. (A translate + substring test is ~10x cheaper than a regex.)
    digits_as_ones = bytes(49 if 48 <= i <= 57 else 48 for i in range(256))
    nineteen_ones = b"1" * 19
    json_loads = json.loads

    def loads(data: bytes) -> Any:
        if nineteen_ones not in data.translate(digits_as_ones):
            try:
                return orjson.loads(data)
            except orjson.JSONDecodeError:
                pass  # NaN, Infinity, lone surrogates: json accepts them, as Ragas users' json does
        return json_loads(data)

    orjson_dumps = orjson.dumps

    def dumps(row: Any) -> bytes:
        try:
            return orjson_dumps(row) + b"\n"
        except TypeError:  # e.g. an integer id beyond 64 bits
            return json.dumps(row, ensure_ascii=False).encode("utf-8", "surrogatepass") + b"\n"

    return loads, dumps


Item = tuple[str, Any, str | None, int]


def _items(source: IO[bytes], loads: Callable[[bytes], Any]) -> Iterator[Item]:
    """``(where, decoded object, problem, bytes consumed)`` for each sample of the input."""
    lines = iter(source)
    number, first = 0, b""
    for raw in lines:  # the first non-blank line decides: JSON Lines, or one JSON document
        number += 1
        first = raw.removeprefix(b"\xef\xbb\xbf") if number == 1 else raw
        if first.strip():
            break
    head = first.lstrip()
    if not head:
        return
    if head.startswith(b"["):
        yield from _document(first + source.read(), loads, number)
        return
    try:
        obj = loads(first)
    except ValueError as exc:
        if not head.startswith(b"{"):
            yield _bad_line(number, exc, len(first))
            yield from _lines(lines, loads, number + 1)
            return
        # Maybe a pretty-printed document ({"samples": [...]} or one sample) spanning lines.
        rest = source.read()
        try:
            whole = loads(first + rest)
        except ValueError:
            yield _bad_line(number, exc, len(first))
            yield from _lines(rest.splitlines(keepends=True), loads, number + 1)
            return
        yield from _document_object(whole, number, len(first) + len(rest))
        return
    yield from _document_object(obj, number, len(first))
    yield from _lines(lines, loads, number + 1)


def _bad_line(number: int, exc: Exception, size: int) -> Item:
    return (f"line {number}", None, f"not valid JSON: {_json_problem(exc)}", size)


def _json_problem(exc: Exception) -> str:
    import json

    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at column {exc.colno}" if exc.lineno == 1 else str(exc)
    return str(exc)


def _lines(lines: Iterable[bytes], loads: Callable[[bytes], Any], start: int) -> Iterator[Item]:
    number = start - 1
    for raw in lines:
        number += 1
        if not raw.strip():
            continue
        try:
            obj = loads(raw)
        except ValueError as exc:
            yield _bad_line(number, exc, len(raw))
            continue
        if type(obj) is dict and "samples" in obj and "user_input" not in obj:
            yield from _document_object(obj, number, len(raw))
        else:
            yield (f"line {number}", obj, None, len(raw))


def _document(data: bytes, loads: Callable[[bytes], Any], number: int) -> Iterator[Item]:
    try:
        obj = loads(data)
    except ValueError as exc:
        yield (f"line {number}", None, f"not a valid JSON document: {exc}", len(data))
        return
    yield from _document_object(obj, number, len(data))


def _document_object(obj: Any, number: int, size: int) -> Iterator[Item]:
    """A JSON array of samples, a ``{"samples": [...]}`` wrapper, or one sample."""
    samples = obj.get("samples") if type(obj) is dict and "user_input" not in obj else obj
    if type(samples) is not list:
        yield (f"line {number}", obj, None, size)
        return
    share = size // max(1, len(samples))
    for index, sample in enumerate(samples, 1):
        yield (f"line {number}, sample {index}", sample, None, share)


class _Progress:
    """A one-line progress report on a terminal's stderr, redrawn at most 5 times a second."""

    def __init__(self, stream: IO[str], total_bytes: int | None) -> None:
        self.stream, self.total = stream, total_bytes
        self.count = self.done = 0
        self.started = self.last = time.monotonic()

    def advance(self, size: int) -> None:
        self.count += 1
        self.done += size
        if self.count & 255 == 0:
            now = time.monotonic()
            if now - self.last >= 0.2:
                self.last = now
                self._draw(now)

    def _draw(self, now: float) -> None:
        rate = self.count / max(now - self.started, 1e-9)
        text = f"\rtoolscore score: {self.count:,} samples ({rate:,.0f}/s)"
        if self.total:
            fraction = min(1.0, self.done / self.total)
            filled = int(fraction * 30)
            text += f" [{'#' * filled}{'.' * (30 - filled)}] {fraction:.0%}"
        self.stream.write(text)
        self.stream.flush()

    def close(self) -> None:
        if self.count:
            self._draw(time.monotonic())
            self.stream.write("\n")
            self.stream.flush()
