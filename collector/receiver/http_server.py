"""OTLP/HTTP (aiohttp): POST /v1/traces and /v1/logs, plus GET /metrics and /health.

Bodies are decompressed here (gzip, deflate/zlib), streaming, with the size limit applied to the
decompressed bytes, so a small compression bomb is refused (413) without being inflated.
Responses use the request's content type; errors carry a ``google.rpc.Status`` body and, when
retryable, ``Retry-After``. The concurrency cap (``OtlpCore.slot``) is checked before the body is
read.
"""

from __future__ import annotations

import asyncio
import logging
import math
import ssl
import zlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import web
from google.protobuf import json_format
from google.protobuf.message import Message

from toolscore.collector.decode import (
    parse_logs_json,
    parse_logs_protobuf,
    parse_traces_json,
    parse_traces_protobuf,
)
from toolscore.collector.errors import (
    ReceiverError,
    RequestTooLarge,
    ShuttingDown,
    UnsupportedEncoding,
    UnsupportedMediaType,
    rpc_status_bytes,
    status_for,
)
from toolscore.collector.metrics import Metrics
from toolscore.collector.receiver.core import OtlpCore
from toolscore.collector.settings import Listen

log = logging.getLogger(__name__)

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
CHUNK = 64 * 1024

HealthCheck = Callable[[], Awaitable[bool]]


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
        self._runner = web.AppRunner(
            app, auto_decompress=False, access_log=None, shutdown_timeout=shutdown_grace_s
        )
        self.port = 0

    async def start(self) -> int:
        await self._runner.setup()
        ssl_context = None
        if self._tls is not None:
            ssl_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            ssl_context.load_cert_chain(str(self._tls[0]), str(self._tls[1]))
        site = web.TCPSite(
            self._runner, self._listen.host, self._listen.port, ssl_context=ssl_context
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
        return await self._export(request, parse_traces_protobuf, parse_traces_json, "traces")

    async def _logs(self, request: web.Request) -> web.StreamResponse:
        return await self._export(request, parse_logs_protobuf, parse_logs_json, "logs")

    async def _export(
        self,
        request: web.Request,
        parse_protobuf: Callable[[bytes], Any],
        parse_json: Callable[[bytes], Any],
        signal: str,
    ) -> web.StreamResponse:
        media = request.content_type.lower()  # parameters such as charset are dropped by aiohttp
        is_json = media == JSON
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
            # before the body: a refused request's body is drained by aiohttp, not buffered.
            with self._core.slot("http"):
                body = await self._read_body(request)
                message = parse_json(body) if is_json else parse_protobuf(body)
                if signal == "traces":
                    response: Message = await self._core.export_traces(message, "http")
                else:
                    response = await self._core.export_logs(message, "http")
            return _message_response(response, is_json, 200)
        except Exception as exc:
            return self._error(exc, is_json)

    async def _read_body(self, request: web.Request) -> bytes:
        encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding in ("", "identity"):
            decompressor = None
        elif encoding in ("gzip", "x-gzip", "deflate"):
            decompressor = zlib.decompressobj(wbits=47)  # 32 + 15: zlib or gzip header
        else:
            raise UnsupportedEncoding(f"unsupported Content-Encoding {encoding!r}: use gzip")
        if request.content_length is not None and request.content_length > self._limit:
            raise RequestTooLarge(_too_large(self._limit))
        out = bytearray()
        try:
            async for chunk in request.content.iter_chunked(CHUNK):
                if decompressor is None:
                    out += chunk
                else:
                    out += decompressor.decompress(chunk, self._limit + 1 - len(out))
                    if decompressor.unconsumed_tail:
                        raise RequestTooLarge(_too_large(self._limit))
                if len(out) > self._limit:
                    raise RequestTooLarge(_too_large(self._limit))
            if decompressor is not None:
                out += decompressor.flush()
                if not decompressor.eof:
                    raise UnsupportedEncoding(f"truncated {encoding} body")
        except zlib.error as exc:
            raise UnsupportedEncoding(f"body is not valid {encoding}: {exc}") from exc
        except web.HTTPRequestEntityTooLarge as exc:
            raise RequestTooLarge(_too_large(self._limit)) from exc
        if len(out) > self._limit:
            raise RequestTooLarge(_too_large(self._limit))
        return bytes(out)

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
        ok = not self._closing
        if ok and self._health is not None:
            try:
                ok = await asyncio.wait_for(self._health(), timeout=5)
            except Exception:
                ok = False
        return web.json_response(
            {"status": "ok" if ok else "unavailable"}, status=200 if ok else 503
        )


def _too_large(limit: int) -> str:
    return f"request body is larger than the limit of {limit} bytes (after decompression)"


def _message_response(message: Message, is_json: bool, status: int) -> web.Response:
    if is_json:
        text = json_format.MessageToJson(message, indent=None)
        return web.Response(body=text.encode(), status=status, content_type=JSON)
    return web.Response(body=message.SerializeToString(), status=status, content_type=PROTOBUF)
