"""Beyond Ragas: order modes, length_mismatch: prefix. Expectations computed by hand."""

from __future__ import annotations

from typing import ClassVar

from tests.scorer.helpers import call, instance, score

SEARCH_PY = call("search", q="python")
FILTER = call("filter", type="recent")


class TestUnordered:
    metric = instance(order="unordered")

    def test_optimal_pairing_gives_partial_credit_where_sorting_gives_none(self):
        # sorted pairing compares b-c and c-d (0 + 0); the optimal one pairs c-c (1 + 0).
        predicted = [call("f", x="c"), call("f", x="d")]
        reference = [call("f", x="b"), call("f", x="c")]
        assert score(instance(order="flexible"), predicted, reference).value == 0.0
        result = score(self.metric, predicted, reference)
        assert result.value == 0.5
        pairs = {(p["expected"], p["predicted"]) for p in result.details["pairs"]}
        assert pairs == {(1, 0), (0, 1)}

    def test_pairs_by_total_argument_score(self):
        reference = [call("search", q="python", limit=10), call("search", q="rust", limit=10)]
        predicted = [call("search", q="rust", limit=5), call("search", q="python", limit=10)]
        # strict: (python,10)~(rust,5) = 0 and (rust,10)~(python,10) = 0.5 → 0.25
        assert score(instance(), predicted, reference).value == 0.25
        # optimal: (python,10)~(python,10) = 1 and (rust,10)~(rust,5) = 0.5 → 0.75
        assert score(self.metric, predicted, reference).value == 0.75

    def test_wrong_tool_name_costs_that_call_only(self):
        predicted = [call("b", y=2), call("c", z=1)]
        reference = [call("a", x=1), call("b", y=2)]
        result = score(self.metric, predicted, reference)
        assert result.value == 0.5  # b paired (1.0), a unmatched (0) → 1/2
        assert result.details["unmatched_expected"] == [0]
        assert result.details["unmatched_predicted"] == [1]
        assert score(instance(), predicted, reference).value == 0.0

    def test_length_mismatch_still_scores_zero_by_default(self):
        result = score(self.metric, [call("a"), call("a")], [call("a")])
        assert result.value == 0.0
        assert "expected 1 calls, got 2" in result.details["reasons"][0]

    def test_with_prefix_missing_calls_cost_twice_as_the_doc_defines(self):
        metric = instance(order="unordered", length_mismatch="prefix")
        # one of two found: (1) / 2 × coverage 1/2 = 0.25
        assert score(metric, [call("b", y=1)], [call("a", x=1), call("b", y=1)]).value == 0.25
        # more predicted than expected: coverage 1, the extra call costs nothing
        assert score(metric, [call("a"), call("a")], [call("a")]).value == 1.0


class TestSubsequence:
    metric = instance(order="subsequence")

    def test_extra_calls_are_allowed_and_reported(self):
        predicted = [call("search", q="pyth"), SEARCH_PY, call("log"), FILTER]
        result = score(self.metric, predicted, [SEARCH_PY, FILTER])
        assert result.value == 1.0  # the better of the two searches is chosen
        assert [(p["expected"], p["predicted"]) for p in result.details["pairs"]] == [
            (0, 1),
            (1, 3),
        ]
        assert result.details["unmatched_predicted"] == [0, 2]
        assert any("allowed by subsequence" in r for r in result.details["reasons"])

    def test_reference_out_of_order_scores_zero(self):
        result = score(self.metric, [FILTER, SEARCH_PY], [SEARCH_PY, FILTER])
        assert result.value == 0.0
        assert "not a subsequence" in result.details["reasons"][0]

    def test_partial_subsequence_with_prefix(self):
        metric = instance(order="subsequence", length_mismatch="prefix")
        # one of two reference calls found in order: 1 / 2, |P| = |R| so no coverage factor
        assert score(metric, [FILTER, SEARCH_PY], [SEARCH_PY, FILTER]).value == 0.5

    def test_wrong_argument_inside_the_subsequence(self):
        predicted = [call("search", q="rust"), call("noise"), FILTER]
        assert score(self.metric, predicted, [SEARCH_PY, FILTER]).value == 0.5

    def test_empty_reference_is_trivially_contained(self):
        assert score(self.metric, [SEARCH_PY], []).value == 1.0
        assert score(self.metric, [], [SEARCH_PY]).value == 0.0


class TestGrouped:
    metric = instance(order="grouped")
    weather = call("get_weather", city="Paris")
    time = call("get_time", tz="Tokyo")
    book = call("book", table=2)
    reference: ClassVar[list] = [[weather, time], book]

    def test_any_order_inside_a_group(self):
        assert score(self.metric, [self.time, self.weather, self.book], self.reference).value == 1.0

    def test_groups_must_come_in_order(self):
        result = score(self.metric, [self.book, self.weather, self.time], self.reference)
        assert result.value == 0.0
        assert result.details["reasons"][0].startswith("group 0: expected [get_time, get_weather]")

    def test_wrong_argument_inside_a_group(self):
        predicted = [call("get_time", tz="Paris"), self.weather, self.book]
        assert score(self.metric, predicted, self.reference).value == 2 / 3

    def test_missing_last_group_with_prefix(self):
        predicted = [self.time, self.weather]
        assert score(self.metric, predicted, self.reference).value == 0.0
        prefix = instance(order="grouped", length_mismatch="prefix")
        assert score(prefix, predicted, self.reference).value == (2 / 3) * (2 / 3)

    def test_flat_reference_means_strict_order(self):
        assert score(self.metric, [FILTER, SEARCH_PY], [SEARCH_PY, FILTER]).value == 0.0
        assert score(self.metric, [SEARCH_PY, FILTER], [SEARCH_PY, FILTER]).value == 1.0

    def test_other_orders_read_groups_as_one_ordered_list(self):
        result = score(instance(), [self.weather, self.time, self.book], self.reference)
        assert result.value == 1.0
        assert "reference groups read as one ordered list" in result.details["reasons"][0]
        assert score(instance(type="tool_call_f1"), [self.book], self.reference).value == 0.5


class TestLengthMismatchPrefix:
    metric = instance(length_mismatch="prefix")

    def test_fewer_predicted_calls_pay_the_coverage_factor(self):
        # (1.0) / 2 × 1/2
        result = score(self.metric, [SEARCH_PY], [SEARCH_PY, FILTER])
        assert result.value == 0.25
        assert result.details["coverage"] == 0.5

    def test_more_predicted_calls_compare_the_prefix_only(self):
        assert (
            score(self.metric, [SEARCH_PY, FILTER, call("extra")], [SEARCH_PY, FILTER]).value == 1.0
        )

    def test_the_gate_still_applies_to_the_compared_prefix(self):
        assert score(self.metric, [FILTER], [SEARCH_PY, FILTER]).value == 0.0

    def test_flexible_prefix_compares_sorted_prefixes(self):
        metric = instance(order="flexible", length_mismatch="prefix")
        assert score(metric, [call("a")], [call("b"), call("a")]).value == 0.25
