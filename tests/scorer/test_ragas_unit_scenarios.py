"""The scenarios of Ragas 0.4.3's own unit tests for these metrics.

Transcribed from ``tests/unit/test_tool_call_accuracy.py`` and ``tests/unit/test_tool_call_f1.py``
of the Ragas repository. Where Ragas mocks the argument comparison, the real exact comparator is
used (the mocked values equal what exact comparison gives in each scenario).
"""

from __future__ import annotations

from typing import Any

from tests.scorer.helpers import call, instance
from toolscore.scorer import Score, parse_sample

ACCURACY = instance()
F1 = instance(type="tool_call_f1")

SEARCH = call("search", query="python")
FILTER = call("filter", type="recent")


def _tc(c: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"name": c[0], "args": c[1]}


def run(metric: Any, messages: list[dict[str, Any]], reference: list[Any]) -> Score:
    sample = parse_sample(
        {"user_input": messages, "reference_tool_calls": [_tc(c) for c in reference]}
    )
    return metric.score(sample.predicted_tool_calls, sample.reference_tool_calls)


def ai(content: str, *calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    message: dict[str, Any] = {"type": "ai", "content": content}
    if calls:
        message["tool_calls"] = [_tc(c) for c in calls]
    return message


class TestToolCallAccuracyScenarios:
    def test_perfect_match(self):
        assert run(ACCURACY, [ai("I'll search", SEARCH, FILTER)], [SEARCH, FILTER]).value == 1.0

    def test_no_predicted_tool_calls(self):
        result = run(ACCURACY, [ai("No tool calls here")], [SEARCH])
        assert result.value == 0.0
        assert any("no tool calls" in r for r in result.details["reasons"])

    def test_sequence_misalignment(self):
        result = run(ACCURACY, [ai("Searching...", FILTER, SEARCH)], [SEARCH, FILTER])
        assert result.value == 0.0
        assert result.details["aligned"] is False

    def test_length_mismatch_more_predicted(self):
        assert run(ACCURACY, [ai("Searching...", SEARCH, FILTER)], [SEARCH]).value == 0.0

    def test_length_mismatch_fewer_predicted(self):
        assert run(ACCURACY, [ai("Searching...", SEARCH)], [SEARCH, FILTER]).value == 0.0

    def test_partial_argument_match(self):
        result = run(
            ACCURACY,
            [ai("Searching...", call("search", query="python", limit=5), FILTER)],
            [call("search", query="python", limit=10), FILTER],
        )
        assert result.value == 0.75  # (0.5 + 1.0) / 2
        assert result.details["pairs"][0]["args"] == {"query": 1.0, "limit": 0.0}

    def test_wrong_tool_names(self):
        wrong = call("wrong_tool", query="python")
        assert run(ACCURACY, [ai("Searching...", wrong)], [SEARCH]).value == 0.0

    def test_multiple_ai_messages(self):
        messages = [ai("First", SEARCH), ai("Second", FILTER)]
        assert run(ACCURACY, messages, [SEARCH, FILTER]).value == 1.0

    def test_empty_reference_and_no_predictions(self):
        assert run(ACCURACY, [ai("No tools needed")], []).value == 1.0

    def test_empty_reference_with_predictions(self):
        assert run(ACCURACY, [ai("Calling tool", call("unexpected"))], []).value == 0.0

    def test_metric_type_name(self):
        assert ACCURACY.type == "tool_call_accuracy"


class TestToolCallF1Scenarios:
    @staticmethod
    def make(expected: list[Any], predicted: list[Any]) -> Score:
        messages = [
            {"type": "human", "content": "What is the weather in Paris?"},
            ai("Let me check the weather forecast", *predicted),
        ]
        return run(F1, messages, expected)

    def test_full_match(self):
        forecast = call("WeatherForecast", location="Paris")
        assert self.make([forecast], [forecast]).value == 1.0

    def test_partial_match(self):
        forecast = call("WeatherForecast", location="Paris")
        uv = call("UVIndex", location="Paris")
        assert round(self.make([forecast, uv], [forecast]).value or 0, 2) == 0.67

    def test_no_match(self):
        forecast = call("WeatherForecast", location="Paris")
        air = call("AirQuality", location="Paris")
        assert self.make([forecast], [air]).value == 0.0

    def test_extra_call(self):
        forecast = call("WeatherForecast", location="Paris")
        air = call("AirQuality", location="Paris")
        result = self.make([forecast], [forecast, air])
        assert round(result.value or 0, 2) == 0.67
        assert result.details["false_positives"] == 1
