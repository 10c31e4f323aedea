"""``toolscore.collector.views.safe_text``: untrusted text for the terminal, JSON output and CSV
cells."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolscore.collector.views.safe_text import (
    csv_cell,
    json_safe,
    safe_lines,
    safe_message,
    terminal_safe,
)

# Written out here, not imported: C0, DEL, C1, bidi embeddings/overrides/isolates/marks, surrogates.
_C0 = "".join(chr(c) for c in range(0x20))
UNSAFE = re.compile(
    f"[{re.escape(_C0)}\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("a\x1b[2Jb", "a\\x1b[2Jb"),  # clear screen
        ("\x1b]0;title\x07", "\\x1b]0;title\\x07"),  # window title (OSC ... BEL)
        ("ok\rALL SCORES PASS", "ok\\rALL SCORES PASS"),  # overwrite the line
        ("one\ntwo\tthree", "one\\ntwo\\tthree"),
        ("\x00\x7f", "\\x00\\x7f"),
        ("\x9b31m\x85", "\\x9b31m\\x85"),  # C1 CSI and NEL
        ("abc\u202edcba\u2066x\u2069", "abc\\u202edcba\\u2066x\\u2069"),  # bidi override, isolate
        ("\u200f\u061c", "\\u200f\\u061c"),  # bidi marks
        ("\ud800", "\\ud800"),  # a lone surrogate (print() would raise)
        ("café ✓ 東京 \\x1b", "café ✓ 東京 \\x1b"),  # printable text and backslashes unchanged
    ],
)
def test_terminal_safe_shows_controls_as_python_escapes(raw: str, shown: str) -> None:
    assert terminal_safe(raw) == shown


def test_non_strings_are_shown_as_their_str() -> None:
    assert terminal_safe(0.5) == "0.5"
    assert terminal_safe(None) == "None"


@given(st.text())
def test_nothing_unsafe_survives_and_escaping_is_idempotent(text: str) -> None:
    shown = terminal_safe(text)
    assert UNSAFE.search(shown) is None
    assert terminal_safe(shown) == shown  # a second guard changes nothing
    shown.encode("utf-8")  # printable on a UTF-8 terminal


def test_lines_keep_only_their_own_newlines() -> None:
    assert safe_lines(["a\nb", "c\x1b"]) == "a\\nb\nc\\x1b"
    assert safe_message("toolscore: bad\x1b[2J\nsecond line\r") == (
        "toolscore: bad\\x1b[2J\nsecond line\\r"
    )


@given(st.recursive(st.none() | st.text() | st.integers(), lambda c: st.lists(c, max_size=3)))
def test_json_safe_is_json_of_the_same_value_with_nothing_unsafe(value: object) -> None:
    text = json_safe(value, indent=2)
    assert json.loads(text) == value
    assert UNSAFE.search(text.replace("\n", "")) is None  # indent newlines are JSON's own


def test_json_safe_escapes_what_json_leaves_raw() -> None:
    assert json_safe(["\x1b", "\x7f\x9b\u202e"]) == '["\\u001b", "\\u007f\\u009b\\u202e"]'
    assert json_safe({"k": "é"}, sort_keys=True) == '{"k": "é"}'


@pytest.mark.parametrize(
    "formula",
    [
        '=HYPERLINK("http://evil.invalid","click")',
        "+1+cmd|' /C calc'!A0",
        "-2+3",
        "@SUM(A1:A9)",
        "\t=1",
        "\r=1",
        "\n=1",
        "  =1",  # after leading spaces
    ],
)
def test_csv_cells_that_a_spreadsheet_would_run_get_a_quote(formula: str) -> None:
    assert csv_cell(formula) == "'" + formula


@pytest.mark.parametrize("value", ["conv-1", "a=b", "", "'=already quoted", "weather"])
def test_other_text_cells_are_unchanged(value: str) -> None:
    assert csv_cell(value) == value


@pytest.mark.parametrize("value", [-1, -0.5, 0.0, 3, None, True])
def test_numbers_stay_numbers(value: object) -> None:
    assert csv_cell(value) is value


def test_a_neutralised_cell_parses_back_as_text() -> None:
    out = io.StringIO()
    csv.writer(out).writerow([csv_cell('=HYPERLINK("x","y")'), csv_cell(-1.0)])
    assert next(csv.reader(io.StringIO(out.getvalue()))) == ['\'=HYPERLINK("x","y")', "-1.0"]
