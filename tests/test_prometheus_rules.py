"""examples/prometheus: the scrape config and alert rules, checked by the real Prometheus tools.

The rule unit tests (``toolscore-alerts.test.yml``) are written from a real run: a server scores
conversations, its ``/metrics`` is scraped, and the test's input series are those series (names
and labels as toolscore exports them) with values over time. The committed file must equal the
one generated here, and ``promtool test rules`` must pass on it.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.collector.pipeline.e2e import genai_agent_trace, import_refs, otlp_provider, wait_scored
from tests.integration.serve_harness import RunningServer, server_settings
from toolscore.collector.pipeline.extension import pipeline_extension
from toolscore.collector.pipeline.options import PipelineOptions
from toolscore.collector.upkeep.status import status_extension
from toolscore.storage.expectations.repository import ExpectationData

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "prometheus"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool not installed (apt-get install prometheus)"
)
WEATHER = {"name": "get_weather", "args": {"city": "Paris"}}
TIME = {"name": "get_time", "args": {"timezone": "Asia/Tokyo"}}
WANTED = (
    "toolscore_evaluations_total",
    "toolscore_conversations_oldest_waiting_seconds",
    "toolscore_export_backlog_evaluations",
)


SCORING_BACKLOG_ALERT = {
    "exp_labels": {"severity": "critical"},
    "exp_annotations": {
        "summary": "Conversations wait more than 5 minutes to be scored",
        "description": "The oldest conversation waiting has had no new span for 6m 40s. Scoring "
        "is stuck or cannot keep up (see the server's log and "
        "toolscore_pipeline_conversations_total).",
    },
}
EXPORT_BACKLOG_ALERT = {
    "exp_labels": {"severity": "warning"},
    "exp_annotations": {
        "summary": "Evaluations are not being written back over OTLP",
        "description": "3 evaluations have failed to export for 15 minutes: the write-back "
        "endpoint is down or refusing them.",
    },
}


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run(
        [PROMTOOL, *args], cwd=EXAMPLE, capture_output=True, text=True, check=False
    )


@needs_promtool
def test_config_and_rules_are_valid() -> None:
    for args in (("check", "config", "prometheus.yml"), ("check", "rules", "toolscore-alerts.yml")):
        result = _promtool(*args)
        assert result.returncode == 0, result.stdout + result.stderr


def _scrape(sqlite_url: str) -> dict[str, list[dict[str, str]]]:
    """The label sets of the series the rules use, from a real server's /metrics."""
    import_refs(sqlite_url, ExpectationData(id="w", reference_tool_calls=[WEATHER]))
    extensions = [
        pipeline_extension(PipelineOptions(settle_s=0.5, root_idle_s=0.3)),
        status_extension(poll_s=0.1, log_every_s=60),
    ]
    with RunningServer(server_settings(sqlite_url), extensions) as srv:
        provider = otlp_provider(srv)
        for i, calls in enumerate(([WEATHER], [TIME])):  # one pass, one fail
            genai_agent_trace(
                provider.get_tracer("t"),
                f"prom-{i}",
                [*calls],
                "weather?",
                {"toolscore.reference.id": "w"},
            )
        provider.force_flush()
        wait_scored(sqlite_url, ["prom-0", "prom-1"])
        time.sleep(0.5)
        text = requests.get(f"{srv.http_url}/metrics", timeout=5).text
        provider.shutdown()
    found: dict[str, list[dict[str, str]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in WANTED:
                found.setdefault(sample.name, []).append(dict(sample.labels))
    return found


def _series(name: str, labels: dict[str, str], values: str) -> dict[str, str]:
    shown = {"instance": "toolscore-a:4318", "job": "toolscore", **labels}
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(shown.items()))
    return {"series": f"{name}{{{inner}}}", "values": values}


def _rate_series(scraped: dict[str, list[dict[str, str]]], per_min: dict[str, int]) -> list[Any]:
    return [
        _series("toolscore_evaluations_total", labels, f"0+{per_min[labels['label']]}x60")
        for labels in scraped["toolscore_evaluations_total"]
        if labels["label"] in per_min
    ]


def generated_tests(scraped: dict[str, list[dict[str, str]]]) -> dict[str, Any]:
    metrics = sorted({lb["metric"] for lb in scraped["toolscore_evaluations_total"]})
    failing = {"state": "failing"}
    assert failing in scraped["toolscore_export_backlog_evaluations"]
    assert {} in scraped["toolscore_conversations_oldest_waiting_seconds"]
    low = [
        {
            "exp_labels": {"severity": "warning", "metric": m},
            "exp_annotations": {
                "summary": f"{m}: only 20% of evaluations pass",
                "description": f"Fewer than 80% of the conversations scored in the last 30 "
                f"minutes pass {m}. `toolscore report` and `toolscore show` explain the failures.",
            },
        }
        for m in metrics
    ]
    return {
        "rule_files": ["toolscore-alerts.yml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "name": "pass rate 20%: alert per metric instance",
                "interval": "1m",
                "input_series": _rate_series(scraped, {"pass": 1, "fail": 4}),
                "alert_rule_test": [
                    {"eval_time": "10m", "alertname": "ToolscorePassRateLow", "exp_alerts": []},
                    {"eval_time": "60m", "alertname": "ToolscorePassRateLow", "exp_alerts": low},
                ],
            },
            {
                "name": "pass rate 90%: no alert",
                "interval": "1m",
                "input_series": _rate_series(scraped, {"pass": 9, "fail": 1}),
                "alert_rule_test": [
                    {"eval_time": "60m", "alertname": "ToolscorePassRateLow", "exp_alerts": []},
                ],
            },
            {
                "name": "backlogs",
                "interval": "1m",
                "input_series": [
                    _series("toolscore_conversations_oldest_waiting_seconds", {}, "400x20"),
                    _series("toolscore_export_backlog_evaluations", failing, "0x5 3x20"),
                ],
                "alert_rule_test": [
                    {"eval_time": "3m", "alertname": "ToolscoreScoringBacklog", "exp_alerts": []},
                    {
                        "eval_time": "10m",
                        "alertname": "ToolscoreScoringBacklog",
                        "exp_alerts": [SCORING_BACKLOG_ALERT],
                    },
                    {"eval_time": "15m", "alertname": "ToolscoreExportBacklog", "exp_alerts": []},
                    {
                        "eval_time": "22m",
                        "alertname": "ToolscoreExportBacklog",
                        "exp_alerts": [EXPORT_BACKLOG_ALERT],
                    },
                ],
            },
        ],
    }


HEADER = (
    "# promtool test rules toolscore-alerts.test.yml\n"
    "# Generated from a real run's /metrics by tests/test_prometheus_rules.py; do not edit by\n"
    "# hand: TOOLSCORE_WRITE_PROMETHEUS_TESTS=1 python -m pytest tests/test_prometheus_rules.py\n"
)


@needs_promtool
def test_rule_unit_tests_from_a_real_scrape_pass(sqlite_url: str) -> None:
    import os

    text = HEADER + yaml.safe_dump(generated_tests(_scrape(sqlite_url)), sort_keys=False, width=100)
    committed = EXAMPLE / "toolscore-alerts.test.yml"
    if os.environ.get("TOOLSCORE_WRITE_PROMETHEUS_TESTS"):
        committed.write_text(text)
    assert committed.read_text() == text, "regenerate toolscore-alerts.test.yml (see its header)"
    result = _promtool("test", "rules", "toolscore-alerts.test.yml")
    assert result.returncode == 0, result.stdout + result.stderr
