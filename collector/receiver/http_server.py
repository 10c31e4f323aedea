"""OTLP/HTTP (aiohttp): POST /v1/traces and /v1/logs, plus GET /metrics and /health.

Bodies are decompressed here (gzip, deflate/zlib), streaming, with the size limit applied to the
decompressed bytes, so a small compression bomb is refused (413) without being inflated; a gzip
body of several members is read whole (inflate.py). Responses use the request's content type;
errors carry a ``google.rpc.Status`` body and, when retryable, ``Retry-After``.

Clients cannot hold the service: the concurrency cap (``OtlpCore.slot``) is
checked before the body is read but taken only once it has arrived, so slow uploads hold no slot;
a body must arrive at ``min_body_rate`` after ``body_grace_s`` (else 503, connection closed); the
bytes read count against the in-flight memory budget (budget.py); a connection with no request
is closed after ``idle_timeout_s``, and at most ``max_http_connections`` are open (limits.py).
"""

from __future__ import annotations

import asyncio
import logging
import math
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import web
from google.protobuf import json_format
from google.protobuf.message import Message

from toolscore.collector.errors import (
    ReceiverError,
    RequestTooLarge,
    RetryableError,
    ShuttingDown,
    UnsupportedMediaType,
    rpc_status_bytes,
    status_for,
)
from toolscore.collector.ingest.metrics import Metrics
from toolscore.collector.receiver.budget import Reservation
from toolscore.collector.receiver.core import Format, OtlpCore, Signal
from toolscore.collector.receiver.inflate import inflater, too_large
from toolscore.collector.receiver.limits import connection_cap
from toolscore.collector.receiver.sites import CappedTCPSite
from toolscore.collector.settings import Listen

log = logging.getLogger(__name__)

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
CHUNK = 64 * 1024
# A refused request's unread body is drained this long before the connection is closed (aiohttp's
# default, 10 s, would let a slow sender keep the connection that much longer).
LINGER_S = 1.0


class BodyTooSlow(RetryableError):
    """The request body did not arrive at the minimum rate."""

    reason = "body_too_slow"


class ClientDisconnected(Exception):
    """The client hung up while sending its body: an expected event, counted, not an error."""


HealthCheck = Callable[[], Awaitable[str | None]]  # why unhealthy now; None: healthy


class HttpReceiver:
    """The OTLP/HTTP server; ``start()`` binds and returns the actual port."""

    def __init__(
        self,
        core: OtlpCore,
        metrics: Metrics,
        listen: Listen,
        max_request_bytes: int,
        tls: tuple[Path, Path] | None = None,
        health: HealthCheck | None = None,
        auth_metrics: bool = True,
        shutdown_grace_s: float = 10.0,
        retry_after_s: float = 1.0,
    ) -> None:
        self._retry_after_s = retry_after_s
        self._core = core
        self._metrics = metrics
        self._listen = listen
        self._limit = max_request_bytes
        self._tls = tls
        self._health = health
        self._auth_metrics = auth_metrics
        self._closing = False
        app = web.Application(client_max_size=max_request_bytes)
        app.router.add_route("POST", "/v1/traces", self._traces)
        app.router.add_route("POST", "/v1/logs", self._logs)
        app.router.add_route("GET", "/metrics", self._metrics_page)
        app.router.add_route("GET", "/health", self._health_page)
        # We decompress ourselves, to apply the limit after decompression.
        limits = core.receiver_limits
        self._runner = web.AppRunner(
            app,
            auto_decompress=False,
            access_log=None,
            shutdown_timeout=shutdown_grace_s,
            keepalive_timeout=limits.idle_timeout_s,  # also before a connection's first request
            lingering_time=LINGER_S,
        )
        self._max_connections = connection_cap(limits.max_http_connections)
        self.port = 0

    async def start(self) -> int:
        await self._runner.setup()
        ssl_context = None
        if self._tls is not None:
            ssl_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            ssl_context.load_cert_chain(str(self._tls[0]), str(self._tls[1]))
        site = CappedTCPSite(
            self._runner,
            self._listen.host,
            self._listen.port,
            max_connections=self._max_connections,
            metrics=self._metrics,
            ssl_context=ssl_context,
        )
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        return self.port

    async def stop(self) -> None:
        """Stop accepting connections; in-flight requests get the shutdown grace to finish."""
        self._closing = True
        await self._runner.cleanup()

    # --- OTLP endpoints -----------------------------------------------------------------------

    async def _traces(self, request: web.Request) -> web.StreamResponse:
        return await self._export(request, "traces")

    async def _logs(self, request: web.Request) -> web.StreamResponse:
        return await self._export(request, "logs")

    async def _export(self, request: web.Request, signal: Signal) -> web.StreamResponse:
        media = request.content_type.lower()  # parameters such as charset are dropped by aiohttp
        is_json = media == JSON
        body = bytearray()
        try:
            if self._closing:
                raise ShuttingDown("server is shutting down", self._retry_after_s)
            self._core.check_auth(request.headers.get("Authorization"))
            if media not in (PROTOBUF, JSON):
                raise UnsupportedMediaType(
                    f"unsupported Content-Type {request.headers.get('Content-Type', '')!r}: "
                    f"use {PROTOBUF} or {JSON}"
                )
            # After the header checks (a bad token must stay a 401, never a retryable 503),
            # before the body: while saturated, a refused request's body is never buffered.
            self._core.check_slot("http")
            with self._core.budget.reservation("http") as reservation:
                body = await self._read_body(request, reservation)
                with self._core.slot("http"):
                    fmt: Format = "json" if is_json else "protobuf"
                    response = await self._core.export(signal, body, fmt, "http", reservation)
            return _message_response(response, is_json, 200)
        except ClientDisconnected:
            self._metrics.client_disconnects.labels("http").inc()
            log.debug("HTTP export: the client hung up before its body had arrived")
            return web.Response(status=400)  # never delivered: nobody is listening
        except Exception as exc:
            body = bytearray()  # the traceback keeps this frame until the cyclic GC: not the body
            return self._error(exc, is_json)

    async def _read_body(self, request: web.Request, reservation: Reservation) -> bytearray:
        """The decompressed body, each byte reserved in the budget as it arrives; raises
        BodyTooSlow when it comes slower than the minimum rate (after the grace). The buffer it
        was read into, not a copy: a copy doubled a body's memory for a moment, beyond what the
        budget holds for it (concurrent big bodies finishing together went past the bound)."""
        inflate = inflater(request.headers.get("Content-Encoding", "identity"), self._limit)
        if request.content_length is not None and request.content_length > self._limit:
            raise RequestTooLarge(too_large(self._limit))
        limits = self._core.receiver_limits
        started = asyncio.get_running_loop().time()
        received = 0
        out = bytearray()
        try:
            async with asyncio.timeout_at(started + limits.body_grace_s) as window:
                async for chunk in request.content.iter_chunked(CHUNK):
                    received += len(chunk)
                    window.reschedule(
                        started + limits.body_grace_s + received / limits.min_body_rate
                    )
                    piece = inflate.feed(chunk, len(out))
                    reservation.grow(len(piece))
                    out += piece
                piece = inflate.finish(len(out))
                reservation.grow(len(piece))
                out += piece
        except TimeoutError:
            out.clear()
            self._metrics.slow_requests.labels("http").inc()
            raise BodyTooSlow(
                f"request body arrived slower than {limits.min_body_rate:.0f} bytes/s "
                f"({received} bytes in {asyncio.get_running_loop().time() - started:.1f} s)",
                self._retry_after_s,
            ) from None
        except web.HTTPRequestEntityTooLarge as exc:
            out.clear()
            raise RequestTooLarge(too_large(self._limit)) from exc
        except ConnectionError:
            out.clear()
            raise ClientDisconnected from None
        except BaseException:
            out.clear()  # see _export: a traceback must not keep what was read
            raise
        return out

    def _error(self, exc: Exception, is_json: bool) -> web.Response:
        status = status_for(exc)
        if not isinstance(exc, ReceiverError | ValueError):
            log.exception("HTTP export failed unexpectedly")
        self._metrics.failed_requests.labels("http", str(status.http_status)).inc()
        from google.rpc import status_pb2

        body = status_pb2.Status.FromString(rpc_status_bytes(status))
        response = _message_response(body, is_json, status.http_status)
        if status.retry_after_s is not None:
            response.headers["Retry-After"] = str(max(1, math.ceil(status.retry_after_s)))
        if status.http_status == 401:
            response.headers["WWW-Authenticate"] = "Bearer"
        return response

    # --- operations ---------------------------------------------------------------------------

    async def _metrics_page(self, request: web.Request) -> web.Response:
        if self._auth_metrics:
            try:
                self._core.check_auth(request.headers.get("Authorization"))
            except ReceiverError as exc:
                return self._error(exc, is_json=True)
        data, content_type = self._metrics.exposition()
        response = web.Response(body=data)
        response.headers["Content-Type"] = content_type
        return response

    async def _health_page(self, request: web.Request) -> web.Response:
        reason = "shutting down" if self._closing else None
        if reason is None and self._health is not None:
            try:
                reason = await asyncio.wait_for(self._health(), timeout=5)
            except Exception:
                reason = "the health check did not answer"
        if reason is None:
            return web.json_response({"status": "ok"})
        return web.json_response({"status": "unavailable", "reason": reason}, status=503)


def _message_response(message: Message, is_json: bool, status: int) -> web.Response:
    if is_json:
        text = json_format.MessageToJson(message, indent=None)
        return web.Response(body=text.encode(), status=status, content_type=JSON)
    return web.Response(body=message.SerializeToString(), status=status, content_type=PROTOBUF)
