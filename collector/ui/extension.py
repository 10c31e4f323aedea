"""Plugs the web UI into ``serve``: its own listener, the server's engine, token and figures."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from toolscore.collector.components import AppContext, Extension, ExtensionFactory
from toolscore.collector.settings import Listen
from toolscore.collector.ui.pages import LiveStatus
from toolscore.collector.ui.server import UiConfig, UiServer


class _IngestRate:
    """Spans accepted per second since the previous reading (the accepted-spans counter)."""

    def __init__(self, counter: Any) -> None:
        self._counter = counter
        self._last: tuple[float, float] | None = (time.monotonic(), self._total())

    def _total(self) -> float:
        return sum(
            float(sample.value)
            for metric in self._counter.collect()
            for sample in metric.samples
            if sample.name.endswith("_total") and sample.labels.get("signal") == "traces"
        )

    def __call__(self) -> float | None:
        now, total = time.monotonic(), self._total()
        last, self._last = self._last, (now, total)
        if last is None or now <= last[0]:
            return None
        return (total - last[1]) / (now - last[0])


def ui_extension(
    listen: Listen | None, started: Callable[[UiServer], None] | None = None
) -> ExtensionFactory:
    """The UI on ``listen`` (None: no UI); ``started`` is told the server once it is built
    (tests read its bound port)."""

    def build(ctx: AppContext) -> Extension:
        if listen is None:
            return Extension()
        live = LiveStatus(spans_per_second=_IngestRate(ctx.metrics.accepted))
        config = UiConfig(
            ctx.engine, ctx.settings.auth_token, ctx.scoring_config, live, ctx.evaluations_written
        )
        server = UiServer(config, listen.host, listen.port)
        if started is not None:
            started(server)
        return Extension(components=[server], summary={"ui": f"web UI on http://{listen}/"})

    return build
