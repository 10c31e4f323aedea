"""The Python API scores as the command line does, takes Ragas objects, and its docs run."""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

import toolscore
from tests.scorer import ragas_oracle
from toolscore.scorer.rows import score_row

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = [json.loads(line) for line in (ROOT / "examples" / "samples.jsonl").open()]
CONFIG = ROOT / "examples" / "scoring.yaml"


def _calls(sample: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for m in sample["user_input"] if m["type"] == "ai" for c in m.get("tool_calls") or []]


@pytest.mark.parametrize("sample", SAMPLES, ids=[s["id"] for s in SAMPLES])
def test_scores_and_explanations_equal_the_command_lines(sample: dict[str, Any]) -> None:
    config = toolscore.load_metrics(CONFIG)
    row, _ = score_row(config, sample, where="line 1")
    by_sample = toolscore.score_sample(sample, config)
    by_calls = toolscore.score_calls(_calls(sample), sample["reference_tool_calls"], config)
    for results in (by_sample, by_calls):
        assert {name: r.score for name, r in results.items()} == {
            name: row[name] for name in config.instances
        }
        assert {name: dict(r.details) for name, r in results.items()} == row["details"]


@ragas_oracle.requires_ragas
@pytest.mark.parametrize("sample", SAMPLES, ids=[s["id"] for s in SAMPLES])
def test_a_ragas_object_scores_like_its_dict_and_like_ragas(sample: dict[str, Any]) -> None:
    ragas_sample = ragas_oracle.build(sample)
    results = toolscore.score_sample(ragas_sample)
    assert results["tool_call_accuracy"].score == ragas_oracle.accuracy(sample)
    assert results["tool_call_f1"].score == ragas_oracle.f1(sample)
    assert results == toolscore.score_sample(sample)


def test_assert_tool_calls_fails_with_the_explanation() -> None:
    called = [{"name": "get_time", "args": {"timezone": "Tokyo"}}]
    wanted = [{"name": "get_time", "args": {"timezone": "Asia/Tokyo"}}]
    with pytest.raises(AssertionError) as failure:
        toolscore.assert_tool_calls(called, wanted)
    assert str(failure.value) == (
        "tool_call_accuracy = 0: expected get_time(timezone='Asia/Tokyo'), "
        "got get_time(timezone='Tokyo') (needed >= 1)"
    )
    passed = toolscore.assert_tool_calls(wanted, wanted, metric="tool_call_f1")
    assert passed.score == 1.0 and passed.reasons == ()
    assert toolscore.assert_tool_calls(SAMPLES[0]).score == 1.0  # a whole sample


def test_groups_and_toolcall_objects_are_references_too() -> None:
    config = toolscore.scorer.parse_config(
        {"metrics": {"grouped": {"type": "tool_call_accuracy", "order": "grouped"}}}
    )
    a, b = toolscore.ToolCall("a", {"x": 1}), toolscore.ToolCall("b", {})
    results = toolscore.score_calls([b, a], [[a, b]], config)
    assert results["grouped"].score == 1.0
    assert toolscore.score_calls([a], [a])["tool_call_accuracy"].score == 1.0


def test_bad_input_says_what_is_wrong() -> None:
    with pytest.raises(toolscore.SampleError, match=r"predicted\[0\]"):
        toolscore.score_calls([{"args": {}}], [])
    with pytest.raises(toolscore.SampleError, match="user_input"):
        toolscore.score_sample({"reference_tool_calls": []})
    with pytest.raises(KeyError, match="known: tool_call_accuracy, tool_call_f1"):
        toolscore.score_calls([], [], metrics=["accuracy"])
    missing = toolscore.score_sample({"user_input": []})["tool_call_accuracy"]
    assert missing.score is None and "reference_tool_calls is missing" in missing.explain()


def _python_blocks(markdown: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", markdown, flags=re.S)


def _expected_output(block: str) -> list[str]:
    """The ``# ...`` comment lines that follow a ``print(...)`` line: what it prints."""
    lines = block.splitlines()
    return [
        nxt[2:]
        for line, nxt in itertools.pairwise(lines)
        if "print(" in line and nxt.startswith("# ")
    ]


def test_the_documented_examples_run_and_print_what_they_say() -> None:
    blocks = _python_blocks((ROOT / "docs" / "api.md").read_text())
    assert len(blocks) == 2
    cwd = os.getcwd()
    os.chdir(ROOT)  # the examples name files relative to the repository
    try:
        for block in blocks:
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(block, "docs/api.md", "exec"), {})
            expected = _expected_output(block)
            if expected:
                assert out.getvalue().splitlines() == expected
            else:
                assert len(out.getvalue().splitlines()) == len(SAMPLES)
    finally:
        os.chdir(cwd)
