"""Saved recordings of real libraries (tests/fixtures/recorded) reconstruct, and score like Ragas.

The recordings were captured by the live tests in this directory (``TOOLSCORE_RECORD=1``); these
tests re-read them without the libraries, fast. The parity tests check that scoring the
reconstructed call list gives exactly the score of the equivalent Ragas sample (the reconstructed
messages as ``user_input``) scored by the scorer, for several references; and that the messages
are a valid Ragas ``MultiTurnSample``.
"""

from __future__ import annotations

import itertools
import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from tests.collector.recording import DOC_FIXTURES, RECORDED, load_recording
from toolscore.collector.reconstruction.control_calls import ControlCalls
from toolscore.collector.reconstruction.rebuild import Reconstruction, reconstruct
from toolscore.scorer import ToolCall, default_config, parse_sample

RECORDINGS = sorted(RECORDED.glob("*.json"))
WITH_CONTENT = [p for p in RECORDINGS if "nocontent" not in p.name]
ALL = RECORDINGS + sorted(DOC_FIXTURES.glob("*.json"))


def test_recordings_of_every_library_are_present() -> None:
    names = {p.name.split("-")[0] for p in RECORDINGS}
    assert {"pydantic", "langchain", "openai", "strands", "vercel", "google"} <= names
    assert len(RECORDINGS) >= 9


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.stem)
def test_recording_reconstructs_to_its_expected_calls(path: Path) -> None:
    spans, logs, expected = load_recording(path)
    # recorded with handoffs counted (their own test leaves them out: test_reconstruct_handoffs)
    result = reconstruct(spans, logs, control_calls=ControlCalls.parse(["include=handoff"]))
    assert [{"name": c.name, "args": c.arguments or {}} for c in result.tool_calls] == expected
    assert len({c.call_id for c in result.tool_calls}) == len(result.tool_calls)  # once each


def _references(expected: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The expected calls, plus variants that must score below 1."""
    changed = json.loads(json.dumps(expected))
    if changed and changed[0]["args"]:
        key = next(iter(changed[0]["args"]))
        changed[0]["args"][key] = "somewhere else"
    return [expected, expected[::-1], changed, expected[:1], []]


def _predicted(result: Reconstruction) -> list[ToolCall]:
    return [ToolCall(c.name, c.arguments or {}) for c in result.tool_calls]


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.stem)
def test_scores_equal_those_of_the_equivalent_ragas_sample(path: Path) -> None:
    spans, logs, expected = load_recording(path)
    result = reconstruct(spans, logs)
    config = default_config()
    for reference in _references(expected):
        sample = parse_sample(
            {"user_input": list(result.messages), "reference_tool_calls": reference}
        )
        assert list(sample.predicted_tool_calls) == _predicted(result)
        for instance in config.instances.values():
            ours = instance.score(_predicted(result), sample.reference_tool_calls)
            theirs = instance.score(sample.predicted_tool_calls, sample.reference_tool_calls)
            assert (ours.value, ours.error) == (theirs.value, theirs.error), instance.name
    perfect = parse_sample({"user_input": list(result.messages), "reference_tool_calls": expected})
    scores = [
        i.score(perfect.predicted_tool_calls, perfect.reference_tool_calls)
        for i in config.instances.values()
    ]
    if expected and all(c["args"] for c in expected):
        assert all(s.value == 1.0 for s in scores)


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.stem)
def test_messages_are_a_valid_ragas_multi_turn_sample(path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from ragas.dataset_schema import MultiTurnSample

    spans, logs, expected = load_recording(path)
    result = reconstruct(spans, logs)
    sample = MultiTurnSample.model_validate(
        {"user_input": list(result.messages), "reference_tool_calls": expected}
    )
    ragas_calls = [
        (tc.name, tc.args)
        for m in sample.user_input
        for tc in (getattr(m, "tool_calls", None) or [])
    ]
    assert ragas_calls == [(c.name, c.arguments or {}) for c in result.tool_calls]


@pytest.mark.parametrize("path", WITH_CONTENT, ids=lambda p: p.stem)
def test_each_model_message_appears_once(path: Path) -> None:
    """Summaries (agent spans, histories) add nothing: ai and human messages never repeat."""
    spans, logs, _ = load_recording(path)
    messages = list(reconstruct(spans, logs).messages)
    types = [m["type"] for m in messages]
    assert all(not (a == b == "ai") for a, b in itertools.pairwise(types)), types
    humans = [m["content"] for m in messages if m["type"] == "human"]
    assert len(humans) == len(set(humans)) >= 1
    if "malformed" not in path.name:  # there the agent may stop at the broken call
        assert types[-1] == "ai" and "tool_calls" not in messages[-1]  # ends with the answer


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda p: p.stem)
def test_recordings_are_self_contained(path: Path) -> None:
    """Every parent span and every log record's span is in the recording (nothing leaked in)."""
    spans, logs, _ = load_recording(path)
    ids = {s.span_id for s in spans}
    assert all(s.parent_span_id is None or s.parent_span_id in ids for s in spans)
    assert all(log.span_id in ids for log in logs)


@pytest.mark.parametrize("path", sorted(RECORDED.glob("*nocontent*.json")), ids=lambda p: p.stem)
def test_without_content_capture_the_tool_spans_still_give_the_calls(path: Path) -> None:
    spans, logs, expected = load_recording(path)
    result = reconstruct(spans, logs)
    assert [c.name for c in result.tool_calls] == [c["name"] for c in expected]
    assert all(c.arguments is None and not c.arguments_ok for c in result.tool_calls)
    assert all(c.call_id for c in result.tool_calls)  # the tool spans' ids survive
    assert len(result.warnings) == len(expected)  # one "arguments were not recorded" per call
