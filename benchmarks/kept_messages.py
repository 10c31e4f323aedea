"""Scenarios of bench_inflight_memory.py whose spans keep their messages whole (under
``--max-attribute-bytes``), so that scoring holds them too: ``kept``, ``distinct``, ``backlog``."""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import os
import signal
import tempfile
import time
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from benchmarks.bench_hostile_clients import BurstRun, TreeSampler, burst_run, until_scored
from benchmarks.bench_inflight_memory import Server


def kept_spans(trace: int, spans: int, value_bytes: int, distinct: bool = False) -> bytes:
    """One request of ``spans`` spans, each with a message attribute of ``value_bytes`` (under
    ``--max-attribute-bytes``: kept whole, decoded, stored and scored); ``distinct``: each
    span's message its own random text (stored once per span, as growing message histories
    are), else one repeated text (stored once, and loaded once for scoring)."""
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.trace.v1.trace_pb2 import Span

    req = ExportTraceServiceRequest()
    scope = req.resource_spans.add().scope_spans.add()
    value = AnyValue(string_value="y" * value_bytes)
    for i in range(spans):
        if distinct:
            text = base64.b64encode(os.urandom(value_bytes * 3 // 4)).decode()
            value = AnyValue(string_value=text)
        scope.spans.append(
            Span(
                trace_id=trace.to_bytes(16, "big"),
                span_id=(i + 1).to_bytes(8, "big"),
                name="kept",
                start_time_unix_nano=1,
                end_time_unix_nano=2,
                attributes=[KeyValue(key="gen_ai.input.messages", value=value)],
            )
        )
    return bytes(req.SerializeToString())


def kept(clients: int, spans: int, distinct: bool = False) -> list[BurstRun]:
    """``clients`` requests of ``spans`` spans of 62,000-byte messages (900: ~56 MB each)."""
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(Path(tmp) / "kept.db", None, None)
        try:
            return [
                burst_run(
                    server,
                    t,
                    [kept_spans(first + i, spans, 62_000, distinct) for i in range(clients)],
                    spans,
                )
                for t, first in (("http", 3_000), ("grpc", 4_000))
            ]
        finally:
            server.stop()


def distinct(clients: int, spans: int) -> list[BurstRun]:
    return kept(clients, spans, distinct=True)


def backlog(clients: int, spans: int) -> list[BurstRun]:
    """The ``distinct`` requests (HTTP) stored while serve's scoring processes are stopped
    (SIGSTOP), then resumed: their next round finds every conversation ready at once (as after
    an outage or a restart with a backlog). The tree's peak until every one is scored."""
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(Path(tmp) / "backlog.db", None, None, scoring=True)
        children: list[int] = []
        try:
            children = _scoring_processes(server.proc.pid)
            for pid in children:
                os.kill(pid, signal.SIGSTOP)
            bodies = [kept_spans(5_000 + i, spans, 62_000, True) for i in range(clients)]
            stored = burst_run(server, "http", bodies, spans, until_done=False)
            with TreeSampler(server.proc.pid) as sampler:
                for pid in children:
                    os.kill(pid, signal.SIGCONT)
                scored_s = until_scored(server.db)
            return [
                dataclasses.replace(
                    stored,
                    transport="backlog",
                    scored_peak_mb=sampler.peak_kb / 1024,
                    scoring_peak_mb=sampler.children_peak_kb / 1024,
                    scored_s=scored_s,
                )
            ]
        finally:
            for pid in children:  # never leave a stopped process behind
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGCONT)
            server.stop()


def _scoring_processes(pid: int, timeout_s: float = 60) -> list[int]:
    """serve's scoring processes (started with its first round), once they all run."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = []
        for task in Path(f"/proc/{pid}/task").iterdir():
            for child in (task / "children").read_text().split():
                with contextlib.suppress(OSError):
                    if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes():
                        found.append(int(child))
        if len(found) >= (os.cpu_count() or 1) or time.monotonic() > deadline:
            assert found, "no scoring process"
            return found
        time.sleep(0.2)
