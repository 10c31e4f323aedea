"""Starting ``serve``'s receivers, with one clear line when an address cannot be bound."""

from __future__ import annotations

import os
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from toolscore.collector.ingest.metrics import Metrics
from toolscore.collector.receiver.core import OtlpCore
from toolscore.collector.settings import Listen, Settings

if TYPE_CHECKING:
    from toolscore.collector.receiver.grpc_server import GrpcReceiver
    from toolscore.collector.receiver.http_server import HttpReceiver


def check_free(listen: Listen, name: str) -> None:
    """Bind ``listen`` once ourselves: grpc's own failure is a C-level log line and a vague
    RuntimeError, and it shares ports (SO_REUSEPORT) with another server already on it."""
    if listen.port == 0:
        return
    family = socket.AF_INET6 if ":" in listen.host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((listen.host, listen.port))
        except OSError as exc:
            raise OSError(f"{name} on {listen}: {_why(exc)}") from exc


def _why(exc: OSError) -> str:
    return os.strerror(exc.errno).lower() if exc.errno else str(exc)


def _tls(s: Settings) -> tuple[Path, Path] | None:
    return (s.tls_cert, s.tls_key) if s.tls_cert and s.tls_key else None


def grpc_receiver(core: OtlpCore, metrics: Metrics, s: Settings, listen: Listen) -> GrpcReceiver:
    from toolscore.collector.receiver.grpc_server import GrpcReceiver

    return GrpcReceiver(core, metrics, listen, s.max_request_bytes, _tls(s), s.retry_after_s)


async def start_grpc(receiver: GrpcReceiver, listen: Listen) -> int:
    """The bound port; OSError naming the address when it cannot be bound."""
    check_free(listen, "OTLP/gRPC")
    try:
        return await receiver.start()
    except RuntimeError as exc:  # grpc says "Failed to bind to address ..."
        raise OSError(f"OTLP/gRPC on {listen}: address in use or unavailable") from exc


def http_receiver(
    core: OtlpCore,
    metrics: Metrics,
    s: Settings,
    listen: Listen,
    unhealthy: Callable[[], Awaitable[str | None]],
) -> HttpReceiver:
    from toolscore.collector.receiver.http_server import HttpReceiver

    return HttpReceiver(
        core,
        metrics,
        listen,
        s.max_request_bytes,
        _tls(s),
        health=unhealthy,
        shutdown_grace_s=s.shutdown_grace_s,
        retry_after_s=s.retry_after_s,
    )


async def start_http(receiver: HttpReceiver, listen: Listen) -> int:
    """The bound port; OSError naming the address when it cannot be bound."""
    try:
        return await receiver.start()
    except OSError as exc:
        raise OSError(f"OTLP/HTTP on {listen}: {_why(exc)}") from exc
