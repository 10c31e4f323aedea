"""A scoring round, blocking: claim ready conversations, score them, write their revisions.

:class:`RoundRunner` runs in the server process (a thread) or in a scoring child process
(:mod:`.child`); a conversation with more than ``SizeLimits.big_spans`` spans is left out of its
round (still claimed) for :meth:`RoundRunner.score_big`, one with more than ``max_spans`` gets
status ``error`` without being loaded. :class:`PipelineStats` counts the outcomes.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from toolscore.collector.pipeline.claim import (
    NS,
    Claimed,
    SizeLimits,
    Timing,
    claim_ready,
    next_due_ns,
)
from toolscore.collector.pipeline.score import compute_within, write
from toolscore.collector.reconstruction.control_calls import DEFAULT as DEFAULT_CONTROL
from toolscore.collector.reconstruction.control_calls import ControlCalls
from toolscore.scorer import ScoringConfig
from toolscore.storage.conversations.leases import end_leases_but, renew_leases, span_counts
from toolscore.storage.database import Database
from toolscore.storage.history.evaluations import prepare_revisions
from toolscore.storage.plumbing.dialect import write_transaction

#: Rows of a big conversation's spans read from the database (and decoded) at a time.
BIG_BATCH_ROWS = 5_000

log = logging.getLogger(__name__)

DEFAULT_LIMITS = SizeLimits()


@dataclass(frozen=True, slots=True)
class RoundResult:
    claimed: int
    due_ns: int | None  # when the next conversation becomes ready (when nothing was claimed)
    statuses: tuple[str, ...] = ()  # scored / unmatched / error, one per written conversation
    latencies: tuple[float, ...] = ()  # seconds from its last span to its rows, likewise
    # Claimed but left for :meth:`RoundRunner.score_big` (still claimed: renew their leases).
    big: tuple[Claimed, ...] = ()
    ids: tuple[str, ...] = ()  # the written conversations, likewise
    reasons: tuple[str | None, ...] = ()  # why unmatched / the error, likewise
    # how long the longest-waiting claimed conversation had been ready: scoring's lag
    behind_s: float = 0.0


@dataclass(slots=True)
class PipelineStats:
    """Counters since start (read by tests and the benchmark)."""

    scored: int = 0
    unmatched: int = 0
    errors: int = 0
    rounds: int = 0
    latency_s: list[float] = field(default_factory=list)  # the most recent ones
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, result: RoundResult) -> None:
        with self.lock:
            self.rounds += 1
            for status in result.statuses:
                if status == "scored":
                    self.scored += 1
                elif status == "unmatched":
                    self.unmatched += 1
                else:
                    self.errors += 1
            self.latency_s.extend(result.latencies)
            del self.latency_s[:-10_000]


def within_budget(
    claimed: Sequence[Claimed], counts: Mapping[str, int], budget: int
) -> list[list[Claimed]]:
    """``claimed`` in order, cut into parts of at most ``budget`` spans (a conversation bigger
    than the budget alone in its part): a round's memory is one part's spans, not the round's."""
    parts: list[list[Claimed]] = []
    spans = 0
    for c in claimed:
        n = counts.get(c.conversation_id, 0)
        if not parts or spans + n > budget:
            parts.append([])
            spans = 0
        parts[-1].append(c)
        spans += n
    return parts


def _joined(parts: Sequence[RoundResult]) -> RoundResult:
    if not parts:
        return RoundResult(0, None)
    return RoundResult(
        sum(p.claimed for p in parts),
        None,
        tuple(s for p in parts for s in p.statuses),
        tuple(s for p in parts for s in p.latencies),
        ids=tuple(s for p in parts for s in p.ids),
        reasons=tuple(s for p in parts for s in p.reasons),
    )


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class RoundRunner:
    """One round, blocking: claim ready conversations, score them, write their revisions."""

    def __init__(
        self,
        engine: Database,
        config: ScoringConfig,
        *,
        timing: Timing,
        batch_size: int,
        worker_id: str,
        clock_ns: Callable[[], int] = time.time_ns,
        control_calls: ControlCalls = DEFAULT_CONTROL,
        limits: SizeLimits = DEFAULT_LIMITS,
    ) -> None:
        self.engine = engine
        self.control_calls = control_calls
        self.limits = limits
        self.config = config
        self.timing = timing
        self.batch_size = batch_size
        self.worker_id = worker_id
        self._clock_ns = clock_ns

    def run_once(self) -> RoundResult:
        now_ns = self._clock_ns()
        with write_transaction(self.engine) as conn:
            claimed = claim_ready(
                conn,
                worker_id=self.worker_id,
                now_ns=now_ns,
                timing=self.timing,
                limit=self.batch_size,
            )
        if not claimed:
            with self.engine.connect() as conn:
                return RoundResult(0, next_due_ns(conn, now_ns=now_ns, timing=self.timing))
        with self.engine.connect() as conn:
            counts = span_counts(conn, [c.conversation_id for c in claimed])
            conn.rollback()
        big = [c for c in claimed if self.limits.big_spans < counts.get(c.conversation_id, 0)]
        refuse = {
            c.conversation_id: self._too_big(counts[c.conversation_id])
            for c in big
            if counts[c.conversation_id] > self.limits.max_spans
        }
        big = [c for c in big if c.conversation_id not in refuse]
        for c in big:
            log.info(
                "conversation %s has %d spans: scored on its own, beside the rounds",
                c.conversation_id,
                counts[c.conversation_id],
            )
        now_done = [c for c in claimed if c not in big]
        loaded = {c: n for c, n in counts.items() if c not in refuse}  # refused: never loaded
        parts: list[RoundResult] = []
        for part in within_budget(now_done, loaded, self.limits.round_spans):
            while part:  # what a part left unloaded (its text budget reached) is the next part
                result, part = self._score(part, refuse, loaded)
                parts.append(result)
        return dataclasses.replace(
            _joined(parts),
            claimed=len(claimed),
            big=tuple(big),
            behind_s=self.timing.behind_s(claimed, now_ns),
        )

    def score_big(self, claimed: Claimed) -> RoundResult:
        """Score one conversation left aside by :meth:`run_once` (its caller renews the lease);
        its spans are streamed from the database, a batch of rows at a time."""
        return self._score([claimed], {}, None, batch_rows=BIG_BATCH_ROWS)[0]

    def _too_big(self, spans: int) -> str:
        return (
            f"not scored: the conversation has {spans} spans, more than the limit of "
            f"{self.limits.max_spans} per conversation (serve --max-conversation-spans, env "
            "TOOLSCORE_MAX_CONVERSATION_SPANS); its spans are stored, none were loaded"
        )

    def _score(
        self,
        claimed: Sequence[Claimed],
        refuse: dict[str, str],
        counts: Mapping[str, int] | None,
        batch_rows: int | None = None,
    ) -> tuple[RoundResult, list[Claimed]]:
        """Score ``claimed``, bounded in text when ``counts`` (their spans) are given; also
        returns the claims left unloaded once the text budget was reached, in order."""
        if not claimed:
            return RoundResult(0, None), []
        # reads in short transactions, reconstruction outside any, the write in its own
        with self.engine.connect() as conn:
            computed, unloaded = compute_within(
                conn,
                [c.conversation_id for c in claimed],
                self.config,
                control_calls=self.control_calls,
                refuse=refuse,
                short_reads=True,
                batch_rows=batch_rows,
                budget_chars=None if counts is None else self.limits.part_chars,
                counts=counts,
            )
            conn.rollback()
            dialect = conn.dialect
        left = set(unloaded)
        rest = [c for c in claimed if c.conversation_id in left]
        claimed = [c for c in claimed if c.conversation_id not in left]
        now = dt.datetime.fromtimestamp(self._clock_ns() / NS, tz=dt.UTC)
        seen = {c.conversation_id: c.last_span_received_ns for c in claimed}
        # the rows are made before the write transaction: it holds the lock for its statements
        rows = prepare_revisions(dialect, computed, now=now, seen_ns=seen)
        with write_transaction(self.engine) as conn:
            outcomes = write(
                conn, computed, now=now, claimed_by=self.worker_id, seen_ns=seen, rows=rows
            )
        done_ns = self._clock_ns()
        return RoundResult(
            len(claimed),
            None,
            tuple(o.status for o in outcomes),
            tuple((done_ns - seen[o.conversation_id]) / NS for o in outcomes),
            ids=tuple(o.conversation_id for o in outcomes),
            reasons=tuple(o.unmatched_reason or o.error for o in outcomes),
        ), rest

    def release(self, conversation_ids: Sequence[str]) -> None:
        """Give up this worker's claims on ``conversation_ids`` (their leases end now)."""
        now = dt.datetime.fromtimestamp(self._clock_ns() / NS, tz=dt.UTC)
        with self.engine.begin() as conn:
            renew_leases(conn, conversation_ids, worker_id=self.worker_id, until=now)

    def release_all_but(self, conversation_ids: Sequence[str]) -> int:
        """Give up this worker's claims on every conversation but ``conversation_ids``."""
        now = dt.datetime.fromtimestamp(self._clock_ns() / NS, tz=dt.UTC)
        with self.engine.begin() as conn:
            return end_leases_but(conn, conversation_ids, worker_id=self.worker_id, until=now)

    def renew(self, conversation_ids: Sequence[str]) -> list[str]:
        """Renew this worker's leases on ``conversation_ids``; the ids still held."""
        until_ns = self._clock_ns() + int(self.timing.lease_s * NS)
        with write_transaction(self.engine) as conn:
            return renew_leases(
                conn,
                conversation_ids,
                worker_id=self.worker_id,
                until=dt.datetime.fromtimestamp(until_ns / NS, tz=dt.UTC),
            )
