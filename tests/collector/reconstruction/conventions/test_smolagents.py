"""smolagents (OpenInference): the recorded ToolCallingAgent conversation, and final_answer.

The recording (record_smolagents.py) is real smolagents 1.26 + openinference-instrumentation-
smolagents output. By default smolagents' own ``final_answer`` call is the turn's answer, not a
tool call; ``Smolagents(control_calls=True)`` counts it, as plain OpenInference reading did.
"""

from __future__ import annotations

from tests.collector.reconstruction.conventions import four_calls as fc
from tests.collector.recording import RECORDED, load_recording
from toolscore.collector.reconstruction.conventions import REGISTRY, Exchange, OpenInference
from toolscore.collector.reconstruction.conventions.smolagents import (
    Smolagents,
    history_calls,
    tool_arguments,
)
from toolscore.collector.reconstruction.rebuild import reconstruct

RECORDING = RECORDED / "smolagents-openinference-multi-turn.json"


def test_the_four_calls_are_rebuilt_in_order_without_final_answer() -> None:
    spans, logs, _ = load_recording(RECORDING)
    result = reconstruct(spans, logs)
    assert [{"name": c.name, "args": c.arguments} for c in result.tool_calls] == fc.EXPECTED
    assert [c.call_id for c in result.tool_calls] == [
        "call_1_0",
        "call_1_1",
        "call_3_0",
        "call_4_0",
    ]
    assert {c.convention for c in result.tool_calls} == {"smolagents"}
    assert not result.warnings


def test_the_transcript_is_the_users_ragas_conversation() -> None:
    spans, logs, _ = load_recording(RECORDING)
    messages = list(reconstruct(spans, logs).messages)
    assert [m["type"] for m in messages] == [
        "human", "ai", "tool", "tool", "ai",
        "human", "ai", "tool", "ai", "tool", "ai",
    ]  # fmt: skip
    humans = [m["content"] for m in messages if m["type"] == "human"]
    assert humans == fc.QUESTIONS  # smolagents' "New task:\n" prefix is not the user's text
    answers = [m["content"] for m in messages if m["type"] == "ai" and "tool_calls" not in m]
    assert answers == fc.ANSWERS  # the final_answer argument is the turn's answer
    tools = [m["content"] for m in messages if m["type"] == "tool"]
    assert tools == [
        fc.get_weather("Paris"),
        fc.get_time("Asia/Tokyo"),
        fc.book_table({"restaurant": "Chez Anne", "when": {"day": "Friday", "hour": 20}}, 4),
        fc.convert_currency(42.5, "JPY"),
    ]  # one result per call, from the tool spans (not the joined "Observation:" text)


def _names(convention: Smolagents) -> list[str]:
    """The calls the model asked for and the tools that ran, as ``convention`` reads them."""
    spans, _, _ = load_recording(RECORDING)
    names: list[str] = []
    for span in spans:
        for observation in convention.extract(span):
            if isinstance(observation, Exchange):
                names += [c.name for m in observation.outputs for c in m.tool_calls]
            else:
                names.append(f"ran {observation.name}")
    return names


def test_with_control_calls_final_answer_stays_a_call() -> None:
    kept = _names(Smolagents(control_calls=True))
    assert kept.count("final_answer") == 2 and kept.count("ran final_answer") == 2
    dropped = _names(Smolagents())
    assert [n for n in kept if "final_answer" not in n] == dropped
    assert len(dropped) == 8  # four calls asked for, four tools run


def test_smolagents_spans_are_read_before_plain_openinference() -> None:
    names = [c.name for c in REGISTRY]
    assert names.index("smolagents") < names.index(OpenInference.name)


def test_history_calls_read_the_python_repr_smolagents_writes() -> None:
    text = (
        "Calling tools:\n[{'id': 'call_1', 'type': 'function', 'function': {'name': 'book', "
        "'arguments': {'when': {'hour': 20}, 'size': 4, 'ok': True, 'note': None}}}]"
    )
    calls = history_calls(text)
    assert calls is not None and len(calls) == 1
    assert (calls[0].name, calls[0].call_id) == ("book", "call_1")
    assert calls[0].arguments == {"when": {"hour": 20}, "size": 4, "ok": True, "note": None}
    assert history_calls("Calling tools:\n[{'id': 'x', 'function': <object at 0x1>}]") is None
    assert history_calls("Observation:\nok") is None


def test_tool_span_arguments_are_the_bound_kwargs() -> None:
    bound = '{"args": [], "sanitize_inputs_outputs": true, "kwargs": {"city": "Paris"}}'
    assert tool_arguments(bound) == {"city": "Paris"}
    positional = '{"args": ["Paris"], "sanitize_inputs_outputs": true, "kwargs": {}}'
    assert tool_arguments(positional) == positional  # left for the general decoder
