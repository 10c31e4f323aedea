"""Optional reference calls and any_of arguments (scorer/readings.py), in every order mode and
ToolCallF1: the score is the best over the reference's readings, in [0, 1], its lost points
sum to 1 - score and point at the calls as written; worked examples as in docs/scoring.md."""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.scorer.helpers import instance
from tests.scorer.test_losses import KINDS, METRICS, call_lists, names, values
from toolscore.scorer import ToolCall, parse_reference
from toolscore.scorer.model import SampleError
from toolscore.scorer.readings import OptionalCall

any_of = st.lists(values, min_size=1, max_size=3).map(lambda vs: {"any_of": vs})
ref_args = st.dictionaries(st.sampled_from("pqr"), st.one_of(values, any_of), max_size=3)
ref_calls = st.one_of(
    st.builds(ToolCall, names, ref_args), st.builds(OptionalCall, names, ref_args)
)
references = st.lists(
    st.one_of(ref_calls, st.lists(ref_calls, min_size=1, max_size=2).map(tuple)), max_size=4
)


def _plain_readings(reference: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """Every reading, spelled out independently of scorer/readings.py."""
    flat = [c for item in reference for c in (item if isinstance(item, tuple) else (item,))]
    options: list[list[ToolCall | None]] = []
    for c in flat:
        keys = list(c.args)
        alternatives = [v["any_of"] if isinstance(v, dict) else [v] for v in c.args.values()]
        variants: list[ToolCall | None] = [
            ToolCall(c.name, dict(zip(keys, combo, strict=True)))
            for combo in itertools.product(*alternatives)
        ]
        options.append([*variants, None] if isinstance(c, OptionalCall) else variants)
    out = []
    for chosen in itertools.product(*options):
        it = iter(chosen)
        items: list[Any] = []
        for item in reference:
            group = [x for x in (next(it) for _ in (item if isinstance(item, tuple) else (item,)))
                     if x is not None]  # fmt: skip
            if group:
                items.append(tuple(group) if isinstance(item, tuple) else group[0])
        out.append(tuple(items))
    return out


@settings(max_examples=60, deadline=None)
@given(call_lists, references)
def test_the_score_is_the_best_reading_and_its_losses_add_up(predicted, reference):
    reference = tuple(reference)
    flat = [c for item in reference for c in (item if isinstance(item, tuple) else (item,))]
    for metric in METRICS:
        result = metric.score(predicted, reference)
        assert result.error is None
        assert 0.0 <= result.value <= 1.0
        best = max(metric.score(predicted, r).value for r in _plain_readings(reference))
        assert result.value == best, metric
        losses = result.details["losses"]
        assert all(label["kind"] in KINDS and label["points"] >= 0.0 for label in losses)
        d = result.details
        nothing = (
            d.get("true_positives", 1) + d.get("false_positives", 0) + d.get("false_negatives", 0)
        )
        if metric.metric.type == "tool_call_f1" and nothing == 0:
            continue  # F1 of nothing against nothing: 0 without a label
        lost = sum(label["points"] for label in losses)
        assert math.isclose(lost, 1.0 - result.value, abs_tol=1e-9), (metric, losses)
        for label in losses:  # positions as written
            if "expected" in label:
                assert label["tool"] == flat[label["expected"]].name
        skipped = result.details.get("reading", {}).get("optional_skipped", [])
        assert all(isinstance(flat[i], OptionalCall) for i in skipped)


@settings(max_examples=60, deadline=None)
@given(call_lists, references)
def test_making_a_call_optional_never_lowers_the_score(predicted, reference):
    required = tuple(
        tuple(ToolCall(c.name, c.args) for c in item)
        if isinstance(item, tuple)
        else ToolCall(item.name, item.args)
        for item in reference
    )
    for metric in METRICS:
        assert metric.score(predicted, tuple(reference)).value >= (
            metric.score(predicted, required).value
        )


def _c(name: str, **args: Any) -> ToolCall:
    return ToolCall(name, args)


def _o(name: str, **args: Any) -> OptionalCall:
    return OptionalCall(name, args)


SEARCH, LOOKUP, BOOK = _c("search", q="lyon"), _o("lookup", id=7), _c("book", n=2)
# (order, predicted, reference, accuracy) -- docs/scoring.md, "Optional calls and alternatives"
WORKED = [
    ("strict", [SEARCH, _c("book", n=2)], (SEARCH, LOOKUP, BOOK), 1.0),
    ("strict", [SEARCH, _c("lookup", id=7), _c("book", n=2)], (SEARCH, LOOKUP, BOOK), 1.0),
    ("strict", [SEARCH, _c("lookup", id=8), _c("book", n=2)], (SEARCH, LOOKUP, BOOK), 2 / 3),
    ("strict", [_c("lookup", id=7), SEARCH, _c("book", n=2)], (SEARCH, LOOKUP, BOOK), 0.0),
    ("flexible", [_c("lookup", id=7), SEARCH, _c("book", n=2)], (SEARCH, LOOKUP, BOOK), 1.0),
    ("unordered", [_c("book", n=3), SEARCH], (SEARCH, LOOKUP, BOOK), 0.5),
    ("subsequence", [SEARCH, _c("x"), _c("book", n=2)], (SEARCH, LOOKUP, BOOK), 1.0),
    ("grouped", [_c("book", n=2), SEARCH], ((SEARCH, LOOKUP, BOOK),), 1.0),
    ("superset", [_c("book", n=2), SEARCH, _c("x")], (SEARCH, LOOKUP, BOOK), 1.0),
    ("subset", [SEARCH], (SEARCH, LOOKUP, BOOK), 1.0),
    ("strict", [_c("search", q="Lyon")], (_c("search", q={"any_of": ["lyon", "Lyon"]}),), 1.0),
    ("strict", [_c("search", q="paris")], (_c("search", q={"any_of": ["lyon", "Lyon"]}),), 0.0),
]


@pytest.mark.parametrize(("order", "predicted", "reference", "score"), WORKED)
def test_worked_examples(order: str, predicted: Any, reference: Any, score: float) -> None:
    result = instance(order=order).score(predicted, reference)
    assert result.value == pytest.approx(score)


def test_f1_with_an_optional_call_and_alternatives() -> None:
    f1 = instance(type="tool_call_f1")
    reference = (SEARCH, LOOKUP, _c("book", n={"any_of": [2, "2"]}))
    assert f1.score([SEARCH, _c("book", n="2")], reference).value == 1.0
    made = f1.score([SEARCH, _c("lookup", id=7), _c("book", n=2)], reference)
    assert made.value == 1.0 and made.details["reading"]["optional_skipped"] == []
    assert f1.score([SEARCH], reference).value == pytest.approx(0.6667)


def test_the_reference_reads_optional_and_any_of() -> None:
    ref = parse_reference(
        [
            {"name": "search", "args": {"q": {"any_of": ["lyon", "Lyon"]}}},
            {"name": "lookup", "args": {"id": 7}, "optional": True},
            {"name": "book", "args": {}, "optional": False},
        ]
    )
    assert [type(c).__name__ for c in ref] == ["ToolCall", "OptionalCall", "ToolCall"]
    with pytest.raises(SampleError, match=r"\[0\]\.optional: must be true or false"):
        parse_reference([{"name": "a", "args": {}, "optional": "yes"}])
    with pytest.raises(SampleError, match=r"\[0\]\.args\.x: any_of must be the only key"):
        parse_reference([{"name": "a", "args": {"x": {"any_of": []}}}])
    many = [{"name": "a", "args": {}, "optional": True}] * 11
    with pytest.raises(SampleError, match="2048 readings"):
        parse_reference(many)


def _compared(value: Any, spec: Any) -> dict[str, Any]:
    return {"compare": spec, "value": value}


inline = st.tuples(values, st.sampled_from(["exact", "json", "normalized", "levenshtein"])).map(
    lambda vs: _compared(*vs)
)
inline_args = st.dictionaries(st.sampled_from("pqr"), st.one_of(values, inline, any_of), max_size=3)
inline_references = st.lists(
    st.one_of(st.builds(ToolCall, names, inline_args), st.builds(OptionalCall, names, inline_args)),
    max_size=4,
)


@settings(max_examples=60, deadline=None)
@given(call_lists, inline_references)
def test_comparators_named_in_the_reference_keep_the_invariants(predicted, reference):
    for metric in METRICS:
        result = metric.score(predicted, tuple(reference))
        assert result.error is None and 0.0 <= result.value <= 1.0
        d = result.details
        if (
            metric.metric.type == "tool_call_f1"
            and d["true_positives"] + d["false_positives"] + d["false_negatives"] == 0
        ):
            continue
        lost = sum(label["points"] for label in d["losses"])
        assert math.isclose(lost, 1.0 - result.value, abs_tol=1e-9), (metric, d["losses"])


@settings(max_examples=100, deadline=None)
@given(call_lists, call_lists)
def test_naming_the_configured_comparator_changes_nothing(predicted, reference):
    named = [ToolCall(c.name, {k: _compared(v, "exact") for k, v in c.args.items()})
             for c in reference]  # fmt: skip
    for metric in METRICS:
        if metric.metric.type == "tool_call_accuracy" and metric.options_dict()["args"] != "exact":
            continue
        assert metric.score(predicted, tuple(named)).value == (
            metric.score(predicted, tuple(reference)).value
        ), metric


def test_a_comparator_named_for_one_argument() -> None:
    reference = parse_reference(
        [{"name": "set", "args": {"t": {"compare": {"numeric": {"abs_tol": 0.5}}, "value": 20}}}]
    )
    accuracy, f1 = instance(), instance(type="tool_call_f1")
    assert accuracy.score([_c("set", t=20.3)], reference).value == 1.0
    assert accuracy.score([_c("set", t=21)], reference).value == 0.0
    assert f1.score([_c("set", t=20.3)], reference).value == 0.0  # F1: equality of the value
    assert f1.score([_c("set", t=20)], reference).value == 1.0
    with pytest.raises(SampleError, match=r"\.args\.t\.compare: unknown comparator 'fuzzy'"):
        parse_reference([{"name": "set", "args": {"t": {"compare": "fuzzy", "value": 1}}}])
