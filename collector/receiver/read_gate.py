"""Turns to read a gRPC call's message: a few at once, and a share per connection; and the reads
that outlast their turn (parked).

grpc core buffers a call's message whole only while the application reads it (otherwise no more
than the HTTP/2 stream window), and grpc.aio cannot tell an idle call from one whose message is
on its way. So reads are taken in turns: at most ``total`` at once (what arrives at once is
bounded by that times the size limit) and at most ``per_connection`` for one connection (70 idle
calls over one connection then hold 1 turn, not every slot). A call waits
for its turn (its stream buffered no further); a turn lasts at most the read timeout, enforced
by the caller. Turns are granted in arrival order within the connection's share.

A turn is short (a probe): a legitimate client sends its message with the call, so by its turn
grpc core has it (up to the stream window), and reading it takes no time. A read still pending
at the end of its probe is parked: it goes on without a turn, still holding its memory
reservation (grpc core may still receive its whole message), so the next call of the
connection gets its turn at once. Silent calls sharing a connection with a legitimate client
then cost it a probe each, not a read timeout each (70 silent calls over one connection starved
a client sharing it). Parked reads hold at most a share of the budget; parking one more, or a
turn that needs the room, ends the oldest (its call gets UNAVAILABLE and may retry).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from toolscore.collector.ingest.metrics import Metrics

ReadFuture = asyncio.Future[object]


class _Share:
    __slots__ = ("semaphore", "users")

    def __init__(self, size: int) -> None:
        self.semaphore = asyncio.Semaphore(size)
        self.users = 0


class ReadGate:
    def __init__(self, total: int, per_connection: int, metrics: Metrics) -> None:
        self._total = asyncio.Semaphore(total)
        self._per_connection = per_connection
        self._shares: dict[str, _Share] = {}
        self._metrics = metrics
        self.waiting = 0

    @contextlib.asynccontextmanager
    async def turn(self, connection: str) -> AsyncIterator[None]:
        """Hold a read turn for one call of ``connection`` (its peer address and port)."""
        share = self._shares.get(connection)
        if share is None:
            share = self._shares[connection] = _Share(self._per_connection)
        share.users += 1
        self._waiting(+1)
        waiting = True
        try:
            async with share.semaphore, self._total:
                self._waiting(-1)
                waiting = False
                yield
        finally:
            if waiting:
                self._waiting(-1)
            share.users -= 1
            if not share.users:
                del self._shares[connection]

    def _waiting(self, delta: int) -> None:
        self.waiting += delta
        self._metrics.grpc_waiting_reads.set(self.waiting)


class ParkedReads:
    """Reads pending past their probe, oldest first, holding at most ``limit_bytes`` of the
    memory budget in all (each its call's reservation). A read parked less than ``min_age_s``
    is never ended to make room (a legitimate message late only because the server was busy
    gets that long to be taken in): a read that finds no room then is not parked at all."""

    def __init__(self, limit_bytes: int, min_age_s: float) -> None:
        self._limit = limit_bytes
        self._min_age_s = min_age_s
        self._reads: dict[ReadFuture, tuple[int, float]] = {}
        self.held = 0

    def park(self, read: ReadFuture, held: int) -> bool:
        """Park ``read`` (its call holds ``held`` bytes), ending the oldest while over the
        limit; False (not parked) when that is not possible."""
        if not self.make_room(self.held + held - self._limit):
            return False
        self._reads[read] = (held, read.get_loop().time())
        self.held += held
        return True

    def unpark(self, read: ReadFuture) -> None:
        held, _ = self._reads.pop(read, (0, 0.0))
        self.held -= held

    def make_room(self, n: int) -> bool:
        """End the oldest parked reads old enough until ``n`` bytes of theirs are given up
        (their calls see their read cancelled and give their reservations back); False when
        that many could not be."""
        if n <= 0:
            return True
        now = asyncio.get_running_loop().time()
        for read, (held, since) in list(self._reads.items()):
            if n <= 0 or now - since < self._min_age_s:
                break
            n -= held
            self.unpark(read)
            read.cancel()
        return n <= 0
