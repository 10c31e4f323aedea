"""What one evaluation says as an annotation, whatever the backend."""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from toolscore.collector.export.attributes import explanation, pass_label, threshold_for
from toolscore.storage.history.outbox import ExportItem

ANNOTATOR = "toolscore"  # Phoenix's identifier: a re-score upserts the same annotation


@dataclass(frozen=True, slots=True)
class Annotation:
    name: str  # the metric instance
    label: str  # pass | fail | error | not_evaluated
    score: float | None
    explanation: str
    trace_id: str
    span_id: str | None  # the evaluated root span
    session_id: str  # the conversation id
    score_id: str  # deterministic per database, conversation and metric (Langfuse's upsert key)
    metadata: Mapping[str, Any]


def annotation(item: ExportItem, thresholds: Mapping[str, float], instance_id: str) -> Annotation:
    threshold = threshold_for(item.metric, item.metric_type, thresholds)
    score = item.score if item.score is not None and not math.isnan(item.score) else None
    key = f"toolscore:{instance_id}:{item.conversation_id}:{item.metric}"
    return Annotation(
        name=item.metric,
        label=pass_label(score, threshold, item.details),
        score=score,
        explanation=explanation(
            score, item.error, item.details, item.predicted_count, item.expected_count
        ),
        trace_id=item.trace_id,
        span_id=item.root_span_id or None,
        session_id=item.conversation_id,
        score_id=str(uuid.uuid5(uuid.NAMESPACE_URL, key)),
        metadata={
            "toolscore.evaluation.id": item.evaluation_id,
            "toolscore.evaluation.revision": item.revision,
            "toolscore.metric.type": item.metric_type,
            "toolscore.evaluation.threshold": threshold,
            "toolscore.expectation.id": item.expectation_id,
            "toolscore.expectation.version": item.expectation_version,
            "toolscore.instance.id": instance_id,
        },
    )


class Sent(Enum):
    DELIVERED = "delivered"
    NOT_FOUND = "not_found"  # the backend has not ingested the evaluated span or trace (yet)
    SKIPPED = "skipped"  # the backend cannot hold it
    REJECTED = "rejected"  # refused for good (the request was invalid)
    FAILED = "failed"  # unreachable, 5xx, authentication: retried


@dataclass(frozen=True, slots=True)
class Outcome:
    sent: Sent
    error: str | None = None


def status_outcome(status: int, text: str, what: str) -> Outcome:
    """The outcome of an HTTP answer to one annotation request."""
    if 200 <= status < 300:
        return Outcome(Sent.DELIVERED)
    if status == 404:
        return Outcome(Sent.NOT_FOUND, f"{what}: 404 (not ingested yet)")
    detail = f"{what}: HTTP {status} {text[:300]}".strip()
    if status in (401, 403):
        return Outcome(Sent.FAILED, f"{detail} (check the credentials)")
    if status in (400, 422):
        return Outcome(Sent.REJECTED, detail)
    return Outcome(Sent.FAILED, detail)
