"""Untrusted text made safe to show: on a terminal, in a JSON document, in a spreadsheet cell.

Conversation ids, tool names, arguments, messages and expectation ids come from spans and
reference files, i.e. from whoever can send traces. Printed raw, an ``ESC [2J`` clears the
operator's screen, ``ESC ]0;...BEL`` sets the window title, a ``CR`` overwrites a line (a fake
"ALL SCORES PASS"), and a bidi override reorders what the reader sees. Every command routes such
text through this module:

* :func:`terminal_safe` -- what the terminal must not interpret is shown as a Python-style
  escape: ``\\t`` ``\\n`` ``\\r``, other C0 controls, DEL and C1 controls (U+0080-U+009F) as
  ``\\xHH``, bidi controls (U+061C, U+200E-U+200F, U+202A-U+202E, U+2066-U+2069) and lone
  surrogates as ``\\uHHHH``. So ``"a\\x1b[2Jb"`` prints as ``a\\x1b[2Jb``. A backslash is left as
  it is, so a literal ``\\x1b`` typed into an id reads the same as an escaped ESC: the form is
  for reading (and harmless either way), the exact value is in the ``--json`` output.
* :func:`json_safe` -- JSON output with those same characters as ``\\u`` escapes (JSON itself
  only escapes U+0000-U+001F): still valid JSON that parses back to the exact value.
* :func:`csv_cell` -- a text cell a spreadsheet would run as a formula (first character, after
  any leading spaces, one of ``= + - @``, or starting with tab, CR or LF) gets a ``'`` prefix, as
  OWASP's CSV-injection guidance recommends. Only strings: numbers (a score of ``-1``) stay numbers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

# C0 (with TAB, LF, CR), DEL, C1; the bidi embeddings, overrides, isolates and marks; surrogates
# (a lone one would also make print() raise UnicodeEncodeError).
_BIDI_AND_SURROGATES = r"\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff"
_UNSAFE = re.compile(rf"[\x00-\x1f\x7f-\x9f{_BIDI_AND_SURROGATES}]")
# The same minus C0, which json.dumps already escapes.
_JSON_UNSAFE = re.compile(rf"[\x7f-\x9f{_BIDI_AND_SURROGATES}]")
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
_FORMULA_START = ("=", "+", "-", "@")
_FORMULA_CONTROL = ("\t", "\r", "\n")


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def terminal_safe(value: object) -> str:
    """``str(value)`` with every control, bidi and surrogate character visibly escaped.

    Newlines too: apply it to one cell or one line, then join the lines yourself.
    """
    return _UNSAFE.sub(_escape, value if isinstance(value, str) else str(value))


def safe_lines(lines: Iterable[str]) -> str:
    """Lines joined with newlines, each made terminal-safe: the last guard before printing."""
    return "\n".join(terminal_safe(line) for line in lines)


def safe_message(text: str) -> str:
    """A (possibly multi-line) message for stderr: its newlines kept, everything else escaped."""
    return safe_lines(text.split("\n"))


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def json_safe(value: Any, **options: Any) -> str:
    """``json.dumps(value, ensure_ascii=False, **options)``, but with DEL, C1, bidi controls and
    surrogates as ``\\uXXXX`` so that a terminal showing it interprets none of them.

    They can only occur inside JSON strings, where ``\\uXXXX`` means the same character.
    """
    return _JSON_UNSAFE.sub(_json_escape, json.dumps(value, ensure_ascii=False, **options))


def csv_cell(value: Any) -> Any:
    """A CSV cell that a spreadsheet shows as text: ``'`` before a string that would be a
    formula; other values (numbers, None) unchanged."""
    if not isinstance(value, str) or not value:
        return value
    if value.startswith(_FORMULA_CONTROL) or value.lstrip(" ").startswith(_FORMULA_START):
        return "'" + value
    return value
