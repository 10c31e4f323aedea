"""Which conversation a trace belongs to, and its reference id. Pure functions, no I/O.

Instrumentations name the conversation under different keys (docs/conventions.md, pitfall 11), and
often only on some spans: the framework's spans may carry the session while the app's root span
carries the reference id. So a trace is looked at as a whole: the first key (in list order) that
any span or the resource carries, with a non-empty value, names the conversation.

A key with ``*`` is a pattern (``*.metadata.thread_id``: any attribute whose name ends so), for the
metadata SDKs copy onto spans under their own prefix (LangSmith's ``langsmith.metadata.<key>``,
Langfuse's ``langfuse.trace.metadata.<key>``, the AI SDK's ``ai.telemetry.metadata.<key>``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from fnmatch import fnmatchcase
from functools import cache

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
    "langsmith.metadata.thread_id",  # LangSmith's OTel export: LangGraph's thread, its threads
    "langsmith.metadata.session_id",
    "langsmith.metadata.conversation_id",
    "ai.settings.context.sessionId",  # Vercel AI SDK 7 with @ai-sdk/otel
    # the rule for metadata an SDK copies onto spans under its own prefix
    "*.metadata.thread_id",
    "*.metadata.session_id",
    "*.metadata.conversation_id",
    "*.metadata.threadId",
    "*.metadata.sessionId",
    "*.metadata.conversationId",
)
DEFAULT_REFERENCE_KEY = "toolscore.reference.id"


def is_pattern(key: str) -> bool:
    return "*" in key


@cache
def _matcher(pattern: str) -> re.Pattern[str]:
    return re.compile(re.escape(pattern).replace(r"\*", ".*") + r"\Z")


def pattern_keys(pattern: str, attributes: Mapping[str, object]) -> list[str]:
    """The attribute names of ``attributes`` that ``pattern`` matches, sorted."""
    if pattern.startswith("*") and "*" not in pattern[1:]:
        suffix = pattern[1:]
        return sorted(key for key in attributes if key.endswith(suffix))
    match = _matcher(pattern).match
    return sorted(key for key in attributes if match(key))


@cache
def _suffixes(keys: tuple[str, ...]) -> tuple[str, ...] | None:
    """The suffixes of ``keys``' patterns when each is ``*suffix`` (else None: no fast test)."""
    patterns = [k for k in keys if is_pattern(k)]
    if any(not p.startswith("*") or "*" in p[1:] for p in patterns):
        return None
    return tuple(p[1:] for p in patterns)


def expand(keys: tuple[str, ...], attributes: Mapping[str, object]) -> list[str]:
    """``keys`` with each pattern replaced by the attribute names it matches (hot path: one
    suffix test per attribute decides that none does)."""
    suffixes = _suffixes(keys)
    if suffixes == () or (
        suffixes is not None and not any(k.endswith(suffixes) for k in attributes)
    ):
        return [k for k in keys if not is_pattern(k)]
    return [n for k in keys for n in (pattern_keys(k, attributes) if is_pattern(k) else [k])]


@cache
def _plain(keys: tuple[str, ...]) -> frozenset[str]:
    return frozenset(k for k in keys if not is_pattern(k))


def names_any(keys: tuple[str, ...], attributes: Mapping[str, object]) -> bool:
    """Whether :func:`expand` of ``keys`` may name an attribute of ``attributes`` (hot path: a
    set test and one suffix test per attribute; True when a pattern needs the slow test)."""
    suffixes = _suffixes(keys)
    if suffixes is None:
        return True
    if not _plain(keys).isdisjoint(attributes):
        return True
    return bool(suffixes) and any(k.endswith(suffixes) for k in attributes)


@cache
def _glob_free_suffixes(keys: tuple[str, ...]) -> tuple[str, ...] | None:
    """:func:`_suffixes`, when none holds a character ``fnmatch`` reads as a wildcard."""
    suffixes = _suffixes(keys)
    if suffixes is None or any(c in s for s in suffixes for c in "*?["):
        return None
    return suffixes


def present_keys(keys: tuple[str, ...], names: set[str] | frozenset[str]) -> list[str]:
    """``[k for k in keys if matches(k, names)]`` (hot path: one suffix test per name decides
    that no pattern matches)."""
    suffixes = _glob_free_suffixes(keys)
    if suffixes is not None and not (suffixes and any(n.endswith(suffixes) for n in names)):
        return [k for k in keys if k in names and not is_pattern(k)]
    return [k for k in keys if matches(k, names)]


def matches(key: str, names: Iterable[str]) -> bool:
    """Whether ``key`` (a name or a pattern) names one of ``names``."""
    if not is_pattern(key):
        return key in names if isinstance(names, set | frozenset) else key in set(names)
    return any(fnmatchcase(name, key) for name in names)


def _value(attributes: Attributes, key: str) -> str | None:
    if is_pattern(key):
        for name in pattern_keys(key, attributes):
            found = _value(attributes, name)
            if found is not None:
                return found
        return None
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
