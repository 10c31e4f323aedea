"""What the server says it does: backlog gauges on ``/metrics`` and a periodic activity line.

Every ``poll_s`` seconds the backlog (conversations waiting to be scored, the age of the oldest,
evaluations waiting to be written back) is read from the database into gauges. Every
``log_every_s`` seconds one INFO line says what happened since the last one (spans and log
records received, conversations scored, unmatched and failed, the backlog), read from the
service's own counters; nothing is logged when nothing happened.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from toolscore.collector.components import AppContext, Extension, ExtensionFactory, Periodic
from toolscore.collector.export.attributes import pass_label, threshold_for
from toolscore.collector.upkeep.coverage import CoverageGauges, CoverageRows, coverage_reader
from toolscore.storage.conversations.backlog import (
    WITH_WARNING,
    Backlog,
    ScoredEvaluation,
    backlog_reader,
    evaluation_reader,
    status_counts_reader,
)
from toolscore.storage.conversations.tables import STATUSES

log = logging.getLogger("toolscore.activity")

#: ``read(after_id)``: evaluations above ``after_id`` (none when it is None), the pass
#: thresholds, and the highest evaluation id.
EvaluationReader = Callable[[int | None], tuple[list[ScoredEvaluation], Mapping[str, float], int]]

# (counter, labels) summed for each figure of the activity line
_FIGURES: Mapping[str, tuple[str, Mapping[str, str]]] = {
    "spans": ("toolscore_receiver_accepted_items", {"signal": "traces"}),
    "log records": ("toolscore_receiver_accepted_items", {"signal": "logs"}),
    "scored": ("toolscore_pipeline_conversations", {"status": "scored"}),
    "unmatched": ("toolscore_pipeline_conversations", {"status": "unmatched"}),
    "failed": ("toolscore_pipeline_conversations", {"status": "error"}),
}


# the label values of toolscore_conversations: STATUSES (bounded: these four and nothing else)
# conversations by status is a scan of the table: once every this many backlog polls, and
# never more than 0.1 % of the time however big the table grows (the next count waits 1,000x
# the wall time the last one took beyond COUNT_FREE_S: on PostgreSQL the scan runs in the
# database's processes, 0.56 s at 2.9 million conversations, where this thread's CPU sees none)
COUNT_EVERY_POLLS = 4
COUNT_COST_FACTOR = 1000.0
COUNT_FREE_S = 0.05  # a count this quick (a small table, a round trip) is not held back


class BacklogGauges:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.by_status = Gauge(
            "toolscore_conversations",
            "Conversations in the database by status (open, scored, unmatched, error), read "
            "every few polls.",
            ["status"],
            registry=registry,
        )
        self.with_warning = Gauge(
            "toolscore_conversations_with_warning",
            "Conversations whose rebuilt calls may be wrong (a name or arguments inferred "
            "without evidence, records that disagree, calls that could not be read), read with "
            "the counts by status.",
            registry=registry,
        )
        self.waiting = Gauge(
            "toolscore_conversations_waiting",
            "Conversations with spans not yet scored (open or re-opened by a late span).",
            registry=registry,
        )
        self.oldest = Gauge(
            "toolscore_conversations_oldest_waiting_seconds",
            "Age of the last span of the longest-waiting conversation (0 when none waits).",
            registry=registry,
        )
        self.export = Gauge(
            "toolscore_export_backlog_evaluations",
            "Evaluations not yet written back over OTLP, by state (pending, failing).",
            ["state"],
            registry=registry,
        )

    def set(self, value: Backlog) -> None:
        self.waiting.set(value.waiting)
        self.oldest.set(value.oldest_waiting_s or 0.0)
        self.export.labels("pending").set(value.export_pending)
        self.export.labels("failing").set(value.export_failing)

    def set_counts(self, counts: Mapping[str, int]) -> None:
        for status in STATUSES:
            self.by_status.labels(status).set(counts.get(status, 0))
        self.with_warning.set(counts.get(WITH_WARNING, 0))


class EvaluationMetrics:
    """Evaluations written to the database, by metric instance and pass/fail/error label.

    Read from the ``evaluations`` table (whichever process wrote them: a scoring child process,
    another replica), so every replica reports the database's evaluations since it started.
    Labels are the instance names of the scoring configuration and the three labels: bounded.
    """

    # PostgreSQL ids can commit out of order: ids this far below the highest are read again
    SLACK = 1_000

    def __init__(self, registry: CollectorRegistry) -> None:
        self.count = Counter(
            "toolscore_evaluations",
            "Evaluations written, by metric instance and label (pass, fail, error).",
            ["metric", "label"],
            registry=registry,
        )
        self.scores = Histogram(
            "toolscore_evaluation_score",
            "Scores of the evaluations written, by metric instance.",
            ["metric"],
            buckets=(0.0, 0.25, 0.5, 0.75, 0.9, 0.99, 1.0),
            registry=registry,
        )
        self.last_id: int | None = None  # None: not started (only evaluations after start count)
        self._start_id = 0
        self._counted: set[int] = set()

    def start(self, highest: int) -> None:
        self.last_id = self._start_id = highest

    def add(self, rows: list[ScoredEvaluation], thresholds: Mapping[str, float]) -> None:
        for row in rows:
            if row.id <= self._start_id or row.id in self._counted:
                continue
            self._counted.add(row.id)
            threshold = threshold_for(row.metric, row.metric_type, thresholds)
            self.count.labels(row.metric, pass_label(row.score, threshold, row.details)).inc()
            if row.score is not None:
                self.scores.labels(row.metric).observe(row.score)
        if rows:
            self.last_id = max(self.last_id or 0, rows[-1].id)
        floor = (self.last_id or 0) - self.SLACK
        self._counted = {i for i in self._counted if i > floor}

    @property
    def read_from(self) -> int | None:
        return None if self.last_id is None else max(0, self.last_id - self.SLACK)


def counter_total(registry: CollectorRegistry, name: str, labels: Mapping[str, str]) -> float:
    """The sum of counter ``name``'s samples whose labels include ``labels``."""
    total = 0.0
    for metric in registry.collect():
        if metric.name != name:
            continue
        for sample in metric.samples:
            if sample.name.endswith("_total") and all(
                sample.labels.get(k) == v for k, v in labels.items()
            ):
                total += sample.value
    return total


def gauge_value(registry: CollectorRegistry, name: str) -> float:
    """The value of the unlabelled gauge ``name`` (0 when it is not registered)."""
    return registry.get_sample_value(name) or 0.0


@dataclass(slots=True)
class _Activity:
    """Counter totals at the last report, to print what changed since."""

    last: dict[str, float]

    def delta(self, registry: CollectorRegistry) -> dict[str, int]:
        now = {k: counter_total(registry, n, lb) for k, (n, lb) in _FIGURES.items()}
        changed = {k: int(now[k] - self.last.get(k, 0.0)) for k in now}
        self.last = now
        return changed


def activity_fields(
    changed: Mapping[str, int], current: Backlog | None, every_s: float, queued: int = 0
) -> dict[str, float | int | None]:
    """The activity line's figures as structured log fields (``--log-format json``)."""
    fields: dict[str, float | int | None] = {
        "interval_s": every_s,
        "spans": changed["spans"],
        "log_records": changed["log records"],
        "scored": changed["scored"],
        "unmatched": changed["unmatched"],
        "failed": changed["failed"],
        "ingest_queue": queued,
    }
    if current is not None:
        fields["waiting"] = current.waiting
        fields["oldest_waiting_s"] = current.oldest_waiting_s
        fields["writeback_backlog"] = current.export_pending
    return fields


def activity_line(
    changed: Mapping[str, int], current: Backlog | None, every_s: float, queued: int = 0
) -> str:
    text = (
        f"last {every_s:g} s: received {changed['spans']} spans, "
        f"{changed['log records']} log records; conversations scored {changed['scored']}, "
        f"unmatched {changed['unmatched']}, failed {changed['failed']}; ingest queue {queued}"
    )
    if current is not None:
        oldest = (
            "" if current.oldest_waiting_s is None else f", oldest {current.oldest_waiting_s:.0f} s"
        )
        text += f"; waiting {current.waiting}{oldest}; write-back backlog {current.export_pending}"
    return text


def _timed(read: Callable[[], Mapping[str, int]]) -> tuple[Mapping[str, int], float]:
    """``read()`` and the seconds it took, wherever they were spent (SQLite scans in this
    process, PostgreSQL in its own)."""
    started = time.monotonic()
    return read(), time.monotonic() - started


class StatusReporter:
    """A service component: polls the backlog and logs the activity line."""

    def __init__(
        self,
        read_backlog: Callable[[], Backlog],
        registry: CollectorRegistry,
        read_evaluations: EvaluationReader | None = None,
        read_counts: Callable[[], Mapping[str, int]] | None = None,
        read_coverage: Callable[[], CoverageRows] | None = None,
        *,
        poll_s: float = 15.0,
        log_every_s: float = 60.0,
    ) -> None:
        self._read = read_backlog
        self._registry = registry
        self._gauges = BacklogGauges(registry)
        self._evaluations = EvaluationMetrics(registry)
        self._read_evaluations = read_evaluations
        self._read_counts = read_counts
        self._read_coverage = read_coverage
        self._coverage = CoverageGauges(registry) if read_coverage is not None else None
        self._polls = 0
        self._next_count = 0.0  # monotonic time of the next count by status
        self._poll_s, self._log_every_s = poll_s, log_every_s
        self._activity = _Activity({})
        self._current: Backlog | None = None
        self._next_log = 0.0
        self._periodic = Periodic(
            "toolscore-status",
            self._step,
            every_s=poll_s,
            what="status poll",
            log=log,
            stop_grace_s=0,  # a read may wait on a silent database: not for stop()
        )

    async def start(self) -> None:
        self._activity.delta(self._registry)  # start counting from now
        self._next_log = time.monotonic() + self._log_every_s
        await self._periodic.start()

    async def stop(self) -> None:
        await self._periodic.stop()

    async def _step(self) -> None:
        await self.poll()
        if self._log_every_s > 0 and time.monotonic() >= self._next_log:
            self._next_log += self._log_every_s
            self.report()

    async def poll(self) -> None:
        try:
            self._current = await asyncio.to_thread(self._read)
            if self._read_evaluations is not None:
                await asyncio.to_thread(self._poll_evaluations, self._read_evaluations)
            if self._read_counts is not None and time.monotonic() >= self._next_count:
                await self._count(self._read_counts)
            self._polls += 1
        except Exception as exc:  # the database's own health is reported elsewhere
            log.debug("backlog not read: %s", exc)
            return
        self._gauges.set(self._current)

    async def _count(self, read: Callable[[], Mapping[str, int]]) -> None:
        started = time.monotonic()
        counts, took_s = await asyncio.to_thread(_timed, read)
        self._gauges.set_counts(counts)
        if self._read_coverage is not None and self._coverage is not None:
            rows = await asyncio.to_thread(self._read_coverage)
            self._coverage.set(rows)
            took_s = time.monotonic() - started  # both scans count against the schedule
        self._next_count = started + max(
            COUNT_EVERY_POLLS * self._poll_s - self._poll_s / 2,
            COUNT_COST_FACTOR * (took_s - COUNT_FREE_S),
        )

    def _poll_evaluations(self, read: EvaluationReader) -> None:
        metrics = self._evaluations
        rows, thresholds, highest = read(metrics.read_from)
        if metrics.last_id is None:
            metrics.start(highest)  # count what is written from now on
        else:
            metrics.add(rows, thresholds)

    def report(self) -> None:
        changed = self._activity.delta(self._registry)
        queued = int(gauge_value(self._registry, "toolscore_ingest_queue_items"))
        if any(changed.values()) or queued or (self._current and self._current.waiting):
            every, current = self._log_every_s, self._current
            log.info(
                "%s",
                activity_line(changed, current, every, queued),
                extra=activity_fields(changed, current, every, queued),
            )


def status_extension(poll_s: float = 15.0, log_every_s: float = 60.0) -> ExtensionFactory:
    """The ``serve`` extension that runs a :class:`StatusReporter` on the app's database."""

    def build(ctx: AppContext) -> Extension:
        reporter = StatusReporter(
            backlog_reader(ctx.engine),
            ctx.metrics.registry,
            evaluation_reader(ctx.engine),
            status_counts_reader(ctx.engine),
            coverage_reader(ctx.engine),
            poll_s=poll_s,
            log_every_s=log_every_s,
        )
        return Extension(components=[reporter])

    return build
