"""Langfuse: an evaluation as a score (``POST /api/public/scores``, its public API).

The score's ``id`` is deterministic (the database's instance id, the conversation and the
metric): Langfuse upserts on it, so a resend or a re-score updates the one score.
``traceId`` / ``observationId`` are the OTel trace id and the evaluated root span id in hex, as
Langfuse's OpenTelemetry endpoint stores them. An evaluation without a score (not scored, not
evaluable) is not sent: a Langfuse numeric score needs a value.
"""

from __future__ import annotations

from typing import Any

import aiohttp

from toolscore.collector.export.annotations.content import (
    Annotation,
    Outcome,
    Sent,
    status_outcome,
)
from toolscore.collector.export.annotations.targets import AnnotationTarget


class LangfuseClient:
    def __init__(self, target: AnnotationTarget) -> None:
        self._target = target

    async def send(self, session: aiohttp.ClientSession, annotation: Annotation) -> Outcome:
        if annotation.score is None:
            return Outcome(Sent.SKIPPED)
        body: dict[str, Any] = {
            "id": annotation.score_id,
            "traceId": annotation.trace_id,
            "name": annotation.name,
            "value": annotation.score,
            "dataType": "NUMERIC",
            "comment": f"{annotation.label}: {annotation.explanation}",
            "metadata": dict(annotation.metadata),
        }
        if annotation.span_id:
            body["observationId"] = annotation.span_id
        url = f"{self._target.url}/api/public/scores"
        try:
            async with session.post(url, json=body, headers=dict(self._target.headers)) as reply:
                return status_outcome(reply.status, await reply.text(), "langfuse scores")
        except (aiohttp.ClientError, TimeoutError) as exc:
            return Outcome(Sent.FAILED, f"langfuse scores: {type(exc).__name__}: {exc}")
