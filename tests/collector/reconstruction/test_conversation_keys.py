"""A trace's conversation id and reference id come from any of its spans or its resource."""

from __future__ import annotations

from typing import Any

from toolscore.collector.reconstruction.conversation_keys import (
    DEFAULT_CONVERSATION_KEYS,
    conversation_id_for_trace,
    normalize_user_input,
    reference_id_for,
)
from toolscore.storage.records import SpanRecord


def span(span_id: str, start: int, attrs: dict[str, Any], resource: dict[str, Any] | None = None):  # type: ignore[no-untyped-def]
    return SpanRecord(
        trace_id="a" * 32,
        span_id=span_id,
        parent_span_id=None,
        name="s",
        kind=1,
        start_ns=start,
        end_ns=start + 1,
        attributes=attrs,
        resource_attributes=resource or {},
    )


def test_default_keys_cover_the_documented_conventions() -> None:
    for key in (
        "gen_ai.conversation.id",
        "session.id",
        "traceloop.association.properties.session_id",
        "langfuse.session.id",
        "ai.telemetry.metadata.sessionId",
        "gcp.vertex.agent.session_id",
    ):
        assert key in DEFAULT_CONVERSATION_KEYS
    assert DEFAULT_CONVERSATION_KEYS[0] == "gen_ai.conversation.id"


def test_the_first_key_in_list_order_wins_even_if_on_a_later_span() -> None:
    spans = [span("1", 1, {"session.id": "s-1"}), span("2", 2, {"gen_ai.conversation.id": "c-1"})]
    assert conversation_id_for_trace(spans, DEFAULT_CONVERSATION_KEYS) == "c-1"
    assert conversation_id_for_trace(spans, ("session.id", "gen_ai.conversation.id")) == "s-1"


def test_a_key_on_a_child_span_names_the_whole_trace() -> None:
    spans = [span("1", 1, {"toolscore.reference.id": "ref-9"}), span("2", 2, {"session.id": "s"})]
    assert conversation_id_for_trace(spans, DEFAULT_CONVERSATION_KEYS) == "s"
    assert reference_id_for(spans) == "ref-9"


def test_empty_values_are_ignored() -> None:
    spans = [span("1", 1, {"gen_ai.conversation.id": ""}), span("2", 2, {"session.id": "s"})]
    assert conversation_id_for_trace(spans, DEFAULT_CONVERSATION_KEYS) == "s"


def test_resource_attributes_count() -> None:
    spans = [span("1", 1, {}, resource={"session.id": "from-resource"})]
    assert conversation_id_for_trace(spans, DEFAULT_CONVERSATION_KEYS) == "from-resource"
    assert reference_id_for([span("1", 1, {}, {"toolscore.reference.id": "r"})]) == "r"


def test_the_earliest_span_wins_for_one_key() -> None:
    spans = [span("2", 5, {"session.id": "late"}), span("1", 1, {"session.id": "early"})]
    assert conversation_id_for_trace(spans, ["session.id"]) == "early"


def test_nothing_found_is_none() -> None:
    assert conversation_id_for_trace([span("1", 1, {"x": "y"})], DEFAULT_CONVERSATION_KEYS) is None
    assert conversation_id_for_trace([], DEFAULT_CONVERSATION_KEYS) is None
    assert reference_id_for([span("1", 1, {})], key="my.ref") is None


def test_numeric_ids_are_text() -> None:
    assert conversation_id_for_trace([span("1", 1, {"session.id": 42})], ["session.id"]) == "42"


def test_normalize_user_input_trims_folds_whitespace_and_case() -> None:
    assert (
        normalize_user_input("  What's the\tWEATHER\n in  Paris? ")
        == "what's the weather in paris?"
    )
    assert normalize_user_input("Straße") == normalize_user_input("STRASSE")
