"""The worked examples of docs/scoring.md (each a real Ragas 0.4.3 result)."""

from __future__ import annotations

import pytest

from tests.scorer import ragas_oracle
from tests.scorer.helpers import call, instance, sample_dict, score

STRICT = instance()
FLEXIBLE = instance(order="flexible")
F1 = instance(type="tool_call_f1")

SEARCH = call("search", q="python")
FILTER = call("filter", type="recent")

# (predicted, reference, accuracy strict, accuracy flexible, F1)
EXAMPLES = [
    ([SEARCH, FILTER], [SEARCH, FILTER], 1.0, 1.0, 1.0),
    ([FILTER, SEARCH], [SEARCH, FILTER], 0.0, 1.0, 1.0),
    (
        [call("search", q="python", limit=5), FILTER],
        [call("search", q="python", limit=10), FILTER],
        0.75,
        0.75,
        0.5,
    ),
    ([SEARCH, FILTER], [SEARCH], 0.0, 0.0, 0.6667),
    ([call("filter", to="1")], [call("filter", to=1)], 1.0, 1.0, 0.0),
    ([call("get_stock", date=1)], [call("get_stock", date=1.0)], 0.0, 0.0, 1.0),
    ([call("f", x={"a": 1, "b": 2})], [call("f", x={"b": 2, "a": 1})], 0.0, 0.0, 1.0),
    ([call("f", x="c"), call("f", x="d")], [call("f", x="b"), call("f", x="c")], 0.0, 0.0, 0.5),
    ([call("search", query="python")], [call("search")], 0.0, 0.0, 0.0),
    ([], [], 1.0, 1.0, 0.0),
]


@pytest.mark.parametrize(("predicted", "reference", "strict", "flexible", "f1"), EXAMPLES)
def test_worked_example(predicted, reference, strict, flexible, f1):
    assert score(STRICT, predicted, reference).value == strict
    assert score(FLEXIBLE, predicted, reference).value == flexible
    assert score(F1, predicted, reference).value == f1


@ragas_oracle.requires_ragas
@pytest.mark.parametrize(("predicted", "reference", "strict", "flexible", "f1"), EXAMPLES)
def test_worked_example_is_what_ragas_computes(predicted, reference, strict, flexible, f1):
    sample = sample_dict(predicted, reference)
    assert ragas_oracle.accuracy(sample) == strict
    assert ragas_oracle.accuracy(sample, strict=False) == flexible
    assert ragas_oracle.f1(sample) == f1


def test_unordered_gives_the_partial_credit_the_doc_promises():
    unordered = instance(order="unordered")
    predicted = [call("f", x="c"), call("f", x="d")]
    reference = [call("f", x="b"), call("f", x="c")]
    assert score(unordered, predicted, reference).value == 0.5


def test_null_reference_is_a_per_sample_error_for_both_metrics():
    for metric in (STRICT, F1):
        result = score(metric, [SEARCH], None)
        assert result.value is None
        assert result.error is not None and "reference_tool_calls" in result.error
