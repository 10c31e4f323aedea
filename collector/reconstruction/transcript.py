"""The transcript a reconstruction builds (messages with their calls, a call counted once: see
:mod:`toolscore.collector.reconstruction.rebuild`), and leaving framework control calls out of it
(docs/conventions.md, "Control calls")."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import orjson

from toolscore.collector.reconstruction.control_calls import (
    PYDANTIC_AI_FINAL_RESULT,
    TURN_END,
    ControlCalls,
    control_kind,
)
from toolscore.collector.reconstruction.conventions import Exchange, Message, ToolExecution
from toolscore.collector.reconstruction.conventions.base import maybe_json
from toolscore.collector.reconstruction.tool_args import (
    DecodedArgs,
    decode_parsed,
    decode_tool_input,
)


@dataclass(slots=True)
class Call:
    name: str
    arguments: Any
    call_id: str | None
    trace_id: str
    span_id: str | None
    convention: str
    execution: ToolExecution | None = None
    rule: str = "model output"  # which rule produced it (show --spans)


@dataclass(slots=True)
class Entry:
    role: str
    key: tuple[int, int]  # (trace rank, time) for inserting calls seen only on tool spans
    content: str = ""
    calls: list[Call] = field(default_factory=list)
    tool_call_id: str | None = None


def _canon_text(decoded: DecodedArgs, value: Any) -> str:
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
        return f"{_NOT_COMPARABLE}{id(value)}>"
    return decoded.raw or ""


_CANON_OPTIONS = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS
_UNREAD: Any = object()
_NOT_COMPARABLE = "<not comparable: "


def _key(value: Any) -> object:
    """A string by its text (equal texts decode alike), anything else by identity."""
    return value if type(value) is str else id(value)


class Canon:
    """Canonical text of tool arguments (equal arguments give equal text), memoised for one
    reconstruction: each call's arguments are compared several times (history replay, duplicate
    model calls, attaching tool spans, checking that tool spans agree). Each value is decoded
    once: a string by its text (a history replays the same argument text again and again), any
    other object by identity. :meth:`peek` reads that decoding; :meth:`decode` hands it out once
    (then the caller owns its argument dict) and decodes anew for later callers."""

    __slots__ = ("_decoded", "_memo", "_parsed")

    def __init__(self) -> None:
        self._memo: dict[object, tuple[Any, str]] = {}
        self._decoded: dict[object, tuple[Any, DecodedArgs]] = {}
        self._parsed: dict[str, Any] = {}  # text -> its JSON value, only when it is JSON

    def parsed(self, value: Any) -> Any:
        """``maybe_json(value)``, to read only: a text is parsed once (tool spans repeat the
        same argument text, and several rules read it)."""
        if type(value) is not str:
            return maybe_json(value)
        found = self._parsed.get(value, _UNREAD)
        if found is _UNREAD:
            found = maybe_json(value)
            if found is not value:  # JSON: decoding the text later starts from it
                self._parsed[value] = found
        return found

    def __call__(self, value: Any) -> str:
        is_text = type(value) is str
        key = value if is_text else id(value)  # _key, written out: the most frequent call here
        hit = self._memo.get(key)
        if hit is not None and (is_text or hit[0] is value):
            return hit[1]
        decoded = self.peek(value)
        text = _canon_text(decoded, value)
        if type(value) is str and text.startswith(_NOT_COMPARABLE):
            key = id(value)  # equal to nothing else, like any object too deep to compare
        self._memo[key] = (value, text)  # holding the value keeps its id unique
        return text

    def peek(self, value: Any) -> DecodedArgs:
        """``decode_tool_input(value)``, to read only: the one decoding of this value."""
        is_text = type(value) is str
        key = value if is_text else id(value)
        hit = self._decoded.get(key)
        if hit is not None and (is_text or hit[0] is value):
            return hit[1]
        parsed = self._parsed.get(value, _UNREAD) if is_text else _UNREAD
        decoded = decode_tool_input(value) if parsed is _UNREAD else decode_parsed(value, parsed)
        self._decoded[key] = (value, decoded)
        return decoded

    def decode(self, value: Any) -> DecodedArgs:
        """``decode_tool_input(value)``, the caller's own: the decoding made for reading if it
        was not handed out yet, else a new one."""
        key = _key(value)
        hit = self._decoded.get(key)
        if hit is not None and (hit[0] is value or type(value) is str):
            del self._decoded[key]
            return hit[1]
        return decode_tool_input(value)


class Transcript:
    def __init__(self, canon: Canon) -> None:
        self.canon = canon
        self.entries: list[Entry] = []
        self.by_id: dict[str, Call] = {}
        self.sig_count: dict[tuple[str, str], int] = defaultdict(int)
        self.fp_count: dict[tuple[str, str], int] = defaultdict(int)
        self.result_ids: set[str] = set()
        # calls first seen without an id, by signature: a later record of one with an id (the
        # next request's history) is the same call, not a new one
        self.idless: dict[tuple[str, str], list[Call]] = defaultdict(list)

    def _add_call(self, call: Call, sig: tuple[str, str]) -> None:
        if call.call_id:
            self.by_id[call.call_id] = call
        else:
            self.idless[sig].append(call)
        self.sig_count[sig] += 1

    def _adopt(self, sig: tuple[str, str], call_id: str) -> bool:
        """Give ``call_id`` to the first call of ``sig`` seen without one (True), if any."""
        waiting = self.idless.get(sig)
        if not waiting:
            return False
        call = waiting.pop(0)
        call.call_id = call_id
        self.by_id[call_id] = call
        return True

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
            self._merge_result(message, key, seen_fp, history=history)
            return
        if not message.tool_calls and not message.content.strip():
            return  # an empty message (e.g. a call the framework could not parse was dropped)
        new_calls = self._new_calls(message, exchange, seen_sig)
        fp = (message.role, " ".join(message.content.split()))
        text_known = self._known(fp, seen_fp) if history else False
        if not message.tool_calls and history and text_known:
            return
        if message.tool_calls and not new_calls:
            return
        content = "" if (text_known and message.tool_calls) else message.content
        if content or not message.tool_calls:
            self.fp_count[fp] += 1
        for call, sig in new_calls:
            self._add_call(call, sig)
        self.entries.append(Entry(message.role, key, content, [c for c, _ in new_calls]))

    def _merge_result(
        self,
        message: Message,
        key: tuple[int, int],
        seen_fp: dict[tuple[str, str], int],
        *,
        history: bool,
    ) -> None:
        if message.tool_call_id:
            if message.tool_call_id in self.result_ids:
                return
            self.result_ids.add(message.tool_call_id)
        elif self._known(("tool", message.content), seen_fp) and history:
            return
        self.fp_count[("tool", message.content)] += 1
        self.entries.append(Entry("tool", key, message.content, [], message.tool_call_id))

    def _new_calls(
        self, message: Message, exchange: Exchange, seen_sig: dict[tuple[str, str], int]
    ) -> list[tuple[Call, tuple[str, str]]]:
        """The calls of ``message`` not known yet (by id; without ids, by occurrence count),
        each with its signature (name, canonical arguments)."""
        new_calls: list[tuple[Call, tuple[str, str]]] = []
        for ref in message.tool_calls:
            sig = (ref.name, self.canon(ref.arguments))
            seen_sig[sig] += 1
            if ref.call_id and (ref.call_id in self.by_id or self._adopt(sig, ref.call_id)):
                continue
            if not ref.call_id and seen_sig[sig] <= self.sig_count[sig]:
                continue  # a replay without id (ADK strips its synthetic ids from history)
            call = Call(
                ref.name,
                ref.arguments,
                ref.call_id,
                exchange.trace_id,
                exchange.span_id,
                exchange.convention,
            )
            if ref.note:
                call.rule = f"model output ({ref.note})"
            new_calls.append((call, sig))
        return new_calls

    def _known(self, fp: tuple[str, str], seen: dict[tuple[str, str], int]) -> bool:
        seen[fp] += 1
        return seen[fp] <= self.fp_count[fp]

    def calls(self) -> list[Call]:
        return [call for entry in self.entries for call in entry.calls]


def drop_control_calls(entries: list[Entry], policy: ControlCalls) -> None:
    """Leave out the control calls ``policy`` excludes, with their results (by call id; without
    ids, the results that follow an assistant message left with no call). The message's text
    stays; an output tool's arguments (the run's structured answer) become its text."""
    dropped: set[str] = set()
    kept: list[Entry] = []
    orphan_results = 0
    last = _turn_ends(entries)
    for index, entry in enumerate(entries):
        if entry.role == "tool":
            if entry.tool_call_id in dropped:
                continue
            if not entry.tool_call_id and orphan_results:
                orphan_results -= 1
                continue
            kept.append(entry)
            continue
        orphan_results = 0
        gone = [
            c
            for c in entry.calls
            if not policy.includes(control_kind(c.name, c.convention, ends_turn=index in last))
        ]
        if gone:
            dropped.update(c.call_id for c in gone if c.call_id)
            entry.calls = [c for c in entry.calls if all(c is not g for g in gone)]
            if not entry.content.strip():
                entry.content = _answer_text(gone)
            if not entry.calls:
                orphan_results = len(gone)
                if not entry.content.strip():
                    continue
        kept.append(entry)
    entries[:] = kept


def _turn_ends(entries: list[Entry]) -> set[int]:
    """The entries holding the last calls of their turn (a turn ends at the next user
    message)."""
    ends: set[int] = set()
    seen_calls = False
    for index in range(len(entries) - 1, -1, -1):
        entry = entries[index]
        if entry.role == "user":
            seen_calls = False
        elif entry.calls and not seen_calls:
            ends.add(index)
            seen_calls = True
    return ends


_ANSWER_KINDS = frozenset({PYDANTIC_AI_FINAL_RESULT, TURN_END})


def _answer_text(calls: list[Call]) -> str:
    for call in calls:
        kind = control_kind(call.name, call.convention, ends_turn=True)
        if kind in _ANSWER_KINDS:
            value = maybe_json(call.arguments)
            if kind == TURN_END and isinstance(value, dict) and len(value) == 1:
                (only,) = value.values()  # {"response": "..."}, {"answer": "..."}
                value = only if isinstance(only, str) else value
            if isinstance(value, str):
                return value
            try:
                return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
            except (TypeError, ValueError, RecursionError):
                return str(value)
    return ""
