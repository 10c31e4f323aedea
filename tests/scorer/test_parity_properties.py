"""Property-based parity: toolscore's defaults equal Ragas 0.4.3 on random samples, bit for bit."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.scorer import ragas_oracle
from tests.scorer.helpers import instance
from toolscore.scorer import SampleError, parse_sample

pytestmark = ragas_oracle.requires_ragas

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Values chosen to hit the str()/== corner cases: 1 vs 1.0 vs "1" vs True, key order, nesting.
scalars = st.one_of(
    st.sampled_from([1, 1.0, "1", True, "True", None, "None", 0, False, "", "abc", "abd", 2.5]),
    st.integers(-3, 3),
    st.text(alphabet="ab ", max_size=3),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=2), st.dictionaries(st.sampled_from("ab"), inner, max_size=2)
    ),
    max_leaves=4,
)
args = st.dictionaries(st.sampled_from(["x", "y", "z"]), values, max_size=3)
calls = st.fixed_dictionaries({"name": st.sampled_from(["a", "b", "c"]), "args": args})
call_lists = st.lists(calls, max_size=4)


@st.composite
def samples(draw: st.DrawFn) -> dict[str, Any]:
    reference = draw(call_lists)
    how = draw(st.sampled_from(["independent", "copy", "permute", "mutate"]))
    if how == "independent" or not reference:
        predicted = draw(call_lists)
    elif how == "copy":
        predicted = [dict(c) for c in reference]
    elif how == "permute":
        predicted = draw(st.permutations(reference))
    else:
        predicted = [dict(c) for c in reference]
        i = draw(st.integers(0, len(predicted) - 1))
        predicted[i] = draw(calls)
    # Spread the predicted calls over one or two ai messages, with tool results in between.
    cut = draw(st.integers(0, len(predicted)))
    messages: list[dict[str, Any]] = [{"type": "human", "content": "q"}]
    for chunk in (predicted[:cut], predicted[cut:]):
        if chunk:
            messages.append({"type": "ai", "content": "", "tool_calls": chunk})
            messages.append({"type": "tool", "content": "r"})
    messages.append({"type": "ai", "content": "a"})
    return {"user_input": messages, "reference_tool_calls": reference}


METRICS = {
    "strict": instance(),
    "flexible": instance(order="flexible"),
    "levenshtein": instance(args="levenshtein"),
    "jaro_winkler": instance(args="jaro_winkler", order="flexible"),
    "f1": instance(type="tool_call_f1"),
}


def ours(name: str, sample: dict[str, Any]) -> tuple[float | None, float | None]:
    parsed = parse_sample(sample)
    metric = METRICS[name]
    full = metric.score(parsed.predicted_tool_calls, parsed.reference_tool_calls).value
    fast = metric.value(parsed.predicted_tool_calls, parsed.reference_tool_calls)
    return full, fast


@SETTINGS
@given(samples())
def test_accuracy_strict_equals_ragas(sample):
    expected = ragas_oracle.accuracy(sample)
    assert ours("strict", sample) == (expected, expected)


@SETTINGS
@given(samples())
def test_accuracy_flexible_equals_ragas(sample):
    expected = ragas_oracle.accuracy(sample, strict=False)
    assert ours("flexible", sample) == (expected, expected)


@SETTINGS
@given(samples())
def test_levenshtein_comparator_equals_ragas_non_llm_string_similarity(sample):
    expected = ragas_oracle.accuracy(sample, measure="levenshtein")
    assert ours("levenshtein", sample) == (expected, expected)


@SETTINGS
@given(samples())
def test_jaro_winkler_comparator_equals_ragas_non_llm_string_similarity(sample):
    expected = ragas_oracle.accuracy(sample, strict=False, measure="jaro_winkler")
    assert ours("jaro_winkler", sample) == (expected, expected)


@SETTINGS
@given(samples())
def test_f1_equals_ragas(sample):
    expected = ragas_oracle.f1(sample)
    assert ours("f1", sample) == (expected, expected)


@SETTINGS
@given(samples())
def test_scores_are_always_in_unit_interval(sample):
    for name in METRICS:
        full, _ = ours(name, sample)
        assert full is not None and 0.0 <= full <= 1.0


# --- Which samples Ragas refuses to build, and which calls it predicts -----------------------

loose_scalars = st.one_of(st.none(), st.integers(0, 2), st.sampled_from(["x", "ai", "tool"]))
loose_calls = st.one_of(
    calls,
    st.fixed_dictionaries({"name": st.sampled_from(["a", 1, None])}),
    st.fixed_dictionaries({"name": st.just("a"), "args": st.one_of(st.none(), st.lists(scalars))}),
    st.fixed_dictionaries({"args": args}),
)
loose_messages = st.fixed_dictionaries(
    {"content": st.one_of(st.just("hi"), st.just(""), st.just("x"), loose_scalars)},
    optional={
        "type": st.sampled_from(["human", "ai", "tool", "ai", "tool", "ai", "system", 3]),
        "tool_calls": st.one_of(st.none(), st.lists(loose_calls, max_size=2), loose_scalars),
        "metadata": st.one_of(st.none(), st.just({"k": 1}), st.just([1])),
    },
)
loose_samples = st.fixed_dictionaries(
    {"user_input": st.lists(loose_messages, max_size=4)},
    optional={
        "reference_tool_calls": st.one_of(st.none(), st.lists(loose_calls, max_size=2)),
        "reference": st.one_of(st.none(), st.just("r"), st.just(5)),
        "reference_topics": st.one_of(st.none(), st.just(["t"]), st.just([1])),
    },
)


@settings(max_examples=500, deadline=None)
@given(loose_samples)
def test_parse_sample_accepts_exactly_what_ragas_accepts(sample):
    try:
        theirs = ragas_oracle.build(sample)
    except Exception:
        theirs = None
    try:
        parsed = parse_sample(sample)
    except SampleError:
        assert theirs is None, "toolscore refused a sample that Ragas accepts"
        event("refused by both")
        return
    event("accepted by both")
    assert theirs is not None, "toolscore accepted a sample that Ragas refuses"
    ragas_predicted = [
        (tc.name, tc.args)
        for m in theirs.user_input
        if getattr(m, "tool_calls", None)
        for tc in m.tool_calls
    ]
    assert [(tc.name, dict(tc.args)) for tc in parsed.predicted_tool_calls] == ragas_predicted
    assert [m.type for m in parsed.user_input] == [m.type for m in theirs.user_input]


def test_oracle_is_really_ragas_0_4_3():
    assert ragas_oracle.RAGAS_VERSION == "0.4.3"


@pytest.mark.parametrize("measure", ["levenshtein", "jaro_winkler", "jaro", "hamming"])
def test_string_similarity_on_fixed_strings(measure):
    sample = {
        "user_input": [
            {"type": "ai", "content": "", "tool_calls": [{"name": "f", "args": {"q": "kitten"}}]}
        ],
        "reference_tool_calls": [{"name": "f", "args": {"q": "sitting"}}],
    }
    parsed = parse_sample(sample)
    metric = instance(args=measure)
    value = metric.score(parsed.predicted_tool_calls, parsed.reference_tool_calls).value
    assert value == ragas_oracle.accuracy(sample, measure=measure)
    assert value is not None and 0 < value < 1
