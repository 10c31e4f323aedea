"""A client that goes away before it is answered is an expected event: an HTTP client hanging
up in the middle of its body, a gRPC client cancelling its call (before its message, while it is
decoded or while it is stored) or dropping its connection in the middle of the message. Each is
counted on /metrics (``toolscore_receiver_client_disconnects_total{transport="http"|"grpc"}``)
and logged as one DEBUG line, never as an error with a traceback nor as a failed request;
nothing of an unfinished request is stored, and the server goes on serving."""

from __future__ import annotations

import logging
import socket
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
import requests

from tests.integration.serve_harness import RunningServer, count_rows, server_settings
from tests.integration.test_receiver_concurrency import TRACES, Gate, _metric, _request
from toolscore.collector.receiver import core

PB = {"Content-Type": "application/x-protobuf"}


def _half_body(port: int, reset: bool) -> None:
    """POST announcing 1,000 bytes, send 500, then close (FIN, or RST with ``reset``)."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(
        b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
        b"Content-Length: 1000\r\n\r\n" + _request(7)[:500].ljust(500, b"\0")
    )
    time.sleep(0.3)  # the server is reading the body
    if reset:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def _wait_for(srv: RunningServer, name: str, transport: str, value: float) -> float:
    deadline = time.monotonic() + 10
    while (got := _metric(srv, name, transport=transport)) < value:
        if time.monotonic() > deadline:
            break
        time.sleep(0.1)
    return got


def test_http_client_hanging_up_mid_body_is_counted_not_logged_as_an_error(
    sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="toolscore")
    with RunningServer(server_settings(sqlite_url)) as srv:
        port = srv.app.http_port or 0
        _half_body(port, reset=False)
        _half_body(port, reset=True)
        name = "toolscore_receiver_client_disconnects_total"
        assert _wait_for(srv, name, "http", 2) == 2
        assert _metric(srv, "toolscore_receiver_failed_requests_total", transport="http") == 0
        resp = requests.post(f"{srv.http_url}/v1/traces", data=_request(8), headers=PB, timeout=10)
        assert resp.status_code == 200
    assert count_rows(sqlite_url) == 5  # the legitimate export only
    loud = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert loud == [], [r.getMessage() for r in loud]
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
    quiet = [r for r in caplog.records if "hung up" in r.getMessage()]
    assert len(quiet) == 2 and all(r.levelno == logging.DEBUG for r in quiet)


def _assert_quiet(caplog: pytest.LogCaptureFixture, went_away: int) -> None:
    loud = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert loud == [], [r.getMessage() for r in loud]
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"
    quiet = [r for r in caplog.records if "went away" in r.getMessage()]
    assert len(quiet) == went_away and all(r.levelno == logging.DEBUG for r in quiet)


def _frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    head = len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big")
    return head + payload


def _literal(name: str, value: str) -> bytes:
    """HPACK: a literal header field without indexing, new name, no Huffman coding."""
    return b"\0" + bytes([len(name)]) + name.encode() + bytes([len(value)]) + value.encode()


def _grpc_half_message(port: int) -> None:
    """An HTTP/2 connection opening an Export call whose message announces its full length
    but carries half of it, then reset (RST): the connection is lost mid-message."""
    message = _request(9, spans=40)
    headers = b"".join(
        _literal(k, v)
        for k, v in (
            (":method", "POST"),
            (":scheme", "http"),
            (":path", TRACES),
            (":authority", "x"),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
        )
    )
    data = b"\0" + len(message).to_bytes(4, "big") + message[: len(message) // 2]
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
        + _frame(0x4, 0, 0, b"")  # SETTINGS
        + _frame(0x1, 0x4, 1, headers)  # HEADERS, END_HEADERS
        + _frame(0x0, 0, 1, data)  # DATA, the stream left open
    )
    time.sleep(0.5)  # the server is reading the message
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def _never_sent(stop: threading.Event) -> Iterator[bytes]:
    stop.wait(30)
    yield _request(10)


def test_grpc_clients_going_away_are_counted_not_logged_as_errors(
    sqlite_url: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.DEBUG, logger="toolscore")
    gate = Gate(hold_s=None)
    splitting = threading.Event()
    split = core.wire.split

    def slow_split(body: Any, *args: Any) -> Iterator[Any]:
        if len(body) > 100_000:  # the third call's message: cancelled while it is split
            splitting.set()
            time.sleep(1.0)
        yield from split(body, *args)

    monkeypatch.setattr(core.wire, "split", slow_split)
    name = "toolscore_receiver_client_disconnects_total"
    with RunningServer(server_settings(sqlite_url), [gate.extension]) as srv:
        stop = threading.Event()
        with grpc.insecure_channel(srv.grpc_target) as channel:
            # 1. cancelled before its message was sent
            silent = channel.stream_unary(TRACES).future(_never_sent(stop), timeout=20)
            time.sleep(0.5)
            silent.cancel()
            stop.set()
            assert _wait_for(srv, name, "grpc", 1) == 1
            # 2. cancelled while its spans are being stored (the commit held by the gate)
            storing = channel.unary_unary(TRACES).future(_request(11), timeout=20)
            assert gate.entered.wait(10)
            storing.cancel()
            assert _wait_for(srv, name, "grpc", 2) == 2
            gate.release.set()
            # 3. cancelled while a decoder thread works on its message
            big = channel.unary_unary(TRACES).future(_request(12, spans=4000), timeout=20)
            assert splitting.wait(10)
            big.cancel()
            assert _wait_for(srv, name, "grpc", 3) == 3
        # 4. the connection lost in the middle of the message
        _grpc_half_message(srv.grpc_port)
        assert _wait_for(srv, name, "grpc", 4) == 4
        failed = [
            _metric(srv, "toolscore_receiver_failed_requests_total", transport="grpc", status=code)
            for code in ("INTERNAL", "UNKNOWN", "CANCELLED", "UNAVAILABLE")
        ]
        assert failed == [0, 0, 0, 0]
        with grpc.insecure_channel(srv.grpc_target) as channel:  # the server goes on serving
            assert channel.unary_unary(TRACES)(_request(13), timeout=10) == b""
        assert _metric(srv, name, transport="http") == 0
    # the call cancelled while stored was already handed to the writer: its batch commits
    assert count_rows(sqlite_url) == 10
    _assert_quiet(caplog, went_away=4)
