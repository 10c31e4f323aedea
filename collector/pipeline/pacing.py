"""Backpressure from scoring to the senders: acknowledgements held while scoring is behind.

Storing a span costs less CPU than scoring it, so a sender acknowledged as fast as spans are
committed outruns scoring: the backlog grows for as long as the burst lasts and every score of
it comes late. Each scoring round reports how long its longest-waiting conversation had been
ready (``RoundResult.behind_s``); while that is more than ``behind_s``, a request whose items
are already committed waits up to ``max_hold_s`` before it is acknowledged, so senders (which
keep a bounded number of requests in flight) slow to the rate scoring keeps up with. Nothing is
refused and nothing waits uncommitted. A report older than ``stale_s`` (no round finished, e.g.
one slow round) stops the holding: the gate never stalls ingest on a signal it no longer has.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge

log = logging.getLogger(__name__)

DEFAULT_BEHIND_S = 0.5
DEFAULT_MAX_HOLD_S = 2.0
STALE_S = 10.0
LOG_EVERY_S = 60.0  # one "held" line a minute at most: the lag hovers around the threshold


class ScoringLagGate:
    """An ``AckGate`` (collector.ingest.writer) fed by the scoring workers' round reports.

    ``report`` and ``hold`` run on the server's event loop (the workers' loops report there).
    """

    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        behind_s: float = DEFAULT_BEHIND_S,
        max_hold_s: float = DEFAULT_MAX_HOLD_S,
        stale_s: float = STALE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.behind_s = behind_s
        self.max_hold_s = max_hold_s
        self._stale_s = stale_s
        self._clock = clock
        self._lag_s = 0.0
        self._reported_at = clock()
        self._holding = False
        self._logged_at: float | None = None
        self._changed = asyncio.Event()
        self._lag_gauge = Gauge(
            "toolscore_scoring_behind_seconds",
            "How long the longest-waiting conversation of the latest scoring round had been "
            "ready when it was claimed (0 when a round found nothing ready).",
            registry=registry,
        )
        self._held = Counter(
            "toolscore_receiver_ack_hold_seconds",
            "Time acknowledgements of committed requests were held because scoring was behind.",
            registry=registry,
        )
        self._held_requests = Counter(
            "toolscore_receiver_held_requests",
            "Requests whose acknowledgement was held because scoring was behind.",
            registry=registry,
        )

    def report(self, claimed: int, behind_s: float) -> None:
        """A scoring round finished: it claimed ``claimed`` conversations, the longest-waiting
        ready for ``behind_s`` seconds."""
        self._lag_s = behind_s if claimed else 0.0
        self._reported_at = self._clock()
        self._lag_gauge.set(self._lag_s)
        self._changed.set()
        self._changed = asyncio.Event()
        self._note_transition()

    def _behind(self) -> bool:
        fresh = self._clock() - self._reported_at <= self._stale_s
        return fresh and self._lag_s > self.behind_s

    async def hold(self) -> float:
        """Wait while scoring is behind, at most ``max_hold_s``; the seconds waited."""
        if self.max_hold_s <= 0 or not self._behind():
            return 0.0
        start = self._clock()
        deadline = start + self.max_hold_s
        while self._behind() and (left := deadline - self._clock()) > 0:
            try:
                await asyncio.wait_for(self._changed.wait(), timeout=left)
            except TimeoutError:
                break
        waited = self._clock() - start
        self._held.inc(waited)
        self._held_requests.inc()
        return waited

    def _note_transition(self) -> None:
        """One INFO line when holding starts (at most one a minute), one when scoring caught up
        (a round found nothing ready)."""
        now = self._clock()
        if self._behind() and not self._holding:
            self._holding = True
            if self._logged_at is None or now - self._logged_at >= LOG_EVERY_S:
                self._logged_at = now
                log.info(
                    "scoring is %.1f s behind: acknowledgements are held (up to %g s each) "
                    "until it catches up",
                    self._lag_s,
                    self.max_hold_s,
                )
        elif self._holding and self._lag_s == 0.0:
            self._holding = False
            log.info("scoring caught up: acknowledgements are no longer held")
