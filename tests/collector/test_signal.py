"""toolscore.collector.app.Signal: the fan-out the pipeline uses to wake the write-back."""

from __future__ import annotations

import threading

import pytest

from toolscore.collector.components import AppContext, Signal


def test_emit_calls_every_subscriber_from_any_thread() -> None:
    calls: list[str] = []
    signal = Signal()
    signal.subscribe(lambda: calls.append("a"))
    signal.subscribe(lambda: calls.append("b"))
    thread = threading.Thread(target=signal.emit)
    thread.start()
    thread.join()
    assert calls == ["a", "b"]


def test_a_failing_subscriber_does_not_stop_the_others_or_the_emitter(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: list[str] = []
    signal = Signal()

    def broken() -> None:
        raise RuntimeError("boom")

    signal.subscribe(broken)
    signal.subscribe(lambda: calls.append("after"))
    signal.emit()
    assert calls == ["after"]
    assert "signal subscriber" in caplog.text


def test_each_app_context_has_its_own_signal() -> None:
    a = AppContext(None, None, None, None)  # type: ignore[arg-type]
    b = AppContext(None, None, None, None)  # type: ignore[arg-type]
    assert a.evaluations_written is not b.evaluations_written
