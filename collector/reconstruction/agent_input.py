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
from toolscore.storage.records import SpanRecord

__all__ = ["Given", "first_user_words", "given", "unwrap_user_messages"]


@dataclasses.dataclass(frozen=True, slots=True)
class Given:
    """What an agent invocation span records it was given: its first user words (the input as
    text, else the first user message with text) and every user message's text."""

    start_ns: int
    first: str | None
    users: tuple[str, ...]


_INPUT_KEYS = frozenset({"input.value", "gen_ai.input.messages"})


def given(invocations: Sequence[SpanRecord]) -> list[Given]:
    """The input of each invocation span (:func:`~toolscore.collector.reconstruction.span_index.
    is_invocation`), read once for both rules here; an invocation recording no input gives
    them nothing and is left out."""
    return [_given(s) for s in invocations if not _INPUT_KEYS.isdisjoint(s.attributes)]


def _given(span: SpanRecord) -> Given:
    attrs = span.attributes
    value = maybe_json(attrs.get("input.value"))
    if isinstance(value, Mapping) and isinstance(value.get("input"), str):
        return Given(span.start_ns, str(value["input"]), (str(value["input"]),))
    if isinstance(value, str):
        return Given(span.start_ns, value, (value,))
    first: str | None = None
    users: list[str] = []
    for source in (value, attrs.get("gen_ai.input.messages")):
        mine = [m.content for m in read_messages(source) if m.role == "user"]
        if first is None:
            first = next((text for text in mine if text.strip()), None)
        users += [text for text in mine if text]
    return Given(span.start_ns, first, tuple(users))


def unwrap_user_messages(
    exchanges: Sequence[Exchange], invocations: Sequence[Given]
) -> list[Exchange]:
    """User messages that wrap what an invocation of the conversation was given (a prompt
    template around the user's words) become those words, so that a later history giving the
    words alone, or the wrapped form again, repeats them rather than adding a user message.
    ``invocations``: what the conversation's invocations were given (:func:`given`)."""
    words = sorted(
        {w for g in invocations for w in g.users if _norm(w)},
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


def first_user_words(invocations: Sequence[Given], first_user: str | None) -> str | None:
    """``first_user``, or the earliest agent invocation's input when ``first_user`` wraps it."""
    if not first_user:
        return first_user
    for invocation in sorted(invocations, key=lambda g: g.start_ns):
        text = invocation.first
        if text and _norm(text) != _norm(first_user) and _norm(text) in _norm(first_user):
            return text
        if text:
            break  # the first invocation with an input decides
    return first_user
