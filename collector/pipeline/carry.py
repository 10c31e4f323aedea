"""Scoring a conversation whose older telemetry was pruned (storage/retention/spans.py).

Its calls are the stored calls of the deleted telemetry (``Carried``) followed by those rebuilt
from what arrived since. A later turn's model input usually replays the earlier turns; rebuilt
alone, that replay would count the earlier calls twice, so the longest run of rebuilt calls at
the start that repeats the end of the carried ones is dropped (by call id when both have one,
else by name and arguments) -- what reconstruction does with history it already knows.
The scorer reads only the calls (``Sample.predicted_tool_calls``), so the messages it gets are
the first user message and one assistant message with every call, in order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from toolscore.collector.reconstruction.rebuild import ReconstructedCall, Reconstruction
from toolscore.storage.history.rows import CallRow
from toolscore.storage.retention.spans import Carried


def after_pruning(
    rec: Reconstruction, carried: Carried | None
) -> tuple[list[dict[str, Any]], tuple[CallRow, ...], Reconstruction]:
    """(messages to score, carried tool calls, ``rec`` with the new calls renumbered after the
    carried ones and the conversation's first user message)."""
    if carried is None:
        return list(rec.messages), (), rec
    kept = carried.calls
    new = _without_replay(kept, rec.tool_calls)
    renumbered = tuple(dataclasses.replace(c, position=len(kept) + i) for i, c in enumerate(new))
    first = carried.first_user_message or rec.first_user_message
    predicted = [{"name": c.name, "args": c.arguments or {}} for c in kept]
    predicted += [{"name": c.name, "args": c.arguments or {}} for c in new]
    messages: list[dict[str, Any]] = []
    if first:
        messages.append({"type": "human", "content": first})
    if predicted:
        messages.append({"type": "ai", "content": "", "tool_calls": predicted})
    rebuilt = dataclasses.replace(rec, tool_calls=renumbered, first_user_message=first)
    return messages, kept, rebuilt


def _same(stored: CallRow, call: ReconstructedCall) -> bool:
    if stored.call_id and call.call_id:
        return stored.call_id == call.call_id
    return bool(stored.name == call.name and stored.arguments == call.arguments)


def _without_replay(
    kept: Sequence[CallRow], calls: Sequence[ReconstructedCall]
) -> Sequence[ReconstructedCall]:
    for m in range(min(len(kept), len(calls)), 0, -1):
        tail = kept[len(kept) - m :]
        if all(_same(tail[i], calls[i]) for i in range(m)):
            return calls[m:]
    return calls
