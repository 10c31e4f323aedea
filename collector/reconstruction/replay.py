"""Fingerprints of a conversation's state, for traces that carry no conversation key.

A stateless client (LiteLLM's OTel callback: one trace per model call, no session) sends the
whole history with every model call. The state after a model call (its input, then its output)
is a *tail*; a later model call whose input begins with exactly those messages replays that
conversation and continues it (docs/receiver.md, "Conversations"). Messages are compared by role,
text and the calls they ask for (name and arguments, not ids); a state counts only when it
holds a model output (a shared first question alone is no evidence), and only a trace's first
model call can continue another conversation: its later calls replay the trace's own states, so
identical runs of one scripted conversation (each a trace of several model calls) stay apart.
A model call's messages count wherever the instrumentation put them: on its span, or only in log
records of that span (Semantic Kernel's native diagnostics), which the pipeline gathers for the
trace however they arrived. A conversation without a key whose first model call replays earlier
turns it was not joined to is marked (:func:`replays_unjoined`): it may be only the end of one.
Pure: the pipeline stores and looks up the fingerprints.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from toolscore.collector.reconstruction.conventions import Exchange, Message, extract_observations
from toolscore.collector.reconstruction.transcript import Canon
from toolscore.storage.records import LogRecordData, SpanRecord

__all__ = ["ReplayPrints", "carries_messages", "replay_prints"]


@dataclass(frozen=True, slots=True)
class ReplayPrints:
    """A trace's fingerprints: the state its last model call leaves (``tails``), and the prefixes
    of its first model call's input that may replay an earlier state (``prefixes``, longest
    first)."""

    tails: tuple[str, ...] = ()
    prefixes: tuple[str, ...] = ()


def _text(message: Message, canon: Canon) -> bytes:
    calls = "|".join(f"{c.name}({canon(c.arguments)})" for c in message.tool_calls)
    content = " ".join(message.content.split())
    return f"{message.role}\x1f{content}\x1f{calls}\x1e".encode()


def _chain(messages: Sequence[Message], canon: Canon) -> list[str]:
    """The running fingerprint after each message."""
    out: list[str] = []
    digest = hashlib.sha256()
    for message in messages:
        digest.update(_text(message, canon))
        out.append(digest.copy().hexdigest()[:32])
    return out


def carries_messages(logs: Sequence[LogRecordData]) -> bool:
    """Whether ``logs`` hold messages of a model call (a model input or output). Never raises."""
    try:
        observations, _ = extract_observations((), logs)
    except Exception:
        return False
    return any(isinstance(o, Exchange) and (o.inputs or o.outputs) for o in observations)


def replay_prints(spans: Sequence[SpanRecord], logs: Sequence[LogRecordData] = ()) -> ReplayPrints:
    """The fingerprints of the model calls in ``spans`` (one trace) and the log records carrying
    their messages. Never raises."""
    try:
        observations, _ = extract_observations(spans, logs)
    except Exception:  # a trace it cannot read joins nothing
        return ReplayPrints()
    canon = Canon()
    tails: list[str] = []
    prefixes: list[tuple[int, str]] = []
    exchanges = [o for o in observations if isinstance(o, Exchange)]
    exchanges.sort(key=lambda e: e.sort_ns)
    for n, exchange in enumerate(exchanges):
        inputs = [m for m in exchange.inputs if m.role != "system"]
        outputs = [m for m in exchange.outputs if m.content.strip() or m.tool_calls]
        chain = _chain([*inputs, *outputs], canon)
        if outputs:
            tails[:] = [chain[-1]]  # the state the trace leaves: where a next one continues
        if n:  # a later model call replays its own trace: only the first can continue another
            continue
        for length in range(1, len(inputs) + 1):
            if any(m.role == "assistant" for m in inputs[:length]):
                prefixes.append((length, chain[length - 1]))
    prefixes.sort(key=lambda p: -p[0])
    return ReplayPrints(tuple(dict.fromkeys(tails)), tuple(dict.fromkeys(p for _, p in prefixes)))


def replays_history(inputs: Sequence[Message]) -> bool:
    """Whether a model call's input replays earlier turns: a model output followed by another
    message (an agent span's own answer, recorded as its only input, is none)."""
    seen_output = False
    for message in inputs:
        if message.role == "assistant" and (message.content.strip() or message.tool_calls):
            seen_output = True
        elif seen_output and message.role in ("user", "tool"):
            return True
    return False


def replays_unjoined(
    conversation_id: str, spans: Sequence[SpanRecord], opens_with_history: bool
) -> str | None:
    """Why a conversation with no key (keyed by its first trace) may be only the end of one: its
    first model call's input replays earlier turns (``Reconstruction.opens_with_history``), which
    no conversation here had ended with when it arrived. None when it has a key or starts at its
    beginning."""
    if not opens_with_history or not any(s.trace_id == conversation_id for s in spans):
        return None  # a key names it, or it starts at its beginning
    return (
        "no key, and the first model call replays earlier turns that no conversation had ended "
        "with when it arrived: they may be scored as another conversation (they came later, or "
        "ended over --replay-window ago); this score sees them only as its history shows them"
    )
