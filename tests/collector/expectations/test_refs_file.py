"""Reading expectation files: three formats, and whole-file rejection that says where it failed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolscore.collector.expectations.files import RefsFileError, load_refs_file, parse_refs_text
from toolscore.storage.expectations.repository import ExpectationData

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "expectations.yaml"

YAML_DOC = """\
expectations:
  - id: weather
    user_input: "What's the weather in Paris?"
    metrics: [acc]
    match:
      user_input: "What's the weather in Paris?"
    reference_tool_calls:
      - name: get_weather
        args: {city: Paris, when: 2024-05-01}
  - id: parallel
    match: {conversation_id: [c1, c2]}
    reference_tool_calls:
      - [{name: a, args: {}}, {name: b}]
      - name: c
        args: {n: 1.0}
"""


def _problems(excinfo: pytest.ExceptionInfo[RefsFileError]) -> list[str]:
    return [str(p) for p in excinfo.value.problems]


def test_yaml_mapping_form_is_read_with_every_field() -> None:
    items = parse_refs_text(YAML_DOC, "yaml", source="refs.yaml")

    assert items[0] == ExpectationData(
        id="weather",
        # dates stay the text written, not datetime objects that JSON cannot hold
        reference_tool_calls=[
            {"name": "get_weather", "args": {"city": "Paris", "when": "2024-05-01"}}
        ],
        user_input="What's the weather in Paris?",
        metrics=("acc",),
        match={"user_input": "What's the weather in Paris?"},
    )
    # a group is a list of calls; a call without args has empty args, as Ragas writes it
    assert items[1].reference_tool_calls == [
        [{"name": "a", "args": {}}, {"name": "b", "args": {}}],
        {"name": "c", "args": {"n": 1.0}},
    ]
    assert items[1].match == {"conversation_id": ["c1", "c2"]}
    assert items[1].metrics is None


def test_json_list_form_keeps_number_types_and_key_order() -> None:
    doc = [{"id": "x", "reference_tool_calls": [{"name": "f", "args": {"b": 1, "a": 1.0}}]}]

    (item,) = parse_refs_text(json.dumps(doc), "json")

    args = item.reference_tool_calls[0]["args"]
    assert list(args) == ["b", "a"]
    assert (type(args["b"]), type(args["a"])) == (int, float)


def test_ragas_jsonl_samples_are_read_one_per_line(tmp_path: Path) -> None:
    samples: list[dict[str, Any]] = [
        {
            "id": "s1",
            "user_input": [
                {"type": "human", "content": "Weather in Paris?"},
                {"type": "ai", "content": "", "tool_calls": [{"name": "w", "args": {"c": "P"}}]},
                {"type": "tool", "content": "18C"},
            ],
            "reference_tool_calls": [{"name": "w", "args": {"c": "P"}}],
            "reference": "It is 18C",  # other Ragas fields are allowed and ignored
        },
        {"id": "s2", "reference_tool_calls": []},
    ]
    path = tmp_path / "samples.jsonl"
    path.write_text("\n".join(json.dumps(s) for s in samples) + "\n\n")

    items = load_refs_file(path)

    assert [i.id for i in items] == ["s1", "s2"]
    assert items[0].user_input == samples[0]["user_input"]
    assert items[1].reference_tool_calls == []


def test_the_shipped_example_is_valid() -> None:
    items = load_refs_file(EXAMPLE)

    assert len(items) >= 3
    assert all(i.reference_tool_calls for i in items)


def test_a_missing_call_name_is_reported_by_path_and_yaml_line() -> None:
    doc = YAML_DOC + "  - id: broken\n    reference_tool_calls:\n      - args: {x: 1}\n"

    with pytest.raises(RefsFileError) as excinfo:
        parse_refs_text(doc, "yaml", source="refs.yaml")

    assert _problems(excinfo) == [
        "refs.yaml:18: expectations[2].reference_tool_calls[0].name: missing"
    ]


def test_jsonl_problems_are_reported_by_line() -> None:
    lines = [
        '{"id": "ok", "reference_tool_calls": []}',
        "",
        '{"id": "bad", "reference_tool_calls": [{"name": "f", "args": "x=1"}]}',
        "{not json",
    ]

    with pytest.raises(RefsFileError) as excinfo:
        parse_refs_text("\n".join(lines), "jsonl", source="s.jsonl")

    problems = _problems(excinfo)
    assert problems[0].startswith("s.jsonl:4: invalid JSON")
    assert problems[1] == (
        "s.jsonl:3: reference_tool_calls[0].args: must be a mapping of arguments, got a string"
    )


def test_json_problems_are_reported_by_path() -> None:
    doc = {"expectations": [{"id": "a", "reference_tool_calls": []}, {"reference_tool_calls": []}]}

    with pytest.raises(RefsFileError) as excinfo:
        parse_refs_text(json.dumps(doc), "json", source="r.json")

    assert _problems(excinfo) == ["r.json: expectations[1].id: missing"]


def test_every_problem_is_reported_not_just_the_first() -> None:
    doc = [
        {"id": "a", "reference_tool_calls": [{"name": ""}], "metrics": []},
        {"id": 3, "reference_tool_calls": {"name": "f"}, "match": {"conversation": "x"}},
    ]

    with pytest.raises(RefsFileError) as excinfo:
        parse_refs_text(json.dumps(doc), "json", source="r.json")

    assert _problems(excinfo) == [
        "r.json: [0].reference_tool_calls[0].name: must not be blank",
        "r.json: [0].metrics: must be a non-empty list of metric instance names (omit for all)",
        "r.json: [1].id: must be a string, got int",
        "r.json: [1].reference_tool_calls: must be a list of tool calls, got a mapping",
        "r.json: [1].match.conversation: unknown key "
        "(expected conversation_id, user_input, attributes, priority)",
    ]


def test_duplicate_ids_reject_the_file() -> None:
    lines = ['{"id": "a", "reference_tool_calls": []}'] * 2

    with pytest.raises(RefsFileError) as excinfo:
        parse_refs_text("\n".join(lines), "jsonl", source="s.jsonl")

    assert _problems(excinfo) == ["s.jsonl:2: id: duplicate id 'a' (first at line 1)"]


@pytest.mark.parametrize(
    ("snippet", "problem"),
    [
        ("reference_tool_calls: [{name: f, arguments: {}}]", "did you mean 'args'?"),
        ("reference_tool_calls: [[]]", "a group of calls must not be empty"),
        ("reference_tool_calls: [[[{name: f}]]]", "groups cannot be nested"),
        ("reference_tool_calls: [{name: f, args: {x: .nan}}]", "cannot be stored as JSON"),
        ("reference_tool_calls: [{name: f, args: {1: x}}]", "key 1 must be a string"),
        ("reference_tool_calls: []\nmatch: {user_input: '   '}", "must be a non-blank string"),
        ("reference_tool_calls: []\nmatch: {conversation_id: []}", "non-empty list"),
        ("reference_tool_calls: []\nmetrics: [a, a]", "'a' is listed twice"),
        ("reference_tool_calls: []\nuser_input: [{type: robot}]", "must be one of human, ai"),
        ("reference_tool_calls: []\nnotes: hi", "unknown key"),
        ("reference_tool_calls: null", "must be a list of tool calls, got null"),
        ("user_input: hi", "reference_tool_calls: missing"),
    ],
)
def test_invalid_content_is_rejected_with_a_reason(snippet: str, problem: str) -> None:
    doc = "- id: e\n" + "".join(f"  {line}\n" for line in snippet.splitlines())

    with pytest.raises(RefsFileError) as excinfo:
        parse_refs_text(doc, "yaml", source="r.yaml")

    assert problem in str(excinfo.value)


def test_metric_names_unknown_to_the_config_are_rejected() -> None:
    doc = "- id: e\n  reference_tool_calls: []\n  metrics: [acc, f1_loose]\n"

    with pytest.raises(RefsFileError) as excinfo:
        parse_refs_text(doc, "yaml", source="r.yaml", metric_names=["acc", "f1"])

    assert _problems(excinfo) == [
        "r.yaml:3: [0].metrics[1]: unknown metric instance 'f1_loose' (configured: acc, f1)"
    ]
    # the same file is fine without a config to check against
    assert parse_refs_text(doc, "yaml")[0].metrics == ("acc", "f1_loose")


@pytest.mark.parametrize(
    ("text", "fmt", "problem"),
    [
        ("expectations: [\n", "yaml", "r:2: invalid YAML"),
        ("{}", "json", "r: expected a list of expectations"),
        ("[]", "json", "r: no expectations in the file"),
        ("", "yaml", "r: expected a list of expectations"),
        ("expectations: []\nversion: 2\n", "yaml", "r:2: version: unknown top-level key"),
        ('{"a": 1,}', "json", "r:1: invalid JSON"),
    ],
)
def test_malformed_documents_are_rejected(text: str, fmt: str, problem: str) -> None:
    with pytest.raises(RefsFileError) as excinfo:
        parse_refs_text(text, fmt, source="r")  # type: ignore[arg-type]

    assert problem in str(excinfo.value)


def test_unknown_suffix_and_unreadable_files_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(RefsFileError, match=r"unknown file type"):
        load_refs_file(tmp_path / "refs.txt")
    with pytest.raises(RefsFileError, match=r"cannot read"):
        load_refs_file(tmp_path / "missing.yaml")
    # an explicit format overrides the suffix
    path = tmp_path / "refs.txt"
    path.write_text('[{"id": "a", "reference_tool_calls": []}]')
    assert load_refs_file(path, fmt="json")[0].id == "a"


def test_a_byte_order_mark_is_tolerated(tmp_path: Path) -> None:
    path = tmp_path / "refs.json"
    path.write_bytes(b"\xef\xbb\xbf" + b'[{"id": "a", "reference_tool_calls": []}]')

    assert [i.id for i in load_refs_file(path)] == ["a"]


def test_rules_and_templates_are_checked_with_their_place() -> None:
    doc = """\
- id: book
  match:
    user_input: {regex: "table for (?P<n>\\\\d+)"}
    attributes: {gen_ai.agent.name: [booking, booker], service.version: {regex: "^2"}}
    priority: 3
  reference_tool_calls:
    - {name: book_table, args: {party_size: "{n|int}", note: "for {n}"}}
- id: bad-regex
  match: {user_input: {regex: "table ("}}
  reference_tool_calls: []
- id: bad-template
  match: {user_input: {regex: "for (?P<n>\\\\d+)"}}
  reference_tool_calls:
    - {name: f, args: {a: "{city}", b: "{n|round}"}}
"""
    with pytest.raises(RefsFileError) as excinfo:
        parse_refs_text(doc, "yaml", source="r.yaml")
    problems = _problems(excinfo)
    assert problems[0].startswith("r.yaml:9: [1].match.user_input.regex: invalid regular")
    assert problems[1:] == [
        "r.yaml:14: [2].reference_tool_calls[0].args.a: {city} names no named group of "
        "match.user_input.regex (its groups: n)",
        "r.yaml:14: [2].reference_tool_calls[0].args.b: unknown filter 'round' in {n|round} "
        "(int, float, lower, upper)",
    ]
    valid = parse_refs_text(doc.split("- id: bad-regex")[0], "yaml", source="r.yaml")
    assert valid[0].match == {
        "user_input": {"regex": r"table for (?P<n>\d+)"},
        "attributes": {
            "gen_ai.agent.name": ["booking", "booker"],
            "service.version": {"regex": "^2"},
        },
        "priority": 3,
    }


def test_optional_calls_and_any_of_arguments_are_read_and_checked() -> None:
    doc = """\
- id: ok
  reference_tool_calls:
    - {name: search, args: {city: {any_of: [Lyon, lyon]}}}
    - {name: lookup, args: {}, optional: true}
- id: bad
  reference_tool_calls:
    - {name: lookup, args: {}, optional: "yes"}
"""
    with pytest.raises(RefsFileError) as excinfo:
        parse_refs_text(doc, "yaml", source="r.yaml")
    assert _problems(excinfo) == [
        "r.yaml:6: [1].reference_tool_calls[0].optional: must be true or false, got a string"
    ]
    (item,) = parse_refs_text(doc.split("- id: bad")[0], "yaml", source="r.yaml")
    assert item.reference_tool_calls == [
        {"name": "search", "args": {"city": {"any_of": ["Lyon", "lyon"]}}},
        {"name": "lookup", "args": {}, "optional": True},
    ]
