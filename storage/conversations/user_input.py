"""The form in which a conversation's first user message is matched against expectations.

Stored expectations keep their user input in this form (``expectations.user_input_norm``), and
scoring looks a conversation's first user message up in it, so both sides use this one function.
"""

from __future__ import annotations


def normalize_user_input(text: str) -> str:
    """Trim, fold runs of whitespace to one space, casefold: the form used to match user input."""
    return " ".join(str(text).split()).casefold()
