"""``toolscore prune [--spans-older-than DURATION] [--history-older-than DURATION]
[--dry-run]``: span and history retention, once.

``--spans-older-than`` deletes the spans and log records of finished conversations whose last
span arrived more than DURATION ago, exactly as ``serve --span-retention`` does periodically
(:mod:`toolscore.collector.upkeep.retention_runner`); conversations, tool calls, evaluations and
expectations
stay. ``--history-older-than`` deletes those conversations whole, as ``serve
--history-retention`` does, their scores kept in the daily rollup. Safe while ``serve`` runs on
the same database.
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
from toolscore.collector.errors import Failure, UsageError

PROG = "toolscore prune"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "prune",
        help="delete old spans and log records, or old conversations, of finished ones",
        description="Delete the spans and log records (--spans-older-than), or whole "
        "conversations with their calls and evaluations (--history-older-than), of scored "
        "(or unmatched, or failed) conversations whose last span arrived more than DURATION "
        "ago. Deleted conversations' scores stay in the daily rollup (toolscore report, "
        "daily_scores); open conversations are never touched.",
    )
    add_db_argument(parser)
    parser.add_argument(
        "--spans-older-than",
        metavar="DURATION",
        help="delete spans and log records; age by arrival time, e.g. 12h, 7d, 2w",
    )
    parser.add_argument(
        "--history-older-than",
        metavar="DURATION",
        help="delete whole conversations (not shorter than --spans-older-than), e.g. 90d",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="count what would be deleted, delete nothing"
    )
    parser.set_defaults(handler=run)


class ProgressBar:
    """``[#####.....] 1200/4000 rows`` redrawn in place on a terminal; silent otherwise."""

    def __init__(self, stream: IO[str], total: int, width: int = 30, unit: str = "rows") -> None:
        self._stream = stream
        self._unit = unit
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
        self._stream.write(f"\rpruning [{bar}] {done}/{self._total} {self._unit}")
        self._stream.flush()

    def close(self) -> None:
        if self._on and self._done:
            self._stream.write("\n")
            self._stream.flush()


def _duration(flag: str, value: str | None) -> float | None:
    from toolscore.collector.upkeep.retention_runner import DurationError, parse_duration

    if value is None:
        return None
    try:
        seconds = parse_duration(value)
    except DurationError as exc:
        raise UsageError(f"{flag}: {exc}, got {value!r}") from None
    if seconds is None:
        print(f"{PROG}: {flag} forever: nothing to delete", file=sys.stderr)
    return seconds


def run(args: argparse.Namespace) -> int:
    from toolscore.collector.upkeep.retention_runner import cutoff_for, history_too_short

    if args.spans_older_than is None and args.history_older_than is None:
        raise UsageError("give --spans-older-than or --history-older-than (or both)")
    spans = _duration("--spans-older-than", args.spans_older_than)
    history = _duration("--history-older-than", args.history_older_than)
    if problem := history_too_short(spans, history, "--spans-older-than", "--history-older-than"):
        raise UsageError(problem)
    if spans is None and history is None:
        return 0
    engine = open_database(args, "conversations")
    try:
        with database_errors(database_url(args)):
            if spans is not None:
                _prune(engine, cutoff_for(spans), dry_run=args.dry_run)
            if history is not None:
                _prune_history(engine, cutoff_for(history), dry_run=args.dry_run)
            return 0
    except KeyboardInterrupt:
        print(f"\n{PROG}: interrupted (what was deleted stays deleted)", file=sys.stderr)
        return 130
    finally:
        engine.dispose()


def _prune(engine: Any, cutoff_ns: int, *, dry_run: bool) -> int:
    from toolscore.collector.upkeep.retention_runner import size_note
    from toolscore.storage.retention.span_pruning import prune
    from toolscore.storage.retention.spans import plan, supported

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
    line += size_note(result)
    print(line)
    return 0


def _prune_history(engine: Any, cutoff_ns: int, *, dry_run: bool) -> int:
    from toolscore.collector.upkeep.retention_runner import size_note
    from toolscore.storage.retention.conversation_pruning import prune_history
    from toolscore.storage.retention.conversations import plan
    from toolscore.storage.retention.rollup import supported

    with engine.connect() as conn:
        if not supported(conn):
            raise Failure("the database predates history retention: run `toolscore db upgrade`")
        planned = plan(conn, cutoff_ns)
    before = _when(cutoff_ns)
    what = (
        f"{planned.conversations} conversations ({planned.evaluations} evaluations, "
        f"{planned.tool_calls} tool calls)"
    )
    if dry_run:
        print(f"would delete {what} whose last span was received before {before}")
        return 0
    bar = ProgressBar(sys.stderr, planned.conversations, unit="conversations")
    try:
        result = prune_history(engine, cutoff_ns, progress=bar)
    finally:
        bar.close()
    line = (
        f"deleted {result.conversations} conversations ({result.evaluations} evaluations, "
        f"{result.tool_calls} tool calls, {result.spans} spans, {result.log_records} log "
        f"records) whose last span was received before {before}; their scores stay in the "
        "daily rollup"
    )
    line += size_note(result)
    print(line)
    return 0


def _when(cutoff_ns: int) -> str:
    return dt.datetime.fromtimestamp(cutoff_ns / 1e9, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
