"""Rebuild a conversation's messages and ordered tool calls from its spans and log records.

Pipeline: every span goes through the convention registry
(:mod:`toolscore.collector.conventions`), giving
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

import bisect
import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from toolscore.collector.control_calls import DEFAULT as DEFAULT_CONTROL
from toolscore.collector.control_calls import ControlCalls
from toolscore.collector.conventions import (
    Exchange,
    Message,
    ToolExecution,
    extract_observations,
    registry_for,
)
from toolscore.collector.conventions.capture import capture_hint
from toolscore.collector.conventions.definitions import parameter_names
from toolscore.collector.model import LogRecordData, SpanRecord
from toolscore.collector.tool_args import DecodedArgs, decode_tool_input
from toolscore.collector.transcript import Call as _Call
from toolscore.collector.transcript import Entry as _Entry
from toolscore.collector.transcript import drop_control_calls

__all__ = ["ReconstructedCall", "Reconstruction", "reconstruct"]

HANDOFF_PREFIX = "handoff to "  # OpenAI Agents handoff TOOL spans: not tool calls


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
    # then ``capture_hint`` says how to record them (collector/conventions/capture.py).
    arguments_recorded: bool = True
    capture_hint: str | None = None


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


def _canon_text(value: Any) -> str:
    decoded = decode_tool_input(value)
    try:
        if decoded.arguments is not None:
            try:
                return orjson.dumps(decoded.arguments, option=_CANON_OPTIONS, default=str).decode()
            except (TypeError, orjson.JSONEncodeError):  # big integers, > 255 levels
                return json.dumps(decoded.arguments, sort_keys=True, default=str)
        if decoded.positional:
            return json.dumps(list(decoded.positional), default=str)
    except (TypeError, ValueError, RecursionError):
        # Too deep even for json (about 1,000 levels): equal to nothing else; the memo keeps
        # the value alive, so its id stays unique. The scorer refuses such arguments anyway.
        return f"<not comparable: {id(value)}>"
    return decoded.raw or ""


_CANON_OPTIONS = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS


class _Canon:
    """Canonical text of tool arguments (equal arguments give equal text), memoised per object
    for one reconstruction: each call's arguments are compared several times (history replay,
    duplicate model calls, attaching tool spans)."""

    __slots__ = ("_memo",)

    def __init__(self) -> None:
        self._memo: dict[int, tuple[Any, str]] = {}

    def __call__(self, value: Any) -> str:
        hit = self._memo.get(id(value))
        if hit is not None and hit[0] is value:
            return hit[1]
        text = _canon_text(value)
        self._memo[id(value)] = (value, text)  # holding the value keeps its id unique
        return text


class _Transcript:
    def __init__(self, canon: _Canon) -> None:
        self.canon = canon
        self.entries: list[_Entry] = []
        self.by_id: dict[str, _Call] = {}
        self.sig_count: dict[tuple[str, str], int] = defaultdict(int)
        self.fp_count: dict[tuple[str, str], int] = defaultdict(int)
        self.result_ids: set[str] = set()

    def _add_call(self, call: _Call) -> None:
        if call.call_id:
            self.by_id[call.call_id] = call
        self.sig_count[(call.name, self.canon(call.arguments))] += 1

    def add(self, exchange: Exchange, rank: int) -> None:
        key = (rank, exchange.sort_ns)
        seen_fp: dict[tuple[str, str], int] = defaultdict(int)
        seen_sig: dict[tuple[str, str], int] = defaultdict(int)
        for message in exchange.inputs:
            self._merge(message, exchange, key, seen_fp, seen_sig, history=True)
        for message in exchange.outputs:
            self._merge(message, exchange, key, seen_fp, seen_sig, history=False)

    def _merge(
        self,
        message: Message,
        exchange: Exchange,
        key: tuple[int, int],
        seen_fp: dict[tuple[str, str], int],
        seen_sig: dict[tuple[str, str], int],
        *,
        history: bool,
    ) -> None:
        if message.role == "tool":
            if message.tool_call_id:
                if message.tool_call_id in self.result_ids:
                    return
                self.result_ids.add(message.tool_call_id)
            elif self._known(("tool", message.content), seen_fp) and history:
                return
            self.fp_count[("tool", message.content)] += 1
            self.entries.append(_Entry("tool", key, message.content, [], message.tool_call_id))
            return
        if not message.tool_calls and not message.content.strip():
            return  # an empty message (e.g. a call the framework could not parse was dropped)
        new_calls: list[_Call] = []
        for ref in message.tool_calls:
            sig = (ref.name, self.canon(ref.arguments))
            seen_sig[sig] += 1
            if ref.call_id and ref.call_id in self.by_id:
                continue
            if not ref.call_id and seen_sig[sig] <= self.sig_count[sig]:
                continue  # a replay without id (ADK strips its synthetic ids from history)
            new_calls.append(
                _Call(
                    ref.name,
                    ref.arguments,
                    ref.call_id,
                    exchange.trace_id,
                    exchange.span_id,
                    exchange.convention,
                )
            )
        fp = (message.role, " ".join(message.content.split()))
        text_known = self._known(fp, seen_fp) if history else False
        if not message.tool_calls and history and text_known:
            return
        if message.tool_calls and not new_calls:
            return
        content = "" if (text_known and message.tool_calls) else message.content
        if content or not message.tool_calls:
            self.fp_count[fp] += 1
        for call in new_calls:
            self._add_call(call)
        self.entries.append(_Entry(message.role, key, content, new_calls))

    def _known(self, fp: tuple[str, str], seen: dict[tuple[str, str], int]) -> bool:
        seen[fp] += 1
        return seen[fp] <= self.fp_count[fp]

    def calls(self) -> list[_Call]:
        return [call for entry in self.entries for call in entry.calls]


def _trace_ranks(
    spans: Sequence[SpanRecord], logs: Sequence[LogRecordData]
) -> tuple[dict[str, int], list[str]]:
    start: dict[str, int] = {}
    for span in spans:
        start[span.trace_id] = min(start.get(span.trace_id, span.start_ns), span.start_ns)
    for log in logs:
        if log.trace_id and log.trace_id not in start:
            start[log.trace_id] = log.time_ns
    order = sorted(start, key=lambda t: (start[t], t))
    return {trace: i for i, trace in enumerate(order)}, order


def _dedupe(
    exchanges: list[Exchange], spans: Sequence[SpanRecord], canon: _Canon
) -> list[Exchange]:
    """Drop a second record of the same model call.

    A framework span and a provider span (say OpenInference LangChain + OpenLLMetry openai) both
    record one API call; they may be parent and child or siblings, but they overlap in time and
    show the same output. Calls with ids are deduplicated later anyway; this catches text answers
    and calls without ids. Same response id → same call.
    """
    interval = {s.span_id: (s.trace_id, s.start_ns, s.end_ns) for s in spans}
    kept: list[Exchange] = []
    by_response: set[str] = set()
    # Earlier exchanges' intervals by (trace, output shape): only those can be a duplicate, and
    # a long conversation's exchanges are then not each compared with all the others.
    timed: dict[tuple[str, tuple[Any, ...]], list[tuple[int, int]]] = defaultdict(list)
    for exchange in exchanges:
        if exchange.response_id and exchange.response_id in by_response:
            continue
        where = interval.get(exchange.span_id or "")
        shape = _output_shape(exchange, canon)
        if where is not None and shape:
            trace, start, end = where
            same = timed[(trace, shape)]
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


def _attach(
    calls: list[_Call], executions: list[ToolExecution], warnings: list[str], canon: _Canon
) -> list[ToolExecution]:
    """Attach executions to calls; return the executions that matched no call."""
    by_id = {c.call_id: c for c in calls if c.call_id}
    pending: list[ToolExecution] = []
    for execution in executions:
        call = by_id.get(execution.call_id) if execution.call_id else None
        if call is not None:
            if call.execution is None:
                call.execution = execution
            continue  # a retried execution of an attached call is not a new call
        pending.append(execution)

    def free(execution: ToolExecution) -> list[_Call]:
        return [
            c
            for c in calls
            if c.execution is None
            and c.name == execution.name
            and not (c.call_id and execution.call_id)  # both have ids and they differ
        ]

    def args_equal(call: _Call, execution: ToolExecution) -> bool:
        return canon(call.arguments) == canon(execution.arguments)

    def positional_equal(call: _Call, execution: ToolExecution) -> bool:
        decoded = decode_tool_input(execution.arguments)
        mine = decode_tool_input(call.arguments).arguments
        if mine is None or not decoded.positional:
            return False
        named = decoded.arguments or {}
        rest = [v for k, v in mine.items() if k not in named]
        return [str(v) for v in rest] == [str(v) for v in decoded.positional]

    for rule in (args_equal, positional_equal, lambda _c, _e: True):
        still: list[ToolExecution] = []
        for execution in pending:
            match = next((c for c in free(execution) if rule(c, execution)), None)
            if match is None:
                still.append(execution)
            else:
                match.execution = execution
        pending = still
    unmatched = [e for e in pending if not e.name.startswith(HANDOFF_PREFIX)]
    if calls and unmatched:
        names = ", ".join(sorted({e.name for e in unmatched}))
        warnings.append(
            f"{len(unmatched)} tool span(s) matched no call in the model output ({names}); "
            "counted from the tool spans"
        )
    return unmatched


def _insert_orphans(
    transcript: _Transcript, orphans: list[ToolExecution], ranks: dict[str, int]
) -> None:
    orphans = sorted(orphans, key=lambda e: (ranks.get(e.trace_id, 0), e.start_ns))
    for execution in orphans:
        key = (ranks.get(execution.trace_id, 0), execution.start_ns)
        call = _Call(
            execution.name,
            None,
            execution.call_id,
            execution.trace_id,
            execution.span_id,
            execution.convention,
            execution,
        )
        keys = [entry.key for entry in transcript.entries]
        index = bisect.bisect_right(keys, key)
        previous = transcript.entries[index - 1] if index else None
        if (
            previous is not None
            and previous.role == "assistant"
            and previous.key[0] == key[0]
            and previous.calls
            and all(c.arguments is None for c in previous.calls)
        ):
            previous.calls.append(call)  # tools of one step: one assistant message
            continue
        transcript.entries.insert(index, _Entry("assistant", key, "", [call]))


def _decode_call(call: _Call, params: dict[str, tuple[str, ...]]) -> DecodedArgs:
    requested = decode_tool_input(call.arguments) if call.arguments is not None else None
    if requested is not None and requested.ok:
        return requested
    executed = (
        decode_tool_input(call.execution.arguments)
        if call.execution is not None and call.execution.arguments is not None
        else None
    )
    if executed is not None and executed.ok:
        return executed
    if requested is not None and requested.arguments is not None:
        return requested  # partial (truncated) model arguments
    if executed is not None and executed.positional and call.name in params:
        named = dict(executed.arguments or {})
        free = [p for p in params[call.name] if p not in named]
        if len(free) >= len(executed.positional):
            named.update(zip(free, executed.positional, strict=False))
            return DecodedArgs(named, None, True)
    return requested or executed or DecodedArgs(None, None, False)


def _messages(transcript: _Transcript, decoded: dict[int, DecodedArgs]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    pending: list[_Call] = []

    def flush() -> None:
        for call in pending:
            if call.execution is not None and call.execution.result is not None:
                out.append({"type": "tool", "content": call.execution.result})
        pending.clear()

    for entry in transcript.entries:
        if entry.role == "tool":
            match = next(
                (c for c in pending if c.call_id and c.call_id == entry.tool_call_id), None
            )
            if match is None and pending and not entry.tool_call_id:
                match = pending[0]
            if match is not None:
                pending.remove(match)
            out.append({"type": "tool", "content": entry.content})
            continue
        flush()
        if entry.role == "user":
            out.append({"type": "human", "content": entry.content})
        elif entry.role == "assistant":
            message: dict[str, Any] = {"type": "ai", "content": entry.content}
            if entry.calls:
                message["tool_calls"] = [
                    {"name": c.name, "args": decoded[id(c)].arguments or {}} for c in entry.calls
                ]
                pending.extend(c for c in entry.calls if c.call_id not in transcript.result_ids)
            out.append(message)
    flush()
    return out


def _root_span_id(spans: Sequence[SpanRecord], last_trace: str | None) -> str | None:
    mine = [s for s in spans if s.trace_id == last_trace]
    ids = {s.span_id for s in mine}
    roots = [s for s in mine if not s.parent_span_id or s.parent_span_id not in ids]
    return min(roots, key=lambda s: (s.start_ns, s.span_id)).span_id if roots else None


def _calls(
    transcript: _Transcript, spans: Sequence[SpanRecord], warnings: list[str]
) -> tuple[list[ReconstructedCall], dict[int, DecodedArgs]]:
    params = parameter_names(spans)
    scopes = {s.span_id: s.scope_name for s in spans}
    calls: list[ReconstructedCall] = []
    decoded_by_call: dict[int, DecodedArgs] = {}
    for position, call in enumerate(transcript.calls()):
        decoded = _decode_call(call, params)
        recorded = decoded.arguments is not None or bool(decoded.raw)
        if not recorded and params.get(call.name) == ():
            decoded, recorded = DecodedArgs({}, None, True), True  # its definition takes none
        decoded_by_call[id(call)] = decoded
        if not decoded.ok:
            what = "were not recorded" if not recorded else "could not be fully decoded"
            warnings.append(f"call #{position} {call.name}: arguments {what}")
        where = call.execution or call
        scope = scopes.get(call.span_id or "") or scopes.get(where.span_id or "")
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
                arguments_recorded=recorded,
                capture_hint=None if recorded else capture_hint(call.convention, scope),
            )
        )
    return calls, decoded_by_call


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
    observations, extract_warnings = extract_observations(spans, logs, registry_for(control_calls))
    # Its only warnings are a convention failing on a span or on the log records: each is
    # telemetry that did not make it into the rebuilt conversation.
    unread.extend(extract_warnings)
    warnings.extend(extract_warnings)
    ranks, order = _trace_ranks(spans, logs)
    exchanges = [o for o in observations if isinstance(o, Exchange)]
    exchanges.sort(key=lambda e: (ranks.get(e.trace_id, 0), e.sort_ns))
    canon = _Canon()
    transcript = _Transcript(canon)
    for exchange in _dedupe(exchanges, spans, canon):
        transcript.add(exchange, ranks.get(exchange.trace_id, 0))
    executions = [o for o in observations if isinstance(o, ToolExecution)]
    executions.sort(key=lambda e: (ranks.get(e.trace_id, 0), e.start_ns))
    orphans = _attach(transcript.calls(), executions, warnings, canon)
    _insert_orphans(transcript, orphans, ranks)
    drop_control_calls(transcript.entries, control_calls)

    calls, decoded_by_call = _calls(transcript, spans, warnings)
    messages = _messages(transcript, decoded_by_call)
    first_user = next(
        (e.content for e in transcript.entries if e.role == "user" and e.content.strip()), None
    )
    return Reconstruction(
        messages=tuple(messages),
        tool_calls=tuple(calls),
        first_user_message=first_user,
        root_span_id=_root_span_id(spans, order[-1] if order else None),
        warnings=tuple(warnings),
        unread=tuple(unread),
    )
