"""Predicted and reference calls side by side, as the metric paired them
(collector/ui/alignment.py)."""

from __future__ import annotations

from toolscore.collector.ui.alignment import Call, align, flatten, stored_position
from toolscore.scorer import parse_sample
from toolscore.scorer.accuracy import ToolCallAccuracy


def _evaluate(predicted: list[dict], reference: list[dict]) -> tuple[float, dict]:
    sample = parse_sample(
        {
            "user_input": [
                {"type": "human", "content": "q"},
                {"type": "ai", "content": "", "tool_calls": predicted},
            ],
            "reference_tool_calls": reference,
        }
    )
    return ToolCallAccuracy().evaluate(sample.predicted_tool_calls, sample.reference_tool_calls)


def _score(predicted: list[dict], reference: list[dict]) -> dict:
    return _evaluate(predicted, reference)[1]


def _calls(calls: list[dict]) -> list[Call]:
    return [Call(i + 1, c["name"], c["args"]) for i, c in enumerate(calls)]


def test_a_pair_with_a_wrong_argument_shows_both_values_and_the_points_it_lost() -> None:
    predicted = [{"name": "get_forecast", "args": {"city": "Berlin", "days": 5}}]
    reference = [{"name": "get_forecast", "args": {"city": "Berlin", "days": 3}}]
    rows = align(_calls(predicted), _calls(reference), _score(predicted, reference))
    assert [r.kind for r in rows] == ["pair"]
    (row,) = rows
    assert row.score == 0.5 and row.lost == 0.5
    wrong = [a for a in row.arguments if not a.ok]
    assert [(a.name, a.predicted, a.reference, a.lost) for a in wrong] == [("days", 5, 3, 0.5)]
    assert [a.name for a in row.arguments if a.ok] == ["city"]


def test_missing_and_extra_calls_have_rows_and_lost_points_sum_to_one_minus_score() -> None:
    predicted = [
        {"name": "get_weather", "args": {"city": "Paris"}},
        {"name": "search", "args": {"q": "x"}},
    ]
    reference = [
        {"name": "get_weather", "args": {"city": "Paris"}},
        {"name": "get_time", "args": {"timezone": "Asia/Tokyo"}},
    ]
    details = _score(predicted, reference)
    rows = align(_calls(predicted), _calls(reference), details)
    kinds = sorted(r.kind for r in rows)
    assert kinds == ["extra", "missing", "pair"]
    extra = next(r for r in rows if r.kind == "extra")
    missing = next(r for r in rows if r.kind == "missing")
    assert extra.predicted is not None and extra.predicted.name == "search"
    assert missing.reference is not None and missing.reference.name == "get_time"
    score = _evaluate(predicted, reference)[0]
    assert abs(sum(r.lost for r in rows) - (1 - score)) < 1e-9


def test_a_missing_call_is_placed_after_its_reference_predecessor() -> None:
    predicted = [{"name": "a", "args": {}}, {"name": "c", "args": {}}]
    reference = [{"name": "a", "args": {}}, {"name": "b", "args": {}}, {"name": "c", "args": {}}]
    rows = align(_calls(predicted), _calls(reference), _score(predicted, reference))
    names = [(r.kind, (r.reference or r.predicted).name) for r in rows]  # type: ignore[union-attr]
    assert names.index(("missing", "b")) == 1


def test_groups_in_the_reference_are_read_as_one_list() -> None:
    assert [c["name"] for c in flatten([{"name": "a"}, [{"name": "b"}, {"name": "c"}]])] == [
        "a",
        "b",
        "c",
    ]


def test_positions_counted_after_collapsed_repeats_map_back_to_the_stored_calls() -> None:
    assert stored_position(0, [1]) == 0
    assert stored_position(1, [1]) == 2
    assert stored_position(1, [0, 1]) == 3


def test_details_without_a_pairing_give_no_rows() -> None:
    assert align(_calls([{"name": "a", "args": {}}]), [], {"losses": []}) == []
