"""Match rules (regex, attributes, priority), their index, and templated references."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolscore.storage.expectations.rule_index import RuleIndex, best, required_literal
from toolscore.storage.expectations.rules import Facts, compile_rule, match_problems
from toolscore.storage.expectations.templates import TemplateError, fill, template_problems

BOOK = r"table for (?P<n>\d+) in (?P<city>\w+)"


def facts(message: str | None, **attributes: str) -> Facts:
    """Attribute names written with ``__`` for ``.`` (``gen_ai__agent__name``)."""
    return Facts(message, {k.replace("__", "."): frozenset([v]) for k, v in attributes.items()})


def test_a_regex_rule_holds_with_its_named_groups() -> None:
    rule = compile_rule("book", 1, {"user_input": {"regex": BOOK}})
    found = rule.search(facts("Book a table for 4 in Lyon at 8pm"))
    assert isinstance(found, re.Match) and found.groupdict() == {"n": "4", "city": "Lyon"}
    assert not rule.search(facts("Book a room in Lyon"))
    assert not rule.search(facts(None))


def test_every_constraint_must_hold() -> None:
    match = {
        "user_input": {"regex": BOOK},
        "attributes": {
            "deployment.environment": "prod",
            "gen_ai.agent.name": ["booking", "booker"],
            "service.version": {"regex": r"^2\."},
        },
    }
    rule = compile_rule("r", 1, match)
    message = "a table for 2 in Paris"
    ok = facts(message, deployment__environment="prod", gen_ai__agent__name="booker")
    ok = Facts(ok.first_user_message, {**ok.attributes, "service.version": frozenset({"2.1"})})
    assert rule.search(ok)
    assert rule.specificity == 4
    for key, value in (
        ("deployment.environment", "dev"),
        ("gen_ai.agent.name", "other"),
        ("service.version", "1.9"),
    ):
        changed = Facts(message, {**ok.attributes, key: frozenset({value})})
        assert not rule.search(changed), key
    assert not rule.search(Facts("no booking here", ok.attributes))


def test_attribute_values_compare_as_text() -> None:
    rule = compile_rule("r", 1, {"attributes": {"flag": True, "n": 3}})
    assert rule.search(Facts(None, {"flag": frozenset({"true"}), "n": frozenset({"3"})}))
    assert not rule.search(Facts(None, {"flag": frozenset({"false"}), "n": frozenset({"3"})}))


@pytest.mark.parametrize(
    ("match", "problem"),
    [
        ({"user_input": {"regex": "("}}, "invalid regular expression"),
        ({"user_input": {"pattern": "a"}}, "unknown key (expected regex)"),
        ({"attributes": {}}, "non-empty mapping"),
        ({"attributes": {"a": []}}, "non-empty, of scalars"),
        ({"attributes": {"a": {"re": "x"}}}, "{regex: PATTERN}"),
        ({"attributes": {"a": {"regex": "["}}}, "invalid regular expression"),
        ({"attributes": {"a": "x"}, "priority": "high"}, "must be an integer"),
        ({"conversation_id": "c", "priority": 3}, "only chooses between"),
        ({"color": "blue"}, "unknown key"),
    ],
)
def test_invalid_rules_are_named(match: dict[str, object], problem: str) -> None:
    assert any(problem in message for _, message in match_problems(match)), match_problems(match)


def test_todays_match_forms_stay_valid() -> None:
    assert match_problems({"conversation_id": ["a", "b"], "user_input": "hello"}) == []


@pytest.mark.parametrize(
    ("pattern", "literal"),
    [
        (BOOK, "table for "),
        (r"^refund (?P<id>\d+) now please$", " now please"),
        (r"a|bcd", None),
        (r"(?i)Refund", "refund"),
        (r"(?i)Book Seats", "boo"),  # k and s match non-ASCII letters too: not in the literal
        (r"x?yz", "yz"),
    ],
)
def test_the_literal_every_match_contains(pattern: str, literal: str | None) -> None:
    assert required_literal(re.compile(pattern)) == literal


def test_priority_then_specificity_then_a_reported_tie() -> None:
    low = compile_rule("a-low", 1, {"user_input": {"regex": "refund"}, "priority": -1})
    plain = compile_rule("b-plain", 1, {"user_input": {"regex": "refund"}})
    twin = compile_rule("c-twin", 1, {"user_input": {"regex": "refund"}})
    narrow = compile_rule(
        "d-narrow", 1, {"user_input": {"regex": "refund"}, "attributes": {"tier": "gold"}}
    )
    top = compile_rule("e-top", 1, {"attributes": {"tier": "gold"}, "priority": 5})
    index = RuleIndex([low, plain, twin, narrow, top])

    def rank(hit: tuple[object, object]) -> tuple[int, int, str]:
        rule = hit[0]
        assert hasattr(rule, "priority")
        return rule.priority, rule.specificity, rule.id  # type: ignore[attr-defined]

    gold = facts("I want a refund", tier="gold")
    winner, tied = best(index.hits(gold), rank)
    assert winner[0].id == "e-top" and len(tied) == 1
    silver = facts("I want a refund", tier="silver")
    winner, tied = best(index.hits(silver), rank)
    assert winner[0].id == "b-plain" and [h[0].id for h in tied] == ["b-plain", "c-twin"]


WORDS = ["refund", "table", "weather", "order", "cancel", "Paris", "Lyon", "for", "in", "sale"]
_patterns = st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(
    lambda ws: r"\s+".join(ws) if len(ws) > 1 else ws[0]
)
_rule = st.tuples(
    st.one_of(st.none(), _patterns, _patterns.map(lambda p: f"(?i){p}")),
    st.one_of(st.none(), st.sampled_from(["a", "b", "c"])),
    st.one_of(st.none(), st.lists(st.sampled_from(["x", "y", "z"]), min_size=1, max_size=2)),
)


@settings(max_examples=200, deadline=None)
@given(
    rules=st.lists(_rule, min_size=1, max_size=25),
    message=st.lists(
        st.sampled_from([*WORDS, "REFUND", "x", "\u017fALE", "\u212aelvin", "TABLE"]), max_size=6
    ).map(" ".join),
    env=st.sampled_from(["a", "b", "c", "d"]),
    agent=st.sampled_from(["x", "y", "z", "w"]),
)
def test_the_index_finds_exactly_the_rules_that_hold(
    rules: list[tuple[str | None, str | None, list[str] | None]],
    message: str,
    env: str,
    agent: str,
) -> None:
    compiled = []
    for i, (pattern, environment, agents) in enumerate(rules):
        match: dict[str, object] = {"attributes": {"tenant": {"regex": "^ten"}}}
        attributes: dict[str, object] = {}
        if pattern is not None:
            match["user_input"] = {"regex": pattern}
        if environment is not None:
            attributes["env"] = environment
        if agents is not None:
            attributes["agent"] = agents
        if attributes or pattern is None:
            match["attributes"] = attributes or {"tenant": {"regex": f"^ten.nt-{i % 3}"}}
        else:
            del match["attributes"]
        compiled.append(compile_rule(f"r{i:02d}", 1, match))
    index = RuleIndex(compiled)
    seen = Facts(
        message,
        {"env": frozenset({env}), "agent": frozenset({agent}), "tenant": frozenset({"tenant-1"})},
    )
    brute = {r.id for r in compiled if r.search(seen)}
    assert {r.id for r, _ in index.hits(seen)} == brute


def test_templates_fill_typed_values_and_strings() -> None:
    reference = [
        {
            "name": "book_table",
            "args": {
                "party_size": "{n|int}",
                "city": "{city}",
                "loud": "{city|upper}",
                "note": "{n} people in {city|lower}",
                "nested": [{"price": "{n|float}"}],
                "fixed": "{kept as written}",
            },
        },
        [{"name": "get_weather", "args": {"city": "{city}"}}],
    ]
    filled, used = fill(reference, {"n": "4", "city": "Lyon"})
    assert filled[0]["args"] == {
        "party_size": 4,
        "city": "Lyon",
        "loud": "LYON",
        "note": "4 people in lyon",
        "nested": [{"price": 4.0}],
        "fixed": "{kept as written}",
    }
    assert list(filled[0]["args"]) == list(reference[0]["args"])  # key order kept
    assert filled[1] == [{"name": "get_weather", "args": {"city": "Lyon"}}]
    assert used == {
        "{n|int}": 4,
        "{city}": "Lyon",
        "{city|upper}": "LYON",
        "{n}": "4",
        "{city|lower}": "lyon",
        "{n|float}": 4.0,
    }


def test_a_template_without_a_value_is_an_error() -> None:
    with pytest.raises(TemplateError, match="has no value"):
        fill([{"name": "f", "args": {"n": "{n}"}}], {"n": None})
    with pytest.raises(TemplateError, match="cannot apply 'int'"):
        fill([{"name": "f", "args": {"n": "{n|int}"}}], {"n": "four"})


def test_template_problems_name_unknown_groups_and_filters() -> None:
    reference = [{"name": "f", "args": {"a": "{city}", "b": "{n|round}", "c": "{x}"}}]
    problems = [m for _, m in template_problems(reference, ["city", "n"])]
    assert len(problems) == 2
    assert "unknown filter 'round'" in problems[0]
    assert "{x} names no named group" in problems[1]
