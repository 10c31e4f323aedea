"""Prometheus metrics of the receiver and the ingest writer (one registry per app instance)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest


class Metrics:
    """Every metric the service exposes on ``/metrics``; ``signal`` is ``traces`` or ``logs``."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        # registration order is exposition order: keep it
        self._add_receiver_metrics()
        self._add_ingest_metrics()
        self._add_health_metrics()
        self._add_admission_metrics()

    def _add_receiver_metrics(self) -> None:
        """What the receiver accepted, refused and truncated, per signal and transport."""
        r = self.registry
        self.accepted = Counter(
            "toolscore_receiver_accepted_items",
            "Spans / log records committed to the database.",
            ["signal", "transport"],
            registry=r,
        )
        self.rejected = Counter(
            "toolscore_receiver_rejected_items",
            "Spans / log records refused as invalid (reported as partial success).",
            ["signal", "transport"],
            registry=r,
        )
        self.refused = Counter(
            "toolscore_receiver_refused_items",
            "Spans / log records refused with a retryable error, by reason.",
            ["signal", "transport", "reason"],
            registry=r,
        )
        self.failed_requests = Counter(
            "toolscore_receiver_failed_requests",
            "Requests answered with an error status, by status.",
            ["transport", "status"],
            registry=r,
        )
        self.in_flight = Gauge(
            "toolscore_receiver_in_flight_requests",
            "Export requests being read, decoded or stored (capped by --max-concurrent-requests).",
            ["transport"],
            registry=r,
        )
        self.throttled = Counter(
            "toolscore_receiver_throttled_requests",
            "Export requests refused, unread, because --max-concurrent-requests were in flight.",
            ["transport"],
            registry=r,
        )
        self.truncated = Counter(
            "toolscore_receiver_truncated_values",
            "Attribute values shortened to the configured size limit.",
            ["signal"],
            registry=r,
        )

    def _add_ingest_metrics(self) -> None:
        """The ingest writer's queue, group-commit batches and failed transactions."""
        r = self.registry
        self.queue_spans = Gauge(
            "toolscore_ingest_queue_items",
            "Spans and log records waiting to be committed.",
            registry=r,
        )
        self.commit_seconds = Histogram(
            "toolscore_ingest_commit_seconds",
            "Time to write and commit one group-commit batch.",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=r,
        )
        self.batch_items = Histogram(
            "toolscore_ingest_batch_items",
            "Spans and log records per committed batch.",
            buckets=(1, 10, 100, 512, 1000, 2500, 5000, 10000, 25000),
            registry=r,
        )
        self.commit_failures = Counter(
            "toolscore_ingest_commit_failures",
            "Batches whose transaction failed (their requests got a retryable error).",
            registry=r,
        )
        self.data_faults = Counter(
            "toolscore_ingest_data_faults",
            "Transactions the database refused for the data they carried (value out of range, "
            "NUL in text, key too long...); each is split to isolate the requests responsible.",
            registry=r,
        )
        self.unstorable_requests = Counter(
            "toolscore_ingest_unstorable_requests",
            "Requests isolated as carrying data the database refuses, answered with a "
            "non-retryable error (INVALID_ARGUMENT / 400) while the rest of their batch committed.",
            registry=r,
        )

    def _add_health_metrics(self) -> None:
        """Whether the service is healthy, and stuck database work that would make it not."""
        r = self.registry
        self.healthy = Gauge(
            "toolscore_healthy",
            "1 while /health answers 200 and gRPC health SERVING; 0 while the database does not "
            "answer or the ingest writer is stuck (see the log's warning for which).",
            registry=r,
        )
        self.ingest_busy_seconds = Gauge(
            "toolscore_ingest_busy_seconds",
            "How long the ingest writer's current database work has been running (0: idle).",
            registry=r,
        )
        self.db_calls_abandoned = Counter(
            "toolscore_database_calls_abandoned",
            "Database calls given up after --db-call-deadline without a reply: their connection "
            "was shut down and discarded.",
            registry=r,
        )

    def _add_admission_metrics(self) -> None:
        """What the receiver's defences against resource-holding clients do."""
        r = self.registry
        self.memory_reserved = Gauge(
            "toolscore_receiver_memory_reserved_bytes",
            "Bytes of request data (bodies, their parsed and decoded form) admitted in flight, "
            "bounded by the in-flight memory budget.",
            registry=r,
        )
        self.memory_refused = Counter(
            "toolscore_receiver_memory_refused_requests",
            "Export requests refused because the in-flight memory budget was taken (retryable) "
            "or could never hold them (413 / RESOURCE_EXHAUSTED).",
            ["transport"],
            registry=r,
        )
        self.client_disconnects = Counter(
            "toolscore_receiver_client_disconnects",
            "Export requests whose client went away before they were answered: hung up while "
            "sending its body (HTTP), cancelled its call or lost its connection (gRPC).",
            ["transport"],
            registry=r,
        )
        self.slow_requests = Counter(
            "toolscore_receiver_slow_requests",
            "Export requests given up because their body (HTTP) or message (gRPC) did not "
            "arrive in time.",
            ["transport"],
            registry=r,
        )
        self.connections = Gauge(
            "toolscore_receiver_http_connections",
            "Open OTLP/HTTP connections.",
            registry=r,
        )
        self.connections_refused = Counter(
            "toolscore_receiver_http_connections_refused",
            "OTLP/HTTP connections closed on accept because the connection limit was reached.",
            registry=r,
        )
        self.grpc_waiting_reads = Gauge(
            "toolscore_receiver_grpc_waiting_calls",
            "gRPC export calls waiting for their turn to read their message.",
            registry=r,
        )

    def exposition(self) -> tuple[bytes, str]:
        """The text exposition format and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
