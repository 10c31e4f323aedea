"""JSON columns are read fast (orjson) but exactly as the standard library reads them."""

from __future__ import annotations

import json
import math

import pytest

from toolscore.storage.plumbing.jsoncodec import json_loads

SAME_AS_STDLIB = [
    '{"a": [1, 2.5, "x", true, null], "b": {"c": "é"}}',
    "123456789012345678901234567890",  # beyond 64 bits: orjson alone would give a float
    '{"id": 18446744073709551616}',
    "[-9223372036854775809, 9223372036854775807]",
    "12345678901234567890.5",
    "-0.0",
    '"\\ud800"',  # a lone surrogate: orjson refuses it
    '{"a": 1, "a": 2}',
]


@pytest.mark.parametrize("text", SAME_AS_STDLIB)
@pytest.mark.parametrize("as_bytes", [False, True], ids=["str", "bytes"])
def test_json_columns_read_like_the_standard_library(text: str, as_bytes: bool) -> None:
    value = json_loads(text.encode() if as_bytes else text)
    expected = json.loads(text)
    assert value == expected
    assert type(value) is type(expected)
    assert repr(value) == repr(expected)  # ints stay ints, -0.0 stays -0.0


@pytest.mark.parametrize("text", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_non_finite_numbers_read_like_the_standard_library(text: str) -> None:
    value, expected = json_loads(text), json.loads(text)
    assert math.isnan(value) if math.isnan(expected) else value == expected


def test_invalid_json_raises_the_standard_error() -> None:
    with pytest.raises(json.JSONDecodeError):
        json_loads("{not json")


@pytest.mark.parametrize(
    "text",
    [
        '{"big": 123456789012345678901}',
        '{"big":-123456789012345678901}',
        "[1,\n 123456789012345678901]",
        '[123456789012345678901, "x"]',
        "123456789012345678901",
        '{"id": "run-1234567890123456789012", "n": 1}',  # digits inside a string: fast path
    ],
)
def test_big_integers_anywhere_keep_their_exact_value(text: str) -> None:
    value = json_loads(text)
    assert repr(value) == repr(json.loads(text))
