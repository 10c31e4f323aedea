"""Clients that hold connections or calls without making progress cannot take the service:
a real server (default settings: 64 slots) while 70 HTTP uploads send one
byte per second and 70 gRPC calls over one connection never send their message."""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
import requests

from tests.integration.serve_harness import RunningServer, count_rows, server_settings
from tests.integration.test_receiver_concurrency import TRACES, _metric, _request
from toolscore.collector.receiver.limits import ReceiverLimits

PB = {"Content-Type": "application/x-protobuf"}
# channels of one process to one target share a connection unless told otherwise: the attacker
# and the legitimate client are different processes in real life
OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]
ATTACKERS = 70
LEGIT = 40  # exports per transport
LIMITS = ReceiverLimits()


class SlowUpload:
    """POST /v1/traces whose 1,000-byte body comes at one byte per second."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.sendall(
            b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
            b"Content-Length: 1000\r\n\r\n"
        )
        self.answer = b""

    def drip(self) -> None:
        with contextlib.suppress(OSError):  # closed by the server
            self.sock.sendall(b"\n")

    def read_answer(self) -> None:
        self.sock.setblocking(False)
        with contextlib.suppress(BlockingIOError, OSError):
            self.answer += self.sock.recv(4096)


def _drip(uploads: list[SlowUpload], stop: threading.Event) -> None:
    while not stop.wait(1.0):
        for upload in uploads:
            upload.drip()


def _never_sending(stop: threading.Event) -> Iterator[bytes]:
    stop.wait()  # the call's message never comes while the test runs
    return
    yield b""  # pragma: no cover - makes this a generator


def _legit_http(url: str, trace: int) -> bool:
    resp = requests.post(f"{url}/v1/traces", data=_request(trace), headers=PB, timeout=10)
    return resp.status_code == 200


def _legit_grpc(channel: grpc.Channel, trace: int) -> bool:
    try:
        channel.unary_unary(TRACES)(_request(trace), timeout=10)
    except grpc.RpcError:
        return False
    return True


@pytest.mark.slow
def test_slow_uploads_and_idle_calls_do_not_keep_legitimate_exports_out(sqlite_url: str) -> None:
    settings = server_settings(sqlite_url)
    assert settings.max_concurrent_requests == 64  # the attack holds more than every slot
    stop = threading.Event()
    with RunningServer(settings) as srv:
        uploads = [SlowUpload(srv.app.http_port or 0) for _ in range(ATTACKERS)]
        dripper = threading.Thread(target=_drip, args=(uploads, stop), daemon=True)
        dripper.start()
        idle_channel = grpc.insecure_channel(srv.grpc_target, OWN_CONNECTION)
        idle_calls = [
            idle_channel.stream_unary(TRACES).future(_never_sending(stop), timeout=60)
            for _ in range(ATTACKERS)
        ]
        time.sleep(1.5)  # every attacker connected and holding what it can
        started = time.monotonic()
        with (
            grpc.insecure_channel(srv.grpc_target, OWN_CONNECTION) as channel,
            ThreadPoolExecutor(4) as pool,
        ):
            http_ok = list(pool.map(lambda i: _legit_http(srv.http_url, 1000 + i), range(LEGIT)))
            http_took = time.monotonic() - started
            grpc_ok = list(pool.map(lambda i: _legit_grpc(channel, 2000 + i), range(LEGIT)))
        took = time.monotonic() - started
        print(f"HTTP {http_took:.2f} s, gRPC {took - http_took:.2f} s")
        assert took < LIMITS.body_grace_s, "legitimate exports ran past the attack's grace"
        served = sum(http_ok) + sum(grpc_ok)
        print(f"served {served}/{2 * LEGIT} legitimate exports in {took:.2f} s under attack")
        assert sum(http_ok) >= 0.95 * LEGIT and sum(grpc_ok) >= 0.95 * LEGIT
        assert count_rows(sqlite_url) == 5 * served  # every acknowledged export stored

        # the slow uploads are cut off after the grace (503, connection closed), not served
        time.sleep(LIMITS.body_grace_s + 2 - (time.monotonic() - started))
        for upload in uploads:
            upload.read_answer()
        answers = [u.answer.split(b"\r\n", 1)[0] for u in uploads]
        assert answers == [b"HTTP/1.1 503 Service Unavailable"] * ATTACKERS
        assert _metric(srv, "toolscore_receiver_slow_requests_total", transport="http") == 70
        stop.set()
        for upload in uploads:
            upload.sock.close()
        for call in idle_calls:
            call.cancel()
        idle_channel.close()
    assert count_rows(sqlite_url) == 5 * served  # nothing of the attackers' stored


def _closed_within(socks: list[socket.socket], started: float, timeout_s: float) -> list[float]:
    """Seconds from ``started`` until each socket saw EOF or a reset (inf: still open after
    ``timeout_s``)."""
    closed = [float("inf")] * len(socks)
    sel = selectors.DefaultSelector()
    for i, sock in enumerate(socks):
        sock.setblocking(False)
        sel.register(sock, selectors.EVENT_READ, i)
    while len(sel.get_map()) and time.monotonic() - started < timeout_s:
        for key, _ in sel.select(timeout=0.5):
            try:
                data = key.fileobj.recv(65536)  # type: ignore[union-attr]
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                closed[key.data] = time.monotonic() - started
                sel.unregister(key.fileobj)
    sel.close()
    return closed


@pytest.mark.slow
def test_a_thousand_idle_connections_per_transport_are_closed_after_the_idle_timeout(
    sqlite_url: str,
) -> None:
    with RunningServer(server_settings(sqlite_url)) as srv:
        opened = time.monotonic()  # the last ones open ~1 s later: the upper bound allows it
        http = [
            socket.create_connection(("127.0.0.1", srv.app.http_port or 0)) for _ in range(1000)
        ]
        grpc_socks = [socket.create_connection(("127.0.0.1", srv.grpc_port)) for _ in range(1000)]
        try:
            # while they are open, a legitimate client is served
            assert _legit_http(srv.http_url, 7)
            with grpc.insecure_channel(srv.grpc_target) as channel:
                assert _legit_grpc(channel, 8)
            closed = _closed_within(http + grpc_socks, opened, LIMITS.idle_timeout_s + 10)
        finally:
            for sock in http + grpc_socks:
                sock.close()
    http_times, grpc_times = sorted(closed[:1000]), sorted(closed[1000:])
    print(
        f"idle connections closed after: HTTP {http_times[0]:.1f}-{http_times[-1]:.1f} s, "
        f"gRPC {grpc_times[0]:.1f}-{grpc_times[-1]:.1f} s (idle timeout {LIMITS.idle_timeout_s} s)"
    )
    # closed, not held forever; the slack covers timers and polling 2,000 sockets on a busy
    # machine (13.4-15.3 s measured on a quiet one, 19.2 s seen under a full test run)
    assert http_times[-1] <= LIMITS.idle_timeout_s + 8
    assert grpc_times[-1] <= LIMITS.idle_timeout_s + 8
    assert http_times[0] >= LIMITS.idle_timeout_s - 3  # not closed early for nothing
