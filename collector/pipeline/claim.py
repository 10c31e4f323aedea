"""When is a conversation ready, and who scores it; the claim statements:
``storage.conversations.leases``.

Ready: ``needs_scoring`` and no live claim, and either no span for ``settle`` seconds, or (sooner)
the conversation is keyed by its only trace (so no other trace can join it), that trace's root
span has arrived (SDKs export a span when it ends) and nothing came for ``idle`` seconds.

A claim is a lease (``claimed_by``, ``claimed_until``): a worker that dies leaves a lease that
expires, and the conversation (still ``needs_scoring``) is claimed again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from toolscore.storage.conversations import leases
from toolscore.storage.conversations.leases import NS, Claimed
from toolscore.storage.database import Connection

__all__ = ["NS", "Claimed", "SizeLimits", "Timing", "claim_ready", "next_due_ns"]


@dataclass(frozen=True, slots=True)
class Timing:
    settle_s: float = 5.0  # quiet time after which any conversation is complete
    idle_s: float = 1.0  # quiet time for a single-trace conversation whose root span ended
    lease_s: float = 60.0  # how long a claim protects a conversation being scored

    def __post_init__(self) -> None:
        if self.settle_s < 0 or self.idle_s < 0 or self.lease_s <= 0:
            raise ValueError(f"invalid pipeline timing {self!r}: times must be >= 0")

    @property
    def settle_ns(self) -> int:
        return int(self.settle_s * NS)

    @property
    def idle_ns(self) -> int:
        return int(min(self.idle_s, self.settle_s) * NS)

    @property
    def readiness(self) -> leases.Readiness:
        return leases.Readiness(self.settle_ns, self.idle_ns)

    def behind_s(self, claimed: Sequence[Claimed], now_ns: int) -> float:
        """How long the longest-waiting of ``claimed`` had been ready when claimed (0: none)."""
        ready = (
            c.last_span_received_ns + (self.idle_ns if c.early else self.settle_ns)
            for c in claimed
        )
        return max(0.0, (now_ns - min(ready, default=now_ns)) / NS)


DEFAULT_BIG_SPANS = 5_000
DEFAULT_MAX_SPANS = 500_000
DEFAULT_ROUND_SPANS = 20_000
# about 256 MB of ASCII text: a scoring process holds its part's decoded strings at once
DEFAULT_PART_CHARS = 256 * 2**20


@dataclass(frozen=True, slots=True)
class SizeLimits:
    """How conversation size changes how it is scored.

    More than ``big_spans`` spans: scored on its own, beside the rounds (which then go on
    scoring the others), its lease renewed while it is read and scored. More than ``max_spans``:
    not loaded at all (memory grows with the spans loaded); status ``error`` with the reason.
    A round scores its other conversations in parts of at most ``round_spans`` spans, and a
    part stops taking conversations once their decoded text reaches ``part_chars`` characters
    (collector/pipeline/loading.py: checked as they are loaded; the rest go to the next part).
    """

    big_spans: int = DEFAULT_BIG_SPANS
    max_spans: int = DEFAULT_MAX_SPANS
    # Most spans a round loads and scores at once: a round's conversations are scored in parts.
    round_spans: int = DEFAULT_ROUND_SPANS
    part_chars: int = DEFAULT_PART_CHARS

    def __post_init__(self) -> None:
        if min(self.big_spans, self.max_spans, self.round_spans, self.part_chars) < 1:
            raise ValueError(f"invalid conversation size limits {self!r}: must be >= 1")


def claim_ready(
    conn: Connection, *, worker_id: str, now_ns: int, timing: Timing, limit: int
) -> list[Claimed]:
    """Claim up to ``limit`` ready conversations for ``worker_id`` (caller commits)."""
    lease_ns = int(timing.lease_s * NS)
    return leases.claim_ready(
        conn,
        worker_id=worker_id,
        now_ns=now_ns,
        ready=timing.readiness,
        lease_ns=lease_ns,
        limit=limit,
    )


def next_due_ns(conn: Connection, *, now_ns: int, timing: Timing) -> int | None:
    """When the next pending conversation becomes ready (``None``: nothing pending)."""
    return leases.next_due_ns(conn, now_ns=now_ns, ready=timing.readiness)
