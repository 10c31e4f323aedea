"""Named metric instances: load-time validation that names the offending path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolscore.scorer import ConfigError, default_config, load_config, parse_config

ROOT = Path(__file__).resolve().parents[2]


def error_of(mapping: object) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config(mapping)
    return str(info.value)


def metric(**options: object) -> dict[str, object]:
    return {"metrics": {"m": {"type": "tool_call_accuracy", **options}}}


def test_default_config_is_the_two_ragas_metrics():
    instances = default_config().instances
    assert list(instances) == ["tool_call_accuracy", "tool_call_f1"]
    assert instances["tool_call_accuracy"].options_dict() == {
        "type": "tool_call_accuracy",
        "order": "strict",
        "length_mismatch": "zero",
        "args": "exact",
        "tools": {},
    }
    assert instances["tool_call_f1"].options_dict() == {"type": "tool_call_f1"}


def test_the_issue_example_loads_with_instances_in_file_order():
    config = load_config(ROOT / "examples" / "scoring.yaml")
    assert list(config.instances) == [
        "tool_call_accuracy",
        "accuracy_any_order",
        "tool_call_f1",
        "accuracy_fuzzy",
    ]
    fuzzy = config.instances["accuracy_fuzzy"]
    assert fuzzy.type == "tool_call_accuracy"
    assert fuzzy.options_dict() == {
        "type": "tool_call_accuracy",
        "order": "unordered",
        "length_mismatch": "prefix",
        "args": "levenshtein",
        "tools": {
            "search": {"args": {"query": "normalized", "request_id": "ignore"}},
            "set_temperature": {"args": {"value": {"numeric": {"abs_tol": 0.5, "rel_tol": 0.0}}}},
        },
    }
    json.dumps(fuzzy.options_dict())  # JSON-able, for the evaluations.metric_config column


@pytest.mark.parametrize(
    ("mapping", "message"),
    [
        (
            metric(tools={"search": {"args": {"query": "normalised"}}}),
            "metrics.m.tools.search.args.query: unknown comparator 'normalised'",
        ),
        (metric(order="random"), "metrics.m.order: unknown order 'random'"),
        (metric(length_mismatch="penalty"), "metrics.m.length_mismatch: unknown length_mismatch"),
        (metric(strict_order=False), "metrics.m.strict_order: unknown key for tool_call_accuracy"),
        (metric(args="fuzzy"), "metrics.m.args: unknown comparator 'fuzzy'"),
        (metric(args={"numeric": {"abs_tol": -1}}), "metrics.m.args.numeric.abs_tol: must be"),
        (metric(args={"numeric": {"abs_tol": "1"}}), "metrics.m.args.numeric.abs_tol: must be"),
        (metric(args={"numeric": {"tol": 1}}), "metrics.m.args.numeric.tol: unknown option"),
        (metric(args={"levenshtein": {"x": 1}}), "metrics.m.args.levenshtein.x: unknown option"),
        (metric(args={"exact": None, "json": None}), "metrics.m.args: a comparator is a name"),
        (metric(tools={"s": {"arguments": {}}}), "metrics.m.tools.s.arguments: unknown key"),
        (metric(tools={"s": {"default": "nope"}}), "metrics.m.tools.s.default: unknown comparator"),
        (metric(tools=["s"]), "metrics.m.tools: must be a mapping"),
        ({"metrics": {"m": {"order": "strict"}}}, "metrics.m.type: missing"),
        ({"metrics": {"m": {"type": "bleu"}}}, "metrics.m.type: unknown metric type 'bleu'"),
        (
            {"metrics": {"m": {"type": "tool_call_f1", "order": "flexible"}}},
            "metrics.m.order: unknown key for tool_call_f1",
        ),
        ({"metrics": {"id": {"type": "tool_call_f1"}}}, "metrics.id: reserved"),
        ({"metrics": {}}, "metrics: at least one metric instance is required"),
        ({"metric": {}}, "metric: unknown top-level key"),
        ({}, "metrics: missing"),
        ([], "(config): must be a mapping"),
    ],
)
def test_invalid_configurations_name_the_offending_path(mapping, message):
    assert error_of(mapping).startswith(message)


def test_other_top_level_sections_can_be_left_to_their_owners():
    config = parse_config(
        {"metrics": {"f1": {"type": "tool_call_f1"}}, "server": {}}, other_sections=["server"]
    )
    assert list(config.instances) == ["f1"]


def test_json_files_load_too(tmp_path):
    path = tmp_path / "scoring.json"
    path.write_text(
        json.dumps({"metrics": {"a": {"type": "tool_call_accuracy", "order": "subsequence"}}})
    )
    assert load_config(path).instances["a"].options_dict()["order"] == "subsequence"


def test_file_errors_name_the_file(tmp_path):
    path = tmp_path / "scoring.yaml"
    path.write_text("metrics:\n  a: {type: tool_call_accuracy, order: sideways}\n")
    with pytest.raises(ConfigError, match=r"scoring\.yaml: metrics\.a\.order: unknown order"):
        load_config(path)
    path.write_text("metrics:\n  a: [unclosed\n")
    with pytest.raises(ConfigError, match=r"scoring\.yaml: invalid YAML"):
        load_config(path)
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")


def test_duplicate_instance_names_are_rejected_not_silently_merged(tmp_path):
    path = tmp_path / "scoring.yaml"
    path.write_text("metrics:\n  a: {type: tool_call_accuracy}\n  a: {type: tool_call_f1}\n")
    with pytest.raises(ConfigError, match="duplicate key 'a' at line 3"):
        load_config(path)
