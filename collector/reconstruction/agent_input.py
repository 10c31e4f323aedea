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

import dataclasses
from collections.abc import Mapping, Sequence

from toolscore.collector.reconstruction.conventions import Exchange, Message
from toolscore.collector.reconstruction.conventions.base import maybe_json
from toolscore.collector.reconstruction.conventions.messages import read_messages
from toolscore.collector.reconstruction.conventions.otel_genai import INVOCATIONS, operation
from toolscore.storage.records import SpanRecord

__all__ = ["first_user_words", "unwrap_user_messages"]


def _is_invocation(span: SpanRecord) -> bool:
    attrs = span.attributes
    kind = str(attrs.get("openinference.span.kind") or "").upper()
    return kind == "AGENT" or operation(attrs) in INVOCATIONS


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


def _user_texts(span: SpanRecord) -> list[str]:
    """Every user message the invocation was given, as given."""
    attrs = span.attributes
    value = maybe_json(attrs.get("input.value"))
    if isinstance(value, Mapping) and isinstance(value.get("input"), str):
        return [str(value["input"])]
    if isinstance(value, str):
        return [value]
    found: list[str] = []
    for source in (value, attrs.get("gen_ai.input.messages")):
        found += [m.content for m in read_messages(source) if m.role == "user" and m.content]
    return found


def unwrap_user_messages(
    exchanges: Sequence[Exchange], spans: Sequence[SpanRecord]
) -> list[Exchange]:
    """User messages that wrap what an invocation of the conversation was given (a prompt
    template around the user's words) become those words, so that a later history giving the
    words alone, or the wrapped form again, repeats them rather than adding a user message."""
    words = sorted(
        {w for s in spans if _is_invocation(s) for w in _user_texts(s) if _norm(w)},
        key=lambda w: -len(w),
    )
    if not words:
        return list(exchanges)
    out: list[Exchange] = []
    for exchange in exchanges:
        inputs = tuple(_unwrapped(m, words) for m in exchange.inputs)
        changed = any(a is not b for a, b in zip(inputs, exchange.inputs, strict=True))
        out.append(dataclasses.replace(exchange, inputs=inputs) if changed else exchange)
    return out


def _unwrapped(message: Message, words: Sequence[str]) -> Message:
    if message.role != "user":
        return message
    text = _norm(message.content)
    for word in words:
        if _norm(word) != text and _norm(word) in text:
            return dataclasses.replace(message, content=word)
    return message


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
