"""``toolscore prune --spans-older-than DURATION [--dry-run]``: span retention, once.

Deletes the spans and log records of finished conversations whose last span arrived more than
DURATION ago, exactly as ``serve --span-retention`` does periodically
(:mod:`toolscore.collector.retention`); conversations, tool calls, evaluations and expectations
stay. Safe while ``serve`` runs on the same database.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from typing import IO, Any

from toolscore.collector.commands.common import (
    add_db_argument,
    database_errors,
    database_url,
    open_database,
)
from toolscore.collector.failure import Failure, UsageError

PROG = "toolscore prune"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "prune",
        help="delete old spans and log records of finished conversations (keeps the history)",
        description="Delete the spans and log records of scored (or unmatched, or failed) "
        "conversations whose last span arrived more than DURATION ago. Conversations, tool "
        "calls, evaluations and expectations are kept; open conversations are never touched.",
    )
    add_db_argument(parser)
    parser.add_argument(
        "--spans-older-than",
        required=True,
        metavar="DURATION",
        help="age by arrival time, e.g. 12h, 7d, 2w",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="count what would be deleted, delete nothing"
    )
    parser.set_defaults(handler=run)


class ProgressBar:
    """``[#####.....] 1200/4000 rows`` redrawn in place on a terminal; silent otherwise."""

    def __init__(self, stream: IO[str], total: int, width: int = 30) -> None:
        self._stream = stream
        self._total = total
        self._width = width
        self._done = 0
        self._on = stream.isatty() and total > 0

    def __call__(self, rows: int) -> None:
        self._done += rows
        if not self._on:
            return
        done = min(self._done, self._total)
        filled = self._width * done // self._total
        bar = "#" * filled + "." * (self._width - filled)
        self._stream.write(f"\rpruning [{bar}] {done}/{self._total} rows")
        self._stream.flush()

    def close(self) -> None:
        if self._on and self._done:
            self._stream.write("\n")
            self._stream.flush()


def run(args: argparse.Namespace) -> int:
    from toolscore.collector.retention import DurationError, cutoff_for, parse_duration

    try:
        seconds = parse_duration(args.spans_older_than)
    except DurationError as exc:
        raise UsageError(f"--spans-older-than: {exc}, got {args.spans_older_than!r}") from None
    if seconds is None:
        print(f"{PROG}: --spans-older-than forever: nothing to delete", file=sys.stderr)
        return 0
    engine = open_database(args, "conversations")
    try:
        with database_errors(database_url(args)):
            return _prune(engine, cutoff_for(seconds), dry_run=args.dry_run)
    except KeyboardInterrupt:
        print(f"\n{PROG}: interrupted (what was deleted stays deleted)", file=sys.stderr)
        return 130
    finally:
        engine.dispose()


def _prune(engine: Any, cutoff_ns: int, *, dry_run: bool) -> int:
    from toolscore.storage.pruning import prune
    from toolscore.storage.retention import plan, supported

    with engine.connect() as conn:
        if not supported(conn):
            raise Failure("the database predates retention: run `toolscore db upgrade`")
        planned = plan(conn, cutoff_ns)
    before = dt.datetime.fromtimestamp(cutoff_ns / 1e9, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    what = (
        f"{planned.spans} spans and {planned.log_records} log records of "
        f"{planned.conversations} conversations"
    )
    if dry_run:
        print(f"would delete {what} (last span received before {before})")
        return 0
    bar = ProgressBar(sys.stderr, planned.spans + planned.log_records)
    try:
        result = prune(engine, cutoff_ns, progress=bar)
    finally:
        bar.close()
    line = (
        f"deleted {result.spans} spans and {result.log_records} log records of "
        f"{result.conversations} conversations (last span received before {before})"
    )
    if result.bytes_before is not None and result.bytes_after is not None:
        line += f"; storage {_size(result.bytes_before)} -> {_size(result.bytes_after)}"
        if result.free_after:
            line += f", {_size(result.free_after)} free inside the file for reuse"
    print(line)
    return 0


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"
