"""An index of rule expectations, so that a conversation is tried against a few rules, not all.

Each rule is filed under one *anchor* that every conversation it holds for must show:

- a value of one of its exact-valued attribute constraints (bucketed by attribute and value);
- or a three-character piece of a literal one of its regexes requires (a run of plain
  characters outside any group, alternation or repetition: it is in every match, so each of its
  trigrams is in the text), of the first user message or of an attribute's value.
  Case-insensitive regexes use a run of ASCII characters other than ``i``, ``k`` and ``s``
  (the letters Python's ``re`` also matches to non-ASCII ones), looked up lowercased.

Of a rule's possible anchors the one shared by the fewest rules is chosen. Rules with none
(regexes without such a literal) are tried on every conversation. A candidate is then checked
whole (:meth:`Rule.search`).
"""

from __future__ import annotations

import importlib
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import Any, TypeVar

from toolscore.storage.expectations.rules import Facts, Rule

T = TypeVar("T")
Hit = tuple[Rule, "re.Match[str] | bool"]
# (kind, attribute or "", value or trigram): kind is "attribute", "gram" (the message),
# "igram" (the lowercased message, case-insensitive regexes) or "agram" (an attribute's value)
_Anchor = tuple[str, str, str]
_Filed = tuple[Rule, str]  # a rule and the literal its anchor came from ("" for a value)
_UNSAFE = frozenset("iksIKS")  # re.IGNORECASE matches these to non-ASCII letters too

try:  # the regex parser Python's re uses; without it no literal is found (every rule is tried)
    _parser: Any = importlib.import_module("re._parser")
    _LITERAL: Any = importlib.import_module("re._constants").LITERAL
except ImportError:  # pragma: no cover - a Python without re._parser
    _parser = None
    _LITERAL = None


@lru_cache(maxsize=1 << 16)  # filing asks twice per rule, and each rebuild asks again
def required_literal(pattern: re.Pattern[str]) -> str | None:
    """The longest run of plain characters that every match of ``pattern`` contains, or None.
    For a case-insensitive pattern: of characters whose case variants are ASCII, lowercased."""
    if _parser is None:
        return None
    insensitive = bool(pattern.flags & re.IGNORECASE)
    try:
        parsed = _parser.parse(pattern.pattern, pattern.flags)
    except Exception:  # the pattern compiled: a parser that disagrees just disables the index
        return None
    best, run = "", ""
    for op, value in parsed:
        char = chr(value) if op is _LITERAL else ""
        if char and (not insensitive or (char.isascii() and char not in _UNSAFE)):
            run += char.lower() if insensitive else char
            best = max(best, run, key=len)
        else:
            run = ""
    return best or None


def _trigrams(text: str) -> set[str]:
    return {text[i : i + 3] for i in range(len(text) - 2)}


def _options(rule: Rule) -> list[list[_Anchor]]:
    """Each way of filing ``rule``: a list of anchors, one of which every match shows."""
    options: list[list[_Anchor]] = []
    for test in rule.attributes:
        if test.values is not None:
            options.append([("attribute", test.key, v) for v in sorted(test.values)])
        elif test.pattern is not None and not test.pattern.flags & re.IGNORECASE:
            literal = required_literal(test.pattern)
            options += [[("agram", test.key, g)] for g in _trigrams(literal or "")]
    if rule.regex is not None:
        literal = required_literal(rule.regex)
        kind = "igram" if rule.regex.flags & re.IGNORECASE else "gram"
        options += [[(kind, "", g)] for g in _trigrams(literal or "")]
    return options


class RuleIndex:
    """The latest rule expectations, indexed; built once per set of versions."""

    def __init__(self, rules: Iterable[Rule]) -> None:
        self.rules = {(r.id, r.version): r for r in rules}
        #: attribute names some rule looks at (conversations collect only these)
        self.keys = frozenset(t.key for r in self.rules.values() for t in r.attributes)
        self._buckets: dict[_Anchor, list[_Filed]] = defaultdict(list)
        self._always: list[Rule] = []
        # rules with an exact user-input text are found by that text (the exact tier)
        tiered = [r for r in self.rules.values() if r.exact_text is None]
        options = {(r.id, r.version): _options(r) for r in tiered}
        counts = Counter(a for found in options.values() for option in found for a in option)
        for rule in tiered:
            found = options[rule.id, rule.version]
            if not found:
                self._always.append(rule)
                continue
            for anchor in min(found, key=lambda o: (sum(counts[a] for a in o), o)):
                self._buckets[anchor].append((rule, _literal(rule, anchor)))
        self._kinds = {kind for kind, _, _ in self._buckets}

    def __len__(self) -> int:
        return len(self.rules)

    def candidates(self, facts: Facts) -> list[Rule]:
        """The rules that may hold for ``facts`` (a superset of those that do), each once."""
        seen: dict[tuple[str, int], Rule] = {}
        buckets = self._buckets
        for key, texts in facts.attributes.items():
            for text in texts:
                for rule, _ in buckets.get(("attribute", key, text), ()):
                    seen[rule.id, rule.version] = rule
                if "agram" in self._kinds:
                    self._grams(seen, "agram", key, text)
        message = facts.first_user_message
        if message:
            if "gram" in self._kinds:
                self._grams(seen, "gram", "", message)
            if "igram" in self._kinds:
                self._grams(seen, "igram", "", message.lower())
        for rule in self._always:
            seen[rule.id, rule.version] = rule
        return list(seen.values())

    def _grams(self, seen: dict[tuple[str, int], Rule], kind: str, key: str, text: str) -> None:
        buckets = self._buckets
        for i in range(len(text) - 2):
            for rule, literal in buckets.get((kind, key, text[i : i + 3]), ()):
                if literal in text:
                    seen[rule.id, rule.version] = rule

    def hits(self, facts: Facts) -> list[Hit]:
        """The rules that hold for ``facts``, with the regex match of each (``True`` without)."""
        found: list[Hit] = []
        for rule in self.candidates(facts):
            result = rule.search(facts)
            if result:
                found.append((rule, result))
        return found


def _literal(rule: Rule, anchor: _Anchor) -> str:
    kind, key, _ = anchor
    if kind in ("gram", "igram") and rule.regex is not None:
        return required_literal(rule.regex) or ""
    if kind == "agram":
        test = next(t for t in rule.attributes if t.key == key and t.pattern is not None)
        assert test.pattern is not None
        return required_literal(test.pattern) or ""
    return ""


def best(items: Sequence[T], rank: Callable[[T], tuple[int, int, str]]) -> tuple[T, list[T]]:
    """The item of highest ``(priority, specificity)`` and smallest id, and every item it is
    tied with on priority and specificity (itself included; one item means no tie).

    ``rank(item)`` is ``(priority, specificity, id)``."""
    ordered = sorted(items, key=lambda i: (-rank(i)[0], -rank(i)[1], rank(i)[2]))
    top = rank(ordered[0])[:2]
    return ordered[0], [i for i in ordered if rank(i)[:2] == top]
