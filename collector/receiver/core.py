"""What both transports do with a request: admit it, store it, then build the OTLP response."""

from __future__ import annotations

import contextlib
import hmac
from collections.abc import Iterator, Sequence

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from toolscore.collector.decode import DecodeLimits, decode_logs, decode_traces
from toolscore.collector.errors import RetryableError, TooManyRequests, Unauthenticated
from toolscore.collector.ingest import IngestWriter
from toolscore.collector.metrics import Metrics
from toolscore.collector.model import LogRecordData, SpanRecord


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
    ) -> None:
        self._writer = writer
        self._limits = limits
        self._metrics = metrics
        self._expected_auth = f"Bearer {auth_token}".encode() if auth_token else None
        self._max_in_flight = max_concurrent_requests  # None: no cap
        self._in_flight = 0
        self._retry_after_s = retry_after_s

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

        Transports take it *before* reading the request body, so that the memory held by
        in-flight requests is bounded by the cap times the size limit, whatever the number of
        clients: a refused request costs no more than its headers. Both receivers run on one
        event loop, and nothing awaits between the test and the increment.
        """
        limit = self._max_in_flight
        if limit is not None and self._in_flight >= limit:
            self._metrics.throttled.labels(transport).inc()
            raise TooManyRequests(
                f"more than {limit} export requests in flight; retry later", self._retry_after_s
            )
        self._in_flight += 1
        self._metrics.in_flight.labels(transport).inc()
        try:
            yield
        finally:
            self._in_flight -= 1
            self._metrics.in_flight.labels(transport).dec()

    async def _store(
        self,
        signal: str,
        transport: str,
        spans: Sequence[SpanRecord],
        logs: Sequence[LogRecordData],
        truncated_values: int,
        rejected: int,
    ) -> None:
        """Submit one decoded request's items (acknowledged only once committed) and count
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

    async def export_traces(
        self, request: ExportTraceServiceRequest, transport: str
    ) -> ExportTraceServiceResponse:
        decoded = decode_traces(request, self._limits)
        await self._store(
            "traces", transport, decoded.spans, (), decoded.truncated_values, decoded.rejected
        )
        response = ExportTraceServiceResponse()
        if decoded.rejected:
            response.partial_success.rejected_spans = decoded.rejected
            response.partial_success.error_message = decoded.error_message
        return response

    async def export_logs(
        self, request: ExportLogsServiceRequest, transport: str
    ) -> ExportLogsServiceResponse:
        decoded = decode_logs(request, self._limits)
        await self._store(
            "logs", transport, (), decoded.records, decoded.truncated_values, decoded.rejected
        )
        response = ExportLogsServiceResponse()
        if decoded.rejected:
            response.partial_success.rejected_log_records = decoded.rejected
            response.partial_success.error_message = decoded.error_message
        return response
