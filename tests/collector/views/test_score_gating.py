"""``toolscore score --fail-under / --pass-threshold / --junit``: CI gating on scores."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
SAMPLES = ROOT / "examples" / "samples.jsonl"
METRICS = ("tool_call_accuracy", "tool_call_f1")


def toolscore(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolscore", "score", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _plain_rows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in toolscore(str(SAMPLES)).stdout.splitlines()]


def _mean(metric: str) -> float:
    scores = [r[metric] for r in _plain_rows() if r.get(metric) is not None]
    return sum(scores) / len(scores)


def test_output_is_unchanged_and_a_met_level_passes() -> None:
    level = _mean("tool_call_accuracy")
    gated = toolscore(str(SAMPLES), "--fail-under", f"tool_call_accuracy={level}")
    assert gated.stdout == toolscore(str(SAMPLES)).stdout
    assert gated.returncode == 0, gated.stderr
    lines = gated.stderr.splitlines()
    assert lines[0].startswith(f"tool_call_accuracy: mean {level:.4f}, pass rate ")
    assert lines[0].endswith(f": PASS (fail-under {level:g})")
    assert lines[1].startswith("tool_call_f1: mean ")


def test_a_mean_below_its_level_fails_the_run() -> None:
    level = min(1.0, _mean("tool_call_f1") + 0.01)
    gated = toolscore(str(SAMPLES), "--fail-under", f"tool_call_f1={level}")
    assert gated.returncode == 1
    assert f"FAIL (fail-under {level:g})" in gated.stderr


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        ("accuracy=0.5", "no metric instance 'accuracy' (tool_call_accuracy, tool_call_f1)"),
        ("tool_call_f1=1.5", "expected METRIC=VALUE with VALUE in [0, 1]"),
        ("tool_call_f1", "expected METRIC=VALUE"),
    ],
)
def test_bad_levels_are_usage_errors(flag: str, message: str) -> None:
    result = toolscore(str(SAMPLES), "--fail-under", flag)
    assert result.returncode == 2 and message in result.stderr and result.stdout == ""


def _cases(path: Path) -> dict[tuple[str, str], ET.Element]:
    suite = ET.parse(path).getroot().find("testsuite")
    assert suite is not None
    return {(c.get("classname", ""), c.get("name", "")): c for c in suite.iter("testcase")}


@pytest.mark.parametrize("threshold", [1.0, 0.5])
def test_junit_has_a_case_per_sample_and_metric_failing_below_threshold(
    tmp_path: Path, threshold: float
) -> None:
    report = tmp_path / "junit.xml"
    args = [str(SAMPLES), "--junit", str(report)]
    args += ["--pass-threshold", f"tool_call_accuracy={threshold}"]
    args += ["--pass-threshold", f"tool_call_f1={threshold}"]
    assert toolscore(*args).returncode == 0  # no --fail-under: a report alone never fails
    rows = _plain_rows()
    cases = _cases(report)
    assert set(cases) == {(m, r["id"]) for r in rows for m in METRICS}
    for row in rows:
        for metric in METRICS:
            failure = cases[(metric, row["id"])].find("failure")
            assert (failure is not None) == (row[metric] < threshold)
            if failure is not None:
                for reason in row["details"][metric]["reasons"]:
                    assert reason in failure.get("message", "")
    suite = ET.parse(report).getroot()[0]
    assert suite.get("tests") == str(len(rows) * 2)
    failed = sum(1 for r in rows for m in METRICS if r[m] < threshold)
    assert suite.get("failures") == str(failed)


def test_a_sample_that_cannot_be_scored_is_an_error_case(tmp_path: Path) -> None:
    samples = tmp_path / "s.jsonl"
    samples.write_text(json.dumps({"id": "no-ref", "user_input": []}) + "\n")
    report = tmp_path / "junit.xml"
    result = toolscore(str(samples), "--junit", str(report), "--fail-under", "tool_call_f1=0")
    assert result.returncode == 1  # nothing scored: the gate cannot pass
    error = _cases(report)[("tool_call_f1", "no-ref")].find("error")
    assert error is not None and "reference_tool_calls is missing" in error.get("message", "")
    assert "tool_call_f1: mean n/a, pass rate n/a (>= 1), 0 scored, 1 not scored" in result.stderr
