"""The replay rule's reading of a model call's input (collector/reconstruction/replay.py)."""

from __future__ import annotations

import pytest

from tests.collector.otlp_requests import load_requests, records
from toolscore.collector.reconstruction.conventions import Message, ToolCallRef
from toolscore.collector.reconstruction.rebuild import reconstruct
from toolscore.collector.reconstruction.replay import (
    carries_messages,
    replay_prints,
    replays_history,
)
from toolscore.storage.records import LogRecordData, SpanRecord

USER = Message("user", "Weather in Paris?")
ANSWER = Message("assistant", "Sunny.")
ASKED = Message("assistant", "", (ToolCallRef("weather", {"city": "Paris"}, "c1"),))
RESULT = Message("tool", "sunny", tool_call_id="c1")


@pytest.mark.parametrize(
    ("inputs", "replays"),
    [
        ([USER], False),  # a first question
        ([Message("system", "Be brief."), USER], False),
        ([ANSWER], False),  # an agent span's own answer, recorded as its only input
        ([USER, ASKED, RESULT], True),  # a call and its result: an earlier step
        ([USER, ANSWER, Message("user", "And tomorrow?")], True),  # an earlier turn
        ([USER, Message("assistant", " "), USER], False),  # no model output in it
    ],
)
def test_an_input_replays_history_when_model_output_comes_before_more(
    inputs: list[Message], replays: bool
) -> None:
    assert replays_history(inputs) is replays


def test_a_model_calls_messages_in_log_records_count() -> None:
    """Semantic Kernel without a key: the second turn's first model call replays the state the
    first turn ended in, and only the log records show it."""
    spans, logs = records(load_requests("semantic-kernel-agent-keyless").requests)
    starts: dict[str, int] = {}
    for span in sorted(spans, key=lambda s: s.start_ns):
        starts.setdefault(span.trace_id, span.start_ns)
    first, second = starts

    def of(trace: str, with_logs: bool) -> tuple[list[SpanRecord], list[LogRecordData]]:
        mine = [g for g in logs if g.trace_id == trace] if with_logs else []
        return [s for s in spans if s.trace_id == trace], mine

    ended = replay_prints(*of(first, True)).tails
    assert ended and set(ended) <= set(replay_prints(*of(second, True)).prefixes)
    assert not set(ended) & set(replay_prints(*of(second, False)).prefixes)
    assert carries_messages(of(second, True)[1]) and not carries_messages([])
    assert reconstruct(*of(second, True)).opens_with_history
    assert not reconstruct(*of(first, True)).opens_with_history
