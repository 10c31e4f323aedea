"""What the pipeline writes is storable on both databases: NUL and lone surrogates become U+FFFD."""

from __future__ import annotations

import json

from toolscore.storage.plumbing.storable import (
    TOO_DEEP,
    escaped_json,
    storable_json,
    storable_text,
    text_needs_fixing,
)


def test_clean_text_is_returned_as_is() -> None:
    for text in ("", "Paris", "Zürich 東京 😀"):
        assert storable_text(text) is text and not text_needs_fixing(text)


def test_nul_and_lone_surrogates_become_the_replacement_character() -> None:
    assert storable_text("a\x00b") == "a\ufffdb"
    assert storable_text("\ud800x\udfff") == "\ufffdx\ufffd"
    assert storable_text("\ud83d\ude00") == "😀", "a valid pair is the character it encodes"
    for text in ("a\x00b", "\ud800", "é\udc80"):
        storable_text(text).encode("utf-8")  # encodable: every driver can send it


def test_clean_json_is_the_same_object() -> None:
    value = {"city": "Paris", "n": [1, 2.5, None, True], "deep": {"a": {"b": "c"}}}
    assert storable_json(value) == (value, None) and storable_json(value)[0] is value


def test_json_keys_and_strings_are_made_storable_in_order() -> None:
    fixed, why = storable_json({"\ud800": ["a\x00", {"k\x00": "v"}], "z": 1, "b": "\udfff"})
    assert why == "text replaced"
    assert fixed == {"\ufffd": ["a\ufffd", {"k\ufffd": "v"}], "z": 1, "b": "\ufffd"}
    assert list(fixed) == ["\ufffd", "z", "b"]


def test_a_literal_backslash_u0000_text_is_not_a_nul() -> None:
    value = {"a": "\\u0000"}
    assert storable_json(value) == (value, None)


def test_too_deep_json_is_not_stored() -> None:
    value: object = "x"
    for _ in range(500):
        value = [value]
    assert storable_json({"a": value}) == (None, TOO_DEEP)
    assert escaped_json({"a": value}) is None


def test_escaped_json_keeps_the_original_loss_free() -> None:
    original = {"\ud800": "a\x00b"}
    text = escaped_json(original)
    assert text is not None and text.isascii() and json.loads(text) == original
