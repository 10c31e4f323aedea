"""Argument comparators, per metric, per tool and per argument. Hand-computed expectations."""

from __future__ import annotations

import pytest

from tests.scorer.helpers import call, instance, score


def one(comparator, predicted, expected):
    """The score of a one-argument call under ``comparator``."""
    metric = instance(args=comparator)
    return score(metric, [call("f", v=predicted)], [call("f", v=expected)]).value


@pytest.mark.parametrize(
    ("predicted", "expected", "result"),
    [
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}, 1.0),  # key order ignored
        (1, 1.0, 1.0),
        ("1", 1, 0.0),
        (True, 1, 0.0),
        ('{"a": 1}', {"a": 1.0}, 1.0),  # a JSON document in a string is decoded
        ([1, [2, {"x": None}]], [1, [2, {"x": None}]], 1.0),
        ([1, 2], [2, 1], 0.0),
    ],
)
def test_json(predicted, expected, result):
    assert one("json", predicted, expected) == result


@pytest.mark.parametrize(
    ("predicted", "expected", "result"),
    [
        ("  New   York ", "new york", 1.0),
        ("5", 5, 1.0),
        ("5.0", 5, 1.0),
        ("abc", "abd", 0.0),
        (["A  b"], ["a b"], 1.0),
        (True, "TRUE", 1.0),
    ],
)
def test_normalized(predicted, expected, result):
    assert one("normalized", predicted, expected) == result


@pytest.mark.parametrize(
    ("options", "predicted", "expected", "result"),
    [
        ({"abs_tol": 0.5}, 20.4, 20, 1.0),
        ({"abs_tol": 0.5}, 20.6, 20, 0.0),
        ({"abs_tol": 0.5}, "20.2", 20, 1.0),
        ({"abs_tol": 0.5}, "hot", 20, 0.0),
        ({"rel_tol": 0.1}, 105, 100, 1.0),
        ({"rel_tol": 0.01}, 105, 100, 0.0),
        (None, "3", 3.0, 1.0),
        (None, True, 1, 0.0),  # booleans are not numbers
    ],
)
def test_numeric(options, predicted, expected, result):
    assert one({"numeric": options}, predicted, expected) == result


def test_levenshtein_and_jaro_winkler_similarities():
    assert one("levenshtein", "kitten", "sitting") == 1 - 3 / 7
    assert one("jaro_winkler", "MARHTA", "MARTHA") == pytest.approx(0.9611111, abs=1e-6)
    assert one("levenshtein", 1, 1.0) == 1 - 2 / 3  # str(): "1" vs "1.0"


@pytest.mark.parametrize(
    ("predicted", "pattern", "result"),
    [("ord-123", r"ord-\d+", 1.0), ("xord-1", r"ord-\d+", 0.0), ("ORD-1", r"ord-\d", 0.0)],
)
def test_regex_must_match_the_whole_value(predicted, pattern, result):
    assert one("regex", predicted, pattern) == result


def test_regex_ignore_case_and_invalid_pattern():
    assert one({"regex": {"ignore_case": True}}, "ORD-1", r"ord-\d") == 1.0
    assert one("regex", "(", "(") == 0.0  # an invalid pattern matches nothing


def test_ignore_scores_one_even_when_missing():
    metric = instance(tools={"search": {"args": {"request_id": "ignore"}}})
    predicted = [call("search", q="x")]
    assert score(metric, predicted, [call("search", q="x", request_id="r-1")]).value == 1.0
    assert score(instance(), predicted, [call("search", q="x", request_id="r-1")]).value == 0.5


def test_per_tool_and_per_argument_overrides():
    metric = instance(
        args="exact",
        tools={"search": {"args": {"query": "normalized"}, "default": "ignore"}},
    )
    predicted = [call("search", query="Python ", page=3), call("filter", type="Recent")]
    reference = [call("search", query="python", page=1), call("filter", type="recent")]
    result = score(metric, predicted, reference)
    # search: query normalized 1, page via the tool default (ignore) 1 → 1; filter exact → 0
    assert result.value == 0.5
    assert result.details["pairs"][0]["args"] == {"query": 1.0, "page": 1.0}
    assert result.details["pairs"][1]["args"] == {"type": 0.0}


def test_metric_default_comparator_applies_to_tools_without_overrides():
    metric = instance(args={"numeric": {"abs_tol": 1}}, tools={"other": {"args": {"x": "exact"}}})
    assert score(metric, [call("t", x=1.5)], [call("t", x=1)]).value == 1.0
    assert score(metric, [call("other", x=1.5)], [call("other", x=1)]).value == 0.0
