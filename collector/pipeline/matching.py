"""Which expectation a conversation is scored against (docs/expectations.md, "Matching").

Tiers, first that finds one wins: the reference id on its spans; ``match.conversation_id``;
``match.user_input`` text equal to the first user message (with its attributes, if any); rules
(``match.user_input: {regex}`` and/or ``match.attributes``). Within the last two tiers the
highest ``match.priority`` wins, then the most constraints (specificity), then the smallest id,
and a tie on priority and specificity is reported as a warning naming the tied expectations.

Rule expectations are compiled and indexed once per set of versions and kept for the process
(``storage.expectations.rule_index``): a round asks only whether the set changed.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolscore.collector.reconstruction.conversation_keys import normalize_user_input
from toolscore.storage.conversations.unmatched import unmatched_reason
from toolscore.storage.database import Connection
from toolscore.storage.expectations.repository import (
    ExpectationRow,
    all_by_user_input,
    expectations_stamp,
    find_by_conversation_id,
    find_by_id,
    latest_rules,
)
from toolscore.storage.expectations.rule_index import RuleIndex, best
from toolscore.storage.expectations.rules import (
    Facts,
    Rule,
    compile_rule,
    priority_of,
    value_texts,
)
from toolscore.storage.plumbing.storable import storable_text
from toolscore.storage.records import SpanRecord

Values = Mapping[str, str | None]


@dataclass(frozen=True, slots=True)
class Found:
    """The expectation a conversation matched, and how."""

    row: ExpectationRow
    by: str  # reference_id | conversation_id | user_input | rule
    values: Values  # the regex's named groups (None: no value, e.g. the regex did not match)
    warning: str | None = None  # a tie, naming the tied expectations


class _Cached:
    """The rule index of one database and its rows, kept while its set of expectation versions
    is unchanged."""

    def __init__(self) -> None:
        self.stamp: tuple[Any, ...] | None = None
        self.index = RuleIndex(())
        self.rows: dict[tuple[str, int], ExpectationRow] = {}


_CACHE: dict[str, _Cached] = {}
_LOCK = threading.Lock()


def rule_index(conn: Connection) -> tuple[RuleIndex, dict[tuple[str, int], ExpectationRow]]:
    """The current rule index of ``conn``'s database (rebuilt when an import added a version);
    regexes already compiled for a version are reused."""
    stamp = expectations_stamp(conn)
    key = conn.engine.url.render_as_string(hide_password=True)
    with _LOCK:
        cached = _CACHE.setdefault(key, _Cached())
        if cached.stamp != stamp:
            old = cached.index.rules
            rows = {(r.id, r.version): r for r in latest_rules(conn)}
            rules = [old.get(k) or _compiled(r) for k, r in rows.items()]
            cached.index = RuleIndex(r for r in rules if r is not None)
            cached.rows = rows
            cached.stamp = stamp
        return cached.index, cached.rows


def _compiled(row: ExpectationRow) -> Rule | None:
    try:
        return compile_rule(row.id, row.version, row.match or {})
    except (ValueError, TypeError, KeyError):  # imported by an older release without the check
        return None


def facts_of(spans: Sequence[SpanRecord], first_user_message: str | None, keys: Any) -> Facts:
    """The texts of the attributes named in ``keys``, on any span or its resource."""
    found: dict[str, set[str]] = {}
    if keys:
        for span in spans:
            for attributes in (span.attributes, span.resource_attributes):
                for key in keys:
                    value = attributes.get(key)
                    if value is not None:
                        found.setdefault(key, set()).update(value_texts(value))
    return Facts(first_user_message, {k: frozenset(v) for k, v in found.items()})


SERVICE_KEY = "service.name"
AGENT_KEY = "gen_ai.agent.name"


def identity(spans: Sequence[SpanRecord]) -> tuple[str | None, str | None]:
    """The conversation's ``service.name`` (of the first span's resource that has one) and
    ``gen_ai.agent.name`` (of the first span that has one): what coverage is counted by."""
    service = agent = None
    for span in spans:
        if service is None and isinstance(v := span.resource_attributes.get(SERVICE_KEY), str):
            service = v
        if agent is None and isinstance(v := span.attributes.get(AGENT_KEY), str):
            agent = v
        if service is not None and agent is not None:
            break
    return service, agent


class Matcher:
    """Matching for one scoring round; lookups by id and by user input memoised."""

    def __init__(self, conn: Connection, short_reads: bool = False) -> None:
        self._conn = conn
        self._short_reads = short_reads  # end the read transaction after each lookup
        self.index, self._rows = rule_index(conn)
        self._by_id: dict[str, ExpectationRow | None] = {}
        self._by_text: dict[str, list[ExpectationRow]] = {}

    def facts(self, spans: Sequence[SpanRecord], first_user_message: str | None) -> Facts:
        return facts_of(spans, first_user_message, self.index.keys)

    def match(self, reference_id: str | None, conversation_id: str, facts: Facts) -> Found | None:
        try:
            row, by, warning = self._tiers(reference_id, conversation_id, facts)
        finally:
            if self._short_reads:
                self._conn.rollback()
        if row is None:
            return None
        if isinstance(row, tuple):  # a rule's hit: its row and the regex's groups
            hit_row, values = row
            return Found(hit_row, by, values, warning)
        return Found(row, by, self._values(row, facts), warning)

    def _tiers(
        self, reference_id: str | None, conversation_id: str, facts: Facts
    ) -> tuple[Any, str, str | None]:
        if reference_id:
            if reference_id not in self._by_id:
                self._by_id[reference_id] = find_by_id(self._conn, reference_id)
            if (found := self._by_id[reference_id]) is not None:
                return found, "reference_id", None
        if (found := find_by_conversation_id(self._conn, conversation_id)) is not None:
            return found, "conversation_id", None
        row, warning = self._by_user_input(facts)
        if row is not None:
            return row, "user_input", warning
        hit, warning = self._by_rule(facts)
        return hit, "rule", warning

    def _by_user_input(self, facts: Facts) -> tuple[ExpectationRow | None, str | None]:
        message = facts.first_user_message
        # Made storable: a NUL in a query parameter fails the whole statement on PostgreSQL.
        norm = storable_text(normalize_user_input(message)) if message else ""
        if not norm:
            return None, None
        if norm not in self._by_text:
            self._by_text[norm] = all_by_user_input(self._conn, norm)
        rules = self.index.rules
        rows = [
            r
            for r in self._by_text[norm]
            if (rule := rules.get((r.id, r.version))) is None or rule.search(facts)
        ]
        if not rows:
            return None, None

        def rank(r: ExpectationRow) -> tuple[int, int, str]:
            rule = rules.get((r.id, r.version))
            return priority_of(r.match), rule.specificity if rule else 1, r.id

        chosen, tied = best(rows, rank)
        return chosen, _tie([r.id for r in tied], rank(chosen))

    def _by_rule(self, facts: Facts) -> tuple[tuple[ExpectationRow, Values] | None, str | None]:
        hits = self.index.hits(facts)
        if not hits:
            return None, None

        def rank(hit: tuple[Rule, Any]) -> tuple[int, int, str]:
            return hit[0].priority, hit[0].specificity, hit[0].id

        (rule, result), tied = best(hits, rank)
        row = self._rows[rule.id, rule.version]
        values = result.groupdict() if not isinstance(result, bool) else {}
        return (row, values), _tie([h[0].id for h in tied], rank((rule, result)))

    def _values(self, row: ExpectationRow, facts: Facts) -> Values:
        """The named groups of the row's regex in the first user message, for a row found by
        another tier (each group None when the regex does not match)."""
        rule = self.index.rules.get((row.id, row.version))
        if rule is None or rule.regex is None:
            return {}
        message = facts.first_user_message
        found = rule.regex.search(message) if message else None
        if found is None:
            return dict.fromkeys(rule.regex.groupindex)
        return found.groupdict()

    def why_not(self, reference_id: str | None, conversation_id: str, facts: Facts) -> str:
        """Why :meth:`match` found nothing (``storage.conversations.unmatched``)."""
        message = facts.first_user_message
        norm = storable_text(normalize_user_input(message)) if message else ""
        why = unmatched_reason(
            self._conn,
            reference_id=reference_id,
            conversation_id=conversation_id,
            normalized_message=norm or None,
        )
        if len(self.index):
            why += f"; none of the {len(self.index)} rule expectations holds for it"
        return storable_text(why)


def _tie(ids: Sequence[str], rank: tuple[int, int, str]) -> str | None:
    if len(ids) < 2:
        return None
    shown = ", ".join(repr(i) for i in ids[:5]) + (
        f" and {len(ids) - 5} more" if len(ids) > 5 else ""
    )
    return (
        f"expectations {shown} tie on priority {rank[0]} and specificity {rank[1]}; "
        f"{ids[0]!r} (the smallest id) was used: set match.priority to choose"
    )
