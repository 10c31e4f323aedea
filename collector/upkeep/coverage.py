"""``toolscore_expectation_coverage_conversations{service,agent,outcome}`` on ``/metrics``.

Read with the count of conversations by status (same schedule: a scan of the table). Labels
stay bounded: the ``TOP`` services and the ``TOP`` agents with the most conversations keep
their names, the rest are summed as ``other``; outcomes are the four of
``storage.conversations.coverage.OUTCOMES``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

from prometheus_client import CollectorRegistry, Gauge

from toolscore.storage.conversations.coverage import coverage_counts, top_labels
from toolscore.storage.database import Engine

TOP = 10
OTHER = "other"
CoverageRows = Sequence[tuple[str, str, str, int]]  # service, agent, outcome, conversations


class CoverageGauges:
    def __init__(self, registry: CollectorRegistry, top: int = TOP) -> None:
        self.top = top
        self.gauge = Gauge(
            "toolscore_expectation_coverage_conversations",
            "Conversations in the database by service.name, gen_ai.agent.name and outcome "
            "(matched, unmatched, open, error); the top services and agents by name, the rest "
            "as 'other'.",
            ["service", "agent", "outcome"],
            registry=registry,
        )

    def set(self, rows: CoverageRows) -> None:
        services = top_labels([(s, n) for s, _, _, n in rows], self.top)
        agents = top_labels([(a, n) for _, a, _, n in rows], self.top)
        summed: Counter[tuple[str, str, str]] = Counter()
        for service, agent, outcome, n in rows:
            key = (
                service if service in services else OTHER,
                agent if agent in agents else OTHER,
                outcome,
            )
            summed[key] += n
        self.gauge.clear()  # a name that left the top is not left behind at its old value
        for labels, n in summed.items():
            self.gauge.labels(*labels).set(n)


def coverage_reader(engine: Engine) -> Callable[[], CoverageRows]:
    """:func:`coverage_counts` on a connection of its own each call."""

    def read() -> CoverageRows:
        with engine.connect() as conn:
            return coverage_counts(conn)

    return read
