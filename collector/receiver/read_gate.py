"""Turns to read a gRPC call's message: a few at once, and a share per connection.

grpc core buffers a call's message whole only while the application reads it (otherwise no more
than the HTTP/2 stream window), and grpc.aio cannot tell an idle call from one whose message is
on its way. So reads are taken in turns: at most ``total`` at once (what arrives at once is
bounded by that times the size limit) and at most ``per_connection`` for one connection (70 idle
calls over one connection then hold 1 turn, not every slot: issue 9, point 4). A call waits
for its turn (its stream buffered no further); a turn lasts at most the read timeout, enforced
by the caller. Turns are granted in arrival order within the connection's share.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from toolscore.collector.ingest.metrics import Metrics


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
