"""``bulk_insert`` (COPY on PostgreSQL) stores exactly what ``table.insert()`` stores."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import select

from toolscore.storage.conversations.tables import evaluations, tool_calls
from toolscore.storage.migrate import upgrade
from toolscore.storage.plumbing.dialect import execute_prepared
from toolscore.storage.plumbing.engine import create_engine
from toolscore.storage.plumbing.row_lists import bulk_insert

NOW = dt.datetime(2026, 11, 30, 8, 0, 0, 123456, tzinfo=dt.UTC)


def _evaluation(conversation_id: str, **overrides: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "conversation_id": conversation_id,
        "revision": 1,
        "is_current": True,
        "trace_id": "0af7651916cd43dd8448eb211c80319c",
        "root_span_id": None,
        "expectation_id": "weather",
        "expectation_version": 2,
        "metric": "tool_call_accuracy",
        "metric_type": "tool_call_accuracy",
        "metric_config": {"order": "strict", "nested": {"x": [1, 2.5, None]}},
        "score": 0.5,
        "error": None,
        "details": {"pairs": [{"args": {"city": "Paris\ttab \\ back\nnew line"}}], "big": 2**70},
        "predicted_count": 2,
        "expected_count": 2,
        "created_at": NOW,
    }
    row.update(overrides)
    return row


def _call(conversation_id: str, position: int, arguments: Any) -> dict[str, Any]:
    return {
        "conversation_id": conversation_id,
        "revision": 1,
        "position": position,
        "name": "get_weather",
        "arguments": arguments,
        "arguments_raw": None if arguments is not None else '{"city": "Par',
        "arguments_ok": arguments is not None,
        "call_id": None,
        "trace_id": "0af7651916cd43dd8448eb211c80319c",
        "span_id": "b7ad6b7169203331",
        "convention": "otel_genai",
    }


def _stored(conn: Any, table: Any, conversation_id: str) -> list[dict[str, Any]]:
    rows = conn.execute(
        select(table).where(table.c.conversation_id == conversation_id).order_by(table.c.id)
    ).mappings()
    return [{k: v for k, v in r.items() if k != "id"} for r in rows]


def test_bulk_insert_stores_what_a_plain_insert_stores(db_url: str) -> None:
    upgrade(db_url)
    engine = create_engine(db_url)
    evaluation_rows = [
        _evaluation("x", score=None, error="cannot score", is_current=False),
        _evaluation("x", metric="tool_call_f1", details={"unicode": "naïve ☃", "empty": {}}),
    ]
    call_rows = [_call("x", 0, {"city": "Paris", "days": 3}), _call("x", 1, None)]
    with engine.begin() as conn:
        conn.execute(
            evaluations.insert(), [{**r, "conversation_id": "plain"} for r in evaluation_rows]
        )
        conn.execute(tool_calls.insert(), [{**r, "conversation_id": "plain"} for r in call_rows])
        bulk_insert(conn, evaluations, [{**r, "conversation_id": "bulk"} for r in evaluation_rows])
        bulk_insert(conn, tool_calls, [{**r, "conversation_id": "bulk"} for r in call_rows])
        bulk_insert(conn, tool_calls, [])  # nothing to do: no statement, no error
    with engine.connect() as conn:
        for table in (evaluations, tool_calls):
            plain, bulk = _stored(conn, table, "plain"), _stored(conn, table, "bulk")
            assert len(bulk) == 2
            for p, b in zip(plain, bulk, strict=True):
                assert {**p, "conversation_id": "bulk"} == b
        # a call without decoded arguments is SQL NULL, not JSON null, on both paths
        nulls = conn.execute(
            select(tool_calls.c.conversation_id).where(tool_calls.c.arguments.is_(None))
        ).scalars()
        assert sorted(nulls) == ["bulk", "plain"]
        assert _stored(conn, evaluations, "bulk")[0]["details"]["big"] == 2**70
    engine.dispose()


def test_execute_prepared_stores_what_a_plain_insert_stores(db_url: str) -> None:
    upgrade(db_url)
    engine = create_engine(db_url)
    later = NOW + dt.timedelta(seconds=1)
    rows = [
        _evaluation("x", score=None, error="cannot score", is_current=False),
        _evaluation("x", metric="tool_call_f1", details={"unicode": "naïve ☃"}, created_at=later),
        _evaluation(
            "x",
            metric="m3",
            revision=2,
            created_at=later.astimezone(dt.timezone(dt.timedelta(hours=2))),
        ),
    ]
    with engine.begin() as conn:
        conn.execute(evaluations.insert(), [{**r, "conversation_id": "plain"} for r in rows])
        for part in (rows[:1], rows[1:]):  # the second call reuses the compiled statement
            execute_prepared(
                conn,
                "test.evaluations",
                lambda _dialect: evaluations.insert(),
                evaluations,
                [{**r, "conversation_id": "prep"} for r in part],
            )
        execute_prepared(conn, "test.evaluations", lambda _: evaluations.insert(), evaluations, [])
    with engine.connect() as conn:
        plain, prep = _stored(conn, evaluations, "plain"), _stored(conn, evaluations, "prep")
        assert len(prep) == 3
        for p, b in zip(plain, prep, strict=True):
            assert {**p, "conversation_id": "prep"} == b
        # as the database holds them (SQLite: timestamps as text, compared as text)
        raw = conn.exec_driver_sql(
            "SELECT conversation_id, CAST(created_at AS TEXT), CAST(is_current AS TEXT) "
            "FROM evaluations ORDER BY id"
        ).all()
        assert [r[1:] for r in raw[:3]] == [r[1:] for r in raw[3:]]
    engine.dispose()
