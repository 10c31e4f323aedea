"""An HTTP client that hangs up in the middle of its body is an expected event: counted on
/metrics (``toolscore_receiver_client_disconnects_total{transport="http"}``), never logged as an
error with a traceback, nothing of it stored, and the server goes on serving. (A gRPC call whose
client goes away ends inside grpc core, quietly, and is not counted.)"""

from __future__ import annotations

import logging
import socket
import struct
import time

import pytest
import requests

from tests.integration.serve_harness import RunningServer, count_rows, server_settings
from tests.integration.test_receiver_concurrency import _metric, _request

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
