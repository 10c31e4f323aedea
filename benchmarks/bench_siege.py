"""Legitimate exports during a siege of silent gRPC calls and slow HTTP uploads.

The attack, against a default ``toolscore serve`` (a child process, SQLite):
- ``--grpc-attackers`` (70) gRPC Export calls over one HTTP/2 connection that send their headers
  and never their message, each replaced as soon as the server ends it;
- ``--http-attackers`` (70) HTTP POSTs announcing ``Content-Length: 1000000`` and sending one
  byte per second, each reopened when the server closes it.
Meanwhile a legitimate client (its own gRPC connection) alternates one gRPC and one HTTP export,
each with a 10 s deadline, for ``--seconds`` (60): the share of its exports served on each
transport is what a user sees. A run with no attack first gives the baseline.

    python benchmarks/bench_siege.py                 # the full shape: 60 s, 70 + 70
    python benchmarks/bench_siege.py --seconds 20    # shorter
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_inflight_memory import TRACES, Server
from tests.integration.test_receiver_concurrency import _request

PB = {"Content-Type": "application/x-protobuf"}
# The legitimate client's channel: its own connection (as a separate process has), or with
# --shared-connection the attacker's (grpc shares one connection between a process's channels
# to one target: also how clients behind one HTTP/2 proxy arrive).
OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]
DEADLINE_S = 10.0


@dataclass
class Tally:
    attempts: dict[str, int] = field(default_factory=lambda: {"grpc": 0, "http": 0})
    served: dict[str, int] = field(default_factory=lambda: {"grpc": 0, "http": 0})
    errors: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, list[float]] = field(default_factory=lambda: {"grpc": [], "http": []})

    def rate(self, transport: str) -> float:
        return self.served[transport] / max(1, self.attempts[transport])


def _silent(stop: threading.Event) -> Iterator[bytes]:
    stop.wait()
    return
    yield b""  # pragma: no cover - makes this a generator


class GrpcSiege:
    """``count`` silent calls over one channel, each replaced when the server ends it."""

    def __init__(self, target: str, count: int, stop: threading.Event, shared: bool) -> None:
        self._channel = grpc.insecure_channel(target, [] if shared else OWN_CONNECTION)
        self._stop = stop
        self.ended = 0
        for _ in range(count):
            self._open()

    def _open(self) -> None:
        if self._stop.is_set():
            return
        call = self._channel.stream_unary(TRACES).future(_silent(self._stop))
        call.add_done_callback(self._replace)

    def _replace(self, _call: object) -> None:
        self.ended += 1
        self._open()

    def close(self) -> None:
        self._channel.close()


class HttpSiege:
    """``count`` uploads at one byte per second, each reopened when the server closes it."""

    HEAD = (
        b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
        b"Content-Length: 1000000\r\n\r\n"
    )

    def __init__(self, port: int, count: int, stop: threading.Event) -> None:
        self._port = port
        self._stop = stop
        self.reopened = 0
        self._socks = [self._connect() for _ in range(count)]
        self._thread = threading.Thread(target=self._drip, daemon=True)
        self._thread.start()

    def _connect(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self._port))
        sock.sendall(self.HEAD)
        return sock

    def _drip(self) -> None:
        while not self._stop.wait(1.0):
            for i, sock in enumerate(self._socks):
                try:
                    sock.sendall(b"\n")
                except OSError:  # closed by the server: reopen
                    sock.close()
                    with contextlib.suppress(OSError):
                        self._socks[i] = self._connect()
                        self.reopened += 1

    def close(self) -> None:
        self._thread.join(5)
        for sock in self._socks:
            sock.close()


def legitimate(server: Server, seconds: float, shared: bool = False) -> Tally:
    """Alternate one gRPC and one HTTP export, each with a 10 s deadline, for ``seconds``."""
    tally = Tally()
    end = time.monotonic() + seconds
    i = 0
    options = [] if shared else OWN_CONNECTION
    with grpc.insecure_channel(server.grpc_target, options) as channel:
        export = channel.unary_unary(TRACES)
        while time.monotonic() < end:
            i += 1
            tally.attempts["grpc"] += 1
            started = time.monotonic()
            try:
                export(_request(100_000 + i), timeout=DEADLINE_S)
                tally.served["grpc"] += 1
                tally.seconds["grpc"].append(time.monotonic() - started)
            except grpc.RpcError as exc:
                name = f"grpc {exc.code().name}: {(exc.details() or '')[:100]}"
                tally.errors[name] = tally.errors.get(name, 0) + 1
            tally.attempts["http"] += 1
            started = time.monotonic()
            try:
                resp = requests.post(
                    f"{server.http_url}/v1/traces",
                    data=_request(200_000 + i),
                    headers=PB,
                    timeout=DEADLINE_S,
                )
                ok = resp.status_code == 200
                name = f"http {resp.status_code}"
            except requests.RequestException as exc:
                ok, name = False, f"http {type(exc).__name__}"
            tally.served["http"] += ok
            if ok:
                tally.seconds["http"].append(time.monotonic() - started)
            if not ok:
                tally.errors[name] = tally.errors.get(name, 0) + 1
    return tally


def siege(
    server: Server, seconds: float, grpc_attackers: int, http_attackers: int, shared: bool
) -> Tally:
    stop = threading.Event()
    port = int(server.http_url.rsplit(":", 1)[1])
    grpc_siege = GrpcSiege(server.grpc_target, grpc_attackers, stop, shared)
    http_siege = HttpSiege(port, http_attackers, stop)
    try:
        time.sleep(2.0)  # every attacker connected and holding what it can
        return legitimate(server, seconds, shared)
    finally:
        stop.set()
        http_siege.close()
        grpc_siege.close()
        print(
            f"  attack: {grpc_siege.ended} silent gRPC calls ended by the server (and replaced), "
            f"{http_siege.reopened} slow uploads reopened",
            flush=True,
        )


def _latency(seconds: list[float]) -> str:
    if not seconds:
        return "-"
    return f"median {statistics.median(seconds):.3f} s, max {max(seconds):.3f} s"


def _line(label: str, tally: Tally) -> str:
    return (
        f"{label}: gRPC {tally.served['grpc']}/{tally.attempts['grpc']} "
        f"({tally.rate('grpc'):.0%}; {_latency(tally.seconds['grpc'])}), "
        f"HTTP {tally.served['http']}/{tally.attempts['http']} "
        f"({tally.rate('http'):.0%}; {_latency(tally.seconds['http'])}); "
        f"failures {tally.errors or 'none'}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--grpc-attackers", type=int, default=70)
    parser.add_argument("--http-attackers", type=int, default=70)
    parser.add_argument(
        "--shared-connection",
        action="store_true",
        help="the legitimate gRPC client shares the attacker's HTTP/2 connection",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(Path(tmp) / "siege.db", None, None)
        try:
            print(_line("alone (10 s)", legitimate(server, 10.0)), flush=True)
            tally = siege(
                server,
                args.seconds,
                args.grpc_attackers,
                args.http_attackers,
                args.shared_connection,
            )
            where = "its own" if not args.shared_connection else "the attacker's"
            label = f"under attack ({args.seconds:g} s, legitimate gRPC on {where} connection)"
            print(_line(label, tally), flush=True)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
