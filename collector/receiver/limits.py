"""Defaults of the receiver's defences against clients that hold resources.

One frozen dataclass, so that the receivers and tests share the numbers and the operator docs can
quote them. The costs per item and per byte below are what CPython and upb allocate, measured
with benchmarks/bench_inflight_memory.py; ``DEFAULT_MEMORY_BUDGET`` (gRPC reads included), the
copies made while one message is handed over, and the server's own memory keep the process
under about 1 GB whatever clients send (docs/reliability.md, "The bound").
"""

from __future__ import annotations

import resource
from dataclasses import dataclass

MIB = 1024 * 1024

# Bytes of request data admitted at once, both transports (see budget.py for what is counted).
DEFAULT_MEMORY_BUDGET = 384 * MIB
# Protobuf bodies are split before parsing (wire.py) into chunks of at most CHUNK_ITEMS spans /
# log records and CHUNK_BYTES of wire bytes; one chunk per request is parsed and decoded at a
# time, each committed before the next. What a chunk may cost, estimated before it is parsed:
CHUNK_ITEMS = 10_000
CHUNK_BYTES = 1 * MIB
# per item: ~170 B parsed (an empty span, 2 wire bytes, parses to 170 B), ~400 B decoded
# (SpanRecord...), plus the ingest writer's rows
ITEM_COST = 1280
# per wire byte of nested values not counted one by one: empty attributes / events parse to 26x
# their wire size, arrays of empty values to 19x (measured, upb)...
PARSE_BYTES_FACTOR = 32
# ...and decoded: attribute text is copied twice on its way in (+ the parsed copy)
DECODE_BYTES_FACTOR = 3
# An item over CHUNK_BYTES is a chunk alone: its nested messages are counted, this much each
# (parsed ~40-50 B, decoded into dict entries and values ~150 B).
NESTED_COST = 256
# OTLP/JSON is parsed whole (json.loads then the protobuf message): estimated from its bytes (a
# string, number or key costs at most 16x its text as Python objects) plus each object and array
# (an empty object "{}" costs ~234 B parsed: 82x). 1,000,000 tiny spans as JSON: 4.4x measured.
JSON_BYTES_FACTOR = 16
JSON_OBJECT_COST = 256
JSON_ARRAY_COST = 64
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
    # per transport: more are closed on accept (also capped by a third of RLIMIT_NOFILE)
    max_http_connections: int = 4096
    max_grpc_connections: int = 4096
    # gRPC calls waiting for their message: grpc core buffers a message whole only while it is
    # being read, so these many reads at once bound what arrives (x --max-request-bytes)...
    grpc_reads: int = 3
    grpc_reads_per_connection: int = 2  # ...and one connection's calls at most this
    grpc_read_timeout_s: float = 30.0  # a call's message must arrive within this of its turn
    # A turn lasts this long; a read still pending then goes on parked, without its turn
    # (read_gate.py), parked reads holding at most this share of the memory budget.
    grpc_probe_s: float = 0.1
    grpc_parked_share: float = 0.5
    grpc_parked_min_s: float = 2.0  # a parked read is not ended to make room before this
    grpc_streams_per_connection: int = 128  # HTTP/2 MAX_CONCURRENT_STREAMS


def connection_cap(configured: int) -> int:
    """``configured``, but at most a third of the process's file descriptors (one third per
    transport; the rest are for the database and the log)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return configured
    return max(1, min(configured, soft // 3))
