"""PostgreSQL restarted (fast shutdown, then start) under load: a PostgreSQL instance of the
test's own (initdb in a temporary directory, its own port, run as the ``postgres`` user; skipped
where that cannot run), a real server (default deadlines) and a client exporting all along.
Meanwhile only retryable refusals; afterwards the server reconnects, nothing acknowledged is
lost, and scoring resumes."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from sqlalchemy import select

from tests.integration.serve_harness import RunningServer, server_settings
from tests.integration.test_receiver_concurrency import _request
from toolscore.storage.migrate import upgrade
from toolscore.storage.plumbing.engine import create_engine
from toolscore.storage.telemetry.spans import spans_table

PB = {"Content-Type": "application/x-protobuf"}
PG_BIN = Path("/usr/lib/postgresql/15/bin")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_postgres(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["runuser", "-u", "postgres", "--", *args], capture_output=True, text=True, timeout=120
    )


class Instance:
    def __init__(self, data: Path, port: int) -> None:
        self.data, self.port = data, port
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"

    def ctl(self, *args: str) -> None:
        done = _as_postgres(str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-w", *args)
        assert done.returncode == 0, done.stderr + done.stdout

    def start(self) -> None:
        options = f"-p {self.port} -k /tmp -c listen_addresses=127.0.0.1"
        self.ctl("-l", str(self.data.parent / "server.log"), "-o", options, "start")

    def stop(self) -> None:
        self.ctl("-m", "fast", "stop")


@contextlib.contextmanager
def own_postgres() -> Iterator[Instance]:
    if os.geteuid() != 0 or not (PG_BIN / "initdb").exists() or not shutil.which("runuser"):
        pytest.skip("needs root, runuser and PostgreSQL 15's initdb to run a private instance")
    root = Path(tempfile.mkdtemp(prefix="toolscore-pg-"))
    shutil.chown(root, "postgres")
    data = root / "data"
    done = _as_postgres(str(PG_BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres")
    if done.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(f"initdb failed: {done.stderr.strip()}")
    instance = Instance(data, _free_port())
    try:
        instance.start()
        yield instance
    finally:
        with contextlib.suppress(AssertionError):
            instance.stop()
        shutil.rmtree(root, ignore_errors=True)


def _spans(url: str) -> set[int]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            traces = conn.execute(select(spans_table.c.trace_id).distinct()).scalars()
            return {int(t, 16) for t in traces}
    finally:
        engine.dispose()


def test_postgres_restarted_under_load_loses_nothing_acknowledged() -> None:
    with own_postgres() as pg:
        upgrade(pg.url)
        answers: Counter[int] = Counter()
        acknowledged: list[int] = []
        stop = threading.Event()

        def client(url: str) -> None:
            trace = 0
            while not stop.is_set():
                trace += 1
                try:
                    resp = requests.post(
                        f"{url}/v1/traces", data=_request(trace), headers=PB, timeout=30
                    )
                    status = resp.status_code
                except requests.RequestException:
                    status = -1
                answers[status] += 1
                if status == 200:
                    acknowledged.append(trace)
                time.sleep(0.05)

        settings = server_settings(pg.url)
        with RunningServer(settings) as srv:
            sender = threading.Thread(target=client, args=(srv.http_url,), daemon=True)
            sender.start()
            time.sleep(2)
            before = len(acknowledged)
            pg.stop()
            time.sleep(3)  # the database is down: exports are refused meanwhile
            down = len(acknowledged)
            pg.start()
            restarted = time.monotonic()
            while len(acknowledged) == down and time.monotonic() - restarted < 60:
                time.sleep(0.1)
            back_after = time.monotonic() - restarted
            time.sleep(2)
            stop.set()
            sender.join(30)
        print(f"\nanswers {dict(answers)}; acknowledged again {back_after:.1f} s after start")
        assert before > 0 and len(acknowledged) > down, "exports never acknowledged again"
        assert set(answers) <= {200, 503}, answers
        assert answers[503] > 0, "the outage was never seen"
        assert set(acknowledged) <= _spans(pg.url), "an acknowledged export is missing"
