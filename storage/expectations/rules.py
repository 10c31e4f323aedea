"""Match rules: what an expectation's ``match`` says besides a conversation id.

A *rule* is a ``match`` with ``user_input: {regex: ...}`` and/or ``attributes: {...}`` (with an
exact ``user_input`` text, attributes restrict that text's matches). Every constraint given must
hold. Rules are compiled once per expectation version (:class:`Rule`); what a conversation
offers them is :class:`Facts`. ``match_problems`` is the one check of a ``match`` mapping, used
by the file reader and by the import.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toolscore.storage.conversations.user_input import normalize_user_input

MATCH_KEYS = ("conversation_id", "user_input", "attributes", "priority")
Path = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class Facts:
    """What rules look at in one conversation: its first user message, and the text of every
    value (``attribute_texts``) of the span and resource attributes the rules name."""

    first_user_message: str | None
    attributes: Mapping[str, frozenset[str]]


@dataclass(frozen=True, slots=True)
class AttributeTest:
    key: str
    values: frozenset[str] | None  # exact values (one, or a list), else None
    pattern: re.Pattern[str] | None  # {regex: ...}, else None

    def holds(self, found: Mapping[str, frozenset[str]]) -> bool:
        texts = found.get(self.key)
        if not texts:
            return False
        if self.values is not None:
            return not self.values.isdisjoint(texts)
        assert self.pattern is not None
        return any(self.pattern.search(t) is not None for t in texts)


@dataclass(frozen=True, slots=True)
class Rule:
    """One expectation version's rule, compiled."""

    id: str
    version: int
    priority: int
    regex: re.Pattern[str] | None
    exact_text: str | None  # normalised match.user_input text, when given as text
    attributes: tuple[AttributeTest, ...]

    @property
    def specificity(self) -> int:
        """Constraints that must hold: each attribute, and the user input (text or regex)."""
        user = self.regex is not None or self.exact_text is not None
        return len(self.attributes) + int(user)

    def search(self, facts: Facts) -> re.Match[str] | bool | None:
        """The regex's match (a truthy ``re.Match``), ``True`` when the rule holds without a
        regex, and ``None`` or ``False`` when it does not hold."""
        if not all(test.holds(facts.attributes) for test in self.attributes):
            return False
        message = facts.first_user_message
        if self.exact_text is not None:
            return message is not None and normalize_user_input(message) == self.exact_text
        if self.regex is None:
            return True
        return None if message is None else self.regex.search(message)


def is_rule(match: Mapping[str, Any] | None) -> bool:
    """Whether ``match`` holds a rule (a user-input regex or attribute constraints)."""
    if not match:
        return False
    return isinstance(match.get("user_input"), Mapping) or bool(match.get("attributes"))


def priority_of(match: Mapping[str, Any] | None) -> int:
    value = match.get("priority") if match else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def regex_of(match: Mapping[str, Any] | None) -> str | None:
    user = match.get("user_input") if match else None
    if isinstance(user, Mapping) and isinstance(user.get("regex"), str):
        return str(user["regex"])
    return None


def compile_rule(expectation_id: str, version: int, match: Mapping[str, Any]) -> Rule:
    """The compiled rule of a valid ``match`` (checked by :func:`match_problems` at import)."""
    user = match.get("user_input")
    pattern = regex_of(match)
    attributes = match.get("attributes") or {}
    return Rule(
        id=expectation_id,
        version=version,
        priority=priority_of(match),
        regex=re.compile(pattern) if pattern is not None else None,
        exact_text=normalize_user_input(user) if isinstance(user, str) else None,
        attributes=tuple(_test(key, value) for key, value in sorted(attributes.items())),
    )


def _test(key: str, value: Any) -> AttributeTest:
    if isinstance(value, Mapping):
        return AttributeTest(key, None, re.compile(str(value["regex"])))
    values = value if isinstance(value, list) else [value]
    return AttributeTest(key, frozenset(attribute_text(v) for v in values), None)


def attribute_text(value: Any) -> str:
    """The text an attribute value is compared as: ``true``/``false`` for booleans (as YAML and
    JSON write them), ``str()`` for the rest."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def value_texts(value: Any) -> tuple[str, ...]:
    """The texts an OTLP attribute value offers: one for a scalar, one per scalar of an array;
    none for key-value lists and bytes."""
    if isinstance(value, str | bool | int | float):
        return (attribute_text(value),)
    if isinstance(value, list | tuple):
        return tuple(attribute_text(v) for v in value if isinstance(v, str | bool | int | float))
    return ()


# --- validation ---------------------------------------------------------------------------------


def match_problems(value: Any) -> list[tuple[Path, str]]:
    """Every problem of a ``match`` mapping, as (path inside ``match``, message)."""
    if not isinstance(value, Mapping) or not value:
        return [((), "must be a mapping with conversation_id, user_input and/or attributes")]
    problems: list[tuple[Path, str]] = []
    for key in value:
        if key not in MATCH_KEYS:
            problems.append(((key,), f"unknown key (expected {', '.join(MATCH_KEYS)})"))
    if "conversation_id" in value:
        cid = value["conversation_id"]
        ok = (isinstance(cid, str) and cid != "") or (
            isinstance(cid, list) and cid and all(isinstance(c, str) and c for c in cid)
        )
        if not ok:
            problems.append(
                (("conversation_id",), "must be a non-empty string or a non-empty list of them")
            )
    if "user_input" in value:
        problems += _user_input_problems(value["user_input"])
    if "attributes" in value:
        problems += _attributes_problems(value["attributes"])
    if "priority" in value:
        priority = value["priority"]
        if not isinstance(priority, int) or isinstance(priority, bool):
            problems.append((("priority",), "must be an integer"))
        elif not is_rule(value) and not isinstance(value.get("user_input"), str):
            problems.append((("priority",), "only chooses between user_input or attribute rules"))
    return problems


def _user_input_problems(user: Any) -> list[tuple[Path, str]]:
    if isinstance(user, str):
        return (
            [] if normalize_user_input(user) else [(("user_input",), "must be a non-blank string")]
        )
    if not isinstance(user, Mapping):
        return [(("user_input",), "must be a non-blank string or {regex: PATTERN}")]
    problems: list[tuple[Path, str]] = []
    for key in user:
        if key != "regex":
            problems.append((("user_input", key), "unknown key (expected regex)"))
    if "regex" not in user:
        problems.append((("user_input", "regex"), "missing"))
    else:
        problems += _regex_problems(("user_input", "regex"), user["regex"])
    return problems


def _attributes_problems(attributes: Any) -> list[tuple[Path, str]]:
    if not isinstance(attributes, Mapping) or not attributes:
        return [(("attributes",), "must be a non-empty mapping of attribute names to values")]
    problems: list[tuple[Path, str]] = []
    for key, value in attributes.items():
        path: Path = ("attributes", key)
        if not isinstance(key, str) or not key:
            problems.append((path, "an attribute name must be a non-empty string"))
        elif isinstance(value, Mapping):
            if set(value) != {"regex"}:
                problems.append((path, "a mapping value must be {regex: PATTERN}"))
            else:
                problems += _regex_problems((*path, "regex"), value["regex"])
        elif isinstance(value, list):
            if not value or not all(_scalar(v) for v in value):
                problems.append((path, "a list of values must be non-empty, of scalars"))
        elif not _scalar(value):
            problems.append((path, "must be a value, a list of values or {regex: PATTERN}"))
    return problems


def _regex_problems(path: Path, pattern: Any) -> list[tuple[Path, str]]:
    if not isinstance(pattern, str) or not pattern:
        return [(path, "must be a non-empty string")]
    try:
        re.compile(pattern)
    except re.error as exc:
        return [(path, f"invalid regular expression: {exc}")]
    return []


def _scalar(value: Any) -> bool:
    return isinstance(value, str | bool | int | float)
