"""Loss labels (``details.losses``): every lost point is labelled, in every order mode.

Worked examples per mode, then properties that hold for every input: the labels' points add
up to what the score lost, every call without a partner has exactly one label, and every
argument that scored below 1 in a pair has one.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.scorer.helpers import instance
from toolscore.scorer import ToolCall
from toolscore.scorer.losses import KINDS


def c(name: str, **args: Any) -> ToolCall:
    return ToolCall(name, args)


def labels(order: str, predicted: list[Any], reference: list[Any], **options: Any) -> Any:
    metric = instance(order=order, **options)
    result = metric.score(predicted, tuple(reference))
    assert result.error is None
    return result.value, [
        {k: (round(v, 4) if k == "points" else v) for k, v in label.items()}
        for label in result.details["losses"]
    ]


def L(kind: str, tool: str | None, points: float, **where: Any) -> dict[str, Any]:
    label: dict[str, Any] = {"kind": kind, "tool": tool}
    label.update(where)
    label["points"] = points
    return label


def arg(tool: str, argument: str, r: int, p: int, points: float) -> dict[str, Any]:
    return {
        "kind": "wrong_argument",
        "tool": tool,
        "argument": argument,
        "expected": r,
        "predicted": p,
        "points": points,
    }


EXAMPLES = [
    # strict: one wrong argument of two calls costs half the score
    ("strict", [c("a", x=1), c("b", y=3)], [c("a", x=1), c("b", y=2)], {}, 0.5,
     [arg("b", "y", 1, 1, 0.5)]),
    # strict: the same calls in the wrong order lose everything to `order`
    ("strict", [c("b"), c("a")], [c("a"), c("b")], {}, 0.0,
     [L("order", "a", 0.25, expected=0), L("order", "b", 0.25, expected=1),
      L("order", "b", 0.25, predicted=0), L("order", "a", 0.25, predicted=1)]),
    # strict: a call too few (length_mismatch: zero) is a missing call worth the whole score
    ("strict", [c("a")], [c("a"), c("b")], {}, 0.0, [L("missing", "b", 1.0, expected=1)]),
    # strict, prefix: two of three calls never compared share what the coverage cost
    ("strict", [c("a")], [c("a"), c("b"), c("c")], {"length_mismatch": "prefix"}, 1 / 9,
     [L("missing", "b", 0.4444, expected=1), L("missing", "c", 0.4444, expected=2)]),
    # flexible: a wrong tool fails the gate; sorted pairs a-b and b-c differ, so every call is
    # missing or extra
    ("flexible", [c("b"), c("c")], [c("a", x=1), c("b")], {}, 0.0,
     [L("missing", "a", 0.25, expected=0), L("missing", "b", 0.25, expected=1),
      L("extra", "b", 0.25, predicted=0), L("extra", "c", 0.25, predicted=1)]),
    # unordered: the optimal pairing leaves one wrong argument
    ("unordered", [c("f", x="c"), c("f", x="d")], [c("f", x="b"), c("f", x="c")], {}, 0.5,
     [arg("f", "x", 0, 1, 0.5)]),
    # unordered: a call with no partner of its name; its would-be partner is extra
    ("unordered", [c("a"), c("c")], [c("a"), c("b")], {}, 0.5,
     [L("missing", "b", 0.25, expected=1), L("extra", "c", 0.25, predicted=1)]),
    # subsequence: an extra call in between is allowed (labelled, no points)
    ("subsequence", [c("a"), c("c"), c("b")], [c("a"), c("b")], {}, 1.0,
     [L("extra", "c", 0.0, predicted=1)]),
    # subsequence: the reference calls came in the wrong order
    ("subsequence", [c("b"), c("a")], [c("a"), c("b")], {}, 0.0,
     [L("order", "b", 1.0, expected=1), L("extra", "b", 0.0, predicted=0)]),
    # grouped: the first group's segment holds a call of the second group
    ("grouped", [c("b"), c("c"), c("a")], [[c("a"), c("b")], c("c")], {}, 0.0,
     [L("group", "a", 0.25, expected=0), L("group", "c", 0.25, expected=2),
      L("group", "c", 0.25, predicted=1), L("group", "a", 0.25, predicted=2)]),
    # superset: an extra call is allowed; a wrong argument costs its share
    ("superset", [c("b", y=3), c("a", x=1), c("c")], [c("a", x=1), c("b", y=2)], {}, 0.5,
     [arg("b", "y", 1, 0, 0.5), L("extra", "c", 0.0, predicted=2)]),
    # superset: a reference call never made fails the gate
    ("superset", [c("a", x=1)], [c("a", x=1), c("b", y=2)], {}, 0.0,
     [L("missing", "b", 1.0, expected=1)]),
    # subset: a missing call is allowed; shares are of the predicted calls
    ("subset", [c("b", y=2), c("a", x=5)], [c("a", x=1), c("b", y=2), c("c", z=3)], {}, 0.5,
     [arg("a", "x", 0, 1, 0.5), L("missing", "c", 0.0, expected=2)]),
    # subset: a call the reference does not have fails the gate
    ("subset", [c("a", x=1), c("d")], [c("a", x=1)], {}, 0.0, [L("extra", "d", 1.0, predicted=1)]),
    # any mode: arguments given where none were expected share the call's loss
    ("strict", [c("a", q=1, r=2)], [c("a")], {}, 0.0,
     [arg("a", "q", 0, 0, 0.5), arg("a", "r", 0, 0, 0.5)]),
    # a fuzzy comparator's partial argument score loses only what it lacks
    ("strict", [c("a", x="abcd", y=1)], [c("a", x="abce", y=1)], {"args": "levenshtein"}, 0.875,
     [arg("a", "x", 0, 0, 0.125)]),
    # no calls made where some were expected
    ("strict", [], [c("a"), c("b")], {}, 0.0,
     [L("missing", "a", 0.5, expected=0), L("missing", "b", 0.5, expected=1)]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("order", "predicted", "reference", "options", "score", "expected"), EXAMPLES
)
def test_worked_examples(order, predicted, reference, options, score, expected):
    got_score, got = labels(order, predicted, reference, **options)
    assert math.isclose(got_score, score)
    assert got == expected


def test_f1_labels_missing_and_extra_calls_sharing_what_f1_lost():
    metric = instance(type="tool_call_f1")
    result = metric.score([c("a", x=2), c("b")], (c("a", x=1), c("b"), c("c")))
    # tp 1 (b), fp 1 (a x=2), fn 2 (a x=1, c): F1 = 2/5
    assert result.value == 0.4
    assert result.details["losses"] == [
        {"kind": "missing", "tool": "a", "points": pytest.approx(0.2)},
        {"kind": "missing", "tool": "c", "points": pytest.approx(0.2)},
        {"kind": "extra", "tool": "a", "points": pytest.approx(0.2)},
    ]


def test_collapsed_repeats_lose_nothing():
    metric = instance(duplicates="collapse")
    result = metric.score([c("a", x=1), c("a", x=1), c("b")], (c("a", x=1), c("b")))
    assert result.value == 1.0
    assert result.details["losses"] == []


names = st.sampled_from(["a", "b", "c"])
values = st.sampled_from([1, 1.0, "1", "x", "xy", None])
calls = st.builds(ToolCall, names, st.dictionaries(st.sampled_from("pqr"), values, max_size=3))
call_lists = st.lists(calls, max_size=5)
groups = st.lists(st.one_of(calls, st.lists(calls, min_size=1, max_size=3)), max_size=4)
ORDERS = ["strict", "flexible", "unordered", "subsequence", "grouped", "superset", "subset"]
METRICS = [
    instance(order=order, length_mismatch=length, args=args, duplicates=duplicates)
    for order in ORDERS
    for length, args, duplicates in (
        ("zero", "exact", "keep"),
        ("prefix", "levenshtein", "keep"),
        ("zero", "normalized", "collapse"),
    )
] + [instance(type="tool_call_f1")]


def _flat(reference: list[Any]) -> list[ToolCall]:
    return [x for item in reference for x in (item if isinstance(item, list) else [item])]


@settings(max_examples=300, deadline=None)
@given(call_lists, groups)
def test_labels_account_exactly_for_the_points_lost(predicted, reference):
    for metric in METRICS:
        result = metric.score(predicted, tuple(reference))
        losses = result.details["losses"]
        assert all(label["kind"] in KINDS and label["points"] >= 0.0 for label in losses)
        if metric.metric.type == "tool_call_f1" and not predicted and not reference:
            assert losses == []  # F1 of nothing against nothing is 0 by definition
            continue
        lost = sum(label["points"] for label in losses)
        assert math.isclose(lost, 1.0 - result.value, abs_tol=1e-9), (metric, losses)


@settings(max_examples=300, deadline=None)
@given(call_lists, groups)
def test_every_unpaired_call_and_every_lost_argument_has_a_label(predicted, reference):
    for metric in METRICS[:-1]:
        details = metric.score(predicted, tuple(reference)).details
        losses = details["losses"]
        sides = [(k, label[k]) for label in losses for k in ("expected", "predicted")
                 if k in label and label["kind"] != "wrong_argument"]  # fmt: skip
        unpaired = [("expected", r) for r in details["unmatched_expected"]]
        unpaired += [("predicted", p) for p in details["unmatched_predicted"]]
        assert sorted(sides) == sorted(unpaired)
        wrong = [(label["expected"], label["argument"]) for label in losses
                 if label["kind"] == "wrong_argument"]  # fmt: skip
        lost_args = [(pair["expected"], k) for pair in details["pairs"]
                     for k, s in pair["args"].items() if s < 1.0]  # fmt: skip
        # and the pairs that expected no arguments and got some
        lost_args += [(p["expected"], a) for p, a in _given_unexpected(details, predicted)]
        assert sorted(wrong) == sorted(lost_args)
        ref = _flat(reference)
        for label in losses:  # each label names the tool of the call it points at
            if "expected" in label:
                assert label["tool"] == ref[label["expected"]].name


def _given_unexpected(details: dict[str, Any], predicted: list[ToolCall]) -> list[Any]:
    """Pairs whose reference call has no arguments while the prediction has some."""
    out = []
    kept = predicted
    if "repeats_collapsed" in details:
        dropped = set(details["repeats_collapsed"])
        kept = [x for i, x in enumerate(predicted) if i not in dropped]
    for pair in details["pairs"]:
        if not pair["args"] and pair["score"] < 1.0:
            out += [(pair, a) for a in kept[pair["predicted"]].args]
    return out
