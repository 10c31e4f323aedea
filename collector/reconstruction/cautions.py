"""Never silently wrong: what the telemetry shows that the rebuilt calls may not account for
(docs/conventions.md, "Never silently wrong").

- a span that looks like a tool run (by its name or a kind attribute) from which nothing was
  taken: a call it ran may be missing;
- a model call whose finish reason says it asked for tools, with output recorded but no call in
  it: calls were made that could not be read;
- a call whose tool span ran with other arguments than the model asked for.

Each becomes a caution of the conversation (with the calls other rules inferred without evidence,
:mod:`toolscore.collector.reconstruction.evidence`): the score is still given, marked.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence

from toolscore.collector.reconstruction.conventions import Exchange
from toolscore.collector.reconstruction.conventions.base import maybe_json
from toolscore.collector.reconstruction.conventions.unrecognised import runs_tool
from toolscore.collector.reconstruction.transcript import Call, Canon
from toolscore.storage.records import SpanRecord

_SHOWN = 3
_TOOL_FINISH = ("tool", "function_call")


def unused_tool_spans(
    spans: Sequence[SpanRecord], used: Collection[str], read: Collection[str]
) -> str | None:
    """Tool-like spans no convention read (one that read a span and took nothing from it does
    so knowingly: ADK's ``execute_tool (merged)``, smolagents' final answer)."""
    unused = [s for s in spans if s.span_id not in used and s.span_id not in read and runs_tool(s)]
    if not unused:
        return None
    shown = ", ".join(f"{s.span_id} {s.name!r}" for s in unused[:_SHOWN])
    more = f" and {len(unused) - _SHOWN} more" if len(unused) > _SHOWN else ""
    return (
        f"{len(unused)} span(s) look like tool runs but gave no call ({shown}{more}): a call "
        "they ran may be missing"
    )


def _finish_reasons(span: SpanRecord) -> list[str]:
    found: list[str] = []
    for key, value in span.attributes.items():
        if key.endswith(("finish_reason", "finish_reasons", "finishReason")):
            parsed = maybe_json(value)
            items = parsed if isinstance(parsed, list | tuple) else [parsed]
            found += [str(v).lower() for v in items if v is not None]
    return found


def unread_calls(exchanges: Sequence[Exchange], by_id: Mapping[str, SpanRecord]) -> str | None:
    silent = []
    for exchange in exchanges:
        span = by_id.get(exchange.span_id or "")
        if span is None or not exchange.outputs:
            continue
        if any(m.tool_calls for m in exchange.outputs):
            continue
        if any(r.startswith(_TOOL_FINISH) for r in _finish_reasons(span)):
            silent.append(span)
    if not silent:
        return None
    shown = ", ".join(f"{s.span_id} {s.name!r}" for s in silent[:_SHOWN])
    return (
        f"{len(silent)} model call(s) finished asking for tools but record no call ({shown}): "
        "calls were made that could not be read"
    )


def disagreements(calls: Sequence[Call], canon: Canon) -> list[str]:
    """Calls whose tool span ran with other arguments than the model asked for (both recorded
    and decodable): scored as the model asked, said."""
    out: list[str] = []
    for call in calls:
        execution = call.execution
        if execution is None or call.arguments is None or execution.arguments is None:
            continue
        if execution.span_id == call.span_id:
            continue  # a call known only from its tool span
        asked, ran = canon.peek(call.arguments), canon.peek(execution.arguments)
        if not (asked.ok and ran.ok) or canon(call.arguments) == canon(execution.arguments):
            continue
        out.append(
            f"call {call.name!r}: the model asked for {_short(asked.arguments)}, its tool span "
            f"{execution.span_id} ran with {_short(ran.arguments)} (scored as the model asked)"
        )
    return out


def _short(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= 120 else text[:117] + "..."
