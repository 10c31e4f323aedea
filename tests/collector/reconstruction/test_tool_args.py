"""Tool-call arguments are decoded from every shape docs/conventions.md lists, and never raise."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolscore.collector.reconstruction.tool_args import (
    decode_arguments,
    decode_tool_input,
    repair_truncated_json,
)
from toolscore.collector.reconstruction.transcript import Canon

PARIS = {"city": "Paris"}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param('{"city":"Paris"}', PARIS, id="json-string"),
        pytest.param({"city": "Paris"}, PARIS, id="object"),
        pytest.param(json.dumps('{"city":"Paris"}'), PARIS, id="json-inside-json"),
        pytest.param(b'{"city":"Paris"}', PARIS, id="bytes"),
        pytest.param('{"args":[],"kwargs":{"city":"Paris"}}', PARIS, id="traceloop-wrapper"),
        pytest.param(
            json.dumps(
                {
                    "input_str": "{'city': 'Paris'}",
                    "tags": [],
                    "metadata": {},
                    "inputs": {"city": "Paris"},
                    "kwargs": {"tool_call_id": "call_1"},
                }
            ),
            PARIS,
            id="openllmetry-langchain-wrapper",
        ),
        pytest.param(
            json.dumps({"input_str": "{'city': 'Paris'}", "tags": [], "metadata": {}}),
            PARIS,
            id="langchain-wrapper-input-str-only",
        ),
        pytest.param("{'city': 'Paris'}", PARIS, id="python-repr"),
        pytest.param("", {}, id="empty-string-is-no-arguments"),
        pytest.param("{}", {}, id="empty-object"),
        pytest.param('{"n": 1, "x": 1.0, "ok": true}', {"n": 1, "x": 1.0, "ok": True}, id="types"),
    ],
)
def test_decodable_shapes(value: object, expected: dict[str, Any]) -> None:
    arguments, raw, ok = decode_arguments(value)
    assert (arguments, raw, ok) == (expected, None, True)


def test_int_and_float_stay_distinct_and_key_order_is_kept() -> None:
    arguments, _, _ = decode_arguments('{"b": 1, "a": 1.0}')
    assert arguments is not None
    assert list(arguments) == ["b", "a"]
    assert type(arguments["b"]) is int and type(arguments["a"]) is float


def test_truncated_json_keeps_the_complete_part_and_is_flagged() -> None:
    text = '{"city": "Paris", "units": "metric", "note": "a long text that was cu'
    arguments, raw, ok = decode_arguments(text)
    assert arguments == {"city": "Paris", "units": "metric"}  # the half value is dropped
    assert raw == text and ok is False


def test_truncated_number_is_not_guessed() -> None:
    assert repair_truncated_json('{"a": "x", "n": 12') == {"a": "x"}


def test_invalid_text_is_kept_raw() -> None:
    assert decode_arguments("city=Paris") == (None, "city=Paris", False)
    assert decode_arguments("{not json at all") == (None, "{not json at all", False)


def test_bare_value_with_lost_parameter_name_is_positional() -> None:
    decoded = decode_tool_input("Asia/Tokyo")  # OpenInference LangChain single-string argument
    assert (decoded.arguments, decoded.ok, decoded.positional) == (None, False, ("Asia/Tokyo",))


def test_traceloop_positional_arguments_are_positional() -> None:
    decoded = decode_tool_input('{"args": ["Asia/Tokyo"], "kwargs": {}}')
    assert decoded.positional == ("Asia/Tokyo",) and decoded.ok is False
    assert decoded.raw == '{"args": ["Asia/Tokyo"], "kwargs": {}}'


def test_missing_arguments_are_not_ok_and_have_no_raw() -> None:
    assert decode_arguments(None) == (None, None, False)


def test_a_json_array_is_not_an_argument_object() -> None:
    assert decode_arguments("[1, 2]") == (None, "[1, 2]", False)


class _Weird:
    def __str__(self) -> str:
        raise RuntimeError("no")


def test_odd_objects_do_not_raise() -> None:
    arguments, raw, ok = decode_arguments(_Weird())
    assert arguments is None and ok is False and raw


@given(st.text(max_size=200))
def test_never_raises_on_any_text(text: str) -> None:
    arguments, raw, ok = decode_arguments(text)
    assert arguments is None or isinstance(arguments, dict)
    assert ok or raw is not None or arguments is None


@given(
    st.dictionaries(
        st.text(max_size=8),
        st.one_of(st.integers(), st.text(max_size=20), st.booleans(), st.none()),
        max_size=5,
    ),
    st.integers(min_value=0, max_value=200),
)
def test_any_prefix_of_a_json_object_decodes_to_a_subset(data: dict[str, Any], cut: int) -> None:
    text = json.dumps(data)
    arguments, _, ok = decode_arguments(text[:cut])
    if ok:
        assert arguments == data or (arguments == {} and cut == 0)
    elif arguments is not None:
        assert all(k in data and data[k] == v for k, v in arguments.items())


def test_a_conversation_decodes_each_argument_text_once_and_hands_out_its_own_dicts() -> None:
    canon = Canon()
    first, again = '{"city": "Paris"}', "".join(['{"city": ', '"Paris"}'])
    assert first == again and first is not again  # a history repeats the text, not the object
    read = canon.peek(first)
    assert canon.peek(again) is read
    assert canon(first) == canon(again) == canon({"city": "Paris"})
    owned = canon.decode(again)
    assert owned is read  # the reading decoding is handed out once...
    later = canon.decode(first)
    assert later == owned and later.arguments is not owned.arguments  # ...then decoded anew
    assert later == decode_tool_input(first)
