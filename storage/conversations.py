"""The conversations repository: reading conversations with the traces that make them up."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, select

from toolscore.storage.pipeline import conversation_traces, conversations

_CHUNK = 500  # bound on IN (...) list sizes


@dataclass(frozen=True, slots=True)
class ScoringHead:
    """What scoring needs to know of a conversation besides its telemetry."""

    id: str
    last_trace_id: str
    root_span_id: str | None
    reference_id: str | None


def heads_and_traces(
    conn: Connection, ids: Sequence[str], *, without_traces: Collection[str] = ()
) -> tuple[list[ScoringHead], dict[str, str]]:
    """The conversations of ``ids`` that exist (in chunk order) and trace id -> conversation id
    of their traces, leaving out the traces of conversations in ``without_traces``."""
    c, ct = conversations.c, conversation_traces.c
    heads: list[ScoringHead] = []
    trace_conv: dict[str, str] = {}
    for i in range(0, len(ids), _CHUNK):
        chunk = ids[i : i + _CHUNK]
        heads.extend(
            ScoringHead(*row)
            for row in conn.execute(
                select(c.id, c.last_trace_id, c.root_span_id, c.reference_id).where(c.id.in_(chunk))
            )
        )
        loaded = [conv_id for conv_id in chunk if conv_id not in without_traces]
        for trace_id, conv_id in conn.execute(
            select(ct.trace_id, ct.conversation_id).where(ct.conversation_id.in_(loaded))
        ):
            trace_conv[trace_id] = conv_id
    return heads, trace_conv
