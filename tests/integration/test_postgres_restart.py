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
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from sqlalchemy import select

from tests.integration.serve_harness import RunningServer, server_settings
from tests.integration.test_receiver_concurrency import _request
from toolscore.collector.pipeline.claim import Timing
from toolscore.collector.pipeline.extension import pipeline_extension
from toolscore.collector.pipeline.options import PipelineOptions
from toolscore.storage.conversations.tables import conversations
from toolscore.storage.expectations.repository import ExpectationData, import_expectations
from toolscore.storage.migrate import upgrade
from toolscore.storage.plumbing.engine import create_engine
from toolscore.storage.telemetry.spans import spans_table

PB = {"Content-Type": "application/x-protobuf"}
PG_BIN = Path("/usr/lib/postgresql/15/bin")
MAX_CONVERSATIONS = 2_000
LEASE_S = Timing().lease_s


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


def _conversation(n: int) -> bytes:
    """Conversation ``pg<n>``: an agent span and one ``execute_tool get_weather`` span."""
    req = ExportTraceServiceRequest()
    spans = req.resource_spans.add().scope_spans.add().spans
    trace, root = n.to_bytes(16, "big"), (1).to_bytes(8, "big")
    now = time.time_ns()
    spans.append(
        Span(
            trace_id=trace, span_id=root, name="invoke_agent weather",
            start_time_unix_nano=now, end_time_unix_nano=now + 2000,
            attributes=[_kv("gen_ai.operation.name", "invoke_agent"),
                        _kv("gen_ai.conversation.id", f"pg{n:05}")],
        )
    )  # fmt: skip
    spans.append(
        Span(
            trace_id=trace, span_id=(2).to_bytes(8, "big"), parent_span_id=root,
            name="execute_tool get_weather",
            start_time_unix_nano=now + 500, end_time_unix_nano=now + 1000,
            attributes=[_kv("gen_ai.operation.name", "execute_tool"),
                        _kv("gen_ai.tool.name", "get_weather"),
                        _kv("gen_ai.tool.call.id", f"call_{n}"),
                        _kv("gen_ai.tool.call.arguments", '{"city": "Paris"}')],
        )
    )  # fmt: skip
    return bytes(req.SerializeToString())


def _kv(key: str, value: str) -> KeyValue:
    return KeyValue(key=key, value=AnyValue(string_value=value))


def _statuses(url: str, names: list[str]) -> dict[str, str]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            c = conversations.c
            rows = conn.execute(select(c.id, c.status).where(c.needs_scoring.is_(False)))
            wanted = set(names)
            return {str(i): str(s) for i, s in rows if i in wanted}
    finally:
        engine.dispose()


def test_postgres_restarted_under_load_with_scoring_on_scores_every_conversation() -> None:
    """Scoring in a child process, as ``serve`` runs it: while the database is down exports are
    refused retryably; afterwards every acknowledged conversation is stored and scored."""
    names = [f"pg{n:05}" for n in range(1, MAX_CONVERSATIONS + 1)]
    with own_postgres() as pg:
        upgrade(pg.url)
        engine = create_engine(pg.url)
        try:
            with engine.connect() as conn:
                import_expectations(
                    conn,
                    [ExpectationData(id="weather", match={"conversation_id": names},
                                     reference_tool_calls=[{"name": "get_weather",
                                                            "args": {"city": "Paris"}}])],
                )  # fmt: skip
        finally:
            engine.dispose()
        answers: Counter[int] = Counter()
        acknowledged: list[int] = []
        stop = threading.Event()

        def client(url: str) -> None:
            n = 0
            while not stop.is_set() and n < MAX_CONVERSATIONS:
                n += 1
                while not stop.is_set():  # resent until acknowledged, as exporters do
                    try:
                        status = requests.post(
                            f"{url}/v1/traces", data=_conversation(n), headers=PB, timeout=30
                        ).status_code
                    except requests.RequestException:
                        status = -1
                    answers[status] += 1
                    if status == 200:
                        acknowledged.append(n)
                        break
                    time.sleep(0.2)
                time.sleep(0.05)

        pipeline = pipeline_extension(
            PipelineOptions(
                settle_s=0.5, root_idle_s=0.3, separate_process=True, scoring_processes=1
            )
        )
        with RunningServer(server_settings(pg.url), [pipeline]) as srv:
            sender = threading.Thread(target=client, args=(srv.http_url,), daemon=True)
            sender.start()
            time.sleep(3)
            before = len(acknowledged)
            pg.stop()
            time.sleep(3)
            down = len(acknowledged)
            pg.start()
            restarted = time.monotonic()
            time.sleep(4)
            stop.set()
            sender.join(60)
            sent = [f"pg{n:05}" for n in acknowledged]
            deadline = time.monotonic() + 90
            while (done := _statuses(pg.url, sent)).keys() != set(sent):
                assert time.monotonic() < deadline, f"not scored: {set(sent) - done.keys()}"
                time.sleep(0.5)
            scored_after = time.monotonic() - restarted
        print(
            f"\nanswers {dict(answers)}; {len(sent)} conversations acknowledged "
            f"({before} before the stop, {down - before} while down), all scored "
            f"{scored_after:.1f} s after the start"
        )
        assert before > 0 and len(acknowledged) > down, "exports never acknowledged again"
        assert set(answers) <= {200, 503}, answers
        assert answers[503] > 0, "the outage was never seen"
        assert set(acknowledged) <= _spans(pg.url), "an acknowledged export is missing"
        assert set(done.values()) == {"scored"}, Counter(done.values())
        # claims taken by a round the outage failed are released, not left to their lease
        assert scored_after < LEASE_S / 2, f"scored {scored_after:.1f} s after the start"
