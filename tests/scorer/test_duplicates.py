"""``duplicates: collapse`` (ToolCallAccuracy): a retried call counts once; ``keep`` is Ragas."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.scorer.helpers import call, instance, score
from toolscore.scorer import ConfigError, parse_config

A, B = call("a", x=1), call("b")


def test_a_retry_counts_once_and_the_explanation_says_so() -> None:
    predicted, reference = [A, A, B], [A, B]
    assert score(instance(), predicted, reference).value == 0.0  # Ragas: 3 calls, 2 expected
    result = score(instance(duplicates="collapse"), predicted, reference)
    assert result.value == 1.0
    assert result.details["repeats_collapsed"] == [1]
    assert result.details["reasons"][0] == (
        "1 repeated calls counted once (duplicates: collapse): a(x=1)"
    )


def test_only_neighbours_collapse() -> None:
    # a second call of the same tool after another one is a real second call
    result = score(instance(duplicates="collapse"), [A, B, A], [A, B])
    assert result.value == 0.0 and "repeats_collapsed" not in result.details
    # different arguments are not a repeat
    assert score(instance(duplicates="collapse"), [A, call("a", x=2)], [A]).value == 0.0


def test_the_default_keeps_stored_configurations_unchanged() -> None:
    keep = parse_config({"metrics": {"m": {"type": "tool_call_accuracy"}}}).instances["m"]
    assert "duplicates" not in keep.options_dict()  # same metric_config, same hash as before
    collapse = parse_config(
        {"metrics": {"m": {"type": "tool_call_accuracy", "duplicates": "collapse"}}}
    ).instances["m"]
    assert collapse.options_dict()["duplicates"] == "collapse"
    again = parse_config({"metrics": {"m": collapse.options_dict()}}).instances["m"]
    assert again.options_dict() == collapse.options_dict()
    with pytest.raises(ConfigError, match=r"metrics\.m\.duplicates: unknown duplicates 'merge'"):
        parse_config({"metrics": {"m": {"type": "tool_call_accuracy", "duplicates": "merge"}}})


CALLS = st.lists(
    st.builds(lambda n, x: call(n, x=x), st.sampled_from("ab"), st.integers(0, 1)), max_size=6
)


@settings(max_examples=200, deadline=None)
@given(CALLS, CALLS, st.sampled_from(["strict", "flexible", "unordered", "superset"]))
def test_collapse_scores_the_calls_with_their_repeats_removed(
    predicted: Any, reference: Any, order: str
) -> None:
    deduped = [c for i, c in enumerate(predicted) if i == 0 or predicted[i - 1] != c]
    collapsed = score(instance(order=order, duplicates="collapse"), predicted, reference).value
    assert collapsed == score(instance(order=order), deduped, reference).value
