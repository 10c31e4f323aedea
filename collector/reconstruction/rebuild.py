"""Rebuild a conversation's messages and ordered tool calls from its spans and log records.

Pipeline: every span goes through the convention registry
(:mod:`toolscore.collector.reconstruction.conventions`), giving
model *exchanges* (history in, messages out) and tool *executions*. Then:

1. Exchanges are replayed in time order (traces by their first span, then the exchange's own
   time) into one transcript. A call counts once: history messages that repeat known calls (by
   call id; without ids by name and arguments, occurrence by occurrence) add nothing; only what
   is new is appended. Call order is the order inside the assistant message, then message order;
   tool-span timestamps never reorder calls (parallel tools overlap).
2. Tool executions attach to calls: by call id, else by name and equal arguments, else by name
   and the positional values, else by name alone. An execution matching nothing is a call the
   model output did not show (content capture off, or a framework that records only tool spans)
   and is inserted by its start time.
3. The transcript becomes a Ragas ``MultiTurnSample.user_input`` list (``human`` / ``ai`` with
   ``tool_calls`` / ``tool``) and the flat call list.

Nothing raises on odd input: problems become ``warnings``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolscore.collector.reconstruction.agent_input import (
    first_user_words,
    given,
    unwrap_user_messages,
)
from toolscore.collector.reconstruction.cautions import (
    disagreements,
    unread_calls,
    unused_tool_spans,
)
from toolscore.collector.reconstruction.control_calls import DEFAULT as DEFAULT_CONTROL
from toolscore.collector.reconstruction.control_calls import ControlCalls
from toolscore.collector.reconstruction.conventions import (
    Exchange,
    ToolExecution,
    extract_observations,
    registry_for,
)
from toolscore.collector.reconstruction.conventions.capture import capture_hint
from toolscore.collector.reconstruction.conventions.definitions import parameter_names
from toolscore.collector.reconstruction.conventions.unrecognised import unrecognised_warning
from toolscore.collector.reconstruction.evidence import confirm, evidence, split_merged
from toolscore.collector.reconstruction.layers import join_layers
from toolscore.collector.reconstruction.replay import replays_history
from toolscore.collector.reconstruction.sample import sample_messages
from toolscore.collector.reconstruction.span_index import SpanIndex
from toolscore.collector.reconstruction.tool_args import DecodedArgs
from toolscore.collector.reconstruction.tool_runs import attach, decode_call, insert_orphans
from toolscore.collector.reconstruction.transcript import Call, drop_control_calls
from toolscore.collector.reconstruction.transcript import Canon as _Canon
from toolscore.collector.reconstruction.transcript import Transcript as _Transcript
from toolscore.storage.records import LogRecordData, SpanRecord

__all__ = ["ReconstructedCall", "Reconstruction", "reconstruct"]


@dataclass(frozen=True, slots=True)
class ReconstructedCall:
    position: int
    name: str
    arguments: dict[str, Any] | None
    arguments_raw: str | None
    arguments_ok: bool
    call_id: str | None
    trace_id: str
    span_id: str | None  # the tool span when one ran the call, else the model-call span
    convention: str
    # False: no arguments were recorded at all (content capture off), as opposed to ``{}``;
    # then ``capture_hint`` says how to record them
    # (collector/reconstruction/conventions/capture.py).
    arguments_recorded: bool = True
    capture_hint: str | None = None
    requested_in: str | None = None  # the model-call span whose output asked for the call
    rule: str = ""  # which rule produced it, and what confirmed it (show --spans)


@dataclass(frozen=True, slots=True)
class Reconstruction:
    messages: tuple[dict[str, Any], ...]  # Ragas MultiTurnSample user_input JSON form
    tool_calls: tuple[ReconstructedCall, ...]
    first_user_message: str | None
    root_span_id: str | None
    warnings: tuple[str, ...]
    # Telemetry a convention failed to read (with why), or the whole reconstruction failing:
    # what was rebuilt is incomplete, so scoring it would score a conversation that did not
    # happen (a call inside an unreadable span simply vanishes). Empty: nothing was skipped.
    unread: tuple[str, ...] = ()
    # No call rebuilt though spans look like tool runs: which, and why (else None).
    unrecognised: str | None = None
    # Why the rebuilt calls may be wrong though they were read (a name or arguments inferred
    # without evidence, records that disagree, calls that could not be read): the score is
    # still given, marked (conversations.warning).
    cautions: tuple[str, ...] = ()
    # span id -> the convention that read it; and the spans that gave something (show --spans)
    readers: Mapping[str, str] = field(default_factory=dict)
    used_spans: frozenset[str] = frozenset()
    # The first model call's input already holds earlier turns (model output, then more): the
    # conversation may be only the end of one (collector/reconstruction/replay.py).
    opens_with_history: bool = False


def _dedupe(exchanges: list[Exchange], index: SpanIndex, canon: _Canon) -> list[Exchange]:
    """Drop a second record of the same model call.

    A framework span and a provider span (say OpenInference LangChain + OpenLLMetry openai) both
    record one API call; they may be parent and child or siblings, but they overlap in time and
    show the same output. Calls with ids are deduplicated later anyway; this catches text answers
    and calls without ids. Same response id → same call.
    """
    kept: list[Exchange] = []
    by_response: set[str] = set()
    # Earlier exchanges' intervals by (trace, output shape): only those can be a duplicate, and
    # a long conversation's exchanges are then not each compared with all the others.
    timed: dict[tuple[str, tuple[Any, ...]], list[tuple[int, int]]] = defaultdict(list)
    for exchange in exchanges:
        if exchange.response_id and exchange.response_id in by_response:
            continue
        where = index.by_id.get(exchange.span_id or "")
        shape = _output_shape(exchange, canon)
        if where is not None and shape:
            start, end = where.start_ns, where.end_ns
            same = timed[(where.trace_id, shape)]
            if any(s <= end and start <= e for s, e in same):
                continue
            same.append((start, end))
        if exchange.response_id:
            by_response.add(exchange.response_id)
        kept.append(exchange)
    return kept


def _output_shape(exchange: Exchange, canon: _Canon) -> tuple[Any, ...]:
    return tuple(
        (
            m.role,
            " ".join(m.content.split()),
            tuple((c.name, canon(c.arguments)) for c in m.tool_calls),
        )
        for m in exchange.outputs
        if m.content.strip() or m.tool_calls
    )


def _root_span_id(spans: Sequence[SpanRecord], last_trace: str | None) -> str | None:
    mine = [s for s in spans if s.trace_id == last_trace]
    ids = {s.span_id for s in mine}
    roots = [s for s in mine if not s.parent_span_id or s.parent_span_id not in ids]
    return min(roots, key=lambda s: (s.start_ns, s.span_id)).span_id if roots else None


def _calls(
    transcript: _Transcript,
    index: SpanIndex,
    params: dict[str, tuple[str, ...]],
    warnings: list[str],
) -> tuple[list[ReconstructedCall], dict[int, DecodedArgs]]:
    calls: list[ReconstructedCall] = []
    decoded_by_call: dict[int, DecodedArgs] = {}
    for position, call in enumerate(transcript.calls()):
        decoded = decode_call(call, params, transcript.canon)
        recorded = decoded.arguments is not None or bool(decoded.raw)
        if not recorded and params.get(call.name) == ():
            decoded, recorded = DecodedArgs({}, None, True), True  # its definition takes none
        decoded_by_call[id(call)] = decoded
        if not decoded.ok:
            what = "were not recorded" if not recorded else "could not be fully decoded"
            warnings.append(f"call #{position} {call.name}: arguments {what}")
        where = call.execution or call
        orphan = call.execution is not None and call.span_id == call.execution.span_id
        calls.append(
            ReconstructedCall(
                position=position,
                name=call.name,
                arguments=decoded.arguments,
                arguments_raw=decoded.raw,
                arguments_ok=decoded.ok,
                call_id=call.call_id or (call.execution.call_id if call.execution else None),
                trace_id=where.trace_id,
                span_id=where.span_id,
                convention=call.convention,
                requested_in=None if orphan else call.span_id,
                arguments_recorded=recorded,
                rule=call.rule,
                capture_hint=None if recorded else _hint(call, where, index),
            )
        )
    return calls, decoded_by_call


def _hint(call: Call, where: Call | ToolExecution, index: SpanIndex) -> str:
    scope = index.scope_of(call.span_id) or index.scope_of(where.span_id)
    return capture_hint(call.convention, scope)


def reconstruct(
    spans: Sequence[SpanRecord],
    logs: Sequence[LogRecordData] = (),
    *,
    control_calls: ControlCalls = DEFAULT_CONTROL,
) -> Reconstruction:
    """Rebuild the messages and the ordered tool calls of one conversation. Never raises.

    ``control_calls`` says which framework control calls (handoffs, final answers...) count as
    tool calls; by default none do.
    """
    warnings: list[str] = []
    unread: list[str] = []
    try:
        return _reconstruct(spans, logs, warnings, control_calls, unread)
    except Exception as exc:  # last line of defence: keep the conversation, report the problem
        reason = f"reconstruction failed: {type(exc).__name__}: {exc}"
        warnings.append(reason)
        return Reconstruction((), (), None, None, tuple(warnings), (*unread, reason))


def _reconstruct(
    spans: Sequence[SpanRecord],
    logs: Sequence[LogRecordData],
    warnings: list[str],
    control_calls: ControlCalls = DEFAULT_CONTROL,
    unread: list[str] | None = None,
) -> Reconstruction:
    unread = unread if unread is not None else []
    readers: dict[str, str] = {}
    observations, extract_warnings = extract_observations(
        spans, logs, registry_for(control_calls), readers
    )
    # Its only warnings are a convention failing on a span or on the log records: each is
    # telemetry that did not make it into the rebuilt conversation.
    unread.extend(extract_warnings)
    warnings.extend(extract_warnings)
    index = SpanIndex(spans)
    ranks, order = index.trace_ranks(logs)
    exchanges = [o for o in observations if isinstance(o, Exchange)]
    exchanges.sort(key=lambda e: (ranks.get(e.trace_id, 0), e.sort_ns))
    canon = _Canon()
    executions = [o for o in observations if isinstance(o, ToolExecution)]
    executions.sort(key=lambda e: (ranks.get(e.trace_id, 0), e.start_ns))
    executions, _joined = join_layers(executions, index.parents, index.parents_of_any)
    params = parameter_names(spans)
    cautions: list[str] = []
    executions = confirm(executions, evidence(exchanges, params, canon), canon, cautions)
    exchanges = split_merged(exchanges, executions, canon, cautions)
    inputs = given(index.invocations)
    exchanges = unwrap_user_messages(exchanges, inputs)
    transcript = _Transcript(canon)
    for exchange in _dedupe(exchanges, index, canon):
        transcript.add(exchange, ranks.get(exchange.trace_id, 0))
    before = len(warnings)
    orphans = attach(transcript.calls(), executions, warnings, canon)
    cautions += warnings[before:]  # tool spans that ran calls the model output does not show
    cautions += disagreements(transcript.calls(), canon)
    insert_orphans(transcript, orphans, ranks)
    drop_control_calls(transcript.entries, control_calls)

    used = frozenset(o.span_id for o in observations if o.span_id)
    unused = unused_tool_spans(spans, used, readers)
    cautions += [c for c in (unused, unread_calls(exchanges, index.by_id)) if c]
    calls, decoded_by_call = _calls(transcript, index, params, warnings)
    before = len(warnings)
    messages = sample_messages(transcript, decoded_by_call, warnings)
    cautions += warnings[before:]  # results left out: a call was made that could not be read
    first_user = next(
        (e.content for e in transcript.entries if e.role == "user" and e.content.strip()), None
    )
    first_user = first_user_words(inputs, first_user)
    return Reconstruction(
        messages=tuple(messages),
        tool_calls=tuple(calls),
        first_user_message=first_user,
        root_span_id=_root_span_id(spans, order[-1] if order else None),
        warnings=tuple(warnings),
        unread=tuple(unread),
        cautions=tuple(cautions) if calls else (),
        unrecognised=None if calls else unrecognised_warning(spans, readers),
        readers=readers,
        used_spans=used,
        opens_with_history=bool(exchanges) and replays_history(exchanges[0].inputs),
    )
