"""The load of ``benchmarks/bench_growth.py``: warm-up requests first, at the same rate and
without a pause, their latencies kept apart from the measured ones."""

from __future__ import annotations

import importlib
import os
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1]


@pytest.fixture
def growth_load(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # the benchmarks import their siblings bare
    return importlib.import_module("growth_load")


class _Receiver(BaseHTTPRequestHandler):
    arrivals: ClassVar[list[float]] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        type(self).arrivals.append(time.monotonic())
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[ThreadingHTTPServer]:
    _Receiver.arrivals = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_warm_up_requests_come_first_and_are_reported_apart(
    growth_load: ModuleType, receiver: ThreadingHTTPServer
) -> None:
    per_request = growth_load.SPANS_PER_TRACE * growth_load.TRACES_PER_REQUEST
    rate = 4 * per_request  # a request every 0.25 s
    result: dict[str, Any] = {"measuring": threading.Event()}
    started = time.monotonic()
    growth_load.load(receiver.server_address[1], rate, 1.0, "m1", result, 0.5)
    assert len(result["warmup"]) == 2  # 0.5 s at 4 requests a second
    assert len(result["latencies"]) == 4
    assert result["failed"] == 0
    assert result["measuring"].is_set()
    arrivals = sorted(_Receiver.arrivals)
    assert len(arrivals) == 6
    # one schedule: the first measured request is due 0.5 s in, no pause after the warm-up
    assert arrivals[2] - started == pytest.approx(0.5, abs=0.2)
    assert arrivals[-1] - started == pytest.approx(1.25, abs=0.3)
    assert result["seconds"] == pytest.approx(0.75, abs=0.3)  # from the first measured request


def test_without_warm_up_every_request_is_measured(
    growth_load: ModuleType, receiver: ThreadingHTTPServer
) -> None:
    per_request = growth_load.SPANS_PER_TRACE * growth_load.TRACES_PER_REQUEST
    result: dict[str, Any] = {"measuring": threading.Event()}
    growth_load.load(receiver.server_address[1], 4 * per_request, 0.5, "m2", result)
    assert (len(result["warmup"]), len(result["latencies"])) == (0, 2)
    assert result["measuring"].is_set()


def test_disk_reads_count_page_cache_misses_only(growth_load: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "pages"
    path.write_bytes(os.urandom(4 << 20))
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)  # clean pages can be dropped from the page cache
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        before = growth_load.disk_read_bytes(os.getpid())
        path.read_bytes()
        missed = growth_load.disk_read_bytes(os.getpid()) - before
        path.read_bytes()  # now cached
        cached = growth_load.disk_read_bytes(os.getpid()) - before - missed
    finally:
        os.close(fd)
    assert missed >= 4 << 20
    assert cached < 1 << 20


class _Refusing(_Receiver):
    """Refuses every second request (503), over connections kept open (HTTP/1.1)."""

    protocol_version = "HTTP/1.1"
    seen: ClassVar[int] = 0
    peers: ClassVar[set[int]] = set()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        type(self).seen += 1
        type(self).peers.add(self.client_address[1])
        self.send_response(200 if type(self).seen % 2 else 503)
        self.send_header("Content-Length", "0")
        self.end_headers()


def test_bench_pipeline_load_counts_refused_requests_and_keeps_its_connections(
    growth_load: ModuleType,
) -> None:
    pipeline_load = importlib.import_module("pipeline_load")
    _Refusing.seen, _Refusing.peers = 0, set()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        per_request = pipeline_load.SPANS_PER_TRACE * pipeline_load.TRACES_PER_REQUEST
        result: dict[str, Any] = {}
        pipeline_load.load(server.server_address[1], 8 * per_request, 1.0, "p", result)
    finally:
        server.shutdown()
        server.server_close()
    assert (result["failed"], result["spans"]) == (4, 4 * per_request)
    assert result["conversations"] == 4 * pipeline_load.TRACES_PER_REQUEST
    assert len(_Refusing.peers) == 4  # 4 senders, each keeping its connection, refused or not
