"""Silent gRPC calls and slow HTTP uploads cannot starve legitimate clients, even one sharing the
attacker's HTTP/2 connection: a real ``toolscore serve`` process (defaults), 70 gRPC calls over
one connection that send their headers and never their message (each replaced as soon as the
server ends it) and 70 HTTP uploads at one byte per second (reopened when closed), while a
legitimate client alternates a gRPC and an HTTP export with a 10 s deadline for 20 s
(benchmarks/bench_siege.py runs the same for 60 s). Before, a gRPC client on the attacker's
connection got 0 of its exports served (every call DEADLINE_EXCEEDED)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest

from benchmarks.bench_inflight_memory import Server
from benchmarks.bench_siege import legitimate, siege
from toolscore.collector.receiver.grpc_server import server_options
from toolscore.collector.receiver.limits import ReceiverLimits, connection_cap


@pytest.mark.slow
@pytest.mark.parametrize("shared", [True, False], ids=["shared-connection", "own-connection"])
def test_legitimate_exports_are_served_during_a_siege(tmp_path: Path, shared: bool) -> None:
    server = Server(tmp_path / "siege.db", None, None)
    try:
        alone = legitimate(server, 2.0)
        assert alone.rate("grpc") == 1.0 and alone.rate("http") == 1.0
        tally = siege(server, 20.0, grpc_attackers=70, http_attackers=70, shared=shared)
    finally:
        server.stop()
    print(tally)
    assert tally.attempts["grpc"] >= 5  # no attempt ran into its 10 s deadline for long
    assert tally.rate("grpc") >= 0.95, tally.errors
    assert tally.rate("http") >= 0.95, tally.errors


def test_grpc_connections_are_capped() -> None:
    options = dict(server_options(64 * 2**20, ReceiverLimits()))
    cap = options["grpc.max_allowed_incoming_connections"]
    assert cap == connection_cap(ReceiverLimits().max_grpc_connections) > 0


def test_grpc_core_refuses_connections_past_the_cap() -> None:
    assert asyncio.run(_three_connections_to_a_server_capped_at_two()) == [
        "OK",
        "OK",
        "UNAVAILABLE",
    ]


async def _three_connections_to_a_server_capped_at_two() -> list[str]:
    """The channel argument is honoured by grpc core: the third connection is refused."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    from grpc_health.v1.health import aio as health_aio

    server = grpc.aio.server(options=[("grpc.max_allowed_incoming_connections", 2)])
    health_pb2_grpc.add_HealthServicer_to_server(health_aio.HealthServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    answers, channels = [], []  # every channel kept open
    try:
        for _ in range(3):
            channel = grpc.aio.insecure_channel(
                f"127.0.0.1:{port}", options=[("grpc.use_local_subchannel_pool", 1)]
            )
            channels.append(channel)
            try:
                stub = health_pb2_grpc.HealthStub(channel)
                await stub.Check(health_pb2.HealthCheckRequest(), timeout=2)
                answers.append("OK")
            except grpc.aio.AioRpcError as exc:
                answers.append(exc.code().name)
    finally:
        for channel in channels:
            await channel.close()
        await server.stop(None)
    return answers
