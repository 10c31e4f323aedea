"""A transcript's order is the conversation's, never the order its records happened to arrive in.

Semantic Kernel's native diagnostics (sensitive data on) write each message of a model call as a
Python-logging log record named by ``event.name``; an app's batch processors send them whenever a
batch fills, so they reach toolscore shuffled among the spans, split across requests, with
timestamps from a coarse clock (all equal), or none at all (only the observed time), and some of
them after the conversation was first scored. Whatever the arrival: every partial rebuild is a
sample the scorer accepts, and the whole one is the recording's four calls with no warning.
Built from the real recordings (tests/fixtures/recorded/semantic-kernel-agent*).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from functools import cache

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.collector.otlp_requests import load_requests, records
from toolscore.collector.reconstruction.rebuild import reconstruct
from toolscore.scorer import parse_sample
from toolscore.storage.records import LogRecordData, SpanRecord

RECORDINGS = ("semantic-kernel-agent", "semantic-kernel-agent-streaming")
# recorded: as exported; equal: one coarse tick for all; observed: only the observed time (the
# SDK's record when the emitter set none); unset: neither (a sender that fills no time at all)
CLOCKS = ("recorded", "equal", "observed", "unset")
INDEX_KEY = "CHAT_MESSAGE_INDEX"  # Semantic Kernel's message position, when the app keeps it


@cache
def _recording(name: str) -> tuple[list[SpanRecord], list[LogRecordData], list[dict[str, object]]]:
    recording = load_requests(name)
    spans, logs = records(recording.requests)
    return spans, logs, recording.expected


def _clocked(log: LogRecordData, clock: str, tick: int, keep_index: bool) -> LogRecordData:
    attributes = (
        log.attributes
        if keep_index
        else {k: v for k, v in log.attributes.items() if k != INDEX_KEY}
    )
    times = {
        "recorded": (log.time_ns, log.observed_time_ns),
        "equal": (tick, tick),
        "observed": (0, log.observed_time_ns),
        "unset": (0, 0),
    }[clock]
    return dataclasses.replace(
        log, time_ns=times[0], observed_time_ns=times[1], attributes=attributes
    )


def _valid(rebuilt_messages: Sequence[dict[str, object]], expected: object) -> None:
    parse_sample({"user_input": list(rebuilt_messages), "reference_tool_calls": expected})


@given(
    name=st.sampled_from(RECORDINGS),
    clock=st.sampled_from(CLOCKS),
    keep_index=st.booleans(),
    arrival=st.randoms(use_true_random=False),
    cut=st.floats(min_value=0.0, max_value=1.0),
)
@settings(max_examples=150, deadline=None)
def test_any_arrival_rebuilds_the_same_calls_and_a_valid_sample(
    name: str, clock: str, keep_index: bool, arrival: object, cut: float
) -> None:
    spans, logs, expected = _recording(name)
    tick = logs[0].time_ns
    items: list[SpanRecord | LogRecordData] = [
        *spans,
        *(_clocked(log, clock, tick, keep_index) for log in logs),
    ]
    arrival.shuffle(items)  # type: ignore[attr-defined]
    # what had arrived when the conversation was first scored: a valid sample, never an error
    first = items[: int(len(items) * cut)]
    early = reconstruct(
        [s for s in first if isinstance(s, SpanRecord)],
        [g for g in first if isinstance(g, LogRecordData)],
    )
    assert early.unread == ()
    _valid(early.messages, expected)
    whole = reconstruct(
        [s for s in items if isinstance(s, SpanRecord)],
        [g for g in items if isinstance(g, LogRecordData)],
    )
    _valid(whole.messages, expected)
    assert [{"name": c.name, "args": c.arguments} for c in whole.tool_calls] == expected
    assert (whole.warnings, whole.cautions) == ((), ())
    assert whole.messages == reconstruct(*_recording(name)[:2]).messages


def test_parallel_results_follow_their_calls_in_the_order_asked() -> None:
    """With no message index and one coarse tick, the records of turn 1's two results arrive in
    the other order: the transcript still answers the calls in the order the model asked."""
    spans, logs, _expected = _recording("semantic-kernel-agent")
    reversed_logs = [_clocked(g, "equal", logs[0].time_ns, False) for g in reversed(logs)]
    rebuilt = reconstruct(spans, reversed_logs).messages
    assert [m["content"] for m in rebuilt[2:4]] == ["18C in Paris", "09:00 in Asia/Tokyo"]
    assert rebuilt == reconstruct(spans, logs).messages


def test_a_result_whose_call_was_not_read_is_left_out_with_a_caution() -> None:
    """Only a later model call's records arrived, and its history's assistant message (the one
    that called the tool) is not among them: the result answers no call the telemetry shows.
    The sample stays valid, and the conversation says why a call may be missing."""
    spans, logs, expected = _recording("semantic-kernel-agent")
    last_call = logs[-1].span_id  # the final model call of turn 2
    kept = [
        g
        for g in logs
        if g.span_id == last_call
        and not (g.event_name == "gen_ai.assistant.message" and "call_3_0" in str(g.body))
    ]
    rebuilt = reconstruct([s for s in spans if s.span_id == last_call], kept)
    _valid(rebuilt.messages, expected)
    assert any("answer no call the telemetry shows" in c for c in rebuilt.cautions)
