"""A database written by the oldest schema the project migrates from, holding conversations and
scores, migrated by ``toolscore serve`` on start while a client sends (SQLite and PostgreSQL).

The database is made the way an early toolscore left it: migrated to the first revision (0001,
telemetry only) and given its spans and log records in that revision's shape, then to 0004 (the
first revision with the pipeline's history and its views) and given an expectation,
conversations, their traces, tool calls and two scores each, in those revisions' shapes. A
client exports new conversations from before ``serve`` starts, resending on any failure, until
after it listens. Then: the schema is current; every old span and log record is there, and every
acknowledged new one; the old conversations, their evaluations and tool calls are unchanged, and
so are the views' answers for their day (``current_scores``, ``daily_scores``); ``show`` and
``conversations`` give their scores; the new conversations are scored."""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import requests
from sqlalchemy import Connection, Engine, MetaData, Table, text

from tests.integration.test_postgres_restart import PB, _conversation
from toolscore.collector.cli import main
from toolscore.storage.migrate import current_revision, head_revision, upgrade
from toolscore.storage.plumbing.engine import create_engine

OLD = 300  # conversations written by the old schema
DAY = dt.datetime(2025, 3, 4, 9, 0, tzinfo=dt.UTC)  # when they ran
T0 = int(DAY.timestamp() * 10**9)
REFERENCE = [{"name": "get_weather", "args": {"city": "Paris"}}]
NEW = 200  # at most, sent by the client during the upgrade


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tables(conn: Connection, *names: str) -> list[Table]:
    meta = MetaData()
    return [Table(n, meta, autoload_with=conn) for n in names]


def _span(i: int, n: int, parent: str | None, name: str, attrs: dict[str, Any]) -> dict[str, Any]:
    return {
        "trace_id": f"{0xA0000 + i:032x}", "span_id": f"{n:016x}", "parent_span_id": parent,
        "name": name, "kind": 1, "start_ns": T0 + i * 10**9 + n, "end_ns": T0 + i * 10**9 + 9,
        "status_code": 0, "status_message": "", "attributes": attrs,
        "resource_attributes": {"service.name": "old-agent"}, "scope_name": "old",
        "scope_version": "0.1", "events": [], "links": [], "received_at_ns": T0 + i * 10**9 + 50,
    }  # fmt: skip


def _telemetry_at_0001(engine: Engine) -> None:
    with engine.begin() as conn:
        spans, logs = _tables(conn, "spans", "log_records")
        rows = []
        for i in range(OLD):
            name = f"old{i:04}"
            rows.append(_span(i, 1, None, "invoke_agent weather",
                              {"gen_ai.operation.name": "invoke_agent",
                               "gen_ai.conversation.id": name}))  # fmt: skip
            rows.append(_span(i, 2, f"{1:016x}", "execute_tool get_weather",
                              {"gen_ai.operation.name": "execute_tool",
                               "gen_ai.tool.name": "get_weather",
                               "gen_ai.tool.call.id": f"call_{i}",
                               "gen_ai.tool.call.arguments": '{"city": "Paris"}'}))  # fmt: skip
        conn.execute(spans.insert(), rows)
        conn.execute(
            logs.insert(),
            [
                {
                    "record_hash": f"{i:064x}",
                    "trace_id": f"{0xA0000 + i:032x}",
                    "span_id": f"{1:016x}",
                    "time_ns": T0 + i,
                    "observed_time_ns": T0 + i,
                    "severity_number": 9,
                    "severity_text": "INFO",
                    "event_name": "gen_ai.user.message",
                    "body": {"content": f"weather {i}?"},
                    "attributes": {},
                    "resource_attributes": {},
                    "scope_name": "old",
                    "scope_version": "0.1",
                    "received_at_ns": T0 + i,
                }
                for i in range(OLD)
            ],
        )


def _history_at_0004(engine: Engine) -> None:
    with engine.begin() as conn:
        exp, convs, ctraces, evals, calls = _tables(
            conn, "expectations", "conversations", "conversation_traces", "evaluations",
            "tool_calls",
        )  # fmt: skip
        conn.execute(exp.insert(), [{
            "id": "weather", "version": 1, "is_latest": True, "reference_tool_calls": REFERENCE,
            "user_input": None, "metrics": None, "match": None, "match_user_input_norm": None,
            "content_hash": "h1", "created_at": DAY,
        }])  # fmt: skip
        at = [DAY + dt.timedelta(seconds=i) for i in range(OLD)]
        conn.execute(convs.insert(), [{
            "id": f"old{i:04}", "status": "scored", "first_seen_at": at[i], "last_span_at": at[i],
            "last_span_received_ns": T0 + i * 10**9 + 50, "needs_scoring": False,
            "claimed_by": None, "claimed_until": None, "last_trace_id": f"{0xA0000 + i:032x}",
            "root_span_id": f"{1:016x}", "reference_id": None,
            "first_user_message": f"weather {i}?", "revision": 1,
            "scored_at": at[i] + dt.timedelta(seconds=5), "expectation_id": "weather",
            "expectation_version": 1, "error": None,
        } for i in range(OLD)])  # fmt: skip
        conn.execute(ctraces.insert(), [
            {"trace_id": f"{0xA0000 + i:032x}", "conversation_id": f"old{i:04}"}
            for i in range(OLD)
        ])  # fmt: skip
        conn.execute(evals.insert(), [{
            "conversation_id": f"old{i:04}", "revision": 1, "is_current": True,
            "trace_id": f"{0xA0000 + i:032x}", "root_span_id": f"{1:016x}",
            "expectation_id": "weather", "expectation_version": 1, "metric": metric,
            "metric_type": metric, "metric_config": {}, "score": (i % 5) / 4,
            "error": None, "details": {"old": True}, "predicted_count": 1, "expected_count": 1,
            "created_at": at[i] + dt.timedelta(seconds=5),
        } for i in range(OLD) for metric in ("tool_call_accuracy", "tool_call_f1")])  # fmt: skip
        conn.execute(calls.insert(), [{
            "conversation_id": f"old{i:04}", "revision": 1, "position": 0, "name": "get_weather",
            "arguments": {"city": "Paris"}, "arguments_raw": None, "arguments_ok": True,
            "call_id": f"call_{i}", "trace_id": f"{0xA0000 + i:032x}", "span_id": f"{2:016x}",
            "convention": "otel_genai",
        } for i in range(OLD)])  # fmt: skip


_QUERIES = {
    "spans": "SELECT trace_id, span_id, name FROM spans WHERE trace_id LIKE '%a____'",
    "logs": "SELECT record_hash, trace_id, time_ns FROM log_records",
    "conversations": "SELECT id, status, revision, expectation_id, expectation_version, "
    "first_user_message, needs_scoring FROM conversations WHERE id LIKE 'old%'",
    "evaluations": "SELECT conversation_id, revision, is_current, metric, score, predicted_count,"
    " expected_count FROM evaluations WHERE conversation_id LIKE 'old%'",
    "tool_calls": "SELECT conversation_id, revision, position, name, arguments, call_id "
    "FROM tool_calls WHERE conversation_id LIKE 'old%'",
    "current_scores": "SELECT conversation_id, metric, score, day, threshold, passed "
    "FROM current_scores WHERE conversation_id LIKE 'old%'",
    "daily_scores": "SELECT day, expectation_id, metric, evaluations, scored, errors, mean_score,"
    " p10, p50, p90, pass_rate FROM daily_scores WHERE expectation_id = 'weather'",
}


def _norm(value: Any) -> Any:
    if isinstance(value, str) and value.startswith("{"):
        return json.loads(value)  # SQLite returns JSON as text through raw SQL
    if isinstance(value, float):
        return round(value, 9)
    if isinstance(value, dt.date | bool):
        return str(value) if not isinstance(value, bool) else int(value)
    return value


def _snapshot(engine: Engine) -> dict[str, list[tuple[Any, ...]]]:
    with engine.connect() as conn:
        return {
            name: sorted(
                (tuple(_norm(v) for v in row) for row in conn.execute(text(sql))), key=repr
            )
            for name, sql in _QUERIES.items()
        }


def _cli(db_url: str, *args: str) -> Any:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([*args, "--db", db_url, "--json"]) == 0
    return json.loads(out.getvalue())


def _client(port: int, stop: threading.Event, acknowledged: list[int], answers: list[int]) -> None:
    """New conversations, each resent until acknowledged (connection refused while serve
    migrates: it listens only once the schema is current)."""
    for n in range(1, NEW + 1):
        while not stop.is_set():
            try:
                status = requests.post(
                    f"http://127.0.0.1:{port}/v1/traces", data=_conversation(n), headers=PB,
                    timeout=30,
                ).status_code  # fmt: skip
            except requests.RequestException:
                status = -1
            answers.append(status)
            if status == 200:
                acknowledged.append(n)
                break
            time.sleep(0.05)
        if stop.is_set():
            return
        time.sleep(0.02)


def test_an_old_database_upgraded_by_serve_while_a_client_sends_keeps_its_history(
    db_url: str, tmp_path: Path
) -> None:
    upgrade(db_url, "0001")
    engine = create_engine(db_url)
    try:
        _telemetry_at_0001(engine)
        upgrade(db_url, "0004")
        _history_at_0004(engine)
        before = _snapshot(engine)
        assert len(before["evaluations"]) == 2 * OLD and len(before["daily_scores"]) == 2
    finally:
        engine.dispose()

    port, stop = _free_port(), threading.Event()
    acknowledged: list[int] = []
    answers: list[int] = []
    client = threading.Thread(target=_client, args=(port, stop, acknowledged, answers))
    client.start()
    time.sleep(0.5)  # the client is sending: refused, resending
    log = tmp_path / "serve.log"
    with log.open("wb") as err:
        serve = subprocess.Popen(
            [sys.executable, "-m", "toolscore", "serve", "--db", db_url, "--grpc", "off",
             "--http", f"127.0.0.1:{port}", "--settle", "1", "--no-export"],
            stdout=subprocess.DEVNULL, stderr=err,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while len(acknowledged) < 20:
            assert serve.poll() is None, log.read_text()
            assert time.monotonic() < deadline, f"nothing acknowledged: {log.read_text()}"
            time.sleep(0.1)
        stop.set()
        client.join(60)
        sent = {f"pg{n:05}" for n in acknowledged}
        while True:  # the new conversations are scored (unmatched: no expectation names them)
            listed = _cli(db_url, "conversations", "--limit", str(OLD + NEW + 10))
            done = {c["id"] for c in listed if c["status"] != "open"}
            if sent <= done:
                break
            assert time.monotonic() < deadline, f"not scored: {sent - done}"
            time.sleep(0.5)
    finally:
        serve.terminate()
        assert serve.wait(60) == 0, log.read_text()
    print(f"\nanswers before acknowledged: {answers.index(200)}; acknowledged {len(sent)}")
    assert current_revision(db_url) == head_revision()
    engine = create_engine(db_url)
    try:
        after = _snapshot(engine)
        with engine.connect() as conn:
            stored = {
                int(t, 16)
                for t in conn.execute(text("SELECT DISTINCT trace_id FROM spans")).scalars()
            }
    finally:
        engine.dispose()
    for name in _QUERIES:
        assert after[name] == before[name], f"{name} changed by the upgrade"
    assert set(acknowledged) <= stored, "an acknowledged export is missing"
    old = {c["id"]: c for c in listed if c["id"].startswith("old")}
    assert len(old) == OLD and all(c["status"] == "scored" for c in old.values())
    for i in (0, 1, OLD - 1):
        shown = _cli(db_url, "show", f"old{i:04}", "--no-messages")
        scores = {e["metric"]: e["score"] for e in shown["evaluations"]}
        assert scores == {"tool_call_accuracy": (i % 5) / 4, "tool_call_f1": (i % 5) / 4}
        assert old[f"old{i:04}"]["scores"] == scores
        assert [c["name"] for c in shown["tool_calls"]] == ["get_weather"]
