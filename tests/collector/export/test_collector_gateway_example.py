"""examples/collector/gateway.yaml: a well-formed Collector gateway spreading traces over replicas.

Checked for structure only (no Collector binary is installable here): every component a pipeline
or the service names is declared, both signals go through the trace-id load balancer, whose
per-replica template has no endpoint and whose replicas are toolscore's OTLP/gRPC port.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from toolscore.collector.settings import DEFAULT_GRPC

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "collector" / "gateway.yaml"


def _config() -> dict[str, Any]:
    data = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def test_every_component_named_is_declared() -> None:
    cfg = _config()
    for extension in cfg["service"]["extensions"]:
        assert extension in cfg["extensions"]
    pipelines = cfg["service"]["pipelines"]
    assert set(pipelines) == {"traces", "logs"}
    for name, pipeline in pipelines.items():
        for kind in ("receivers", "processors", "exporters"):
            for component in pipeline.get(kind, []):
                assert component in cfg[kind], f"{name}: {kind} {component} is not declared"
        assert pipeline["processors"][0] == "memory_limiter"  # first, as the Collector advises


def test_both_signals_are_balanced_by_trace_id_over_toolscore_grpc_ports() -> None:
    cfg = _config()
    for pipeline in cfg["service"]["pipelines"].values():
        assert pipeline["exporters"] == ["load_balancing"]
    balancer = cfg["exporters"]["load_balancing"]
    assert balancer["routing_key"] == "traceID"
    assert "endpoint" not in balancer["protocol"]["otlp"]  # the balancer sets it per replica
    port = DEFAULT_GRPC.rsplit(":", 1)[1]
    hosts = balancer["resolver"]["static"]["hostnames"]
    assert len(hosts) >= 2 and all(h.endswith(f":{port}") for h in hosts)
    queue = balancer["sending_queue"]
    assert queue["enabled"] and queue["storage"] in cfg["extensions"]
    assert balancer["retry_on_failure"]["enabled"]
