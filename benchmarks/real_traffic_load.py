"""The load of bench_real_traffic.py: the spans recorded from real frameworks, as OTLP requests.

Every recording under tests/fixtures/recorded/ (the JSON recordings and the ``requests.json`` of
each request recording, decoded by the receiver's own decoder) is copied ``copies`` times with
fresh trace and span ids and its conversation id made unique per copy, then one long
conversation is added: the first turn of the Pydantic AI recording repeated ``turns`` times,
each turn's model spans carrying the whole history so far (as that convention does). The spans
become OTel SDK spans and are encoded by the SDK's own OTLP encoder into requests of ``batch``
spans (the SDK's default batch), serialised before any clock starts.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the recordings' loaders live in tests/

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans  # noqa: E402

from tests.collector.otlp_replay import sdk_span  # noqa: E402
from tests.collector.otlp_requests import load_requests, records, request_recordings  # noqa: E402
from tests.collector.recording import RECORDED, load_recording  # noqa: E402
from toolscore.storage.records import SpanRecord  # noqa: E402

BATCH = 512
LONG_SOURCE = "pydantic-ai-multi-turn.json"
LONG_ID = "long-conversation"
# attribute keys that name a conversation in the recorded conventions
CONVERSATION_SUFFIXES = ("session.id", "session_id", "conversation.id", "conversation_id",
                         "thread_id", "thread.id")  # fmt: skip


@dataclass(frozen=True)
class Corpus:
    requests: list[bytes]
    spans: int
    conversations: int
    recordings: int
    long_spans: int  # spans of the long conversation
    long_distinct_bytes: int  # its distinct content: each message once, as JSON


def recorded_spans() -> dict[str, list[SpanRecord]]:
    """Every recording's spans (recording name -> spans)."""
    out: dict[str, list[SpanRecord]] = {}
    for path in sorted(RECORDED.glob("*.json")):
        spans = load_recording(path)[0]
        if spans:
            out[path.stem] = spans
    for name in request_recordings():
        spans = records(load_requests(name).requests)[0]
        if spans:
            out[name] = spans
    return out


def _fresh(old: str, salt: str) -> str:
    return hashlib.sha256(f"{salt}:{old}".encode()).hexdigest()[: len(old)]


def _is_conversation_key(key: str) -> bool:
    return key.lower().endswith(CONVERSATION_SUFFIXES)


def relabel(spans: Sequence[SpanRecord], salt: str) -> list[SpanRecord]:
    """A copy with fresh ids and the conversation ids made unique to ``salt``."""

    def attrs(values: Mapping[str, Any]) -> dict[str, Any]:
        return {
            k: f"{v}-{salt}" if isinstance(v, str) and _is_conversation_key(k) else v
            for k, v in values.items()
        }

    return [
        dataclasses.replace(
            s,
            trace_id=_fresh(s.trace_id, salt),
            span_id=_fresh(s.span_id, salt),
            parent_span_id=_fresh(s.parent_span_id, salt) if s.parent_span_id else None,
            attributes=attrs(s.attributes),
        )
        for s in spans
    ]


def _numbered(messages: Any, turn: int) -> Any:
    """The messages with every ``content`` text marked with the turn (distinct per turn)."""
    if isinstance(messages, list):
        return [_numbered(m, turn) for m in messages]
    if isinstance(messages, dict):
        return {
            k: f"{v} (turn {turn})" if k == "content" and isinstance(v, str) else _numbered(v, turn)
            for k, v in messages.items()
        }
    return messages


def long_conversation(turns: int, salt: str) -> tuple[list[SpanRecord], int]:
    """``turns`` copies of the recording's first turn in one conversation, each model span's
    input carrying every earlier turn's messages; and the bytes of its distinct messages."""
    spans = load_recording(RECORDED / LONG_SOURCE)[0]
    first = [s for s in spans if s.trace_id == spans[0].trace_id]
    turn_messages = json.loads(
        next(s for s in first if "pydantic_ai.all_messages" in s.attributes).attributes[
            "pydantic_ai.all_messages"
        ]
    )
    duration = max(s.end_ns for s in first) - min(s.start_ns for s in first) + 1_000_000
    out: list[SpanRecord] = []
    history: list[Any] = []
    distinct: set[str] = set()
    for turn in range(turns):
        mine = _numbered(turn_messages, turn)
        distinct.update(json.dumps(m) for m in mine)
        for s in relabel(first, f"{salt}-{turn}"):
            attrs = dict(s.attributes)
            attrs["gen_ai.conversation.id"] = f"{LONG_ID}-{salt}"
            for key in ("gen_ai.input.messages", "pydantic_ai.all_messages"):
                if key in attrs:
                    own = _numbered(json.loads(attrs[key]), turn)
                    attrs[key] = json.dumps(history + own)
            if "gen_ai.output.messages" in attrs:
                attrs["gen_ai.output.messages"] = json.dumps(
                    _numbered(json.loads(attrs["gen_ai.output.messages"]), turn)
                )
            shift = turn * duration
            out.append(
                dataclasses.replace(
                    s, attributes=attrs, start_ns=s.start_ns + shift, end_ns=s.end_ns + shift
                )
            )
        history += mine
    return out, sum(map(len, distinct))


def _batches(spans: Sequence[SpanRecord], size: int) -> Iterator[Sequence[SpanRecord]]:
    for i in range(0, len(spans), size):
        yield spans[i : i + size]


def build(copies: int, turns: int, run: int, batch: int = BATCH) -> Corpus:
    """The corpus of run ``run`` (ids differ from run to run)."""
    recorded = recorded_spans()
    spans: list[SpanRecord] = []
    conversations = 0
    for copy in range(copies):
        for name, source in recorded.items():
            spans += relabel(source, f"{run}-{copy}-{name}")
            conversations += 1
    long_spans, distinct = long_conversation(turns, f"{run}")
    spans += long_spans
    requests = [
        encode_spans([sdk_span(s) for s in chunk]).SerializeToString()
        for chunk in _batches(spans, batch)
    ]
    return Corpus(requests, len(spans), conversations + 1, len(recorded), len(long_spans), distinct)
