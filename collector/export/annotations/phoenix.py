"""Arize Phoenix: an evaluation as span, trace and session annotations (its REST API).

``POST /v1/span_annotations`` on the evaluated root span, ``/v1/trace_annotations`` on the trace
and, where Phoenix made a session of the conversation id (the agent's spans carried it as
``session.id``), ``/v1/session_annotations``; each with ``annotator_kind: CODE`` and
``identifier: toolscore``, which Phoenix upserts on (name, span or trace or session,
identifier): a resend or a re-score updates the annotation. ``sync=true`` makes Phoenix answer
404 for a span or trace it has not ingested yet, which the outbox retries.
"""

from __future__ import annotations

from typing import Any

import aiohttp

from toolscore.collector.export.annotations.content import (
    ANNOTATOR,
    Annotation,
    Outcome,
    Sent,
    status_outcome,
)
from toolscore.collector.export.annotations.targets import AnnotationTarget


class PhoenixClient:
    def __init__(self, target: AnnotationTarget) -> None:
        self._target = target

    async def send(self, session: aiohttp.ClientSession, annotation: Annotation) -> Outcome:
        posts: list[tuple[str, dict[str, str]]] = []
        if annotation.span_id:
            posts.append(("span_annotations", {"span_id": annotation.span_id}))
        posts.append(("trace_annotations", {"trace_id": annotation.trace_id}))
        for path, key in posts:
            outcome = await self._post(session, path, annotation, key)
            if outcome.sent is not Sent.DELIVERED:
                return outcome
        # a conversation is a Phoenix session only if the agent's spans said so (session.id),
        # and older Phoenix versions lack the route: 404 and 405 leave the others in place
        session_key = {"session_id": annotation.session_id}
        outcome = await self._post(session, "session_annotations", annotation, session_key)
        if outcome.sent in (Sent.DELIVERED, Sent.NOT_FOUND) or "HTTP 405" in (outcome.error or ""):
            return Outcome(Sent.DELIVERED)
        return outcome

    async def _post(
        self,
        session: aiohttp.ClientSession,
        path: str,
        annotation: Annotation,
        key: dict[str, str],
    ) -> Outcome:
        body: dict[str, Any] = {
            "data": [
                {
                    **key,
                    "name": annotation.name,
                    "annotator_kind": "CODE",
                    "result": {
                        "label": annotation.label,
                        "score": annotation.score,
                        "explanation": annotation.explanation,
                    },
                    "identifier": ANNOTATOR,
                    "metadata": dict(annotation.metadata),
                }
            ]
        }
        url = f"{self._target.url}/v1/{path}?sync=true"
        try:
            async with session.post(url, json=body, headers=dict(self._target.headers)) as reply:
                return status_outcome(reply.status, await reply.text(), f"phoenix {path}")
        except (aiohttp.ClientError, TimeoutError) as exc:
            return Outcome(Sent.FAILED, f"phoenix {path}: {type(exc).__name__}: {exc}")
