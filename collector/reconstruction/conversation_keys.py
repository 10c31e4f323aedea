"""Which conversation a trace belongs to, and its reference id. Pure functions, no I/O.

Instrumentations name the conversation under different keys (docs/conventions.md, pitfall 11), and
often only on some spans: the framework's spans may carry the session while the app's root span
carries the reference id. So a trace is looked at as a whole: the first key (in list order) that
any span or the resource carries, with a non-empty value, names the conversation.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from toolscore.storage.conversations.user_input import (
    normalize_user_input,  # matching's form, owned by storage
)
from toolscore.storage.records import Attributes, SpanRecord

__all__ = [
    "DEFAULT_CONVERSATION_KEYS",
    "DEFAULT_REFERENCE_KEY",
    "conversation_id_for_trace",
    "normalize_user_input",
    "reference_id_for",
]

DEFAULT_CONVERSATION_KEYS: tuple[str, ...] = (
    "gen_ai.conversation.id",  # OTel GenAI >= 1.34; Pydantic AI, ADK invoke_agent, OpenLLMetry
    "session.id",  # OpenInference, Langfuse SDK, Strands trace_attributes
    "langfuse.session.id",
    "traceloop.association.properties.session_id",  # OpenLLMetry association properties
    "traceloop.association.properties.conversation_id",
    "ai.telemetry.metadata.sessionId",  # Vercel AI SDK metadata (Langfuse convention)
    "ai.telemetry.metadata.session_id",
    "gcp.vertex.agent.session_id",  # Google ADK call_llm spans
    "langfuse.trace.metadata.session_id",
    "group_id",  # OpenAI Agents SDK thread id, as Logfire exports it
)
DEFAULT_REFERENCE_KEY = "toolscore.reference.id"


def _value(attributes: Attributes, key: str) -> str | None:
    value = attributes.get(key)
    if value is None or isinstance(value, bool | bytes | list | dict):
        return None
    text = str(value).strip()
    return text or None  # gen_ai.conversation.id may be "" (Pydantic AI writes '' when unset)


def span_order(span: SpanRecord) -> tuple[int, str]:
    """Earliest first: the order in which a trace's spans are asked for a key."""
    return span.start_ns, span.span_id


def _first(spans: Sequence[SpanRecord], key: str, ordered: bool = False) -> str | None:
    """The value of ``key`` on the earliest span carrying it, else on a resource."""
    for span in spans if ordered else sorted(spans, key=span_order):
        found = _value(span.attributes, key)
        if found is not None:
            return found
    for span in spans:
        found = _value(span.resource_attributes, key)
        if found is not None:
            return found
    return None


def conversation_id_for_trace(
    spans: Sequence[SpanRecord],
    keys: Iterable[str] = DEFAULT_CONVERSATION_KEYS,
    ordered: bool = False,
) -> str | None:
    """The conversation id named by the first key (in ``keys`` order) that the trace carries.

    ``None`` means no span or resource names one; the caller then keys the conversation by the
    trace id. ``ordered``: ``spans`` are already sorted by :func:`span_order`.
    """
    for key in keys:
        found = _first(spans, key, ordered)
        if found is not None:
            return found
    return None


def reference_id_for(
    spans: Sequence[SpanRecord], key: str = DEFAULT_REFERENCE_KEY, ordered: bool = False
) -> str | None:
    """The reference (expectation) id set by the app on any span or resource, if any."""
    return _first(spans, key, ordered)
