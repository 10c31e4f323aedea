"""What the server says it does: backlog gauges on ``/metrics`` and a periodic activity line.

Every ``poll_s`` seconds the backlog (conversations waiting to be scored, the age of the oldest,
evaluations waiting to be written back) is read from the database into gauges. Every
``log_every_s`` seconds one INFO line says what happened since the last one (spans and log
records received, conversations scored, unmatched and failed, the backlog), read from the
service's own counters; nothing is logged when nothing happened.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Gauge

from toolscore.collector.app import AppContext, Extension, ExtensionFactory
from toolscore.storage.status import Backlog, backlog_reader

log = logging.getLogger("toolscore.activity")

# (counter, labels) summed for each figure of the activity line
_FIGURES: Mapping[str, tuple[str, Mapping[str, str]]] = {
    "spans": ("toolscore_receiver_accepted_items", {"signal": "traces"}),
    "log records": ("toolscore_receiver_accepted_items", {"signal": "logs"}),
    "scored": ("toolscore_pipeline_conversations", {"status": "scored"}),
    "unmatched": ("toolscore_pipeline_conversations", {"status": "unmatched"}),
    "failed": ("toolscore_pipeline_conversations", {"status": "error"}),
}


class BacklogGauges:
    def __init__(self, registry: CollectorRegistry) -> None:
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


@dataclass(slots=True)
class _Activity:
    """Counter totals at the last report, to print what changed since."""

    last: dict[str, float]

    def delta(self, registry: CollectorRegistry) -> dict[str, int]:
        now = {k: counter_total(registry, n, lb) for k, (n, lb) in _FIGURES.items()}
        changed = {k: int(now[k] - self.last.get(k, 0.0)) for k in now}
        self.last = now
        return changed


def activity_line(changed: Mapping[str, int], current: Backlog | None, every_s: float) -> str:
    text = (
        f"last {every_s:g} s: received {changed['spans']} spans, "
        f"{changed['log records']} log records; conversations scored {changed['scored']}, "
        f"unmatched {changed['unmatched']}, failed {changed['failed']}"
    )
    if current is not None:
        oldest = (
            "" if current.oldest_waiting_s is None else f", oldest {current.oldest_waiting_s:.0f} s"
        )
        text += f"; waiting {current.waiting}{oldest}; write-back backlog {current.export_pending}"
    return text


class StatusReporter:
    """A service component: polls the backlog and logs the activity line."""

    def __init__(
        self,
        read_backlog: Callable[[], Backlog],
        registry: CollectorRegistry,
        *,
        poll_s: float = 15.0,
        log_every_s: float = 60.0,
    ) -> None:
        self._read = read_backlog
        self._registry = registry
        self._gauges = BacklogGauges(registry)
        self._poll_s, self._log_every_s = poll_s, log_every_s
        self._activity = _Activity({})
        self._current: Backlog | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._activity.delta(self._registry)  # start counting from now
        self._task = asyncio.create_task(self._run(), name="toolscore-status")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        next_log = time.monotonic() + self._log_every_s
        while True:
            await self.poll()
            if self._log_every_s > 0 and time.monotonic() >= next_log:
                next_log += self._log_every_s
                self.report()
            await asyncio.sleep(self._poll_s)

    async def poll(self) -> None:
        try:
            self._current = await asyncio.to_thread(self._read)
        except Exception as exc:  # the database's own health is reported elsewhere
            log.debug("backlog not read: %s", exc)
            return
        self._gauges.set(self._current)

    def report(self) -> None:
        changed = self._activity.delta(self._registry)
        if any(changed.values()) or (self._current is not None and self._current.waiting):
            log.info("%s", activity_line(changed, self._current, self._log_every_s))


def status_extension(poll_s: float = 15.0, log_every_s: float = 60.0) -> ExtensionFactory:
    """The ``serve`` extension that runs a :class:`StatusReporter` on the app's database."""

    def build(ctx: AppContext) -> Extension:
        reporter = StatusReporter(
            backlog_reader(ctx.engine),
            ctx.metrics.registry,
            poll_s=poll_s,
            log_every_s=log_every_s,
        )
        return Extension(components=[reporter])

    return build
