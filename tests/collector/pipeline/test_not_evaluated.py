"""Not evaluable is not zero (collector/pipeline/not_evaluated.py): calls without recorded
arguments,
the metrics they make unscorable, and how each convention's capture is turned on.

End to end with real instrumentations: tests/integration/test_not_evaluated.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.collector.reconstruction.test_reconstruct import span, tool
from toolscore.collector.export.attributes import pass_label
from toolscore.collector.pipeline.not_evaluated import (
    Unrecorded,
    compares_arguments,
    mark_not_evaluated,
    unrecorded,
)
from toolscore.collector.reconstruction.conventions.capture import (
    GENERIC,
    OPENAI_AGENTS,
    OPENINFERENCE,
    OPENLLMETRY,
    OTEL_GENAI,
    PYDANTIC_AI,
    capture_hint,
)
from toolscore.collector.reconstruction.rebuild import reconstruct
from toolscore.scorer import parse_config
from toolscore.storage.history.rows import CallRow, EvaluationRow


def _config() -> Any:
    return parse_config(
        {
            "metrics": {
                "accuracy": {"type": "tool_call_accuracy"},
                "f1": {"type": "tool_call_f1"},
                "names_only": {"type": "tool_call_accuracy", "args": "ignore"},
                "search_ids_ignored": {
                    "type": "tool_call_accuracy",
                    "tools": {"search": {"args": {"id": "ignore"}, "default": "ignore"}},
                },
            }
        }
    )


def test_which_metrics_compare_arguments_of_which_tools() -> None:
    instances = _config().instances
    assert compares_arguments(instances["accuracy"], "get_weather")
    assert compares_arguments(instances["f1"], "get_weather")  # sets of (name, arguments)
    assert not compares_arguments(instances["names_only"], "get_weather")
    assert not compares_arguments(instances["search_ids_ignored"], "search")
    assert compares_arguments(instances["search_ids_ignored"], "get_weather")


def _row(metric: str, score: float | None = 0.0, error: str | None = None) -> EvaluationRow:
    return EvaluationRow(metric, "tool_call_accuracy", {}, score, error, {"reasons": []}, 1, 1)


def test_only_rows_comparing_unrecorded_arguments_become_not_evaluated() -> None:
    instances = _config().instances
    missing = [Unrecorded(1, "get_weather", "set X=true")]
    rows = [_row(m) for m in instances] + [_row("broken", None, "no such metric")]
    out = {r.metric: r for r in mark_not_evaluated(rows, instances, missing, total=3)}
    for metric in ("accuracy", "f1"):
        assert out[metric].score is None and out[metric].error is None
        details = out[metric].details
        assert details["label"] == "not_evaluated"
        assert details["arguments_not_recorded"] == [{"position": 1, "name": "get_weather"}]
        assert details["reason"] == (
            "not evaluated: the arguments of 1 of 3 call(s) were not recorded (#1 get_weather) "
            "and this metric compares arguments; to record them, set X=true"
        )
    assert out["names_only"] == _row("names_only")
    assert out["search_ids_ignored"].details["label"] == "not_evaluated"  # get_weather's
    assert out["broken"] == _row("broken", None, "no such metric")
    assert mark_not_evaluated(rows, instances, [], total=3) == tuple(rows)


def test_absent_arguments_are_told_apart_from_empty_ones() -> None:
    spans = [
        tool("get_weather", None, "c1", start=0),  # gen_ai.tool.call.arguments absent
        tool("get_time", {}, "c2", start=10),  # recorded, and empty
        tool("lookup", '{"q": "x', "c3", start=20),  # recorded, cut short
    ]
    rec = reconstruct(spans)
    assert [(c.arguments, c.arguments_recorded) for c in rec.tool_calls] == [
        (None, False),
        ({}, True),
        (None, True),  # kept raw and flagged (docs/conventions.md, pitfall 5)
    ]
    assert rec.tool_calls[2].arguments_raw == '{"q": "x'
    assert rec.tool_calls[0].capture_hint == OTEL_GENAI
    assert [c.capture_hint for c in rec.tool_calls[1:]] == [None, None]
    assert [u.position for u in unrecorded(rec.tool_calls)] == [0]
    stored = [
        CallRow(0, "old", None, None, True, None, "t", None, "openai"),
        CallRow(1, "older", {}, None, True, None, "t", None, "openai"),
    ]
    assert [u.name for u in unrecorded(rec.tool_calls, stored)] == ["old", "get_weather"]


def test_a_tool_whose_definition_takes_no_parameters_has_empty_arguments() -> None:
    definitions = [
        {
            "type": "function",
            "name": "get_time",
            "parameters": {"type": "object", "properties": {}},
        },
        {"type": "function", "name": "get_weather", "parameters": {"properties": {"city": {}}}},
    ]
    chat = span(
        "chat m",
        {"gen_ai.operation.name": "chat", "gen_ai.tool.definitions": json.dumps(definitions)},
        start=0,
    )
    rec = reconstruct(
        [chat, tool("get_time", None, "c1", start=5), tool("get_weather", None, "c2", start=6)]
    )
    assert [(c.name, c.arguments, c.arguments_recorded) for c in rec.tool_calls] == [
        ("get_time", {}, True),
        ("get_weather", None, False),
    ]


@pytest.mark.parametrize(
    ("convention", "scope", "hint"),
    [
        ("otel_genai", "opentelemetry.instrumentation.openai_v2", OTEL_GENAI),
        (
            "otel_genai_events",
            "opentelemetry.instrumentation.openai.v1",
            f"{OTEL_GENAI}, or {OPENLLMETRY}",
        ),
        ("otel_genai", "my.agent", OTEL_GENAI),
        ("openllmetry", "opentelemetry.instrumentation.langchain", OPENLLMETRY),
        ("openinference", "openinference.instrumentation.langchain", OPENINFERENCE),
        ("openinference", "openinference.instrumentation.openai_agents", OPENAI_AGENTS),
        ("smolagents", "openinference.instrumentation.smolagents", OPENINFERENCE),
        ("logfire_openai_agents", "logfire.openai_agents", OPENAI_AGENTS),
        ("pydantic_ai", "pydantic-ai", PYDANTIC_AI),
        ("strands", "strands.telemetry.tracer", GENERIC),
    ],
)
def test_each_convention_names_its_own_capture_switch(
    convention: str, scope: str, hint: str
) -> None:
    assert capture_hint(convention, scope) == hint


def test_the_write_back_label_says_not_evaluated() -> None:
    details = {"label": "not_evaluated", "reason": "..."}
    assert pass_label(None, 1.0, details) == "not_evaluated"
    assert pass_label(None, 1.0) == "error"
    assert pass_label(1.0, 1.0, {"reasons": []}) == "pass"
