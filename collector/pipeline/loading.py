"""The telemetry scoring reads: conversations' spans, log records and what pruning carried.

Span counts size a conversation before it is loaded, its bytes only once it is: long strings are
stored as compressed pieces (``storage.telemetry.contents``), so a stored row says little about
the text it decodes to. A part bounded in bytes is therefore loaded a group of conversations at
a time (at most ``GROUP_SPANS`` spans a group, a bigger conversation alone in its group) and
stops taking groups once the text read so far reaches the budget (spans: the text of their rows
and the long strings their references stand for, counted as they are decoded; log records:
their strings); the conversations of the groups not loaded are left for the caller's next part.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolscore.storage.conversations.reading import ScoringHead, heads_and_traces
from toolscore.storage.database import Connection
from toolscore.storage.records import LogRecordData, SpanRecord
from toolscore.storage.retention import spans as retention
from toolscore.storage.retention.spans import Carried
from toolscore.storage.telemetry.spans import load_logs, load_spans

#: Most spans read in one group when a part is bounded in bytes: what a group adds past the
#: budget (ordinary traffic: a part's few hundred small conversations in a few groups).
GROUP_SPANS = 1_000


@dataclass(frozen=True, slots=True)
class Telemetry:
    """What :func:`load_within` read; ``left``: conversations not loaded (the budget was
    reached), in the order given, not in ``heads``."""

    heads: list[ScoringHead]
    spans: dict[str, list[SpanRecord]]
    logs: dict[str, list[LogRecordData]]
    pruned: dict[str, Carried]
    left: tuple[str, ...] = ()
    text_chars: int = 0  # characters of text read (counted with a budget only)


def load_telemetry(
    conn: Connection,
    ids: Sequence[str],
    refuse: Mapping[str, str] | None = None,
    *,
    batch_rows: int | None = None,
) -> tuple[
    list[ScoringHead],
    dict[str, list[SpanRecord]],
    dict[str, list[LogRecordData]],
    dict[str, Carried],
]:
    """The conversations of ``ids`` that exist, their spans and log records (those in
    ``refuse`` not loaded), and what pruned conversations carry from their deleted telemetry."""
    t = load_within(conn, ids, refuse, batch_rows=batch_rows)
    return t.heads, t.spans, t.logs, t.pruned


def load_within(
    conn: Connection,
    ids: Sequence[str],
    refuse: Mapping[str, str] | None = None,
    *,
    batch_rows: int | None = None,
    budget_chars: int | None = None,
    counts: Mapping[str, int] | None = None,
) -> Telemetry:
    """As :func:`load_telemetry`; with ``budget_chars``, groups of conversations (``counts``:
    their spans) are loaded in the order of ``ids`` until their decoded text reaches that many
    characters: at least one conversation is always loaded."""
    refuse = refuse or {}
    heads, trace_conv = heads_and_traces(conn, ids, without_traces=refuse)
    traces_of: dict[str, list[str]] = defaultdict(list)
    for trace_id, conv_id in trace_conv.items():
        traces_of[conv_id].append(trace_id)
    order = [i for i in dict.fromkeys(ids) if i in traces_of]
    groups = [order] if budget_chars is None else _groups(order, counts or {})
    # Pruned conversations: only telemetry that arrived after the pruning is read.
    pruned = retention.carried(conn, [r.id for r in heads if r.id not in refuse])
    after = {t: pruned[cid].through_ns for t, cid in trace_conv.items() if cid in pruned}
    spans: dict[str, list[SpanRecord]] = defaultdict(list)
    logs: dict[str, list[LogRecordData]] = defaultdict(list)
    chars, loaded = 0, 0
    for group in groups:
        if budget_chars is not None and loaded and chars >= budget_chars:
            break
        trace_ids = sorted(t for cid in group for t in traces_of[cid])
        tally = [0]
        for span in load_spans(conn, trace_ids, after, batch_rows=batch_rows, tally=tally):
            spans[trace_conv[span.trace_id]].append(span)
        for log in load_logs(conn, trace_ids, after):
            if log.trace_id in trace_conv:
                logs[trace_conv[log.trace_id]].append(log)
                chars += log_chars(log) if budget_chars is not None else 0
        chars += tally[0] if budget_chars is not None else 0
        loaded += 1
    left = tuple(cid for group in groups[loaded:] for cid in group)
    skipped = set(left)
    heads = [h for h in heads if h.id not in skipped]
    return Telemetry(heads, spans, logs, pruned, left, chars)


def _groups(order: Sequence[str], counts: Mapping[str, int]) -> list[list[str]]:
    groups: list[list[str]] = []
    spans = 0
    for conv_id in order:
        n = counts.get(conv_id, 0)
        if not groups or spans + n > GROUP_SPANS:
            groups.append([])
            spans = 0
        groups[-1].append(conv_id)
        spans += n
    return groups


def log_chars(log: LogRecordData) -> int:
    return _text((log.body,)) + _text(log.attributes.values())


def _text(values: Iterable[Any]) -> int:
    n = 0
    for v in values:
        if isinstance(v, str | bytes):
            n += len(v)
        elif isinstance(v, list | tuple):
            n += _text(v)
        elif isinstance(v, dict):
            n += _text(v.values())
    return n
