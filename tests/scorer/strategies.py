"""Hypothesis strategies of Ragas samples that stress the reader and the comparisons: retyped
arguments (``1``, ``1.0``, ``true``), ``-0.0``, NaN, infinities, big integers, lone surrogates,
extra keys, malformed calls and messages."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

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
# Mostly valid calls, sometimes not.
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
