"""OtlpCore.slot: the cap on export requests in flight shared by both transports."""

from __future__ import annotations

from typing import Any

import pytest

from toolscore.collector.errors import TooManyRequests, status_for
from toolscore.collector.ingest.metrics import Metrics
from toolscore.collector.otlp.decode import DecodeLimits
from toolscore.collector.receiver.core import OtlpCore


def _core(cap: int | None) -> tuple[OtlpCore, Metrics]:
    metrics = Metrics()
    writer: Any = None  # slot() never touches the writer
    core = OtlpCore(
        writer, DecodeLimits(1024), metrics, max_concurrent_requests=cap, retry_after_s=3.0
    )
    return core, metrics


def _value(metrics: Metrics, name: str, transport: str) -> float:
    value = metrics.registry.get_sample_value(name, {"transport": transport})
    return 0.0 if value is None else value


def test_slots_are_shared_by_transports_and_released_even_on_errors() -> None:
    core, metrics = _core(2)
    with core.slot("grpc"), core.slot("http"):
        assert _value(metrics, "toolscore_receiver_in_flight_requests", "grpc") == 1
        with pytest.raises(TooManyRequests) as info, core.slot("http"):
            pass
        assert info.value.retry_after_s == 3.0
        status = status_for(info.value)
        assert (status.grpc_code.name, status.http_status, status.retry_after_s) == (
            "UNAVAILABLE",
            503,
            3.0,
        )
    assert _value(metrics, "toolscore_receiver_throttled_requests_total", "http") == 1
    with pytest.raises(ValueError), core.slot("grpc"):
        raise ValueError("undecodable")  # a request failing inside its slot gives it back
    with core.slot("grpc"), core.slot("grpc"):
        pass  # both slots free again
    assert _value(metrics, "toolscore_receiver_in_flight_requests", "grpc") == 0
    assert _value(metrics, "toolscore_receiver_in_flight_requests", "http") == 0


def test_no_cap_when_none() -> None:
    core, metrics = _core(None)
    with core.slot("grpc"), core.slot("grpc"), core.slot("http"):
        assert _value(metrics, "toolscore_receiver_in_flight_requests", "grpc") == 2
    assert _value(metrics, "toolscore_receiver_throttled_requests_total", "grpc") == 0
