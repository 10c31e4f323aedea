"""The transcript a reconstruction builds (messages with their calls), and leaving framework
control calls out of it (docs/conventions.md, "Control calls")."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from toolscore.collector.control_calls import (
    PYDANTIC_AI_FINAL_RESULT,
    ControlCalls,
    control_kind,
)
from toolscore.collector.conventions import ToolExecution
from toolscore.collector.conventions.base import maybe_json


@dataclass(slots=True)
class Call:
    name: str
    arguments: Any
    call_id: str | None
    trace_id: str
    span_id: str | None
    convention: str
    execution: ToolExecution | None = None


@dataclass(slots=True)
class Entry:
    role: str
    key: tuple[int, int]  # (trace rank, time) for inserting calls seen only on tool spans
    content: str = ""
    calls: list[Call] = field(default_factory=list)
    tool_call_id: str | None = None


def drop_control_calls(entries: list[Entry], policy: ControlCalls) -> None:
    """Leave out the control calls ``policy`` excludes, with their results (by call id; without
    ids, the results that follow an assistant message left with no call). The message's text
    stays; an output tool's arguments (the run's structured answer) become its text."""
    dropped: set[str] = set()
    kept: list[Entry] = []
    orphan_results = 0
    for entry in entries:
        if entry.role == "tool":
            if entry.tool_call_id in dropped:
                continue
            if not entry.tool_call_id and orphan_results:
                orphan_results -= 1
                continue
            kept.append(entry)
            continue
        orphan_results = 0
        gone = [c for c in entry.calls if not policy.includes(control_kind(c.name, c.convention))]
        if gone:
            dropped.update(c.call_id for c in gone if c.call_id)
            entry.calls = [c for c in entry.calls if all(c is not g for g in gone)]
            if not entry.content.strip():
                entry.content = _answer_text(gone)
            if not entry.calls:
                orphan_results = len(gone)
                if not entry.content.strip():
                    continue
        kept.append(entry)
    entries[:] = kept


def _answer_text(calls: list[Call]) -> str:
    for call in calls:
        if control_kind(call.name, call.convention) == PYDANTIC_AI_FINAL_RESULT:
            value = maybe_json(call.arguments)
            if isinstance(value, str):
                return value
            try:
                return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
            except (TypeError, ValueError, RecursionError):
                return str(value)
    return ""
