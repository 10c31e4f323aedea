"""``toolscore conversations`` and ``toolscore show``: what a human sees of the pipeline's rows.

The database is migrated for real, then filled the way the pipeline fills it (rows inserted
directly in ``conversations``, ``evaluations``, ``tool_calls``, spans in ``spans``), and the
commands run as real processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import insert

from tests.scorer.helpers import instance
from toolscore.collector.commands.show_losses import render_losses
from toolscore.scorer import ToolCall
from toolscore.storage import migrate
from toolscore.storage.conversations.tables import conversations, evaluations, tool_calls
from toolscore.storage.expectations.repository import ExpectationData, import_expectations
from toolscore.storage.plumbing.engine import create_engine
from toolscore.storage.records import SpanRecord
from toolscore.storage.telemetry.spans import store_spans
from toolscore.storage.telemetry.traces import traces_table

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
TRACE = "ab" * 16
QUESTION = "What's the weather in Paris and the time in Tokyo?"
REFERENCE_V1 = [
    {"name": "get_weather", "args": {"city": "Paris"}},
    {"name": "get_time", "args": {"timezone": "Asia/Tokyo"}},
]
# v2 was imported after scoring: `show` must display the version the scores were computed with
REFERENCE_V2 = [{"name": "get_weather", "args": {"city": "Lyon"}}]
# what scorer/losses.py labels for revision 2's calls (test_the_losses_shown_are_the_scorers)
ACCURACY_LOSSES = [
    {
        "kind": "wrong_argument",
        "tool": "get_time",
        "argument": "timezone",
        "expected": 1,
        "predicted": 1,
        "points": 0.5,
    }
]
F1_LOSSES = [
    {"kind": "missing", "tool": "get_time", "points": 0.25},
    {"kind": "extra", "tool": "get_time", "points": 0.25},
]


def toolscore(*args: str, db: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "TOOLSCORE_DB"}
    return subprocess.run(
        [sys.executable, "-m", "toolscore", *args, "--db", db],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def _conversation(cid: str, status: str, minutes: int, **extra: Any) -> dict[str, Any]:
    at = T0 + timedelta(minutes=minutes)
    row = {
        "id": cid,
        "status": status,
        "first_seen_at": T0,
        "last_span_at": at,
        "last_span_received_ns": int(at.timestamp() * 1e9),
        "needs_scoring": False,
        "last_trace_id": TRACE if cid == "conv-scored" else "cd" * 16,
        "revision": 0,
        "scored_at": None,
        "expectation_id": None,
        "expectation_version": None,
        "first_user_message": None,
    }
    row.update(extra)
    return row


def _evaluation(metric: str, revision: int, score: float | None, **extra: Any) -> dict[str, Any]:
    row = {
        "conversation_id": "conv-scored",
        "revision": revision,
        "is_current": revision == 2,
        "trace_id": TRACE,
        "expectation_id": "weather-and-time",
        "expectation_version": 1,
        "metric": metric,
        "metric_type": metric,
        "metric_config": {"type": metric},
        "score": score,
        "error": None,
        "details": {},
        "predicted_count": 2,
        "expected_count": 2,
        "created_at": T0 + timedelta(minutes=revision),
    }
    row.update(extra)
    return row


def _call(
    cid: str, revision: int, position: int, name: str, args: Any, **extra: Any
) -> dict[str, Any]:
    row = {
        "conversation_id": cid,
        "revision": revision,
        "position": position,
        "name": name,
        "arguments": args,
        "arguments_raw": None,
        "arguments_ok": True,
        "call_id": f"call_{position}",
        "trace_id": TRACE,
        "span_id": None,
        "convention": "otel_genai",
    }
    row.update(extra)
    return row


def _chat_span(span_id: str, start: int, inputs: list[Any], outputs: list[Any]) -> SpanRecord:
    return SpanRecord(
        trace_id=TRACE,
        span_id=span_id,
        parent_span_id=None,
        name="chat model",
        kind=3,
        start_ns=start,
        end_ns=start + 10,
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps(inputs),
            "gen_ai.output.messages": json.dumps(outputs),
        },
    )


def _spans() -> list[SpanRecord]:
    user = {"role": "user", "parts": [{"type": "text", "content": QUESTION}]}
    calls = {
        "role": "assistant",
        "parts": [
            {
                "type": "tool_call",
                "id": "c1",
                "name": "get_weather",
                "arguments": {"city": "Paris"},
            },
            {
                "type": "tool_call",
                "id": "c2",
                "name": "get_time",
                "arguments": {"timezone": "Tokyo"},
            },
        ],
    }
    results = [
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "18C"}]},
        {
            "role": "tool",
            "parts": [{"type": "tool_call_response", "id": "c2", "response": "21:04"}],
        },
    ]
    answer = {"role": "assistant", "parts": [{"type": "text", "content": "18C and 21:04."}]}
    return [
        _chat_span("0000000000000001", 1_000, [user], [calls]),
        _chat_span("0000000000000002", 2_000, [user, calls, *results], [answer]),
    ]


@pytest.fixture
def filled_db(db_url: str) -> str:
    migrate.upgrade(db_url)
    engine = create_engine(db_url)
    with engine.begin() as conn:
        import_expectations(conn, [ExpectationData("weather-and-time", REFERENCE_V1)])
        import_expectations(conn, [ExpectationData("weather-and-time", REFERENCE_V2)])
        conn.execute(
            insert(conversations),
            [
                _conversation(
                    "conv-scored",
                    "scored",
                    10,
                    revision=2,
                    scored_at=T0 + timedelta(minutes=11),
                    expectation_id="weather-and-time",
                    expectation_version=1,
                    first_user_message=QUESTION,
                ),
                _conversation("conv-unmatched", "unmatched", 5, revision=1),
                _conversation("conv-open", "open", 0, needs_scoring=True),
            ],
        )
        accuracy_reason = "expected get_time(timezone='Asia/Tokyo'), got get_time(timezone='Tokyo')"
        conn.execute(
            insert(evaluations),
            [
                _evaluation("tool_call_accuracy", 1, 0.0),
                _evaluation("tool_call_f1", 1, 0.0),
                _evaluation(
                    "tool_call_accuracy",
                    2,
                    0.5,
                    details={"reasons": [accuracy_reason], "losses": ACCURACY_LOSSES},
                ),
                _evaluation(
                    "tool_call_f1",
                    2,
                    0.5,
                    details={
                        "precision": 0.5,
                        "recall": 0.5,
                        "reasons": ["expected get_time(timezone='Asia/Tokyo') was not called"],
                        "losses": F1_LOSSES,
                    },
                ),
            ],
        )
        conn.execute(
            insert(tool_calls),
            [
                _call("conv-scored", 1, 0, "get_weather", {"city": "Pariss"}),
                _call("conv-scored", 2, 0, "get_weather", {"city": "Paris"}),
                _call("conv-scored", 2, 1, "get_time", {"timezone": "Tokyo"}),
                _call(
                    "conv-unmatched",
                    1,
                    0,
                    "search",
                    None,
                    arguments_raw='{"q": "pyth',
                    arguments_ok=False,
                ),
            ],
        )
        conn.execute(insert(traces_table), [{"trace_id": TRACE, "conversation_id": "conv-scored"}])
        store_spans(conn, _spans(), 1)
    engine.dispose()
    return db_url


def test_conversations_lists_recent_first_with_current_scores(filled_db: str) -> None:
    result = toolscore("conversations", db=filled_db)

    assert result.returncode == 0, result.stderr
    header, _rule, *rows = result.stdout.splitlines()
    assert header.split() == [
        "CONVERSATION",
        "STATUS",
        "LAST",
        "ACTIVITY",
        "EXPECTATION",
        "tool_call_accuracy",
        "tool_call_f1",
    ]
    cells = [row.split() for row in rows]
    assert [c[0] for c in cells] == ["conv-scored", "conv-unmatched", "conv-open"]
    assert cells[0] == [
        "conv-scored",
        "scored",
        "2026-03-01",
        "12:10:00Z",
        "weather-and-time@1",
        "0.5",  # the current revision's score, not the superseded 0.0
        "0.5",
    ]
    assert cells[1][1:] == ["unmatched", "2026-03-01", "12:05:00Z", "-", "-", "-"]


def test_conversations_filters_by_status_and_limits(filled_db: str) -> None:
    only_unmatched = toolscore("conversations", "--status", "unmatched", db=filled_db)
    assert [line.split()[0] for line in only_unmatched.stdout.splitlines()[2:]] == [
        "conv-unmatched"
    ]

    newest = json.loads(toolscore("conversations", "--limit", "1", "--json", db=filled_db).stdout)
    assert [c["id"] for c in newest] == ["conv-scored"]
    assert newest[0]["scores"] == {"tool_call_accuracy": 0.5, "tool_call_f1": 0.5}
    assert (newest[0]["expectation_id"], newest[0]["expectation_version"]) == (
        "weather-and-time",
        1,
    )

    none = toolscore("conversations", "--status", "error", db=filled_db)
    assert none.stdout.strip() == "no conversations with status error yet"


def test_show_puts_calls_next_to_the_reference_used_and_explains_scores(filled_db: str) -> None:
    result = toolscore("show", "conv-scored", db=filled_db)

    assert result.returncode == 0, result.stderr
    out = result.stdout
    lines = out.splitlines()
    assert lines[0] == "conversation conv-scored"
    assert "  expectation     weather-and-time@1" in lines
    # messages rebuilt from the stored spans
    assert f"  human  {QUESTION}" in lines
    assert '         -> get_time(timezone="Tokyo")' in lines
    assert "  ai     18C and 21:04." in lines
    # the latest revision's calls, each next to the reference call of that position (v1, not v2)
    assert "tool calls (revision 2):" in lines
    calls = [line.split() for line in lines if line.startswith("  1 ") or line.startswith("  2 ")]
    assert calls == [
        ["1", 'get_weather(city="Paris")', 'get_weather(city="Paris")', "otel_genai"],
        ["2", 'get_time(timezone="Tokyo")', 'get_time(timezone="Asia/Tokyo")', "otel_genai"],
    ]
    assert "Lyon" not in out and "Pariss" not in out
    # each metric's score and explanation
    scores = lines[lines.index("scores:") + 1 :]
    assert scores == [
        "  tool_call_accuracy  0.5",
        "    - expected get_time(timezone='Asia/Tokyo'), got get_time(timezone='Tokyo')",
        "    lost points:",
        "      LOST  KIND            TOOL      ARGUMENT  PREDICTED  REFERENCE",
        "      ----  --------------  --------  --------  ---------  ---------",
        "      0.5   wrong_argument  get_time  timezone  #2         #2",
        "  tool_call_f1  0.5",
        "    precision=0.5  recall=0.5",
        "    - expected get_time(timezone='Asia/Tokyo') was not called",
        "    lost points:",  # F1 counts distinct calls: no positions, no arguments
        "      LOST  KIND     TOOL",
        "      ----  -------  --------",
        "      0.25  missing  get_time",
        "      0.25  extra    get_time",
    ]


def test_show_an_unmatched_conversation(filled_db: str) -> None:
    result = toolscore("show", "conv-unmatched", db=filled_db)

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "  expectation     -" in lines
    assert "messages: (no spans stored for this conversation)" in lines
    assert any("(no reference)" in line for line in lines)
    assert any('search(<undecoded: {"q": "pyth>)' in line for line in lines)
    assert lines[-2:] == ["scores:", "  (not scored)"]


def test_show_json_has_calls_reference_and_details(filled_db: str) -> None:
    result = toolscore("show", "conv-scored", "--json", db=filled_db)

    data = json.loads(result.stdout)
    assert data["conversation"]["status"] == "scored"
    assert [(c["position"], c["name"], c["arguments"]) for c in data["tool_calls"]] == [
        (0, "get_weather", {"city": "Paris"}),
        (1, "get_time", {"timezone": "Tokyo"}),
    ]
    assert data["reference_tool_calls"] == REFERENCE_V1
    assert [(e["metric"], e["score"]) for e in data["evaluations"]] == [
        ("tool_call_accuracy", 0.5),
        ("tool_call_f1", 0.5),
    ]
    assert data["evaluations"][1]["details"]["recall"] == 0.5
    assert [e["details"]["losses"] for e in data["evaluations"]] == [ACCURACY_LOSSES, F1_LOSSES]
    assert [m["type"] for m in data["messages"]] == ["human", "ai", "tool", "tool", "ai"]


def test_show_an_unknown_conversation_fails(filled_db: str) -> None:
    result = toolscore("show", "nope", db=filled_db)

    assert result.returncode == 1
    assert "no conversation 'nope'" in result.stderr


def test_an_unmigrated_database_gets_a_hint(sqlite_url: str) -> None:
    import sqlite3

    sqlite3.connect(sqlite_url.removeprefix("sqlite:///")).close()  # a file with no tables
    for args in (("conversations",), ("show", "x")):
        result = toolscore(*args, db=sqlite_url)
        assert result.returncode == 1
        assert "no conversations table: run `toolscore db upgrade`" in result.stderr


def test_show_an_earlier_revision(filled_db: str) -> None:
    result = toolscore("show", "conv-scored", "--revision", "1", "--no-messages", db=filled_db)

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "tool calls (revision 1):" in lines
    assert any('get_weather(city="Pariss")' in line for line in lines)
    assert not any(line.startswith("messages") for line in lines)
    assert lines[lines.index("scores (revision 1):") + 1 :] == [
        "  tool_call_accuracy  0",
        "  tool_call_f1  0",
    ]

    missing = toolscore("show", "conv-scored", "--revision", "7", db=filled_db)
    assert missing.returncode == 1
    assert "conversation 'conv-scored' has no revision 7" in missing.stderr


def test_the_losses_shown_are_the_scorers() -> None:
    """The fixture's labels are what the scorer gives revision 2's calls (not made up)."""
    predicted = [
        ToolCall("get_weather", {"city": "Paris"}),
        ToolCall("get_time", {"timezone": "Tokyo"}),
    ]
    reference = tuple(ToolCall(c["name"], c["args"]) for c in REFERENCE_V1)
    for metric, expected in (("tool_call_accuracy", ACCURACY_LOSSES), ("tool_call_f1", F1_LOSSES)):
        result = instance(type=metric).score(predicted, reference)
        assert (result.value, result.details["losses"]) == (0.5, expected)


def test_losses_number_calls_as_the_call_table_does() -> None:
    """Predicted positions count after `duplicates: collapse`; `show` numbers the stored calls."""
    details = {
        "repeats_collapsed": [1, 2],  # stored calls #2 and #3 repeated #1
        "losses": [
            {"kind": "extra", "tool": "search", "predicted": 1, "points": 0.0},
            {"kind": "order", "tool": None, "points": 0.5},
            {"kind": "missing", "tool": "book\x1b[2J", "expected": 0, "points": 0.5},
            "not a label",
        ],
    }
    assert render_losses(details) == [
        "    lost points:",
        "      LOST  KIND     TOOL         PREDICTED  REFERENCE",
        "      ----  -------  -----------  ---------  ---------",
        "      0     extra    search       #4         -",
        "      0.5   order    -            -          -",
        "      0.5   missing  book\\x1b[2J  -          #1",  # escaped: it came from a span
    ]
    assert render_losses({"losses": []}) == render_losses({}) == []
