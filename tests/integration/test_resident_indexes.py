"""A real ``toolscore serve`` on a SQLite file keeps the random-keyed indexes mapped in memory.

The file holds 20,000 numbered traces before the server starts. The server's ``/metrics`` then
reports the indexes' bytes and how many it keeps, and the kernel's view of the server process
(``/proc/PID/smaps``) shows that much of the file mapped. With
``--sqlite-resident-bytes 0`` nothing of the file is mapped.
"""

from __future__ import annotations

import mmap
import re
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.proc_maps import mapped_bytes
from toolscore.storage.migrate import upgrade
from toolscore.storage.plumbing.engine import create_engine
from toolscore.storage.telemetry.traces import number_traces

pytestmark = pytest.mark.skipif(not hasattr(mmap.mmap, "madvise"), reason="Linux only")


@pytest.fixture
def db_file(tmp_path: Path) -> Path:
    path = tmp_path / "toolscore.db"
    upgrade(f"sqlite:///{path}")
    engine = create_engine(f"sqlite:///{path}")
    try:
        with engine.begin() as conn:
            number_traces(conn, [uuid.uuid4().hex for _ in range(20_000)])
    finally:
        engine.dispose()
    return path


@contextmanager
def _serve(db_file: Path, *flags: str) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    log = db_file.with_suffix(".log")
    args = ["--db", f"sqlite:///{db_file}", "--grpc", "off", "--http", "127.0.0.1:0", *flags]
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "toolscore", "serve", *args],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        deadline = time.monotonic() + 60
        while not (m := re.search(r"OTLP/HTTP on (http://127\.0\.0\.1:\d+)", log.read_text())):
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        yield proc, m.group(1)
    finally:
        proc.terminate()
        proc.wait(30)


def _gauges(url: str) -> dict[str, float]:
    text = urllib.request.urlopen(f"{url}/metrics", timeout=10).read().decode()
    found = re.findall(r"^(toolscore_sqlite_\w+_index_bytes) (\S+)$", text, re.M)
    return {name: float(value) for name, value in found}


def test_the_server_keeps_the_indexes_mapped_and_says_how_much(db_file: Path) -> None:
    with _serve(db_file) as (proc, url):
        deadline = time.monotonic() + 30
        while not (gauges := _gauges(url)).get("toolscore_sqlite_resident_index_bytes"):
            assert time.monotonic() < deadline, gauges
            time.sleep(0.2)
        mapped = mapped_bytes(db_file, proc.pid)
    resident = gauges["toolscore_sqlite_resident_index_bytes"]
    assert resident == gauges["toolscore_sqlite_random_index_bytes"] > 80 * 8192
    assert mapped == resident  # the indexes' pages, not the cached pages around them


def test_zero_keeps_nothing_mapped(db_file: Path) -> None:
    with _serve(db_file, "--sqlite-resident-bytes", "0") as (proc, url):
        time.sleep(1.0)  # a refresh would have happened by now
        assert _gauges(url) == {}
        assert mapped_bytes(db_file, proc.pid) == 0
