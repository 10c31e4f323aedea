"""An aiohttp TCP site that keeps at most ``max_connections`` connections open.

aiohttp has no such bound: 1,000 idle connections held 1,000 file descriptors. On
accept, past the bound, the new connection is closed at once (its client sees a reset or
EOF and, if it is an exporter, retries); the keep-alive timeout frees idle ones meanwhile. The
count is aiohttp's own list of live connections; connections accepted in the same event-loop
turn are counted through ``_pending`` until aiohttp counts them (two loop turns later: the
transport schedules ``connection_made`` after the factory returns), so a burst cannot overshoot.
A TLS connection is counted by aiohttp only after its handshake (asyncio bounds that to 60 s).
"""

from __future__ import annotations

import asyncio
from ssl import SSLContext

from aiohttp import web

from toolscore.collector.ingest.metrics import Metrics


class _Refused(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.close()


class CappedTCPSite(web.BaseSite):
    def __init__(
        self,
        runner: web.BaseRunner,
        host: str,
        port: int,
        max_connections: int,
        metrics: Metrics,
        ssl_context: SSLContext | None = None,
    ) -> None:
        super().__init__(runner, ssl_context=ssl_context)
        self._host = host
        self._port = port
        self._max = max_connections
        self._metrics = metrics
        self._pending = 0  # protocols made, connection_made not yet run

    @property
    def name(self) -> str:
        scheme = "https" if self._ssl_context else "http"
        return f"{scheme}://{self._host}:{self._port}"

    async def start(self) -> None:
        await super().start()
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            self._protocol, self._host, self._port, ssl=self._ssl_context, backlog=self._backlog
        )
        server = self._runner.server
        assert server is not None
        self._metrics.connections.set_function(lambda: len(server.connections))

    def _protocol(self) -> asyncio.BaseProtocol:
        server = self._runner.server
        assert server is not None
        live = len(server.connections)
        if live + self._pending >= self._max:
            self._metrics.connections_refused.inc()
            return _Refused()
        self._pending += 1
        loop = asyncio.get_running_loop()
        loop.call_soon(loop.call_soon, self._made)  # after the transport's connection_made
        return server()

    def _made(self) -> None:
        self._pending -= 1
