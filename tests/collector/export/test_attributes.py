"""Provenance on what toolscore writes back: which evaluator and which reference."""

from __future__ import annotations

import toolscore
from toolscore.collector.export.attributes import metric_config_hash, provenance_attributes

FUZZY = {"type": "tool_call_accuracy", "order": "unordered", "args": "levenshtein", "tools": {}}


def test_the_config_hash_follows_the_options_not_their_key_order() -> None:
    reordered = dict(reversed(list(FUZZY.items())))
    assert metric_config_hash("tool_call_accuracy", FUZZY) == metric_config_hash(
        "tool_call_accuracy", reordered
    )
    strict = {**FUZZY, "order": "strict"}
    assert metric_config_hash("tool_call_accuracy", FUZZY) != metric_config_hash(
        "tool_call_accuracy", strict
    )
    assert len(metric_config_hash("tool_call_f1", {})) == 16


def test_provenance_names_evaluator_and_reference_set() -> None:
    attrs = provenance_attributes(
        metric_type="tool_call_f1", metric_config={}, expectation_id="weather", version=3
    )
    assert attrs == {
        "gen_ai.evaluation.evaluator.id": "toolscore.tool_call_f1",
        "gen_ai.evaluation.evaluator.version": toolscore.__version__,
        "gen_ai.evaluation.evaluator.type": "deterministic",
        "toolscore.metric.config_hash": metric_config_hash("tool_call_f1", {}),
        "gen_ai.evaluation.reference_set.id": "weather",
        "gen_ai.evaluation.reference_set.version": "3",
    }
    unmatched = provenance_attributes(
        metric_type="tool_call_f1", metric_config={}, expectation_id=None, version=None
    )
    assert "gen_ai.evaluation.reference_set.id" not in unmatched
