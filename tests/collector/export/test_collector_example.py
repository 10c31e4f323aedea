"""examples/collector/otelcol.yaml is a well-formed Collector config that routes without a loop."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "collector" / "otelcol.yaml"


def _config() -> dict[str, Any]:
    data = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def test_every_pipeline_names_declared_components() -> None:
    cfg = _config()
    pipelines = cfg["service"]["pipelines"]
    assert pipelines
    for name, pipeline in pipelines.items():
        assert name.split("/")[0] in ("traces", "logs", "metrics")
        for kind in ("receivers", "processors", "exporters"):
            for component in pipeline.get(kind, []):
                assert component in cfg[kind], f"{name}: {kind} {component} is not declared"


def test_agents_fan_out_and_evaluations_go_only_to_the_backend() -> None:
    pipelines = _config()["service"]["pipelines"]
    for signal in ("traces", "logs"):
        agents = pipelines[f"{signal}/agents"]
        assert set(agents["exporters"]) == {"otlp/backend", "otlp/toolscore"}
        evaluations = pipelines[f"{signal}/evaluations"]
        assert evaluations["exporters"] == ["otlp/backend"]  # never back into toolscore
        assert set(evaluations["receivers"]).isdisjoint(agents["receivers"])
