"""One poisoned conversation never wedges a scoring round.

Each poison used to fail the whole round on every retry, leaving every conversation claimed with
it ``open``; or (1,020 levels) to lose the call silently. Now, in one round with 100 good
neighbours: the neighbours are scored, and the poisoned conversation is either scored with its
unstorable text made safe (U+FFFD, the original kept escaped in ``arguments_raw``, the fact in
the evaluation details' ``storage_notes``) or ``error`` with the reason.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.trace import Tracer
from sqlalchemy import Engine, select

from tests.collector.pipeline.e2e import import_refs, otlp_provider, pipeline_server, wait_scored
from tests.collector.pipeline.test_score import expect
from toolscore.collector.pipeline.assign import AssignConfig, assign_spans
from toolscore.collector.pipeline.claim import NS, Timing
from toolscore.collector.pipeline.rounds import RoundRunner
from toolscore.scorer import default_config, parse_sample
from toolscore.storage.conversations.tables import conversations, evaluations, tool_calls
from toolscore.storage.expectations.repository import ExpectationData
from toolscore.storage.plumbing.engine import create_engine
from toolscore.storage.records import SpanRecord
from toolscore.storage.telemetry.spans import store_spans

REFERENCE = [{"name": "get_weather", "args": {"city": "Paris"}}]
GOOD_ARGS = '{"city": "Paris"}'


def deep(levels: int) -> str:
    return '{"city": ' + "[" * levels + "]" * levels + "}"


@dataclass(frozen=True)
class Poison:
    kind: str
    arguments: str = GOOD_ARGS  # JSON text, as the model wrote it
    tool: str = "get_weather"
    question: str = "Weather in Paris?"


POISONS = (
    Poison("surrogate-value", '{"city": "\\ud800"}'),
    Poison("surrogate-key", '{"\\udfff": "Paris"}'),
    Poison("nested-900", deep(900)),
    Poison("nested-1020", deep(1020)),
    Poison("nul-in-arguments", '{"city": "Pa\\u0000ris"}'),
    Poison("nul-in-tool-name", tool="get_\x00weather"),
    Poison("nul-in-user-message", question="Weather\x00 in Paris?"),
)


def messages(poison: Poison) -> tuple[str, str]:
    user = [{"role": "user", "parts": [{"type": "text", "content": poison.question}]}]
    call = {"type": "tool_call", "id": "call_1", "name": poison.tool, "arguments": "@ARGS@"}
    out = json.dumps([{"role": "assistant", "parts": [call]}]).replace('"@ARGS@"', poison.arguments)
    return json.dumps(user), out


def conversation_spans(conv_id: str, poison: Poison) -> list[SpanRecord]:
    """An OTel GenAI agent turn: invoke_agent root (conversation and reference ids) and a chat
    span whose output calls the tool with ``poison.arguments``."""
    trace, root = uuid.uuid4().hex, uuid.uuid4().hex[:16]
    user, out = messages(poison)
    chat = {
        "gen_ai.operation.name": "chat",
        "gen_ai.conversation.id": conv_id,
        "gen_ai.input.messages": user,
        "gen_ai.output.messages": out,
    }
    agent = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.conversation.id": conv_id,
        "toolscore.reference.id": "weather",
    }
    return [
        SpanRecord(trace, root, None, "invoke_agent", 1, 1_000, 9_000, attributes=agent),
        SpanRecord(trace, uuid.uuid4().hex[:16], root, "chat", 3, 2_000, 3_000, attributes=chat),
    ]


def ingest(engine: Engine, spans: Sequence[SpanRecord], at_ns: int) -> None:
    with engine.begin() as conn:
        store_spans(conn, spans, at_ns)
        assign_spans(conn, spans, received_at_ns=at_ns, config=AssignConfig())


def rows(engine: Engine) -> tuple[dict[str, Any], dict[str, list[Any]], dict[str, Any]]:
    """Conversations by id, their current evaluations, their tool_calls rows."""
    with engine.connect() as conn:
        convs = {r["id"]: dict(r) for r in conn.execute(select(conversations)).mappings()}
        evals: dict[str, list[Any]] = {}
        for e in conn.execute(select(evaluations).where(evaluations.c.is_current)).mappings():
            evals.setdefault(e["conversation_id"], []).append(dict(e))
        calls = {c["conversation_id"]: dict(c) for c in conn.execute(select(tool_calls)).mappings()}
    return convs, evals, calls


def offline(poison: Poison) -> dict[str, float | None]:
    """What ``toolscore score`` gives the same conversation as a Ragas sample (raw values)."""
    args = json.loads(poison.arguments)
    sample = parse_sample(
        {
            "user_input": [
                {"type": "human", "content": poison.question},
                {"type": "ai", "content": "", "tool_calls": [{"name": poison.tool, "args": args}]},
            ],
            "reference_tool_calls": REFERENCE,
        }
    )
    return {
        name: inst.score(sample.predicted_tool_calls, sample.reference_tool_calls).value
        for name, inst in default_config().instances.items()
    }


def check_outcomes(convs: dict[str, Any], evals: dict[str, Any], calls: dict[str, Any]) -> None:
    """The specification, per poison, of what the round recorded."""
    good = [c for c in convs if c.startswith("good-")]
    assert len(good) == 100
    assert Counter(convs[c]["status"] for c in good) == {"scored": 100}
    assert all({e["score"] for e in evals[c]} == {1.0} for c in good)
    assert not any(c["needs_scoring"] for c in convs.values()), "nothing left pending"
    by_kind = {
        p.kind: (p, convs[p.kind], evals.get(p.kind, []), calls.get(p.kind)) for p in POISONS
    }

    for kind in ("surrogate-value", "surrogate-key", "nul-in-arguments", "nul-in-tool-name"):
        poison, conv, ev, call = by_kind[kind]
        assert conv["status"] == "scored", (kind, conv["error"])
        assert {e["metric"]: e["score"] for e in ev} == offline(poison), "scored on the raw values"
        assert all(e["details"]["storage_notes"] for e in ev), "the replacement is recorded"
        assert "\ufffd" in json.dumps(call["arguments"], ensure_ascii=False) + call["name"]
        if kind != "nul-in-tool-name":  # the original arguments, escaped: nothing lost
            assert json.loads(call["arguments_raw"]) == json.loads(poison.arguments)
    assert by_kind["surrogate-value"][3]["arguments"] == {"city": "\ufffd"}
    assert by_kind["surrogate-key"][3]["arguments"] == {"\ufffd": "Paris"}
    assert by_kind["nul-in-arguments"][3]["arguments"] == {"city": "Pa\ufffdris"}
    assert by_kind["nul-in-tool-name"][3]["name"] == "get_\ufffdweather"

    _, conv, ev, _ = by_kind["nul-in-user-message"]
    assert (conv["status"], conv["first_user_message"]) == ("scored", "Weather\ufffd in Paris?")
    assert {e["score"] for e in ev} == {1.0}

    _, conv, ev, call = by_kind["nested-900"]
    assert (conv["status"], ev) == ("error", [])
    assert "args: nested deeper than 100 levels" in conv["error"]
    assert call["arguments"] is None and "nested deeper than 100 levels" in call["arguments_raw"]

    _, conv, ev, call = by_kind["nested-1020"]
    assert (conv["status"], ev, call) == ("error", [], None)
    assert "could not be read" in conv["error"] and "RecursionError" in conv["error"]


def test_one_round_scores_the_neighbours_of_every_poison(engine: Engine) -> None:
    expect(engine, ExpectationData(id="weather", reference_tool_calls=REFERENCE))
    t0 = time.time_ns() - 60 * NS
    for i in range(100):
        ingest(engine, conversation_spans(f"good-{i:03}", Poison("good")), t0)
    for poison in POISONS:
        ingest(engine, conversation_spans(poison.kind, poison), t0)
    runner = RoundRunner(engine, default_config(), timing=Timing(), batch_size=200, worker_id="w")

    result = runner.run_once()

    assert result.claimed == 100 + len(POISONS), "everything in one round"
    assert Counter(result.statuses) == {"scored": 100 + 5, "error": 2}
    check_outcomes(*rows(engine))
    assert runner.run_once().claimed == 0, "nothing is retried"


def send(tracer: Tracer, conv_id: str, poison: Poison) -> None:
    """The same turn through the real OTel SDK (the tool name also as a span attribute)."""
    user, out = messages(poison)
    with tracer.start_as_current_span(
        "invoke_agent",
        attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.conversation.id": conv_id,
            "toolscore.reference.id": "weather",
        },
    ):
        attrs = {"gen_ai.operation.name": "chat", "gen_ai.conversation.id": conv_id}
        attrs |= {"gen_ai.input.messages": user, "gen_ai.output.messages": out}
        with tracer.start_as_current_span("chat", attributes=attrs):
            pass


def test_a_running_server_scores_the_neighbours_of_every_poison(db_url: str) -> None:
    import_refs(db_url, ExpectationData(id="weather", reference_tool_calls=REFERENCE))
    ids = [f"good-{i:03}" for i in range(100)] + [p.kind for p in POISONS]
    with pipeline_server(db_url) as srv:
        provider = otlp_provider(srv)
        tracer = provider.get_tracer("poison-test")
        for conv_id in ids[:100]:
            send(tracer, conv_id, Poison("good"))
        for poison in POISONS:
            send(tracer, poison.kind, poison)
        provider.force_flush()
        wait_scored(db_url, ids, timeout_s=60)
        provider.shutdown()
    engine = create_engine(db_url)
    try:
        check_outcomes(*rows(engine))
    finally:
        engine.dispose()
