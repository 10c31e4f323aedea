"""Tool executions (tool spans) attached to the calls the model made, executions that match no
call inserted as calls, and each call's arguments decoded (docs/conventions.md, "How calls are
rebuilt", steps 2 and 3)."""

from __future__ import annotations

import bisect

from toolscore.collector.reconstruction.conventions import ToolExecution
from toolscore.collector.reconstruction.tool_args import DecodedArgs
from toolscore.collector.reconstruction.transcript import Call, Canon, Entry, Transcript

HANDOFF_PREFIX = "handoff to "  # OpenAI Agents handoff TOOL spans: not tool calls


def attach(
    calls: list[Call], executions: list[ToolExecution], warnings: list[str], canon: Canon
) -> list[ToolExecution]:
    """Attach executions to calls; return the executions that matched no call."""
    by_id = {c.call_id: c for c in calls if c.call_id}
    pending: list[ToolExecution] = []
    for execution in executions:
        call = by_id.get(execution.call_id) if execution.call_id else None
        if call is not None:
            if call.execution is None:
                call.execution = execution
                call.rule += _confirmed("call id", execution)
            continue  # a retried execution of an attached call is not a new call
        pending.append(execution)

    def free(execution: ToolExecution) -> list[Call]:
        return [
            c
            for c in calls
            if c.execution is None
            and c.name == execution.name
            and not (c.call_id and execution.call_id)  # both have ids and they differ
        ]

    def args_equal(call: Call, execution: ToolExecution) -> bool:
        return canon(call.arguments) == canon(execution.arguments)

    def positional_equal(call: Call, execution: ToolExecution) -> bool:
        decoded = canon.peek(execution.arguments)
        mine = canon.peek(call.arguments).arguments
        if mine is None or not decoded.positional:
            return False
        named = decoded.arguments or {}
        rest = [v for k, v in mine.items() if k not in named]
        return [str(v) for v in rest] == [str(v) for v in decoded.positional]

    rules = (
        (args_equal, "name and arguments"),
        (positional_equal, "name and positional values"),
        (lambda _c, _e: True, "name only"),
    )
    for rule, how in rules:
        still: list[ToolExecution] = []
        for execution in pending:
            match = next((c for c in free(execution) if rule(c, execution)), None)
            if match is None:
                still.append(execution)
            else:
                match.execution = execution
                match.rule += _confirmed(how, execution)
        pending = still
    unmatched = [e for e in pending if not e.name.startswith(HANDOFF_PREFIX)]
    if calls and unmatched:
        names = ", ".join(sorted({e.name for e in unmatched}))
        warnings.append(
            f"{len(unmatched)} tool span(s) matched no call in the model output ({names}); "
            "counted from the tool spans"
        )
    return unmatched


def _confirmed(how: str, execution: ToolExecution) -> str:
    notes = "".join(f"; {n}" for n in execution.notes)
    return f"; tool span {execution.span_id} by {how}{notes}"


def insert_orphans(
    transcript: Transcript, orphans: list[ToolExecution], ranks: dict[str, int]
) -> None:
    orphans = sorted(orphans, key=lambda e: (ranks.get(e.trace_id, 0), e.start_ns))
    for execution in orphans:
        key = (ranks.get(execution.trace_id, 0), execution.start_ns)
        call = Call(
            execution.name,
            None,
            execution.call_id,
            execution.trace_id,
            execution.span_id,
            execution.convention,
            execution,
            "tool span only (not in the model output)" + "".join(f"; {n}" for n in execution.notes),
        )
        keys = [entry.key for entry in transcript.entries]
        index = bisect.bisect_right(keys, key)
        previous = transcript.entries[index - 1] if index else None
        if (
            previous is not None
            and previous.role == "assistant"
            and previous.key[0] == key[0]
            and previous.calls
            and all(c.arguments is None for c in previous.calls)
        ):
            previous.calls.append(call)  # tools of one step: one assistant message
            continue
        transcript.entries.insert(index, Entry("assistant", key, "", [call]))


def decode_call(call: Call, params: dict[str, tuple[str, ...]], canon: Canon) -> DecodedArgs:
    requested = canon.decode(call.arguments) if call.arguments is not None else None
    if requested is not None and requested.ok:
        return requested
    executed = (
        canon.decode(call.execution.arguments)
        if call.execution is not None and call.execution.arguments is not None
        else None
    )
    if executed is not None and executed.ok:
        return executed
    if requested is not None and requested.arguments is not None:
        return requested  # partial (truncated) model arguments
    if executed is not None and executed.positional and call.name in params:
        named = dict(executed.arguments or {})
        free = [p for p in params[call.name] if p not in named]
        if len(free) >= len(executed.positional):
            named.update(zip(free, executed.positional, strict=False))
            return DecodedArgs(named, None, True)
    return requested or executed or DecodedArgs(None, None, False)
