"""End-to-end helpers: a real ``toolscore serve`` with the pipeline, OTLP exporters, score checks.

Used by tests/integration/test_pipeline_*.py and the quickstart test. The reference score for a
conversation is what the scorer gives the *equivalent Ragas sample* written by hand from the
agent's script (``ragas_scores``), never the pipeline's own reconstruction.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from sqlalchemy import select

from tests.integration.serve_harness import RunningServer, server_settings
from toolscore.collector.pipeline.extension import pipeline_extension
from toolscore.collector.pipeline.options import DEFAULT_REPLAY_WINDOW_S, PipelineOptions
from toolscore.scorer import ScoringConfig, default_config, parse_sample
from toolscore.storage.conversations.tables import conversations, evaluations
from toolscore.storage.expectations.repository import ExpectationData, import_expectations
from toolscore.storage.migrate import upgrade
from toolscore.storage.plumbing.engine import create_engine

SETTLE_S = 1.0  # short settle time for tests
ROOT_IDLE_S = 0.3


def pipeline_server(
    db_url: str,
    *,
    settle_s: float = SETTLE_S,
    root_idle_s: float = ROOT_IDLE_S,
    replay_window_s: float = DEFAULT_REPLAY_WINDOW_S,
    **settings: Any,
) -> RunningServer:
    options = PipelineOptions(
        settle_s=settle_s, root_idle_s=root_idle_s, replay_window_s=replay_window_s
    )
    return RunningServer(server_settings(db_url, **settings), [pipeline_extension(options)])


def otlp_provider(
    srv: RunningServer, *, grpc: bool = False, service: str = "agent"
) -> TracerProvider:
    """A TracerProvider exporting through the standard OTLP exporter to ``srv``."""
    exporter: Any
    if grpc:
        exporter = GrpcSpanExporter(endpoint=srv.grpc_target, insecure=True)
    else:
        exporter = OTLPSpanExporter(endpoint=f"{srv.http_url}/v1/traces")
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=100))
    return provider


def import_refs(db_url: str, *items: ExpectationData) -> None:
    """Import expectations (migrating the database first, as ``toolscore refs import`` does)."""
    upgrade(db_url)
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            import_expectations(conn, items)
    finally:
        engine.dispose()


def conversation(db_url: str, conv_id: str) -> dict[str, Any] | None:
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            row = (
                conn.execute(select(conversations).where(conversations.c.id == conv_id))
                .mappings()
                .first()
            )
            return dict(row) if row else None
    finally:
        engine.dispose()


def current_scores(db_url: str, conv_id: str) -> dict[str, float | None]:
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                select(evaluations.c.metric, evaluations.c.score).where(
                    evaluations.c.conversation_id == conv_id, evaluations.c.is_current
                )
            ).all()
        return {m: s for m, s in rows}
    finally:
        engine.dispose()


def wait_scored(
    db_url: str, conv_ids: Iterable[str], *, revision: int = 1, timeout_s: float = 30.0
) -> dict[str, dict[str, Any]]:
    """Wait until every conversation reached ``revision`` with nothing pending; their rows."""
    wanted = list(conv_ids)
    deadline = time.monotonic() + timeout_s
    engine = create_engine(db_url)
    try:
        while True:
            with engine.connect() as conn:
                rows = {
                    r["id"]: dict(r)
                    for r in conn.execute(
                        select(conversations).where(conversations.c.id.in_(wanted))
                    ).mappings()
                }
            done = [
                c
                for c in wanted
                if c in rows and rows[c]["revision"] >= revision and not rows[c]["needs_scoring"]
            ]
            if len(done) == len(wanted):
                return rows
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"not scored within {timeout_s}s: {sorted(set(wanted) - set(done))}; "
                    f"state: { {k: (v['status'], v['revision']) for k, v in rows.items()} }"
                )
            time.sleep(0.1)
    finally:
        engine.dispose()


def ragas_sample(
    question: str,
    turns: Sequence[Sequence[Mapping[str, Any]]],
    reference: Sequence[Any],
) -> dict[str, Any]:
    """The Ragas MultiTurnSample a user would write for this conversation: per assistant turn
    its tool calls (``{"name", "args"}``), each followed by one tool message per call."""
    messages: list[dict[str, Any]] = [{"type": "human", "content": question}]
    for calls in turns:
        messages.append({"type": "ai", "content": "", "tool_calls": [dict(c) for c in calls]})
        messages += [{"type": "tool", "content": "ok"} for _ in calls]
    messages.append({"type": "ai", "content": "done"})
    return {"user_input": messages, "reference_tool_calls": list(reference)}


def ragas_scores(sample: Mapping[str, Any], config: ScoringConfig | None = None) -> dict[str, Any]:
    """What ``toolscore score`` gives ``sample`` with ``config`` (default: Ragas defaults)."""
    parsed = parse_sample(dict(sample))
    instances = (config or default_config()).instances
    return {
        name: inst.score(parsed.predicted_tool_calls, parsed.reference_tool_calls).value
        for name, inst in instances.items()
    }


def genai_agent_trace(
    tracer: Any,
    conversation_id: str | None,
    calls: Sequence[Mapping[str, Any]],
    question: str = "What's the weather in Paris?",
    root_attributes: Mapping[str, Any] | None = None,
) -> None:
    """One agent turn in the OTel GenAI conventions (invoke_agent, chat, execute_tool, chat),
    made with the real OTel SDK ``tracer``; ``calls`` are ``{"name", "args"}`` run in parallel."""
    conv = {"gen_ai.conversation.id": conversation_id} if conversation_id else {}
    user = {"role": "user", "parts": [{"type": "text", "content": question}]}
    ids = [f"call_{uuid.uuid4().hex[:12]}" for _ in calls]  # call ids are unique per call
    parts = [
        {"type": "tool_call", "id": ids[i], "name": c["name"], "arguments": c["args"]}
        for i, c in enumerate(calls)
    ]
    assistant = {"role": "assistant", "parts": parts}
    with tracer.start_as_current_span(
        "invoke_agent weather",
        attributes={"gen_ai.operation.name": "invoke_agent", **conv, **(root_attributes or {})},
    ):
        with tracer.start_as_current_span(
            "chat model",
            attributes={
                "gen_ai.operation.name": "chat",
                **conv,
                "gen_ai.input.messages": json.dumps([user]),
                "gen_ai.output.messages": json.dumps([assistant]),
            },
        ):
            pass
        for i, c in enumerate(calls):
            with tracer.start_as_current_span(
                f"execute_tool {c['name']}",
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": c["name"],
                    "gen_ai.tool.call.id": ids[i],
                    "gen_ai.tool.call.arguments": json.dumps(c["args"]),
                },
            ):
                pass
        tool_msg = {
            "role": "tool",
            "parts": [
                {"type": "tool_call_response", "id": call_id, "response": "ok"} for call_id in ids
            ],
        }
        with tracer.start_as_current_span(
            "chat model",
            attributes={
                "gen_ai.operation.name": "chat",
                **conv,
                "gen_ai.input.messages": json.dumps([user, assistant, tool_msg]),
                "gen_ai.output.messages": json.dumps(
                    [{"role": "assistant", "parts": [{"type": "text", "content": "done"}]}]
                ),
            },
        ):
            pass
