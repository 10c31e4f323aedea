"""``order: superset`` and ``order: subset`` (agentevals' trajectory modes, with partial credit).

superset: every reference call must have a same-name partner among the predicted calls (extras
allowed); score = paired argument scores / R. subset: every predicted call must have a same-name
partner in the reference (missing calls allowed); score = paired argument scores / P. Pairing
maximises the number of same-name pairs, then their total argument score.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.scorer.helpers import call, instance, score

A1, A2, A5, A9 = call("a", x=1), call("a", x=2), call("a", x=5), call("a", x=9)
B2, B3, C3, C, D = call("b", y=2), call("b", y=3), call("c", z=3), call("c"), call("d")

# The worked examples of the issue (argument comparator exact).
WORKED = [
    ("superset", [A1, B2], [C, B2, A1], 1.0),
    ("superset", [A1, B2], [B3, A1, C], 0.5),
    ("superset", [A1, B2], [A1], 0.0),
    ("superset", [A1, A2], [A2, A9, A1], 1.0),
    ("subset", [A1, B2, C3], [B2, A5], 0.5),
    ("subset", [A1], [A1, D], 0.0),
    ("subset", [A1], [], 1.0),
]


@pytest.mark.parametrize(("order", "reference", "predicted", "expected"), WORKED)
def test_worked_examples(order: str, reference: Any, predicted: Any, expected: float) -> None:
    assert score(instance(order=order), predicted, reference).value == expected


def test_empty_reference_and_length_mismatch() -> None:
    assert score(instance(order="superset"), [A1, C], []).value == 1.0
    assert score(instance(order="subset"), [A1], []).value == 0.0
    # length_mismatch does not apply: different counts are the point of both orders
    prefix = instance(order="superset", length_mismatch="prefix")
    assert score(prefix, [C, B2, A1], [A1, B2]).value == 1.0


def test_explanations_say_what_was_allowed_and_what_failed_the_gate() -> None:
    extra = score(instance(order="superset"), [B3, A1, C], [A1, B2])
    assert extra.details["reasons"] == [
        "expected b(y=2), got b(y=3)",
        "unexpected call c() (allowed by superset)",
    ]
    missing = score(instance(order="superset"), [A1], [A1, B2])
    assert missing.details["reasons"][0] == "expected calls never made: [b]"
    unexpected = score(instance(order="subset"), [A1, D], [A1])
    assert unexpected.details["reasons"][0] == "calls the reference does not have: [d]"
    partial = score(instance(order="subset"), [B2], [A1, B2])
    assert (
        "expected a(x=1) was not matched by any call (allowed by subset)"
        in (partial.details["reasons"])
    )


NAMES = st.sampled_from("abc")
CALLS = st.lists(st.builds(lambda n, x: call(n, x=x), NAMES, st.integers(0, 2)), max_size=5)


@settings(max_examples=200, deadline=None)
@given(CALLS, CALLS, st.sampled_from(["superset", "subset"]))
def test_the_order_of_calls_never_matters(reference: Any, predicted: Any, order: str) -> None:
    metric = instance(order=order)
    value = score(metric, predicted, reference).value
    for shuffled in itertools.islice(itertools.permutations(predicted), 6):
        assert score(metric, list(shuffled), reference).value == value
    assert score(metric, predicted, list(reversed(reference))).value == value


@settings(max_examples=200, deadline=None)
@given(CALLS, CALLS, st.integers(1, 3))
def test_calls_of_other_tools_are_ignored_on_the_allowed_side(
    reference: Any, predicted: Any, extras: int
) -> None:
    other = [call("z", w=i) for i in range(extras)]
    superset = instance(order="superset")
    assert (
        score(superset, predicted + other, reference).value
        == score(superset, predicted, reference).value
    )
    subset = instance(order="subset")
    assert (
        score(subset, predicted, reference + other).value
        == score(subset, predicted, reference).value
    )


@settings(max_examples=200, deadline=None)
@given(CALLS, CALLS)
def test_with_the_same_tool_names_both_equal_unordered(reference: Any, predicted: Any) -> None:
    if sorted(c[0] for c in reference) != sorted(c[0] for c in predicted):
        return
    unordered = score(instance(order="unordered"), predicted, reference).value
    assert score(instance(order="superset"), predicted, reference).value == unordered
    assert score(instance(order="subset"), predicted, reference).value == unordered
