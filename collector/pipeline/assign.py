"""Conversation bookkeeping inside the ingest transaction: which conversation each trace belongs to.

A trace belongs as a whole to the conversation any of its spans names (the first present key of
the configured list), else to a conversation keyed by its own trace id. Instrumentations often
name the conversation on some spans only, so a trace first seen without a name and later naming
one *moves*: its trace-keyed conversation is dropped (its evaluations, if it was already scored,
stay in the history as superseded) and the named conversation takes it. Once a trace belongs to a
named conversation it stays there: the first name wins over conflicting later ones.

Reference ids (``toolscore.reference.id`` on any span or resource) belong to the conversation:
one stored on a trace-keyed conversation moves with its trace, one arriving later on any span of
a trace reaches the trace's conversation, and the first one stored for a conversation stays
(conflicting later ones, from any of its traces, are ignored). See
``storage.conversations.assignments`` for
why concurrent transactions (several servers) cannot lose a move or a reference id.

Cost per ingest batch, whatever its size: one ``SELECT`` of the traces the batch did not number
(none when all are new), one insert of new trace assignments, one upsert of conversations; on
PostgreSQL one locking ``SELECT`` of the known traces still in their trace-keyed conversation;
a few small statements only when traces move.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from toolscore.collector.pipeline.rejoin import HEAD, heads, taken, waited, waiting
from toolscore.collector.pipeline.replaying import replayables
from toolscore.collector.reconstruction.conversation_keys import (
    DEFAULT_CONVERSATION_KEYS,
    DEFAULT_REFERENCE_KEY,
    conversation_id_for_trace,
    present_keys,
    reference_id_for,
    span_order,
)
from toolscore.collector.reconstruction.replay import ReplayPrints
from toolscore.storage.conversations.assignments import (
    ConversationTouch,
    TraceState,
    claim_traces,
    conversations_of,
    leave_conversations,
    move_traces,
    trace_keyed,
    upsert_conversations,
)
from toolscore.storage.conversations.replays import latest_tails, record_tails
from toolscore.storage.database import Connection
from toolscore.storage.records import LogRecordData, SpanRecord


@dataclass(frozen=True, slots=True)
class AssignConfig:
    """Which attributes name a conversation (first present wins) and the reference id."""

    conversation_keys: tuple[str, ...] = DEFAULT_CONVERSATION_KEYS
    reference_key: str = DEFAULT_REFERENCE_KEY
    # A keyless trace replaying a conversation left this recently joins it (0: never).
    replay_window_s: float = 0.0


@dataclass(frozen=True, slots=True)
class AssignResult:
    conversations: int  # conversations touched by the batch
    new_traces: int  # traces seen for the first time
    moved_traces: int  # traces moved from their trace-keyed conversation to a named one


@dataclass(frozen=True, slots=True)
class _TraceInBatch:
    trace_id: str
    named: str | None
    root_span_id: str | None
    reference_id: str | None
    first_start_ns: int
    prints: ReplayPrints | None = None  # keyless traces, with the replay rule on
    replayed: bool = False  # ``named`` by the replay rule, not by a key
    rooted: bool = False  # its root span is in the batch or stored: it may join by replay


def _summarise(
    spans: Iterable[SpanRecord], log_trace_ids: Iterable[str], config: AssignConfig
) -> tuple[list[_TraceInBatch], dict[str, list[SpanRecord]], Collection[str]]:
    """The batch's traces, the spans of those that name no conversation (with the replay rule
    on: their fingerprints are taken by ``_with_prints``), and the traces with spans in it."""
    by_trace: dict[str, list[SpanRecord]] = defaultdict(list)
    for span in spans:
        by_trace[span.trace_id].append(span)
    out = []
    # Log records (GenAI content events) count as activity of their trace, naming nothing.
    for trace_id in sorted(set(log_trace_ids) - by_trace.keys()):
        out.append(_TraceInBatch(trace_id, None, None, None, 0))
    keys_of = config.conversation_keys
    ref_key = config.reference_key
    keyless: dict[str, list[SpanRecord]] = {}
    for trace_id, trace_spans in by_trace.items():
        ordered = sorted(trace_spans, key=span_order)
        root = next((s.span_id for s in ordered if not s.parent_span_id), None)
        # Only ask about keys the trace carries at all: most carry one or none (hot path).
        resources = {id(s.resource_attributes): s.resource_attributes for s in ordered}
        present = set().union(*[s.attributes for s in ordered], *resources.values())
        keys = present_keys(keys_of, present)
        named = (conversation_id_for_trace(ordered, keys, True) or None) if keys else None
        if named is None and config.replay_window_s > 0:
            keyless[trace_id] = ordered
        out.append(
            _TraceInBatch(
                trace_id=trace_id,
                named=named,
                root_span_id=root,
                reference_id=(reference_id_for(ordered, ref_key, True) or None)
                if ref_key in present
                else None,
                first_start_ns=ordered[0].start_ns,
            )
        )
    return out, keyless, by_trace.keys()


def _with_prints(
    conn: Connection,
    traces: list[_TraceInBatch],
    keyless: dict[str, list[SpanRecord]],
    spanned: Collection[str],
    logs: Sequence[LogRecordData],
    numbered: Collection[str],
) -> list[_TraceInBatch]:
    """The replay rule's fingerprints of the keyless traces, their spans and the log records
    carrying their messages read together (``replaying``)."""
    found = replayables(conn, keyless, logs, numbered, spanned)
    if not found:
        return traces
    out = []
    for t in traces:
        r = found.get(t.trace_id)
        if r is not None:
            t = dataclasses.replace(
                t,
                prints=r.prints,
                rooted=r.root_span_id is not None,
                root_span_id=t.root_span_id or r.root_span_id,
                first_start_ns=t.first_start_ns or r.first_start_ns,
            )
        out.append(t)
    return out


def assign_spans(
    conn: Connection,
    spans: Sequence[SpanRecord],
    *,
    received_at_ns: int,
    config: AssignConfig,
    log_trace_ids: Iterable[str] = (),
    numbered: Collection[str] = frozenset(),
    logs: Sequence[LogRecordData] = (),
) -> AssignResult:
    """Record the conversations of ``spans`` (one ingest batch) in the caller's transaction;
    ``numbered``: the traces it numbered (``storage.telemetry.traces.Numbered.new``), not looked
    up; ``logs``: the batch's log records (their traces count as activity, and those carrying
    a model call's messages take part in the replay rule)."""
    log_ids = [*log_trace_ids, *(g.trace_id for g in logs if g.trace_id)]
    traces, keyless, spanned = _summarise(spans, log_ids, config)
    if not traces:
        return AssignResult(0, 0, 0)
    if config.replay_window_s > 0:
        traces = _with_prints(conn, traces, keyless, spanned, logs, numbered)
    # Proposed: the named conversation, else the trace's own; a trace already assigned keeps its
    # row (locked if it may still move) and the plan below decides whether it moves.
    since_ns = received_at_ns - int(config.replay_window_s * 1e9)
    # one look-up: the states the traces replay, and conversations waiting for those they leave
    prefixes = [p for t in traces if t.prints is not None for p in t.prints.prefixes]
    left = waited(tail for t in traces if t.prints is not None for tail in t.prints.tails)
    found = latest_tails(conn, [*prefixes, *left], since_ns) if prefixes or left else {}
    traces = _join_replays(conn, traces, found)
    waits = waiting(conn, found, {t.trace_id for t in traces})
    proposed = {t.trace_id: t.named or t.trace_id for t in traces}
    proposed.update((w, w) for w in waits.values() if w not in proposed)  # locked with them
    states = claim_traces(conn, proposed, numbered)
    plan = _plan(traces, states, _joined_elsewhere(conn, traces, states))
    move_traces(conn, plan.moves, with_joined=config.replay_window_s > 0)
    leave_conversations(conn, plan.left)
    upsert_conversations(conn, plan.touched, received_at_ns)
    if config.replay_window_s > 0:
        _record_states(conn, traces, states, plan, waits, received_at_ns, since_ns)
    new = sum(1 for s in states.values() if s.inserted)
    return AssignResult(len(plan.touched), new, len(plan.moves))


def _record_states(
    conn: Connection,
    traces: Sequence[_TraceInBatch],
    states: dict[str, TraceState],
    plan: _Plan,
    waits: dict[str, str],
    received_at_ns: int,
    since_ns: int,
) -> None:
    """Record the states the keyless traces leave, and the heads of those that continue a
    conversation not seen yet; a conversation waiting for a state left now is taken in
    (``rejoin``)."""
    conversation_of = {
        t.trace_id: plan.moves.get(t.trace_id, states[t.trace_id].conversation_id) for t in traces
    }
    tails: dict[str, str] = {}
    waiting_rows: dict[str, str] = {}
    for t in traces:
        if t.prints is None:
            continue
        tails.update(dict.fromkeys(t.prints.tails, conversation_of[t.trace_id]))
        if t.rooted and not t.replayed and conversation_of[t.trace_id] == t.trace_id:
            waiting_rows.update(heads(t.prints.prefixes, t.trace_id))
    record_tails(conn, {**tails, **waiting_rows}, received_at_ns, since_ns)
    takes = taken(waits, tails, states)
    if takes:
        move_traces(conn, takes, with_joined=True)
        touches = [
            ConversationTouch(c, states[w].last_trace_id or w, None, states[w].reference_id)
            for w, c in takes.items()
        ]
        upsert_conversations(conn, touches, received_at_ns)


def _join_replays(
    conn: Connection, traces: list[_TraceInBatch], stored: dict[str, str]
) -> list[_TraceInBatch]:
    """Keyless traces whose model input replays the state a conversation was left in (stored,
    or left by an earlier trace of this batch) join that conversation: the longest replayed
    state wins, then the latest conversation left in it. Only a trace whose root span is in the
    batch, or stored (its log records came after it), joins: children are exported before their
    root, which may still name a conversation.
    A keyless conversation named since (its first trace moved) is joined where it went.
    ``stored``: state -> the conversation most recently left in it (``latest_tails``)."""
    stored = {p: c for p, c in stored.items() if not p.startswith(HEAD)}
    if not any(t.prints is not None and t.prints.prefixes for t in traces):
        return traces
    went = conversations_of(conn, sorted(set(stored.values()))) if stored else {}
    stored = {p: went.get(c) or c for p, c in stored.items()}
    left: dict[str, str] = {}  # by this batch's earlier traces
    out: list[_TraceInBatch] = []
    for t in sorted(traces, key=lambda t: (t.first_start_ns, t.trace_id)):
        prints = t.prints
        if prints is not None:
            found = next((c for p in prints.prefixes if (c := left.get(p) or stored.get(p))), None)
            if found is not None and found != t.trace_id and t.rooted:
                t = dataclasses.replace(t, named=found, replayed=True)
            left.update(dict.fromkeys(prints.tails, t.named or t.trace_id))
        out.append(t)
    return out


def _joined_elsewhere(
    conn: Connection, traces: Sequence[_TraceInBatch], states: dict[str, TraceState]
) -> set[str]:
    """The keyless conversations (keyed by their first trace) holding a trace of the batch that
    joined them by replay and now names a conversation: it moves there. Looked up only for a
    trace naming another conversation than its own, which is rare."""
    maybe = {
        state.conversation_id
        for t in traces
        if t.named
        and not t.replayed
        and not (state := states[t.trace_id]).inserted
        and state.conversation_id not in (t.named, t.trace_id)
    }
    return trace_keyed(conn, sorted(maybe)) if maybe else set()


@dataclass(frozen=True, slots=True)
class _Member:
    trace: _TraceInBatch
    joined: bool  # new to the conversation in this batch (first seen, or moved in)
    carried_reference: str | None  # stored on the trace-keyed conversation it moved from


@dataclass(frozen=True, slots=True)
class _Plan:
    moves: dict[str, str]  # trace id -> named conversation it moves to
    touched: list[ConversationTouch]
    # keyless conversation -> the traces joined by replay that leave it for a named one
    left: dict[str, list[str]] = dataclasses.field(default_factory=dict)


def _plan(
    traces: Sequence[_TraceInBatch], states: dict[str, TraceState], joined: Collection[str] = ()
) -> _Plan:
    moves: dict[str, str] = {}
    left: dict[str, list[str]] = defaultdict(list)
    groups: dict[str, list[_Member]] = defaultdict(list)
    last_known: dict[str, str | None] = {}
    for t in traces:
        state = states[t.trace_id]
        current = state.conversation_id
        if state.inserted:
            groups[current].append(_Member(t, True, None))
        elif t.named and current == t.trace_id and t.named != t.trace_id:
            moves[t.trace_id] = t.named
            # The trace-keyed conversation is dropped: its reference id moves with the trace.
            groups[t.named].append(_Member(t, True, state.reference_id))
        elif t.named and not t.replayed and current in joined:
            moves[t.trace_id] = t.named  # joined by replay, named since: the name wins
            left[current].append(t.trace_id)
            groups[t.named].append(_Member(t, True, None))
        else:
            groups[current].append(_Member(t, False, None))
            last_known[current] = state.last_trace_id
    touched = [
        _touch(conv_id, members, last_known.get(conv_id)) for conv_id, members in groups.items()
    ]
    return _Plan(moves, touched, dict(left))


def _touch(conv_id: str, members: Sequence[_Member], last_known: str | None) -> ConversationTouch:
    if len(members) == 1:  # the usual case: one trace of the conversation in the batch
        m = members[0]
        t = m.trace
        last = t.trace_id if m.joined else (last_known or t.trace_id)
        root = t.root_span_id if last == t.trace_id else None
        return ConversationTouch(conv_id, last, root, m.carried_reference or t.reference_id)
    joined = [m.trace for m in members if m.joined]
    if joined:  # a newly joined trace is the conversation's latest turn
        last = max(joined, key=lambda t: (t.first_start_ns, t.trace_id)).trace_id
    else:
        last = last_known or members[0].trace.trace_id
    root = next((m.trace.root_span_id for m in members if m.trace.trace_id == last), None)
    return ConversationTouch(conv_id, last, root, _reference(members))


def _reference(members: Sequence[_Member]) -> str | None:
    """The reference id proposed for a conversation (one already stored on it wins anyway): one
    already stored on a trace-keyed conversation moving in, else the earliest trace's."""
    carried = sorted(
        (m.trace.first_start_ns, m.trace.trace_id, m.carried_reference)
        for m in members
        if m.carried_reference
    )
    if carried:
        return carried[0][2]
    fresh = sorted(
        (m.trace.first_start_ns, m.trace.trace_id, m.trace.reference_id)
        for m in members
        if m.trace.reference_id
    )
    return fresh[0][2] if fresh else None
