"""What both transports do with a request: admit it, store it, then build the OTLP response."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal

from google.protobuf.message import Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from toolscore.collector.errors import RetryableError, TooManyRequests, Unauthenticated
from toolscore.collector.ingest.metrics import Metrics
from toolscore.collector.ingest.writer import AckGate, IngestWriter
from toolscore.collector.otlp.decode import (
    DecodeLimits,
    decode_logs,
    decode_traces,
    parse_logs_json,
    parse_logs_protobuf,
    parse_traces_json,
    parse_traces_protobuf,
)
from toolscore.collector.receiver import wire
from toolscore.collector.receiver.budget import MemoryBudget, Reservation
from toolscore.collector.receiver.limits import (
    CHUNK_BYTES,
    CHUNK_ITEMS,
    DECODE_BYTES_FACTOR,
    ITEM_COST,
    JSON_ARRAY_COST,
    JSON_BYTES_FACTOR,
    JSON_OBJECT_COST,
    ReceiverLimits,
)
from toolscore.collector.receiver.splitting import Request, chunks, item_count
from toolscore.storage.records import LogRecordData, SpanRecord

Signal = Literal["traces", "logs"]
Format = Literal["protobuf", "json"]
MAX_CHUNK_MESSAGES = 3  # chunks' rejection summaries quoted in one partial_success
DECODER_THREADS = 2  # the machine's cores: more would only contend for the GIL
DEFAULT_LIMITS = ReceiverLimits()


class OtlpCore:
    """Transport-independent export handling; raises :mod:`~toolscore.collector.errors`."""

    def __init__(
        self,
        writer: IngestWriter,
        limits: DecodeLimits,
        metrics: Metrics,
        auth_token: str | None = None,
        max_concurrent_requests: int | None = None,
        retry_after_s: float = 1.0,
        receiver_limits: ReceiverLimits = DEFAULT_LIMITS,
        ack_gates: Sequence[AckGate] = (),
    ) -> None:
        self.receiver_limits = receiver_limits
        self.budget = MemoryBudget(receiver_limits.memory_budget_bytes, metrics, retry_after_s)
        self._decoder = ThreadPoolExecutor(DECODER_THREADS, thread_name_prefix="toolscore-decode")
        self._writer = writer
        self._limits = limits
        self._metrics = metrics
        self._expected_auth = f"Bearer {auth_token}".encode() if auth_token else None
        self._max_in_flight = max_concurrent_requests  # None: no cap
        self._in_flight = 0
        self._retry_after_s = retry_after_s
        self._ack_gates = tuple(ack_gates)

    def check_auth(self, authorization: str | None) -> None:
        """Raise Unauthenticated unless ``authorization`` is ``Bearer <token>`` (when required)."""
        if self._expected_auth is None:
            return
        given = (authorization or "").strip().encode()
        # constant-time: the comparison must not reveal how much of the token matched
        if not given or not hmac.compare_digest(given, self._expected_auth):
            raise Unauthenticated("missing or invalid bearer token")

    @contextlib.contextmanager
    def slot(self, transport: str) -> Iterator[None]:
        """Hold one of the ``max_concurrent_requests`` slots (shared by both transports) for
        the body of the ``with``, or raise TooManyRequests at once when all are taken.

        Transports take it once the request body has been read (see ``check_slot``): memory is
        bounded by the budget (budget.py), the slots bound the work being decoded and stored.
        Both receivers run on one event loop, and nothing awaits between test and increment.
        """
        self.check_slot(transport)
        self._in_flight += 1
        self._metrics.in_flight.labels(transport).inc()
        try:
            yield
        finally:
            self._in_flight -= 1
            self._metrics.in_flight.labels(transport).dec()

    def check_slot(self, transport: str) -> None:
        """Raise TooManyRequests (counted as throttled) when every slot is taken now.

        Transports call it before reading a body, so that while the service is saturated a
        refused request costs no more than its headers; they take the slot itself only once the
        body has arrived, so a client that sends slowly (or never) holds no slot.
        """
        limit = self._max_in_flight
        if limit is not None and self._in_flight >= limit:
            self._metrics.throttled.labels(transport).inc()
            raise TooManyRequests(
                f"more than {limit} export requests in flight; retry later", self._retry_after_s
            )

    async def export(
        self,
        signal: Signal,
        body: bytes | bytearray,
        fmt: Format,
        transport: str,
        reservation: Reservation,
    ) -> Message:
        """Parse, decode and store one request body, within its memory ``reservation`` (which
        already holds the body). Work runs in the decoder threads, chunk by chunk (limits.py),
        so the event loop is never blocked and at most one chunk per request is parsed and
        decoded at a time, its cost reserved first; each chunk is committed before the next.
        If a later chunk is refused (retryable), the client resends the whole request and the
        chunks already stored are ignored as duplicates. Once all is committed, the ack gates
        may hold the response: backpressure from scoring (pacing.py in the pipeline room)."""
        loop = asyncio.get_running_loop()
        if fmt == "protobuf":
            parts: Iterator[wire.Chunk | Request] = wire.split(
                body, signal == "logs", CHUNK_ITEMS, CHUNK_BYTES, self.budget.limit
            )
            allowance = first_allowance(len(body))
            # (a gRPC read may have reserved it already, with the message)
            reservation.grow(len(body) + allowance - reservation.held)
        else:
            parts, allowance = await self._parsed_json(signal, body, reservation), 0
        del body  # the chunks keep what they need
        outcome = _Outcome()
        try:
            while chunk := await loop.run_in_executor(self._decoder, next, parts, None):
                if isinstance(chunk, wire.Chunk) and chunk.cost > allowance:
                    reservation.grow(chunk.cost - allowance)  # a big item (wire.item_cost)
                    allowance = chunk.cost
                decoded = await loop.run_in_executor(self._decoder, self._decode, chunk, signal)
                del chunk
                outcome.add(decoded.rejected, decoded.message)
                spans, logs = decoded.items
                truncated, rejected = decoded.truncated, decoded.rejected
                del decoded
                await self._store(signal, transport, spans, logs, truncated, rejected)
        finally:
            _close(parts)
            chunk = None
            spans = logs = ()
        for gate in self._ack_gates:  # the request's memory stays reserved: its caller holds it
            await gate.hold()
        return outcome.response(signal)

    async def _parsed_json(
        self, signal: Signal, body: bytes | bytearray, reservation: Reservation
    ) -> Iterator[Request]:
        """OTLP/JSON, parsed whole (its estimated cost reserved first), in chunks."""
        loop = asyncio.get_running_loop()
        reservation.grow(await loop.run_in_executor(self._decoder, _json_cost, body))
        parse = parse_traces_json if signal == "traces" else parse_logs_json
        request, items = await loop.run_in_executor(self._decoder, _parse, parse, body)
        try:
            reservation.grow(_json_chunk_cost(items, len(body)))
        except BaseException:
            del request
            raise
        return chunks(request, CHUNK_ITEMS, CHUNK_BYTES)

    def _decode(self, chunk: wire.Chunk | Request, signal: Signal) -> _Decoded:
        """In a decoder thread: one chunk, parsed if need be, decoded."""
        if isinstance(chunk, wire.Chunk):
            parse = parse_traces_protobuf if signal == "traces" else parse_logs_protobuf
            chunk = parse(chunk.data)
        if isinstance(chunk, ExportTraceServiceRequest):
            traces = decode_traces(chunk, self._limits)
            return _Decoded(
                (traces.spans, ()), traces.rejected, traces.error_message, traces.truncated_values
            )
        logs = decode_logs(chunk, self._limits)
        return _Decoded(
            ((), logs.records), logs.rejected, logs.error_message, logs.truncated_values
        )

    async def _store(
        self,
        signal: str,
        transport: str,
        spans: Sequence[SpanRecord],
        logs: Sequence[LogRecordData],
        truncated_values: int,
        rejected: int,
    ) -> None:
        """Submit one decoded chunk's items (acknowledged only once committed) and count
        them: truncated values, then refused, or accepted and rejected ones."""
        items = len(spans) + len(logs)
        if truncated_values:
            self._metrics.truncated.labels(signal).inc(truncated_values)
        try:
            await self._writer.submit(spans, logs)
        except RetryableError as exc:
            self._metrics.refused.labels(signal, transport, exc.reason).inc(items)
            raise
        self._metrics.accepted.labels(signal, transport).inc(items)
        if rejected:
            self._metrics.rejected.labels(signal, transport).inc(rejected)


def _parse(
    parse: Callable[[bytes | bytearray], Request], body: bytes | bytearray
) -> tuple[Request, int]:
    """In a decoder thread: the parsed request and its number of items."""
    request = parse(body)
    return request, item_count(request)


def first_allowance(wire_bytes: int) -> int:
    """What the first chunk of a protobuf body of ``wire_bytes`` may cost (an item takes 2
    bytes at least); bigger items grow it (wire.py)."""
    return wire.chunk_cost(min(wire_bytes // 2, CHUNK_ITEMS), min(wire_bytes, CHUNK_BYTES))


def _json_cost(body: bytes | bytearray) -> int:
    """In a decoder thread: what parsing an OTLP/JSON body may cost (limits.py)."""
    return (
        len(body) * JSON_BYTES_FACTOR
        + body.count(b"{") * JSON_OBJECT_COST
        + body.count(b"[") * JSON_ARRAY_COST
    )


def _json_chunk_cost(items: int, wire_bytes: int) -> int:
    """What decoding the largest chunk of a parsed JSON request costs (limits.py)."""
    return min(items, CHUNK_ITEMS) * ITEM_COST + min(wire_bytes, CHUNK_BYTES) * DECODE_BYTES_FACTOR


@dataclass(frozen=True, slots=True)
class _Decoded:
    items: tuple[Sequence[SpanRecord], Sequence[LogRecordData]]
    rejected: int
    message: str
    truncated: int


class _Outcome:
    """The partial success of a request decoded in chunks."""

    def __init__(self) -> None:
        self.rejected = 0
        self.messages: list[str] = []

    def add(self, rejected: int, message: str) -> None:
        self.rejected += rejected
        if message and len(self.messages) < MAX_CHUNK_MESSAGES:
            self.messages.append(message)

    def response(self, signal: Signal) -> Message:
        message = "; ".join(self.messages)
        if signal == "traces":
            traces = ExportTraceServiceResponse()
            if self.rejected:
                traces.partial_success.rejected_spans = self.rejected
                traces.partial_success.error_message = message
            return traces
        logs = ExportLogsServiceResponse()
        if self.rejected:
            logs.partial_success.rejected_log_records = self.rejected
            logs.partial_success.error_message = message
        return logs


def _close(parts: Iterator[object]) -> None:
    """Close the chunk generator. When the call was cancelled (its client went away) while a
    decoder thread runs the generator's step, it cannot be closed from here (ValueError:
    generator already executing); it is freed once that step returns."""
    close = getattr(parts, "close", None)
    if close is not None:
        with contextlib.suppress(ValueError):
            close()
