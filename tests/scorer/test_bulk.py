"""The bulk fast path (``scorer.bulk``) gives exactly the general path's rows, byte for byte."""

from __future__ import annotations

import json
from typing import Any

import orjson
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from toolscore.scorer import default_config, parse_config
from toolscore.scorer.bulk import DEFAULT_PLAN, bulk_plan, fast_row
from toolscore.scorer.rows import score_row

SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

NAN = float("nan")  # json.loads gives this one object for every NaN, as here
scalars = st.one_of(
    st.sampled_from([1, 1.0, "1", True, "True", None, 0, False, "", "abc", "x" * 90, 2.5]),
    # equal but printed differently, printed alike by orjson (null), beyond 64 bits
    st.sampled_from([0.0, -0.0, NAN, float("inf"), float("-inf"), 2**64, -(2**70), 1e-7]),
    st.sampled_from(["null", "\ud800", "nan"]),  # a lone surrogate (json reads them)
    st.floats(),  # distinct NaN objects among them
    st.integers(-3, 3),
    st.text(alphabet="ab '\"\\é", max_size=3),
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
# Mostly valid calls, sometimes not (the fast path must then step aside).
odd_calls = st.one_of(
    calls,
    st.just({"name": "a"}),
    st.just({"name": 1, "args": {}}),
    st.just({"name": "a", "args": []}),
    st.just({"name": "a", "args": {}, "id": "call_1"}),  # extra keys: Ragas ignores them
    st.just({"name": "a", "id": "call_1"}),  # two keys, no args
    st.just({"args": {}, "id": "call_1"}),  # two keys, no name
    st.just([{"name": "a", "args": {}}]),  # a reference group
    st.just("a"),
)
call_lists = st.lists(calls, max_size=4)
odd_call_lists = st.lists(st.one_of(calls, odd_calls), max_size=4)
messages = st.one_of(
    st.fixed_dictionaries({"type": st.just("human"), "content": st.just("q")}),
    st.fixed_dictionaries({"type": st.just("tool"), "content": st.just("r")}),
    st.fixed_dictionaries({"type": st.just("ai"), "content": st.just("")}),
    st.fixed_dictionaries(
        {"type": st.just("ai"), "content": st.just(""), "tool_calls": odd_call_lists}
    ),
    st.just({"type": "ai", "content": None}),
    st.just({"type": "ai", "content": "", "tool_calls": []}),
    st.just({"type": "ai", "content": "", "tool_calls": {}}),
    st.just({"type": "human", "content": "q", "metadata": {"k": 1}}),
    st.just({"type": "human", "content": "q", "metadata": 3}),
    st.just({"type": "system", "content": "q"}),
    st.just({"content": "q", "tool_calls": []}),
    st.just({"type": "human"}),
    st.just({"content": "q"}),
    st.just({"type": "ai", "content": "", "id": "m1"}),
)


def _retype(value: Any) -> Any:
    if type(value) is bool:
        return int(value)
    if type(value) is int:
        return float(value) if abs(value) < 2**53 else value
    if type(value) is float and value.is_integer():
        return int(value)
    return value


def encoded(row: Any) -> bytes:
    """What ``toolscore score`` writes for a row (orjson, or json where orjson cannot)."""
    try:
        return orjson.dumps(row)
    except TypeError:
        return json.dumps(row, ensure_ascii=False).encode("utf-8", "surrogatepass")


@st.composite
def samples(draw: st.DrawFn) -> Any:
    odd = draw(st.integers(0, 3)) == 0  # a quarter of the samples stress the fallbacks
    if odd:
        reference = draw(st.one_of(odd_call_lists, st.none(), st.just("x")))
    else:
        reference = draw(call_lists)
    kinds = ["independent", "copy", "retype", "permute", "mutate"] + (["messages"] if odd else [])
    how = draw(st.sampled_from(kinds))
    if how == "independent" or not isinstance(reference, list) or not reference:
        predicted = draw(odd_call_lists if odd else call_lists)
    elif how == "copy":
        predicted = [dict(c) if isinstance(c, dict) else c for c in reference]
    elif how == "retype":  # equal (==) arguments of other types: str() tells them apart
        predicted = [
            {"name": c.get("name"), "args": {k: _retype(v) for k, v in c["args"].items()}}
            if isinstance(c, dict) and isinstance(c.get("args"), dict)
            else c
            for c in reference
        ]
    elif how == "permute":
        predicted = draw(st.permutations(reference))
    else:
        predicted = list(reference)
        i = draw(st.integers(0, len(predicted) - 1))
        predicted[i] = draw(calls)
    user_input: list[Any] = [{"type": "human", "content": "q"}]
    if how == "messages":
        user_input += draw(st.lists(messages, max_size=5))
    else:
        cut = draw(st.integers(0, len(predicted)))
        for chunk in (predicted[:cut], predicted[cut:]):
            if chunk:
                user_input.append({"type": "ai", "content": "", "tool_calls": chunk})
                user_input.append({"type": "tool", "content": "r"})
        user_input.append({"type": "ai", "content": "a"})
    sample: dict[str, Any] = {
        "id": draw(st.one_of(st.none(), st.text(max_size=3), st.integers(-(2**63), 2**63 - 1)))
    }
    sample["user_input"] = user_input
    if reference is not None or draw(st.booleans()):
        sample["reference_tool_calls"] = reference
    extras = [None, "reference", "rubrics", "reference_topics", "bad"] if odd else [None]
    extra = draw(st.sampled_from(extras))
    if extra == "reference":
        sample["reference"] = "the answer"
    elif extra == "rubrics":
        sample["rubrics"] = {"1": "fine"}
    elif extra == "reference_topics":
        sample["reference_topics"] = ["x"]
    elif extra == "bad":
        sample["rubrics"] = 5
    return sample


CONFIGS = {
    "default": default_config(),
    "renamed_and_reordered": parse_config(
        {
            "metrics": {
                "f": {"type": "tool_call_f1"},
                "acc": {"type": "tool_call_accuracy", "order": "strict"},
                "acc2": {"type": "tool_call_accuracy"},
            }
        }
    ),
}


@SETTINGS
@given(samples(), st.sampled_from(sorted(CONFIGS)), st.booleans())
def test_fast_rows_equal_the_general_rows_byte_for_byte(
    sample: Any, config_name: str, details: bool
) -> None:
    config = CONFIGS[config_name]
    plan = bulk_plan(config.instances)
    assert plan is not None
    fast = fast_row(plan, sample, details)
    general, ok = score_row(config, sample, where="line 1", details=details)
    event("fast path" if fast is not None else "general path")
    if fast is not None:
        assert ok, "the fast path only produces successful rows"
        assert encoded(fast) == encoded(general)


def test_the_default_plan_is_the_default_configuration() -> None:
    assert bulk_plan(default_config().instances) == DEFAULT_PLAN


def test_instances_outside_ragas_strict_defaults_have_no_plan() -> None:
    for options in (
        {"order": "flexible"},
        {"order": "unordered"},
        {"length_mismatch": "prefix"},
        {"args": "levenshtein"},
    ):
        config = parse_config({"metrics": {"m": {"type": "tool_call_accuracy", **options}}})
        assert bulk_plan(config.instances) is None, options


def test_the_benchmark_mix_takes_the_fast_path() -> None:
    call = {"name": "search", "args": {"q": "x", "n": 2}}
    other = {"name": "get_time", "args": {"tz": "UTC"}}
    sample = {
        "id": "s",
        "user_input": [
            {"type": "human", "content": "q"},
            {"type": "ai", "content": "", "tool_calls": [other, call]},
            {"type": "tool", "content": "r"},
            {"type": "tool", "content": "r"},
            {"type": "ai", "content": "done"},
        ],
        "reference_tool_calls": [call, other],
    }
    row = fast_row(DEFAULT_PLAN, sample)
    assert row is not None
    assert row["tool_call_accuracy"] == 0.0
    assert row["details"]["tool_call_accuracy"]["reasons"][0] == (
        "tool names differ at position 0: expected [search, get_time], got [get_time, search]"
    )


def test_arguments_nested_past_the_bound_take_the_general_path() -> None:
    from toolscore.scorer import default_config
    from toolscore.scorer.bulk import DEFAULT_PLAN, fast_row
    from toolscore.scorer.nesting import MAX_ARGUMENT_DEPTH
    from toolscore.scorer.rows import score_row

    def nested(levels: int) -> dict:
        value: dict = {"v": 1}
        for _ in range(levels - 1):
            value = {"k": value}
        return value

    for levels, fast in ((MAX_ARGUMENT_DEPTH, True), (MAX_ARGUMENT_DEPTH + 1, False)):
        call = {"name": "f", "args": nested(levels)}
        sample = {
            "user_input": [
                {"type": "human", "content": "q"},
                {"type": "ai", "content": "", "tool_calls": [call]},
            ],
            "reference_tool_calls": [call],
        }
        general, _ = score_row(default_config(), sample, where="line 1")
        assert (fast_row(DEFAULT_PLAN, sample, True) is not None) == fast
        if fast:
            assert fast_row(DEFAULT_PLAN, sample, True) == general
        else:
            assert "nested deeper than" in general["error"]
