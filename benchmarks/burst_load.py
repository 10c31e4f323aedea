"""The load of bench_burst.py (each sender runs in its own process): the pipeline load's
requests sent as fast as ``serve`` acknowledges them, over OTLP/gRPC or OTLP/HTTP."""

from __future__ import annotations

import time
from typing import Any

from benchmarks.pipeline_load import SPANS_PER_TRACE, TRACES_PER_REQUEST

GRPC_IN_FLIGHT = 8
TRACES = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def send_grpc(port: int, conversations: int, prefix: str, result: Any) -> None:
    """The burst as OTLP/gRPC requests of 511 spans, ``GRPC_IN_FLIGHT`` in flight over one
    channel, each sent again on UNAVAILABLE (as exporters do), as fast as acknowledged."""
    import threading

    import grpc

    from benchmarks.pipeline_load import payloads

    bodies = payloads(prefix, max(1, conversations // TRACES_PER_REQUEST))
    cpu = time.process_time()
    state = {"next": 0, "ok": 0, "failed": 0}
    lock = threading.Lock()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    export = channel.unary_unary(TRACES)

    def sender() -> None:
        while True:
            with lock:
                i = state["next"]
                state["next"] += 1
            if i >= len(bodies):
                return
            for _attempt in range(100):
                try:
                    export(bodies[i], timeout=30)
                    with lock:
                        state["ok"] += 1
                    break
                except grpc.RpcError as exc:
                    if exc.code() != grpc.StatusCode.UNAVAILABLE:
                        with lock:
                            state["failed"] += 1
                        break
                    time.sleep(0.05)

    started = time.time()
    threads = [threading.Thread(target=sender) for _ in range(GRPC_IN_FLIGHT)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    result["last_ack"] = time.time()
    result["first_send"] = started
    result["cpu"] = time.process_time() - cpu
    channel.close()
    result.update(
        spans=state["ok"] * TRACES_PER_REQUEST * SPANS_PER_TRACE,
        conversations=state["ok"] * TRACES_PER_REQUEST,
        failed=state["failed"],
    )


def send_http(port: int, conversations: int, prefix: str, result: Any) -> None:
    from benchmarks.pipeline_load import paced, payloads

    bodies = payloads(prefix, max(1, conversations // TRACES_PER_REQUEST))  # before the clock
    cpu, started = time.process_time(), time.time()
    posted = paced(port, bodies, 0.0)  # unpaced: as fast as acknowledged
    result["last_ack"] = time.time()
    ok = len(posted.latencies)
    result.update(
        first_send=started,
        cpu=time.process_time() - cpu,
        spans=ok * TRACES_PER_REQUEST * SPANS_PER_TRACE,
        conversations=ok * TRACES_PER_REQUEST,
        failed=posted.failed,
    )
