"""Defaults of the receiver's defences against clients that hold resources (issue 9, 4 and 7).

One frozen dataclass, so that the receivers and tests share the numbers and the operator docs can
quote them. Every figure below was measured on the 2-core test VM (benchmarks/
bench_inflight_memory.py); ``DEFAULT_MEMORY_BUDGET`` plus the gRPC arrival bound plus the
server's own ~140 MB keep the process under 1 GB whatever clients send.
"""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1024 * 1024

# Bytes of request data admitted at once, both transports (see budget.py for what is counted).
DEFAULT_MEMORY_BUDGET = 384 * MIB
# Protobuf (upb) and OTLP/JSON parsing need about 4x a body's size on top of the body itself
# (1,000,000 tiny spans: 48 MiB -> +199 MB; 200,000 as JSON: 27 MiB -> +109 MB peak).
PARSE_FACTOR = 4
# Decoded in chunks of at most this many spans / log records and this many wire bytes: the
# decoded form (SpanRecord, attribute dicts, the ingest writer's rows) exists for one chunk at a
# time, whatever the request's size. ~1 KiB per item and ~3x the wire bytes (measured: 400 B per
# decoded tiny span, plus the writer's rows; attribute text is copied twice on its way in).
CHUNK_ITEMS = 10_000
CHUNK_BYTES = 4 * MIB
ITEM_COST = 1024
CHUNK_BYTES_FACTOR = 3
# After a request this large, freed heap is handed back to the OS (malloc_trim).
TRIM_AFTER_BYTES = 64 * MIB


@dataclass(frozen=True, slots=True)
class ReceiverLimits:
    memory_budget_bytes: int = DEFAULT_MEMORY_BUDGET
    # A connection with no request in progress (no request sent yet, or idle keep-alive; for
    # gRPC: no call, or no HTTP/2 preface) is closed after this long.
    idle_timeout_s: float = 15.0
    # An HTTP body must arrive at min_body_rate bytes/s after a grace: by grace + received/rate.
    body_grace_s: float = 10.0
    min_body_rate: float = 64 * 1024
    max_http_connections: int = 4096  # more are closed on accept (also capped by RLIMIT_NOFILE/2)
    # gRPC calls waiting for their message: grpc core buffers a message whole only while it is
    # being read, so these many reads at once bound what arrives (x --max-request-bytes)...
    grpc_reads: int = 2
    grpc_reads_per_connection: int = 1  # ...and one connection's idle calls hold at most this
    grpc_read_timeout_s: float = 30.0  # a call's message must arrive within this of its turn
    grpc_streams_per_connection: int = 32  # HTTP/2 MAX_CONCURRENT_STREAMS
