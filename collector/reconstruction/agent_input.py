"""The user's own words, when the model saw them inside a prompt template.

Agent frameworks often wrap the user's message before the model sees it (BeeAI: ``Your task:
...``; CrewAI: ``Current Task: ...``), so the first user message of the rebuilt transcript is the
template, not what the user said, and matching an expectation by ``match.user_input`` misses.
The agent's invocation span records the input as given (OpenInference ``AGENT`` spans'
``input.value``, OTel GenAI invocation spans' ``gen_ai.input.messages``): it is taken as the
conversation's first user message only with evidence, when the model's first user message
contains it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from toolscore.collector.reconstruction.conventions.base import maybe_json
from toolscore.collector.reconstruction.conventions.messages import read_messages
from toolscore.collector.reconstruction.conventions.otel_genai import INVOCATIONS
from toolscore.storage.records import SpanRecord

__all__ = ["first_user_words"]


def _is_invocation(span: SpanRecord) -> bool:
    attrs = span.attributes
    kind = str(attrs.get("openinference.span.kind") or "").upper()
    return kind == "AGENT" or attrs.get("gen_ai.operation.name") in INVOCATIONS


def _input_text(span: SpanRecord) -> str | None:
    attrs = span.attributes
    value = maybe_json(attrs.get("input.value"))
    if isinstance(value, Mapping) and isinstance(value.get("input"), str):
        return str(value["input"])
    if isinstance(value, str):
        return value
    for source in (value, attrs.get("gen_ai.input.messages")):
        users = [m for m in read_messages(source) if m.role == "user" and m.content.strip()]
        if users:
            return users[0].content
    return None


def _norm(text: str) -> str:
    return " ".join(text.split())


def first_user_words(spans: Sequence[SpanRecord], first_user: str | None) -> str | None:
    """``first_user``, or the earliest agent invocation's input when ``first_user`` wraps it."""
    if not first_user:
        return first_user
    for span in sorted((s for s in spans if _is_invocation(s)), key=lambda s: s.start_ns):
        text = _input_text(span)
        if text and _norm(text) != _norm(first_user) and _norm(text) in _norm(first_user):
            return text
        if text:
            break  # the first invocation with an input decides
    return first_user
