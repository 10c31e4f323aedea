"""Several processes migrating one empty database at once, as a Kubernetes deployment of three
replicas starts: three ``toolscore serve`` and a ``toolscore db upgrade`` started together, real
subprocesses. The migrations run once; the others wait, then serve; every one of them accepts an
export. And a serve whose migration lock is taken by someone else waits, not listening, until
the lock is released (so it never serves a half-migrated schema).
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from sqlalchemy import func, select, text

from toolscore.storage.migrate import current_revision, head_revision
from toolscore.storage.migrations.lock import ADVISORY_LOCK_KEY
from toolscore.storage.plumbing.engine import create_engine
from toolscore.storage.telemetry.spans import spans_table

SERVE_FLAGS = ["--grpc", "off", "--http", "127.0.0.1:0", "--no-export", "--no-scoring"]
_LISTENING = re.compile(r"OTLP/HTTP on (http://127\.0\.0\.1:\d+)")


# `python -m toolscore ARGS`, but with the modules loaded first and the command run at wall
# time START_AT, so processes started one after the other reach their migrations together.
_LAUNCH = """
import sys, time
import toolscore.collector.app, toolscore.storage.migrate
from toolscore.collector.cli import main
time.sleep(max(0.0, float(sys.argv[1]) - time.time()))
sys.exit(main(sys.argv[2:]))
"""


def _start(args: list[str], log: Path, start_at: float = 0.0) -> subprocess.Popen[bytes]:
    with log.open("wb") as err:
        return subprocess.Popen(
            [sys.executable, "-c", _LAUNCH, repr(start_at), *args],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )


def _listening(proc: subprocess.Popen[bytes], log: Path, timeout_s: float = 90) -> str:
    deadline = time.monotonic() + timeout_s
    while not (found := _LISTENING.search(log.read_text())):
        assert proc.poll() is None, f"serve exited {proc.returncode}: {log.read_text()}"
        assert time.monotonic() < deadline, f"serve did not start: {log.read_text()}"
        time.sleep(0.1)
    return found.group(1)


@contextmanager
def _stopped_at_exit(procs: list[subprocess.Popen[bytes]]) -> Iterator[None]:
    try:
        yield
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in procs:
            proc.wait(30)


def _export(url: str, trace: int) -> int:
    req = ExportTraceServiceRequest()
    span = Span(
        trace_id=trace.to_bytes(16, "big"),
        span_id=(1).to_bytes(8, "big"),
        name="migrated",
        start_time_unix_nano=1,
        end_time_unix_nano=2,
    )
    req.resource_spans.add().scope_spans.add().spans.append(span)
    post = urllib.request.Request(
        f"{url}/v1/traces",
        data=req.SerializeToString(),
        headers={"Content-Type": "application/x-protobuf"},
    )
    with urllib.request.urlopen(post, timeout=30) as response:
        return int(response.status)


def _stored_spans(db_url: str) -> int:
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(spans_table)).scalar_one())
    finally:
        engine.dispose()


def _race(db_url: str, tmp_path: Path) -> None:
    serve_logs = [tmp_path / f"serve{i}.log" for i in range(3)]
    upgrade_log = tmp_path / "upgrade.log"
    start_at = time.time() + 8  # past every process's imports, even on a busy machine
    serves = [_start(["serve", "--db", db_url, *SERVE_FLAGS], log, start_at) for log in serve_logs]
    upgrade = _start(["db", "upgrade", "--db", db_url], upgrade_log, start_at)
    with _stopped_at_exit([*serves, upgrade]):
        urls = [_listening(proc, log) for proc, log in zip(serves, serve_logs, strict=True)]
        assert upgrade.wait(90) == 0, upgrade_log.read_text()
        assert current_revision(db_url) == head_revision()
        assert [_export(url, trace) for trace, url in enumerate(urls, 1)] == [200, 200, 200]
        for log in serve_logs:
            assert "cannot migrate" not in log.read_text()
    assert _stored_spans(db_url) == 3


def test_three_serves_and_an_upgrade_on_an_empty_postgres(
    postgres_url: str, tmp_path: Path
) -> None:
    _race(postgres_url, tmp_path)


def test_three_serves_and_an_upgrade_on_a_new_sqlite_file(sqlite_url: str, tmp_path: Path) -> None:
    _race(sqlite_url, tmp_path)
    engine = create_engine(sqlite_url)
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA page_size").scalar_one() == 8192
            assert conn.exec_driver_sql("PRAGMA auto_vacuum").scalar_one() == 2
            assert conn.exec_driver_sql("PRAGMA integrity_check").scalar_one() == "ok"
    finally:
        engine.dispose()


def _serve_waits_for_lock(db_url: str, tmp_path: Path, hold: ExitStack) -> None:
    log = tmp_path / "serve.log"
    proc = _start(["serve", "--db", db_url, *SERVE_FLAGS], log)
    with _stopped_at_exit([proc]):
        deadline = time.monotonic() + 60
        while "waiting" not in log.read_text():
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, f"serve never waited: {log.read_text()}"
            time.sleep(0.1)
        time.sleep(1.0)
        assert not _LISTENING.search(log.read_text()), "serve listened before migrating"
        assert current_revision(db_url) is None
        hold.close()
        url = _listening(proc, log)
        assert current_revision(db_url) == head_revision()
        assert _export(url, 1) == 200


def test_serve_waits_while_another_process_holds_the_postgres_migration_lock(
    postgres_url: str, tmp_path: Path
) -> None:
    engine = create_engine(postgres_url)
    hold = ExitStack()
    hold.callback(engine.dispose)
    conn = hold.enter_context(engine.connect())
    conn.execute(text("SELECT pg_advisory_lock(:key)"), {"key": ADVISORY_LOCK_KEY})
    conn.commit()
    _serve_waits_for_lock(postgres_url, tmp_path, hold)


def test_serve_waits_while_another_process_writes_the_new_sqlite_file(
    sqlite_url: str, tmp_path: Path
) -> None:
    engine = create_engine(sqlite_url)
    hold = ExitStack()
    hold.callback(engine.dispose)
    conn = hold.enter_context(engine.connect())
    dbapi = conn.connection.driver_connection
    assert dbapi is not None
    dbapi.execute("BEGIN IMMEDIATE")
    hold.callback(dbapi.rollback)
    _serve_waits_for_lock(sqlite_url, tmp_path, hold)
