"""Traces with no conversation key join the conversation whose messages their model input
replays (LiteLLM's OTel callback: one trace per model call, no session).

The LiteLLM recording's five traces, stored one per ingest batch (and all in one batch), make one
conversation that scores exactly; with the rule off (window 0) they stay five; a trace whose
input replays a state older than the window starts its own; two conversations that only share
their first question stay two.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence

import pytest
from sqlalchemy import Engine, select

from tests.collector.otlp_requests import load_requests, records
from toolscore.collector.pipeline.assign import AssignConfig, assign_spans
from toolscore.collector.pipeline.score import score_conversation
from toolscore.scorer import default_config
from toolscore.storage.conversations.tables import conversations
from toolscore.storage.expectations.repository import ExpectationData, import_expectations
from toolscore.storage.records import SpanRecord
from toolscore.storage.telemetry.row_encode import prepare_telemetry
from toolscore.storage.telemetry.spans import store_telemetry
from toolscore.storage.telemetry.traces import traces_table

from .test_warning import NOW

S = 10**9


def _traces() -> list[list[SpanRecord]]:
    spans, _ = records(load_requests("litellm-otel").requests)
    by_trace: dict[str, list[SpanRecord]] = defaultdict(list)
    for span in spans:
        by_trace[span.trace_id].append(span)
    return sorted(by_trace.values(), key=lambda t: min(s.start_ns for s in t))


def _ingest(engine: Engine, batch: Sequence[SpanRecord], at_ns: int, window_s: float) -> None:
    with engine.begin() as conn:
        numbered = store_telemetry(conn, prepare_telemetry(batch, (), at_ns))
        config = AssignConfig(replay_window_s=window_s)
        assign_spans(conn, batch, received_at_ns=at_ns, config=config, numbered=numbered)


def _conversations(engine: Engine) -> list[str]:
    with engine.connect() as conn:
        return list(conn.execute(select(conversations.c.id).order_by(conversations.c.id)).scalars())


@pytest.mark.parametrize("batches", ["one per trace", "all at once"])
def test_a_stateless_clients_traces_make_one_conversation(engine: Engine, batches: str) -> None:
    traces = _traces()
    assert len(traces) == 5
    if batches == "all at once":
        _ingest(engine, [s for t in traces for s in t], S, 3600)
    else:
        for i, trace in enumerate(traces):
            _ingest(engine, trace, (i + 1) * S, 3600)
    assert _conversations(engine) == [traces[0][0].trace_id]
    recording = load_requests("litellm-otel")
    with engine.begin() as conn:
        import_expectations(
            conn,
            [
                ExpectationData(
                    id="litellm",
                    reference_tool_calls=recording.expected,
                    match={"user_input": recording.user_input},
                )
            ],
            now=NOW,
        )
    outcome = score_conversation(engine, traces[0][0].trace_id, default_config(), now=NOW)
    assert outcome is not None and outcome.status == "scored" and outcome.warning is None
    assert dict(outcome.scores) == {"tool_call_accuracy": 1.0, "tool_call_f1": 1.0}


def test_the_rule_is_off_with_a_window_of_zero(engine: Engine) -> None:
    for i, trace in enumerate(_traces()):
        _ingest(engine, trace, (i + 1) * S, 0)
    assert len(_conversations(engine)) == 5


def test_a_state_older_than_the_window_is_not_joined(engine: Engine) -> None:
    traces = _traces()
    _ingest(engine, traces[0], S, 60)
    _ingest(engine, traces[1], 200 * S, 60)  # 199 s later: beyond the 60 s window
    assert len(_conversations(engine)) == 2


def test_conversations_sharing_only_their_first_question_stay_apart(engine: Engine) -> None:
    """Two users asking the same question, answered differently: the question alone is no
    evidence; a second model call of each joins its own conversation."""
    question = {"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]}

    def call(trace: str, inputs: list[object], answer: str, start: int) -> SpanRecord:
        out = [{"role": "assistant", "parts": [{"type": "text", "content": answer}]}]
        return SpanRecord(trace_id=trace, span_id=f"{start:016x}", parent_span_id=None,
                          name="litellm_request", kind=1, start_ns=start, end_ns=start + 1,
                          attributes={"gen_ai.operation.name": "chat",
                                      "gen_ai.input.messages": json.dumps(inputs),
                                      "gen_ai.output.messages": json.dumps(out)})  # fmt: skip

    def said(text: str) -> dict[str, object]:
        return {"role": "assistant", "parts": [{"type": "text", "content": text}]}

    follow = {"role": "user", "parts": [{"type": "text", "content": "And tomorrow?"}]}
    _ingest(engine, [call("a" * 32, [question], "Sunny.", 1)], S, 3600)
    _ingest(engine, [call("b" * 32, [question], "Rainy.", 2)], 2 * S, 3600)
    _ingest(engine, [call("c" * 32, [question, said("Rainy."), follow], "Dry.", 3)], 3 * S, 3600)
    _ingest(engine, [call("d" * 32, [question, said("Sunny."), follow], "Wet.", 4)], 4 * S, 3600)
    assert _conversations(engine) == ["a" * 32, "b" * 32]


def _naming(trace: Sequence[SpanRecord], conversation: str) -> SpanRecord:
    """A late span of ``trace`` naming its conversation (a child exported after the rest)."""
    root = trace[0]
    return SpanRecord(trace_id=root.trace_id, span_id="f" * 16, parent_span_id=root.span_id,
                      name="late", kind=1, start_ns=root.start_ns, end_ns=root.start_ns + 1,
                      attributes={"gen_ai.conversation.id": conversation})  # fmt: skip


def _trace_conversations(engine: Engine) -> dict[str, str | None]:
    with engine.connect() as conn:
        rows = conn.execute(select(traces_table.c.trace_id, traces_table.c.conversation_id))
        return {trace: conv for trace, conv in rows}


def test_a_trace_joined_by_replay_moves_when_it_names_a_conversation(engine: Engine) -> None:
    traces = _traces()
    first, second = traces[0][0].trace_id, traces[1][0].trace_id
    _ingest(engine, [*traces[0], *traces[1]], S, 3600)
    assert _conversations(engine) == [first]
    _ingest(engine, [_naming(traces[1], "named")], 2 * S, 3600)
    assert sorted(_conversations(engine)) == sorted([first, "named"])
    assert _trace_conversations(engine) == {first: first, second: "named"}
    with engine.connect() as conn:
        left = conn.execute(
            select(conversations.c.needs_scoring, conversations.c.last_trace_id).where(
                conversations.c.id == first
            )
        ).one()
    assert tuple(left) == (True, first)  # scored again without the trace that left


def test_a_keyless_conversation_named_later_takes_its_joined_traces(engine: Engine) -> None:
    traces = _traces()
    for i, trace in enumerate(traces[:3]):
        _ingest(engine, trace, (i + 1) * S, 3600)
    _ingest(engine, [_naming(traces[0], "named")], 4 * S, 3600)
    assert _conversations(engine) == ["named"]
    _ingest(engine, traces[3], 5 * S, 3600)  # replays a state left under the first trace's id
    assert _conversations(engine) == ["named"]
    assert set(_trace_conversations(engine).values()) == {"named"}


def test_identical_runs_of_one_scripted_conversation_stay_apart(engine: Engine) -> None:
    """Each run a trace of two model calls (call a tool, then answer), the same every time, and
    no key: the second call replays the first call's state in every run, but only a trace's
    first model call can continue another conversation."""
    question = {"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]}
    asked = {"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "weather",
                                             "arguments": {"city": "Paris"}}]}  # fmt: skip
    result = {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1",
                                         "response": "sunny"}]}  # fmt: skip
    answer = {"role": "assistant", "parts": [{"type": "text", "content": "Sunny."}]}

    def run(trace: str, start: int) -> list[SpanRecord]:
        def chat(n: int, inputs: list[object], out: object) -> SpanRecord:
            return SpanRecord(trace_id=trace, span_id=f"{start + n:016x}",
                              parent_span_id=f"{start:016x}", name="chat", kind=1,
                              start_ns=start + n, end_ns=start + n + 1,
                              attributes={"gen_ai.operation.name": "chat",
                                          "gen_ai.input.messages": json.dumps(inputs),
                                          "gen_ai.output.messages": json.dumps([out])})  # fmt: skip

        root = SpanRecord(trace_id=trace, span_id=f"{start:016x}", parent_span_id=None,
                          name="agent run", kind=1, start_ns=start, end_ns=start + 9)  # fmt: skip
        return [chat(1, [question], asked), chat(2, [question, asked, result], answer), root]

    for i, trace in enumerate(("a" * 32, "b" * 32, "c" * 32)):
        _ingest(engine, run(trace, (i + 1) * 100), (i + 1) * S, 3600)
    assert _conversations(engine) == ["a" * 32, "b" * 32, "c" * 32]


def test_a_trace_whose_root_comes_after_its_model_calls_joins_when_the_root_comes(
    engine: Engine,
) -> None:
    """An agent run exported in two requests (its model calls, then its root span, which ends
    last): the trace is read whole when the root comes, so its first model call, stored
    earlier, is the one compared."""
    question = {"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]}
    answer = {"role": "assistant", "parts": [{"type": "text", "content": "Sunny."}]}
    follow = {"role": "user", "parts": [{"type": "text", "content": "And tomorrow?"}]}

    def chat(trace: str, start: int, inputs: list[object], out: object) -> SpanRecord:
        return SpanRecord(trace_id=trace, span_id=f"{start + 1:016x}",
                          parent_span_id=f"{start:016x}", name="chat", kind=1,
                          start_ns=start + 1, end_ns=start + 2,
                          attributes={"gen_ai.operation.name": "chat",
                                      "gen_ai.input.messages": json.dumps(inputs),
                                      "gen_ai.output.messages": json.dumps([out])})  # fmt: skip

    def root(trace: str, start: int) -> SpanRecord:
        return SpanRecord(trace_id=trace, span_id=f"{start:016x}", parent_span_id=None,
                          name="agent run", kind=1, start_ns=start, end_ns=start + 9)  # fmt: skip

    first, second = "a" * 32, "b" * 32
    _ingest(engine, [chat(first, 100, [question], answer), root(first, 100)], S, 3600)
    dry = {"role": "assistant", "parts": [{"type": "text", "content": "Dry."}]}
    _ingest(engine, [chat(second, 200, [question, answer, follow], dry)], 2 * S, 3600)
    _ingest(engine, [root(second, 200)], 3 * S, 3600)
    assert _conversations(engine) == [first]
