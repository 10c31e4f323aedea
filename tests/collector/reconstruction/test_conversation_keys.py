"""A trace's conversation id and reference id come from any of its spans or its resource."""

from __future__ import annotations

from typing import Any

from toolscore.collector.reconstruction.conversation_keys import (
    DEFAULT_CONVERSATION_KEYS,
    conversation_id_for_trace,
    matches,
    names_any,
    normalize_user_input,
    present_keys,
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


def test_sdk_session_attributes_name_the_conversation() -> None:
    for key in (
        "langsmith.metadata.thread_id",  # LangSmith's OTel export, LangGraph's thread
        "langsmith.metadata.session_id",
        "ai.settings.context.sessionId",  # Vercel AI SDK 7 with @ai-sdk/otel
    ):
        assert conversation_id_for_trace([span("1", 1, {key: "t-1"})]) == "t-1", key


def test_metadata_style_keys_name_the_conversation_by_rule() -> None:
    """Metadata an SDK copies onto spans under its own prefix, which no list can foresee."""
    for key in ("acme.metadata.thread_id", "x.y.metadata.session_id", "z.metadata.conversationId"):
        assert conversation_id_for_trace([span("1", 1, {key: "c-9"})]) == "c-9", key
    # a project name is no conversation; a metadata key of another name neither
    other = {"langsmith.trace.session_name": "default", "acme.metadata.user_id": "u"}
    assert conversation_id_for_trace([span("1", 1, other)]) is None


def test_named_keys_come_before_the_rule_and_a_list_without_it_drops_it() -> None:
    attrs = {"acme.metadata.thread_id": "by-rule", "session.id": "named"}
    assert conversation_id_for_trace([span("1", 1, attrs)]) == "named"
    assert conversation_id_for_trace([span("1", 1, attrs)], ["gen_ai.conversation.id"]) is None
    assert conversation_id_for_trace([span("1", 1, attrs)], ["*.thread_id"]) == "by-rule"


def test_a_pattern_key_is_checked_like_a_named_one_when_decoded() -> None:
    from toolscore.collector.otlp.sanitize import DEFAULT_KEY_ATTRIBUTES, key_problem

    long = {"acme.metadata.thread_id": "x" * 2000}
    assert key_problem(long, DEFAULT_KEY_ATTRIBUTES, 1024) is not None
    assert key_problem({"acme.metadata.other": "x" * 2000}, DEFAULT_KEY_ATTRIBUTES, 1024) is None


def test_present_keys_are_the_keys_matching_a_name_with_patterns_tested_by_suffix() -> None:
    names = {"gen_ai.conversation.id", "langsmith.metadata.thread_id", "other"}
    keys = DEFAULT_CONVERSATION_KEYS
    assert present_keys(keys, names) == [k for k in keys if matches(k, names)]
    assert present_keys(keys, names) == [
        "gen_ai.conversation.id",
        "langsmith.metadata.thread_id",
        "*.metadata.thread_id",
    ]
    assert present_keys(keys, {"gen_ai.operation.name"}) == []
    # a pattern fnmatch reads with wildcards beyond its leading * is tested as fnmatch does
    assert present_keys(("*.s?ssion", "*[ab]"), {"x.session", "zb"}) == ["*.s?ssion", "*[ab]"]


def test_names_any_tells_attributes_no_key_can_name() -> None:
    keys = DEFAULT_CONVERSATION_KEYS
    assert not names_any(keys, {"gen_ai.operation.name": "chat", "gen_ai.tool.name": "t"})
    assert names_any(keys, {"session.id": "s"})
    assert names_any(keys, {"acme.metadata.sessionId": "s"})
    assert names_any(("a*b",), {"x": 1})  # a pattern it cannot test by suffix: maybe
