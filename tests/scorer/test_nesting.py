"""Deeply nested arguments: refused with a reason that says where, never a RecursionError.

Ragas recurses over arguments and dies somewhere between 500 and 1,000 levels; the scorer draws
the line at ``MAX_ARGUMENT_DEPTH`` levels and scores everything up to it exactly as Ragas does.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.scorer import ragas_oracle
from tests.scorer.ragas_oracle import requires_ragas
from toolscore.scorer import SampleError, ToolCall, default_config, parse_config, parse_sample
from toolscore.scorer.comparators import json_equal, normalize
from toolscore.scorer.f1 import make_hashable
from toolscore.scorer.nesting import MAX_ARGUMENT_DEPTH, NestingError, depth_exceeds
from toolscore.scorer.rows import score_row


def nested(levels: int, leaf: Any = "x") -> Any:
    """``levels`` levels of lists around ``leaf`` (built without recursion)."""
    value = leaf
    for _ in range(levels):
        value = [value]
    return value


def sample(args: dict[str, Any], reference_args: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "user_input": [
            {"type": "human", "content": "q"},
            {"type": "ai", "content": "", "tool_calls": [{"name": "f", "args": args}]},
        ],
        "reference_tool_calls": [{"name": "f", "args": reference_args or {"a": 1}}],
    }


def test_depth_counts_the_args_object_as_level_one() -> None:
    assert not depth_exceeds({"a": nested(MAX_ARGUMENT_DEPTH - 1)})
    assert depth_exceeds({"a": nested(MAX_ARGUMENT_DEPTH)})
    assert not depth_exceeds({"a": 1}) and not depth_exceeds("text")


@pytest.mark.parametrize("levels", [MAX_ARGUMENT_DEPTH, 600, 900, 5_000])
def test_the_reader_refuses_deeper_arguments_naming_the_call(levels: int) -> None:
    with pytest.raises(SampleError) as info:
        parse_sample(sample({"a": nested(levels)}))
    assert str(info.value).startswith("user_input[1].tool_calls[0].args: nested deeper than 100")


def test_a_deep_key_path_is_refused_too() -> None:
    deep: Any = 1
    for _ in range(MAX_ARGUMENT_DEPTH):
        deep = {"k": deep}
    with pytest.raises(SampleError, match=r"reference_tool_calls\[0\]\.args: nested deeper"):
        parse_sample(sample({"a": 1}, {"a": deep}))


@requires_ragas
def test_arguments_at_the_limit_score_as_ragas_scores_them() -> None:
    args = {"a": nested(MAX_ARGUMENT_DEPTH - 1, leaf=1), "b": "same"}
    for reference in (args, {"a": nested(MAX_ARGUMENT_DEPTH - 1, leaf=2), "b": "same"}):
        obj = sample(args, reference)
        parsed = parse_sample(obj)
        scores = {
            name: inst.score(parsed.predicted_tool_calls, parsed.reference_tool_calls).value
            for name, inst in default_config().instances.items()
        }
        assert scores == {
            "tool_call_accuracy": ragas_oracle.accuracy(obj),
            "tool_call_f1": ragas_oracle.f1(obj),
        }
    assert scores["tool_call_accuracy"] == 0.5, "the deep argument was compared, and differs"


@pytest.mark.parametrize("levels", [MAX_ARGUMENT_DEPTH, 900, 50_000])
def test_hand_made_calls_get_an_error_score_not_a_recursion_error(levels: int) -> None:
    predicted = [ToolCall("f", {"a": nested(levels)})]
    reference = (ToolCall("f", {"a": 1}),)
    for instance in default_config().instances.values():
        result = instance.score(predicted, reference)
        assert result.value is None
        assert result.error is not None and result.error.startswith("predicted[0].args: nested")
        assert instance.value(predicted, reference) is None


def test_every_recursive_walk_is_bounded_on_its_own() -> None:
    too_deep = nested(MAX_ARGUMENT_DEPTH + 1)
    with pytest.raises(NestingError):
        make_hashable(too_deep)
    with pytest.raises(NestingError):
        json_equal(too_deep, too_deep)
    with pytest.raises(NestingError):
        normalize(too_deep)
    assert make_hashable(nested(MAX_ARGUMENT_DEPTH)) == make_hashable(nested(MAX_ARGUMENT_DEPTH))


@pytest.mark.parametrize("comparator", ["json", "normalized"])
def test_json_inside_an_argument_string_is_bounded_too(comparator: str) -> None:
    config = parse_config({"metrics": {"m": {"type": "tool_call_accuracy", "args": comparator}}})
    deep_text = json.dumps(nested(900))  # a flat string argument that decodes to 900 levels
    row, ok = score_row(config, sample({"a": deep_text}, {"a": deep_text}), where="line 1")
    if comparator == "json":
        assert not ok and row["m"] is None
        assert row["errors"]["m"] == (
            "argument values: nested deeper than 100 levels of objects/arrays (refused rather "
            "than walked: real arguments nest a few levels)"
        )
    else:  # normalized compares the string itself: equal
        assert ok and row["m"] == 1.0
    way_too_deep = "[" * 100_000 + "]" * 100_000  # json.loads itself gives up: compared as text
    row, ok = score_row(config, sample({"a": way_too_deep}, {"a": way_too_deep}), where="l")
    assert ok and row["m"] == 1.0
