"""Span retention in ``serve`` (``--span-retention``) and its durations: a component that runs
a pruning pass (:mod:`toolscore.storage.retention.span_pruning`) every
``--span-retention-interval`` seconds in
a worker thread, counts what it deleted on ``/metrics`` and logs one INFO line per pass that
deleted something.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from prometheus_client import Counter

from toolscore.collector.components import Periodic
from toolscore.collector.configuration import (
    ConfigError,
    FileSection,
    Option,
    positive_seconds,
    resolve,
)
from toolscore.storage.retention.conversation_pruning import HistoryResult, prune_history
from toolscore.storage.retention.span_pruning import PruneLimits, PruneResult, prune
from toolscore.storage.telemetry.partitions import create_ahead

if TYPE_CHECKING:
    from toolscore.collector.components import AppContext, Extension, ExtensionFactory

log = logging.getLogger("toolscore.retention")

DEFAULT_RETENTION = "7d"
FOREVER = "forever"
DEFAULT_INTERVAL_S = 60.0  # between passes in serve
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$", re.IGNORECASE)


class DurationError(ValueError):
    """A retention duration that cannot be read (the message says what is expected)."""


def parse_duration(text: str) -> float | None:
    """Seconds in ``text`` (``90s``, ``30m``, ``12h``, ``7d``, ``2w``); None for ``forever``."""
    if text.strip().lower() == FOREVER:
        return None
    match = _DURATION.match(text)
    if match is None:
        raise DurationError(f"expected a duration such as 30m, 12h, 7d or 2w, or {FOREVER!r}")
    seconds = float(match.group(1)) * _UNITS[match.group(2).lower()]
    if seconds <= 0:
        raise DurationError("expected a duration greater than 0")
    return seconds


def cutoff_for(retention_s: float, now_ns: int | None = None) -> int:
    """The arrival time (Unix ns) before which telemetry is old."""
    return (time.time_ns() if now_ns is None else now_ns) - int(retention_s * 1e9)


class RetentionMetrics:
    """``/metrics`` counters of the retention component."""

    def __init__(self, registry: object) -> None:
        self.rows = Counter(
            "toolscore_retention_pruned_rows",
            "Rows deleted by span retention, by table (spans, log_records).",
            ["table"],
            registry=registry,  # type: ignore[arg-type]
        )
        self.conversations = Counter(
            "toolscore_retention_pruned_conversations",
            "Conversations whose spans and log records span retention deleted.",
            registry=registry,  # type: ignore[arg-type]
        )
        self.history = Counter(
            "toolscore_retention_deleted_conversations",
            "Finished conversations history retention deleted with their calls and evaluations "
            "(their scores stay in daily_score_rollup).",
            registry=registry,  # type: ignore[arg-type]
        )
        self.failures = Counter(
            "toolscore_retention_failed_passes",
            "Pruning passes that failed (retried at the next interval).",
            registry=registry,  # type: ignore[arg-type]
        )
        # Present from the start with 0, so rate() and alerts work before the first deletion.
        self.rows.labels("spans")
        self.rows.labels("log_records")


class RetentionComponent:
    """Runs a pruning pass every ``interval_s`` in a worker thread (a ``Component`` of serve);
    on partitioned PostgreSQL it first creates the coming days' partitions (also at start, and
    also when spans are kept forever: ``retention_s`` None)."""

    def __init__(
        self,
        engine: Any,
        retention_s: float | None,
        metrics: RetentionMetrics,
        *,
        interval_s: float = DEFAULT_INTERVAL_S,
        limits: PruneLimits | None = None,
        history_s: float | None = None,
    ) -> None:
        self._engine = engine
        self._retention_s = retention_s
        self._history_s = history_s
        self._metrics = metrics
        self._interval_s = interval_s
        self._limits = limits or PruneLimits()
        self._stop = threading.Event()  # also read by a pass in progress, between transactions
        self._behind = False  # the last pass left eligible conversations for the next
        self._first = True
        self._periodic = Periodic(
            "toolscore-retention",
            self._step,
            every_s=interval_s,
            what="span retention: pruning pass",
            log=log,
            on_failure=lambda _exc: metrics.failures.inc(),
        )

    async def start(self) -> None:
        self._stop.clear()
        self._first = True
        await self._periodic.start()

    async def stop(self) -> None:
        """Stop; a pass in progress ends after its current (short) transaction."""
        self._stop.set()
        await self._periodic.stop()

    async def _step(self) -> float | None:
        if self._first:  # partitions for today at once: rows of a missing day go to DEFAULT
            self._first = False
            with contextlib.suppress(Exception):
                await asyncio.to_thread(self._partitions_ahead)
            return None
        await asyncio.to_thread(self.run_once)
        return 0 if self._behind else None  # a pass that stopped at its cap goes on at once

    def _partitions_ahead(self) -> None:
        with self._engine.begin() as conn:
            created = create_ahead(conn, time.time_ns())
        if created:
            log.info("partitions created ahead: %s", ", ".join(created))

    def run_once(self) -> PruneResult | None:
        """One pass: span retention, then history retention; the span pass's result."""
        self._partitions_ahead()
        result = self._spans() if self._retention_s is not None else None
        history = None
        if self._history_s is not None and not self._stop.is_set():
            history = self._history(self._history_s)
        cap = self._limits.marks_per_pass
        behind = any(r is not None and r.conversations >= cap for r in (result, history))
        if behind != self._behind:
            log.info(
                "retention: %s",
                f"more than {cap} conversations eligible: passes run back to back"
                if behind
                else f"caught up: a pass every {self._interval_s:g} s",
            )
        self._behind = behind
        return result

    def _history(self, history_s: float) -> HistoryResult:
        started = time.monotonic()
        result = prune_history(
            self._engine, cutoff_for(history_s), limits=self._limits, stop=self._stop
        )
        self._metrics.history.inc(result.conversations)
        if result.conversations:
            log.info(
                "history retention: deleted %d conversations (%d evaluations, %d tool calls) "
                "whose last span arrived over %s ago in %.1f s%s",
                result.conversations,
                result.evaluations,
                result.tool_calls,
                describe(history_s),
                time.monotonic() - started,
                size_note(result),
            )
        return result

    def _spans(self) -> PruneResult:
        assert self._retention_s is not None
        started = time.monotonic()
        result = prune(
            self._engine,
            cutoff_for(self._retention_s),
            limits=self._limits,
            stop=self._stop,
        )
        m = self._metrics
        m.rows.labels("spans").inc(result.spans)
        m.rows.labels("log_records").inc(result.log_records)
        m.conversations.inc(result.conversations)
        if result.deleted:
            log.info(
                "span retention: deleted %d spans and %d log records of %d conversations "
                "received over %s ago in %.1f s%s",
                result.spans,
                result.log_records,
                result.conversations,
                describe(self._retention_s),
                time.monotonic() - started,
                size_note(result),
            )
        return result


def describe(seconds: float) -> str:
    """``604800`` -> ``7d`` (days rather than weeks: how retention is usually said)."""
    for unit, size in sorted(_UNITS.items(), key=lambda kv: -kv[1])[1:]:
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def size_note(result: PruneResult | HistoryResult) -> str:
    """``"; database 1.3 MiB -> 0.5 MiB (0.2 MiB free inside the file for reuse)"`` when the
    database could say (SQLite), else ``""``: the server's log line and ``toolscore prune``."""
    if result.bytes_after is None or result.bytes_before is None:
        return ""
    note = f"; database {_mib(result.bytes_before)} -> {_mib(result.bytes_after)}"
    if result.free_after:
        note += f" ({_mib(result.free_after)} free inside the file for reuse)"
    return note


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


@dataclass(frozen=True, slots=True)
class RetentionOptions:
    retention_s: float | None = parse_duration(DEFAULT_RETENTION)  # None: keep spans forever
    interval_s: float = DEFAULT_INTERVAL_S
    history_s: float | None = None  # None: keep conversations forever


OPTIONS: tuple[Option, ...] = (
    Option(
        "--span-retention",
        "retention_s",
        "delete the spans and log records of finished conversations whose last span arrived "
        "longer ago than this (e.g. 12h, 7d, 2w; by arrival, not by the spans' own times), "
        f"keeping their calls and scores; '{FOREVER}' keeps everything",
        parse=parse_duration,
        default=parse_duration(DEFAULT_RETENTION),
        metavar="DURATION",
        shown_default=DEFAULT_RETENTION,
    ),
    Option(
        "--history-retention",
        "history_s",
        "delete whole finished conversations (calls, evaluations, traces) whose last span "
        "arrived longer ago than this, keeping their scores in the daily rollup that "
        f"daily_scores and toolscore report read; at least --span-retention; '{FOREVER}' keeps "
        "them all",
        parse=parse_duration,
        default=None,
        metavar="DURATION",
        shown_default=FOREVER,
    ),
    Option(
        "--span-retention-interval",
        "interval_s",
        "time between two pruning passes",
        parse=positive_seconds,
        default=DEFAULT_INTERVAL_S,
        metavar="SECONDS",
    ),
)


def options_from(
    args: argparse.Namespace | None, environ: Mapping[str, str], file: FileSection | None = None
) -> RetentionOptions:
    """Flags > environment > ``file`` > defaults; raises ConfigError naming the flag and source."""
    options = RetentionOptions(**resolve(OPTIONS, args, environ, file))
    names = (OPTIONS[0].names(), OPTIONS[1].names())
    if problem := history_too_short(options.retention_s, options.history_s, *names):
        raise ConfigError(problem)
    return options


def history_too_short(
    spans_s: float | None, history_s: float | None, spans_flag: str, history_flag: str
) -> str | None:
    """What is wrong when the history would be deleted before the spans (serve, prune)."""
    if history_s is None or spans_s is None or history_s >= spans_s:
        return None
    return (
        f"{history_flag}: {describe(history_s)} is shorter than {spans_flag} "
        f"({describe(spans_s)}): the history retention must be at least the span retention"
    )


def summary(options: RetentionOptions) -> str:
    """What the start-up line says of retention."""
    spans, history = options.retention_s, options.history_s
    if spans is None and history is None:
        return "spans kept forever"
    said = "spans kept forever" if spans is None else f"span retention {describe(spans)}"
    if history is not None:
        said += f", history retention {describe(history)}"
    return f"{said} (pass every {options.interval_s:g} s)"


def retention_extension(options: RetentionOptions) -> ExtensionFactory:
    """The retention component for ``serve`` (nothing when spans are kept forever)."""
    from toolscore.collector.components import Extension

    def build(ctx: AppContext) -> Extension:
        if options.retention_s is None and options.history_s is None:
            # still creates PostgreSQL partitions ahead
            keep = RetentionComponent(
                ctx.engine, None, RetentionMetrics(ctx.metrics.registry), interval_s=3600.0
            )
            return Extension(components=[keep], summary={"retention": summary(options)})
        component = RetentionComponent(
            ctx.engine,
            options.retention_s,
            RetentionMetrics(ctx.metrics.registry),
            interval_s=options.interval_s,
            history_s=options.history_s,
        )
        return Extension(components=[component], summary={"retention": summary(options)})

    return build
