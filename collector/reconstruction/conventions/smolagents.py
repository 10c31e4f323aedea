"""smolagents under OpenInference (scope ``openinference.instrumentation.smolagents``).

The spans are OpenInference ones (read by :class:`OpenInference`), with smolagents' own habits:

- ``<Model>.generate`` LLM spans send the agent's memory as history, where a step's calls are a
  ``tool-call`` message whose text is ``"Calling tools:\\n"`` + the Python ``repr`` of the calls
  (``[{'id', 'type', 'function': {'name', 'arguments'}}]``) and their results one
  ``tool-response`` text (``"Observation:\\n..."``, the parallel results joined, no call ids);
  the task is the user message ``"New task:\\n<task>"``.
- Tool spans (``Tool.__call__``) carry ``tool.name`` and ``input.value`` =
  ``{"args": [], "sanitize_inputs_outputs": ..., "kwargs": {<the arguments>}}``, no call id.
- A ``ToolCallingAgent`` ends every run with a call of its own ``final_answer`` tool (a
  ``CodeAgent`` calls it from code). That is how smolagents ends a step, not a tool the user
  wrote: by default it becomes the assistant's text answer, and its tool span is left out
  (``Smolagents(control_calls=True)``, from ``--control-calls include=smolagents.final_answer``,
  keeps it as a call).

History ``tool-call`` messages become assistant messages with their calls (ids included), so
replays deduplicate; ``tool-response`` texts are dropped: the tool spans give each call's result.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from typing import Any

from toolscore.collector.reconstruction.conventions.base import (
    Exchange,
    Message,
    Observation,
    ToolCallRef,
    ToolExecution,
    Triggers,
    as_text,
    maybe_json,
    opt_str,
)
from toolscore.collector.reconstruction.conventions.openinference import OpenInference
from toolscore.storage.records import LogRecordData, SpanRecord

SCOPE = "openinference.instrumentation.smolagents"
FINAL_ANSWER = "final_answer"  # smolagents' built-in tool that ends a run
TASK_PREFIX = "New task:\n"
CALLS_PREFIX = "Calling tools:\n"
TOOL_CALL_ROLE = "tool-call"
TOOL_RESPONSE_ROLE = "tool-response"


def history_calls(text: str) -> tuple[ToolCallRef, ...] | None:
    """The calls of a ``tool-call`` history message (a Python repr), or None if unreadable."""
    if not text.startswith(CALLS_PREFIX):
        return None
    try:
        items = ast.literal_eval(text[len(CALLS_PREFIX) :].strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None  # e.g. an argument whose repr is not a literal: the outputs still have it
    calls: list[ToolCallRef] = []
    for item in items if isinstance(items, list) else []:
        function = item.get("function") if isinstance(item, Mapping) else None
        if isinstance(function, Mapping) and function.get("name"):
            name, arguments = str(function["name"]), function.get("arguments")
            calls.append(ToolCallRef(name, arguments, opt_str(item.get("id"))))
    return tuple(calls)


def tool_arguments(value: object) -> Any:
    """``Tool.__call__``'s bound arguments → the tool's arguments (kwargs when no positional)."""
    parsed = maybe_json(value)
    if (
        isinstance(parsed, Mapping)
        and isinstance(parsed.get("kwargs"), Mapping)
        and not parsed.get("args")
    ):
        return dict(parsed["kwargs"])
    return value


class Smolagents:
    name = "smolagents"
    triggers = Triggers(scopes=frozenset({SCOPE}))

    def __init__(self, *, control_calls: bool = False) -> None:
        self.control_calls = control_calls  # keep final_answer as a tool call
        self._openinference = OpenInference()

    def applies(self, span: SpanRecord) -> bool:
        return span.scope_name == SCOPE

    def extract(self, span: SpanRecord) -> Sequence[Observation]:
        out: list[Observation] = []
        for observation in self._openinference.extract(span):
            if isinstance(observation, ToolExecution):
                if observation.name == FINAL_ANSWER and not self.control_calls:
                    continue
                out.append(self._execution(observation, span))
            else:
                out.append(self._exchange(observation))
        return out

    def _execution(self, execution: ToolExecution, span: SpanRecord) -> ToolExecution:
        return ToolExecution(
            convention=self.name,
            trace_id=execution.trace_id,
            span_id=execution.span_id,
            start_ns=execution.start_ns,
            name=execution.name,
            arguments=tool_arguments(span.attributes.get("input.value")),
            call_id=execution.call_id,
            result=execution.result,
            failed=execution.failed,
        )

    def _exchange(self, exchange: Exchange) -> Exchange:
        inputs = [m for raw in exchange.inputs for m in self._history(raw)]
        outputs = [self._answer(m) for m in exchange.outputs]
        return Exchange(
            convention=self.name,
            trace_id=exchange.trace_id,
            span_id=exchange.span_id,
            sort_ns=exchange.sort_ns,
            inputs=tuple(inputs),
            outputs=tuple(outputs),
            response_id=exchange.response_id,
        )

    def _history(self, message: Message) -> list[Message]:
        if message.role == TOOL_RESPONSE_ROLE:
            return []
        if message.role == TOOL_CALL_ROLE:
            calls = history_calls(message.content)
            return [] if not calls else [self._answer(Message("assistant", "", calls))]
        if message.role == "user" and message.content.startswith(TASK_PREFIX):
            return [Message("user", message.content[len(TASK_PREFIX) :])]
        return [message]

    def _answer(self, message: Message) -> Message:
        """Without control calls, a ``final_answer`` call becomes the message's text."""
        if self.control_calls or not any(c.name == FINAL_ANSWER for c in message.tool_calls):
            return message
        texts = [message.content] if message.content.strip() else []
        for call in message.tool_calls:
            if call.name == FINAL_ANSWER:
                arguments = maybe_json(call.arguments)
                answer = arguments.get("answer") if isinstance(arguments, Mapping) else arguments
                texts.append(as_text(answer))
        calls = tuple(c for c in message.tool_calls if c.name != FINAL_ANSWER)
        return Message(message.role, "\n".join(texts), calls, message.tool_call_id)

    def extract_logs(self, logs: Sequence[LogRecordData]) -> Sequence[Observation]:
        return ()
