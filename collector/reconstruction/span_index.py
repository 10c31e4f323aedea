"""What the rules after extraction ask of a conversation's spans, found in one pass.

Ranking traces, joining layers, dropping duplicate model calls, cautions, capture hints and the
user's own words each looked spans up by id or parent, or scanned them all for agent
invocations; one index serves them all (a span id seen twice: the last span wins, as each rule's
own lookup did).
"""

from __future__ import annotations

from collections.abc import Sequence

from toolscore.collector.reconstruction.conventions.otel_genai import INVOCATIONS, operation
from toolscore.storage.records import LogRecordData, SpanRecord

__all__ = ["SpanIndex", "is_invocation"]

Key = tuple[str, str]  # (trace id, span id): span ids repeat across traces


def is_invocation(span: SpanRecord) -> bool:
    """An agent's invocation span: it records the input as the agent was given it."""
    attrs = span.attributes
    kind = attrs.get("openinference.span.kind")
    return (kind is not None and str(kind).upper() == "AGENT") or operation(attrs) in INVOCATIONS


class SpanIndex:
    __slots__ = ("by_id", "invocations", "parents", "parents_of_any", "spans", "trace_start")

    def __init__(self, spans: Sequence[SpanRecord]) -> None:
        self.spans = spans
        self.by_id: dict[str, SpanRecord] = {}
        self.parents: dict[Key, str | None] = {}
        self.parents_of_any: set[Key] = set()  # the spans some span names as its parent
        self.trace_start: dict[str, int] = {}
        for span in spans:
            self.by_id[span.span_id] = span
            self.parents[(span.trace_id, span.span_id)] = span.parent_span_id
            if span.parent_span_id:
                self.parents_of_any.add((span.trace_id, span.parent_span_id))
            start = self.trace_start.get(span.trace_id)
            if start is None or span.start_ns < start:
                self.trace_start[span.trace_id] = span.start_ns
        # in span order (a rule wanting time order sorts them)
        self.invocations = [s for s in spans if is_invocation(s)]

    def trace_ranks(self, logs: Sequence[LogRecordData]) -> tuple[dict[str, int], list[str]]:
        """Each trace's rank by its first span (a trace known only from log records: by its
        first record), and the traces in that order."""
        start = dict(self.trace_start)
        for log in logs:
            if log.trace_id and log.trace_id not in start:
                start[log.trace_id] = log.time_ns or log.observed_time_ns
        order = sorted(start, key=lambda t: (start[t], t))
        return {trace: i for i, trace in enumerate(order)}, order

    def scope_of(self, span_id: str | None) -> str | None:
        span = self.by_id.get(span_id or "")
        return None if span is None else span.scope_name
