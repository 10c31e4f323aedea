"""Request recordings of real frameworks → a real ``toolscore serve`` → the exact conversation.

Each recording (tests/fixtures/recorded/<name>/requests.json, re-recorded by the record script
beside it) holds the OTLP requests a framework's own exporter sent while playing the two turns
of tests/collector/reconstruction/conventions/four_calls.py against a scripted model. The
requests are posted as they were exported, and the one expectation imported is matched in one
of three ways: the ``toolscore.reference.id`` the app put on a span, the framework's own session
or thread id through ``match.conversation_id``, and the first user message through
``match.user_input``.
Exact means: one conversation, scored with no warning, the four calls stored in order, the
scores of the Ragas sample a user would write, and the messages grouped as the model made them
(turn 1's parallel calls in one assistant message).
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from sqlalchemy import select

from tests.collector.otlp_requests import (
    RequestRecording,
    load_requests,
    records,
    request_recordings,
    shuffled_and_split,
)
from tests.collector.otlp_requests import send as send_requests
from tests.collector.pipeline.e2e import (
    current_scores,
    import_refs,
    pipeline_server,
    ragas_sample,
    ragas_scores,
)
from tests.collector.reconstruction.conventions import four_calls as fc
from toolscore.collector.reconstruction.rebuild import reconstruct
from toolscore.collector.views.conversation import messages_of
from toolscore.storage.conversations.tables import conversations, tool_calls
from toolscore.storage.expectations.repository import ExpectationData
from toolscore.storage.plumbing.engine import create_engine

STYLES = ("reference_id", "conversation_id", "user_input")

# (recording, style) → why it does not yet rebuild exactly; strict, so each flips when it does
NOT_YET: dict[tuple[str, str], str] = {}
DSPY = (
    "DSPy ReAct through OpenInference: the four calls are rebuilt (their names and arguments "
    "confirmed by the model's own text, finish left out as the turn's end), but the transcript "
    "is not the turns': each ReAct step's prompt (the question re-rendered with the trajectory "
    "so far) comes back as another user message, a step's text and the call its tool span ran "
    "are two assistant messages, and turn 2's dspy.History re-renders turn 1 as a new "
    "question/answer pair"
)
DSPY_USER = (
    DSPY + "; and the first user message is DSPy's formatted prompt ('[[ ## question ## ]] ...'): "
    "the question is on the ReAct module's span, a CHAIN, not read as the agent's input"
)
NOT_YET.update({("dspy-openinference", style): DSPY for style in STYLES})
NOT_YET[("dspy-openinference", "user_input")] = DSPY_USER

# recording → what the conversation's warning must say: the rebuild is right but rests on a
# repair of what the instrumentation recorded, and a user must be able to see that
WARNINGS = {"beeai-openinference": "merged into one entry"}

RECORDINGS = {
    "ag2-native",
    "agno-openllmetry",
    "autogen-openllmetry",
    "beeai-openinference",
    "crewai-openinference",
    "dspy-openinference",
    "langsmith-langgraph",
    "litellm-otel",
    "llamaindex-openinference",
    "openai-agents-mcp",
    "pydantic-ai-mcp",
    "semantic-kernel-agent",
    "semantic-kernel-agent-keyless",
    "semantic-kernel-agent-streaming",
    "vercel-ai7",
    "vercel-ai7-streaming",
}


def _cases() -> list[Any]:
    cases = []
    for name in sorted(RECORDINGS):
        for style in STYLES:
            reason = NOT_YET.get((name, style))
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            cases.append(pytest.param(name, style, marks=marks, id=f"{name}-{style}"))
    return cases


def expectation(recording: RequestRecording, style: str) -> ExpectationData:
    calls = recording.expected
    if style == "reference_id":
        assert recording.reference_id is not None
        return ExpectationData(id=recording.reference_id, reference_tool_calls=calls)
    key = "conversation_id" if style == "conversation_id" else "user_input"
    value = recording.conversation_id if style == "conversation_id" else recording.user_input
    return ExpectationData(id=f"by-{style}", reference_tool_calls=calls, match={key: value})


def settled(db_url: str, timeout_s: float = 30.0) -> list[dict[str, Any]]:
    """Every conversation's row once all of them were scored (or found unmatched)."""
    deadline = time.monotonic() + timeout_s
    engine = create_engine(db_url)
    try:
        while True:
            with engine.connect() as conn:
                rows = [dict(r) for r in conn.execute(select(conversations)).mappings()]
            if rows and all(r["revision"] >= 1 and not r["needs_scoring"] for r in rows):
                return rows
            if time.monotonic() > deadline:
                state = [(r["id"], r["status"], r["revision"]) for r in rows]
                raise AssertionError(f"not settled within {timeout_s}s: {state}")
            time.sleep(0.1)
    finally:
        engine.dispose()


def stored_calls(db_url: str, row: dict[str, Any]) -> list[dict[str, Any]]:
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            found = conn.execute(
                select(tool_calls.c.name, tool_calls.c.arguments)
                .where(
                    tool_calls.c.conversation_id == row["id"],
                    tool_calls.c.revision == row["revision"],
                )
                .order_by(tool_calls.c.position)
            ).all()
        return [
            {"name": name, "args": json.loads(args) if isinstance(args, str) else args}
            for name, args in found
        ]
    finally:
        engine.dispose()


def skeleton(messages: list[dict[str, Any]]) -> list[Any]:
    """The transcript's shape: human and tool messages, and each assistant message's calls."""
    shape: list[Any] = []
    for message in messages:
        kind = message.get("type")
        if kind == "ai":
            shape.append([c["name"] for c in message.get("tool_calls") or []])
        elif kind in ("human", "tool"):
            shape.append(kind)
    return shape


def steps_of(recording: RequestRecording) -> list[list[list[dict[str, Any]]]]:
    """The expected calls grouped per user turn into the assistant messages that make them:
    the recording's own ``turns`` where the framework groups them otherwise than four_calls.py
    (one call per step), else four_calls.py's TURNS."""
    sizes = recording.turns or [[[c["name"] for c in step] for step in t] for t in fc.TURNS]
    calls = iter(recording.expected)
    return [[[next(calls) for _ in step] for step in turn] for turn in sizes]


def expected_skeleton(recording: RequestRecording) -> list[Any]:
    shape: list[Any] = []
    for turn in steps_of(recording):
        shape.append("human")
        for step in turn:
            shape.append([c["name"] for c in step])
            shape += ["tool"] * len(step)
        shape.append([])  # the turn's text answer
    return shape


def transcript(db_url: str, conversation_id: str) -> list[dict[str, Any]]:
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            messages = messages_of(conn, conversation_id)
        assert messages is not None
        return messages
    finally:
        engine.dispose()


def scored_exactly(db_url: str, recording: RequestRecording, wanted: ExpectationData) -> str:
    """Check the server's one conversation against the recording; its id."""
    rows = settled(db_url)
    found = [(r["id"], r["status"], r["expectation_id"], r["error"]) for r in rows]
    # telemetry that is no conversation (an MCP client's session set-up outside any agent run)
    # may stand apart; anything with a user message or a call is part of the one conversation
    rows = [r for r in rows if r["first_user_message"] is not None or stored_calls(db_url, r)]
    assert [(r["status"], r["expectation_id"]) for r in rows] == [("scored", wanted.id)], found
    row = rows[0]
    if recording.name in WARNINGS:
        assert WARNINGS[recording.name] in (row["warning"] or ""), row["warning"]
    else:
        assert row["warning"] is None, row["warning"]
    assert stored_calls(db_url, row) == recording.expected
    turns = [step for turn in steps_of(recording) for step in turn]
    sample = ragas_sample(recording.user_input, turns, recording.expected)
    scores = current_scores(db_url, row["id"])
    assert scores == ragas_scores(sample) == {"tool_call_accuracy": 1.0, "tool_call_f1": 1.0}
    messages = transcript(db_url, row["id"])
    assert skeleton(messages) == expected_skeleton(recording)
    return str(row["id"])


@pytest.mark.parametrize(("name", "style"), _cases())
def test_recording_rebuilds_exactly_through_serve(db_url: str, name: str, style: str) -> None:
    recording = load_requests(name)
    if style == "conversation_id" and recording.conversation_id is None:
        pytest.skip(f"{name}: the framework exports no session id")
    if style == "reference_id" and recording.reference_id is None:
        pytest.skip(f"{name}: the app sets no reference id")
    wanted = expectation(recording, style)
    import_refs(db_url, wanted)
    with pipeline_server(db_url) as srv:  # the defaults: a first-contact user's
        send_requests(srv.http_url, recording.requests)
        conversation_id = scored_exactly(db_url, recording, wanted)
    if recording.conversation_id is not None:
        assert conversation_id == recording.conversation_id


def test_every_request_recording_is_replayed() -> None:
    assert set(request_recordings()) == RECORDINGS


@pytest.mark.parametrize("name", sorted(RECORDINGS))
def test_recording_keeps_what_it_expects(name: str) -> None:
    """The saved expectations are the script's: the four calls, the first question, a reference
    id carried by a span."""
    recording = load_requests(name)
    assert [c["args"] for c in recording.expected] == [c["args"] for c in fc.EXPECTED]
    assert recording.user_input == fc.QUESTION_1
    carried = json.dumps(recording.requests)
    if recording.reference_id is not None:
        assert json.dumps(recording.reference_id) in carried
    if recording.conversation_id is not None:
        assert json.dumps(recording.conversation_id) in carried


# (recording, seed, where the log records go, their clock, the share of requests sent before the
# conversation is first scored: the rest arrive after it)
ARRIVALS = [
    ("semantic-kernel-agent", 1, "logs-first", "recorded", 1.0),
    ("semantic-kernel-agent", 2, "spans-first", "recorded", 1.0),
    ("semantic-kernel-agent", 3, "logs-first", "equal", 1.0),
    ("semantic-kernel-agent", 4, "spans-first", "zero", 1.0),
    ("semantic-kernel-agent", 5, "interleaved", "equal", 1.0),
    ("semantic-kernel-agent", 6, "interleaved", "zero", 0.5),
    ("semantic-kernel-agent", 7, "logs-first", "recorded", 0.3),
    ("semantic-kernel-agent-streaming", 8, "interleaved", "recorded", 0.6),
    ("semantic-kernel-agent-streaming", 9, "spans-first", "equal", 0.5),
    # no key: each turn a trace, joined by replaying the history its log records carry
    ("semantic-kernel-agent-keyless", 10, "logs-first", "recorded", 1.0),
    ("semantic-kernel-agent-keyless", 11, "spans-first", "equal", 1.0),
    ("semantic-kernel-agent-keyless", 12, "interleaved", "zero", 1.0),
    ("semantic-kernel-agent-keyless", 13, "interleaved", "recorded", 0.5),
    ("semantic-kernel-agent-keyless", 14, "spans-first", "recorded", 0.4),
]


@pytest.mark.parametrize(
    ("name", "seed", "order", "clock", "early"),
    ARRIVALS,
    ids=[f"{n[-9:]}-{o}-{c}-{e}" for n, _s, o, c, e in ARRIVALS],
)
def test_shuffled_and_split_log_records_rebuild_the_same_transcript(
    db_url: str, name: str, seed: int, order: str, clock: str, early: float
) -> None:
    """Semantic Kernel's content arrives as log records, which an app's batch processors send
    whenever a batch fills: the same records and spans, shuffled and cut into requests of three
    (records before, after or among the spans; their clocks as recorded, all equal, or only the
    observed time; some sent after the conversation was first scored, which must not have
    ended in error), give the transcript of the whole recording at once. Without a key (each turn
    a trace, matched by its first question) too: the later turn's records may come first."""
    recording = load_requests(name)
    whole = reconstruct(*records(recording.requests))
    keyless = recording.reference_id is None
    requests = shuffled_and_split(recording.requests, seed, 3, order=order, clock=clock)
    assert len(requests) > len(recording.requests)
    cut = round(len(requests) * early)
    import_refs(db_url, expectation(recording, "user_input" if keyless else "reference_id"))
    spans, _logs = records(recording.requests)
    named = recording.conversation_id or min(spans, key=lambda s: s.start_ns).trace_id
    calls = [{"name": c.name, "args": c.arguments} for c in whole.tool_calls]
    with pipeline_server(db_url) as srv:
        send_requests(srv.http_url, requests[:cut])
        first = settled(db_url)
        assert not [r for r in first if r["status"] == "error"], first
        send_requests(srv.http_url, requests[cut:])
        deadline = time.monotonic() + 30
        while True:
            rows = settled(db_url)
            now = (
                [r["id"] for r in rows],
                transcript(db_url, rows[0]["id"]),
                stored_calls(db_url, rows[0]),
            )
            want = ([named], [dict(m) for m in whole.messages], calls)
            if now == want or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    assert now == want
    assert [(r["status"], r["warning"]) for r in rows] == [("scored", None)]
