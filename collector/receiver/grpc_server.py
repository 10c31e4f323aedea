"""OTLP/gRPC: TraceService/Export and LogsService/Export (grpc.aio), plus grpc.health.v1.

The methods are registered with no request deserializer so that corrupt protobuf reaches us as
bytes and is answered INVALID_ARGUMENT (grpcio would answer INTERNAL). grpc core enforces the
message size limit after decompression (RESOURCE_EXHAUSTED, no RetryInfo).

They are registered as stream-unary handlers (the same thing on the wire as the unary call that
exporters make: one request message, one response), because grpc.aio reads a unary request's
whole message before calling the handler: a call refused by the concurrency cap would still
have cost its full size in memory. A stream handler checks the cap first and reads the message
only once admitted (a bare grpc.aio server, 30 concurrent 16 MiB calls, cap 1: 119 MB peak
RSS instead of 656 MB).

What grpc core buffers of a call nobody reads yet is bounded by the HTTP/2 stream window. By
default BDP probing grows that window until a whole message fits, so while the event loop was
busy with an admitted call, refused calls could still be buffered whole (16 concurrent 16 MiB
calls, cap 1: 92-230 MB peak growth). A fixed 1 MiB window bounds each to about that (47-65
MB in all) without slowing a local client measurably; over a 100 ms link it still allows ~10
MB/s per call, more than ingest stores (benchmarks/bench_inflight_memory.py).

A call counts against ``--max-concurrent-requests`` only once its message has arrived: before
that it waits for a read turn (read_gate.py: a few at once, a share per
connection; a turn is a short probe, after which a pending read is parked), and a message that
does not arrive within ``grpc_read_timeout_s`` of its turn is answered UNAVAILABLE. In its
turn, a call first waits for room in the in-flight memory budget (budget.py) for a message of
the size limit, then is read (see ``_read``). Connections: at most
``max_grpc_connections`` (grpc core refuses more), at most ``grpc_streams_per_connection``
calls each (HTTP/2 MAX_CONCURRENT_STREAMS; more wait on the client: enough that silent calls
do not take every stream of a connection a legitimate client shares), closed after
``idle_timeout_s`` without a call (or without their HTTP/2 preface), and pinged every minute
so that dead peers are dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1.health import aio as health_aio

from toolscore.collector.errors import (
    ErrorStatus,
    ReceiverError,
    RetryableError,
    ShuttingDown,
    grpc_trailers,
    status_for,
)
from toolscore.collector.ingest.metrics import Metrics
from toolscore.collector.receiver.budget import MemoryBusy, Reservation
from toolscore.collector.receiver.core import OtlpCore, Signal, first_allowance
from toolscore.collector.receiver.limits import ReceiverLimits, connection_cap
from toolscore.collector.receiver.read_gate import ParkedReads, ReadGate
from toolscore.collector.settings import Listen

log = logging.getLogger(__name__)

TRACE_SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
LOGS_SERVICE = "opentelemetry.proto.collector.logs.v1.LogsService"
RESPONSE_LIMIT = 4 * 1024 * 1024
STREAM_WINDOW = 1024 * 1024  # fixed HTTP/2 window per call (BDP probing off): see above
KEEPALIVE_MS = 60_000  # server pings an idle connection this often...
KEEPALIVE_TIMEOUT_MS = 20_000  # ...and closes it when the ping is not answered within this


class MessageTooSlow(RetryableError):
    """A call's request message did not arrive within the read timeout of its turn."""

    reason = "message_too_slow"


def server_options(max_request_bytes: int, limits: ReceiverLimits) -> list[tuple[str, int]]:
    """grpc core channel arguments of the server (see the module docstring)."""
    idle_ms = int(limits.idle_timeout_s * 1000)
    return [
        ("grpc.max_receive_message_length", max_request_bytes),
        ("grpc.max_send_message_length", RESPONSE_LIMIT),
        ("grpc.so_reuseport", 0),
        ("grpc.http2.bdp_probe", 0),
        ("grpc.http2.lookahead_bytes", STREAM_WINDOW),
        ("grpc.max_concurrent_streams", limits.grpc_streams_per_connection),
        ("grpc.max_allowed_incoming_connections", connection_cap(limits.max_grpc_connections)),
        ("grpc.max_connection_idle_ms", idle_ms),
        ("grpc.server_handshake_timeout_ms", idle_ms),
        ("grpc.keepalive_time_ms", KEEPALIVE_MS),
        ("grpc.keepalive_timeout_ms", KEEPALIVE_TIMEOUT_MS),
    ]


class GrpcReceiver:
    """An OTLP/gRPC server; ``start()`` binds and returns the actual port."""

    def __init__(
        self,
        core: OtlpCore,
        metrics: Metrics,
        listen: Listen,
        max_request_bytes: int,
        tls: tuple[Path, Path] | None = None,
        retry_after_s: float = 1.0,
    ) -> None:
        self._core = core
        self._metrics = metrics
        self._listen = listen
        self._tls = tls
        self._health = health_aio.HealthServicer()
        limits = core.receiver_limits
        self._server = grpc.aio.server(options=server_options(max_request_bytes, limits))
        self._gate = ReadGate(limits.grpc_reads, limits.grpc_reads_per_connection, metrics)
        self._read_timeout_s = limits.grpc_read_timeout_s
        self._probe_s = limits.grpc_probe_s
        self._parked = ParkedReads(
            int(limits.memory_budget_bytes * limits.grpc_parked_share), limits.grpc_parked_min_s
        )
        # the message and its first chunk (core.py): once read, an admitted call is not refused
        self._read_allowance = min(
            max_request_bytes + first_allowance(max_request_bytes), limits.memory_budget_bytes
        )
        handlers = {
            TRACE_SERVICE: {"Export": self._export_traces},
            LOGS_SERVICE: {"Export": self._export_logs},
        }
        for service, methods in handlers.items():
            self._server.add_generic_rpc_handlers(
                (
                    grpc.method_handlers_generic_handler(
                        service,
                        {
                            name: grpc.stream_unary_rpc_method_handler(fn)
                            for name, fn in methods.items()
                        },
                    ),
                )
            )
        health_pb2_grpc.add_HealthServicer_to_server(self._health, self._server)
        self.port = 0
        self._closing = False
        self._retry_after_s = retry_after_s

    async def start(self) -> int:
        address = str(self._listen)
        if self._tls is not None:
            cert, key = self._tls
            creds = grpc.ssl_server_credentials([(key.read_bytes(), cert.read_bytes())])
            self.port = self._server.add_secure_port(address, creds)
        else:
            self.port = self._server.add_insecure_port(address)
        if self.port == 0:
            raise OSError(f"gRPC: cannot listen on {address}")
        await self._server.start()
        for service in ("", TRACE_SERVICE, LOGS_SERVICE):
            await self._health.set(service, health_pb2.HealthCheckResponse.SERVING)
        return self.port

    async def set_serving(self, serving: bool) -> None:
        """Report SERVING or NOT_SERVING on grpc.health.v1 (the health watchdog's verdict)."""
        if self._closing:
            return  # shutting down: NOT_SERVING for good
        status = health_pb2.HealthCheckResponse.SERVING
        if not serving:
            status = health_pb2.HealthCheckResponse.NOT_SERVING
        for service in ("", TRACE_SERVICE, LOGS_SERVICE):
            await self._health.set(service, status)

    async def stop(self, grace_s: float) -> None:
        """Refuse new calls, let in-flight calls finish (up to ``grace_s``)."""
        # New exports are answered UNAVAILABLE + RetryInfo from here on; grpc core itself may
        # still CANCEL a call that races its shutdown (also retryable for exporters).
        self._closing = True
        await self._health.enter_graceful_shutdown()
        await self._server.stop(grace_s)

    async def _export_traces(
        self, _requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext[Any, Any]
    ) -> bytes:
        return await self._export(context, "traces")

    async def _export_logs(
        self, _requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext[Any, Any]
    ) -> bytes:
        return await self._export(context, "logs")

    async def _export(
        self,
        context: grpc.aio.ServicerContext[Any, Any],
        signal: Signal,
    ) -> bytes:
        try:
            return await self._admit_and_export(context, signal)
        except asyncio.CancelledError:
            self._went_away()
            raise
        except Exception as exc:
            status = self._failed(exc)
        # Aborted outside the handler: the exception's traceback holds the frames that held the
        # message, and the abort's exception would keep it (as __context__, in a cycle with this
        # frame) until the cyclic GC runs; refused 48 MB messages piled up to 1.2 GB that way.
        await context.abort(
            status.grpc_code, status.message, trailing_metadata=grpc_trailers(status)
        )
        raise AssertionError("unreachable: abort raises")  # pragma: no cover

    async def _admit_and_export(
        self, context: grpc.aio.ServicerContext[Any, Any], signal: Signal
    ) -> bytes:
        self._refuse_if_closing()
        self._core.check_auth(_metadata(context, "authorization"))
        self._core.check_slot("grpc")  # saturated: refused before the message is read
        with self._core.budget.reservation("grpc") as reservation:
            data = await self._read(context, reservation)
            if data is None:
                return b""
            with self._core.slot("grpc"):
                response = await self._core.export(signal, data, "protobuf", "grpc", reservation)
        return bytes(response.SerializeToString())

    async def _read(
        self, context: grpc.aio.ServicerContext[Any, Any], reservation: Reservation
    ) -> bytes | None:
        """The call's one message (as a unary call sends), read from its turn (read_gate.py) on,
        once the memory budget has room for a message of the size limit and its first chunk;
        ``reservation`` then holds what the message needs of that (core.py).

        Its size is known only once it is read, and what grpc core reads is not refused: a call
        that had been read, then refused by the budget, cost its whole transfer and three copies
        (grpcio hands a message over through a bytearray, on the event loop), and was sent again.
        Read through the context (not the iterator). None at EOF: grpc core already failed the
        call (message over the size limit: the client gets its RESOURCE_EXHAUSTED, whatever we
        return) or the client sent no message: an empty export, which succeeds (both
        responses' empty encoding is b"")."""
        deadline = asyncio.get_running_loop().time() + self._read_timeout_s
        async with self._gate.turn(context.peer()):
            await self._reserve_read(reservation, deadline)
            read: asyncio.Future[object] = asyncio.ensure_future(context.read())
            try:
                done, _ = await asyncio.wait({read}, timeout=self._probe_s)
            except asyncio.CancelledError:
                read.cancel()  # the client went away: nobody will take its message
                raise
        if not done:
            await self._parked_read(read, reservation, deadline)
        data = read.result()
        size = len(data) if isinstance(data, bytes) else 0
        reservation.shrink(reservation.held - size - first_allowance(size))
        return data if isinstance(data, bytes) else None

    async def _reserve_read(self, reservation: Reservation, deadline: float) -> None:
        budget = self._core.budget
        # parked reads give way to a turn (the oldest first)
        self._parked.make_room(budget.used + self._read_allowance - budget.limit)
        try:
            async with asyncio.timeout_at(deadline):
                await budget.room(self._read_allowance)
        except TimeoutError:
            self._metrics.memory_refused.labels("grpc").inc()
            raise MemoryBusy(
                "the server's in-flight memory budget is taken by other requests; retry later",
                self._retry_after_s,
            ) from None
        reservation.grow(self._read_allowance)

    async def _parked_read(
        self, read: asyncio.Future[object], reservation: Reservation, deadline: float
    ) -> None:
        """Wait for ``read`` without a turn, until the read timeout or until it is ended to make
        room; or, when there is no room to park it, end it now (all: MessageTooSlow, which
        clients retry)."""
        try:
            if self._parked.park(read, reservation.held):
                await asyncio.wait({read}, timeout=max(0.0, deadline - read.get_loop().time()))
        except asyncio.CancelledError:
            read.cancel()
            raise
        finally:
            self._parked.unpark(read)
        if read.done() and not read.cancelled():
            return
        read.cancel()
        with contextlib.suppress(BaseException):
            await read  # the read op is given up before the call is answered
        self._metrics.slow_requests.labels("grpc").inc()
        raise MessageTooSlow(
            f"request message did not arrive within {self._probe_s:g} s of its turn, and other "
            f"calls wait (at most {self._read_timeout_s:g} s once parked): retry later",
            self._retry_after_s,
        )

    def _went_away(self) -> None:
        """grpc core cancels a call's handler when its client cancels it, its deadline passes or
        its connection is lost (also mid-message): an expected event, counted like an HTTP
        client hanging up; the calls a stopping server ends are not."""
        if not self._closing:
            self._metrics.client_disconnects.labels("grpc").inc()
            log.debug("gRPC export: the client went away before it was answered")

    def _refuse_if_closing(self) -> None:
        if self._closing:
            raise ShuttingDown("server is shutting down", self._retry_after_s)

    def _failed(self, exc: Exception) -> ErrorStatus:
        status = status_for(exc)
        if not isinstance(exc, ReceiverError | ValueError):
            log.exception("gRPC export failed unexpectedly")
        self._metrics.failed_requests.labels("grpc", status.grpc_code.name).inc()
        return status


def _metadata(context: grpc.aio.ServicerContext[Any, Any], key: str) -> str | None:
    for k, v in context.invocation_metadata() or ():
        if k == key:
            return v if isinstance(v, str) else v.decode("utf-8", "replace")
    return None
