"""The transcript as a Ragas ``MultiTurnSample.user_input`` list (``human`` / ``ai`` with
``tool_calls`` / ``tool``), valid by construction: a tool result follows the message that called
tools, and one answering no call the telemetry shows is left out and reported."""

from __future__ import annotations

from typing import Any

from toolscore.collector.reconstruction.tool_args import DecodedArgs
from toolscore.collector.reconstruction.transcript import Call, Entry, Transcript


class _Sample:
    def __init__(self, transcript: Transcript, decoded: dict[int, DecodedArgs]) -> None:
        self.transcript = transcript
        self.decoded = decoded
        self.out: list[dict[str, Any]] = []
        self.pending: list[Call] = []
        self.unanswered = 0

    def result(self, content: str) -> None:
        last = self.out[-1] if self.out else None
        if last is not None and (last["type"] == "tool" or last.get("tool_calls")):
            self.out.append({"type": "tool", "content": content})
        else:
            self.unanswered += 1

    def flush(self) -> None:
        for call in self.pending:
            if call.execution is not None and call.execution.result is not None:
                self.result(call.execution.result)
        self.pending.clear()

    def tool(self, entry: Entry) -> None:
        match = next(
            (c for c in self.pending if c.call_id and c.call_id == entry.tool_call_id), None
        )
        if match is None and self.pending and not entry.tool_call_id:
            match = self.pending[0]
        if match is not None:
            self.pending.remove(match)
        self.result(entry.content)

    def assistant(self, entry: Entry) -> None:
        message: dict[str, Any] = {"type": "ai", "content": entry.content}
        if entry.calls:
            message["tool_calls"] = [
                {"name": c.name, "args": self.decoded[id(c)].arguments or {}} for c in entry.calls
            ]
            answered = self.transcript.result_ids
            self.pending.extend(c for c in entry.calls if c.call_id not in answered)
        self.out.append(message)

    def add(self, entry: Entry) -> None:
        if entry.role == "tool":
            self.tool(entry)
            return
        self.flush()
        if entry.role == "user":
            self.out.append({"type": "human", "content": entry.content})
        elif entry.role == "assistant":
            self.assistant(entry)


def _in_call_order(entries: list[Entry]) -> list[Entry]:
    """The results that follow an assistant message in the order of its calls (by call id):
    their records may arrive in any order, with equal times, and parallel calls' results in the
    conversation answer the calls in the order the model asked. Results without a known id keep
    their place after them."""
    out: list[Entry] = []
    order: dict[str, int] = {}
    run: list[Entry] = []
    for entry in [*entries, Entry("end", (0, 0))]:
        if entry.role == "tool":
            run.append(entry)
            continue
        out += sorted(run, key=lambda e: order.get(e.tool_call_id or "", len(order)))
        run = []
        if entry.role != "end":
            out.append(entry)
        order = {c.call_id: i for i, c in enumerate(entry.calls) if c.call_id}
    return out


def sample_messages(
    transcript: Transcript, decoded: dict[int, DecodedArgs], warnings: list[str]
) -> list[dict[str, Any]]:
    """The messages of ``transcript``; ``decoded``: each call's arguments (by ``id(call)``)."""
    sample = _Sample(transcript, decoded)
    for entry in _in_call_order(transcript.entries):
        sample.add(entry)
    sample.flush()
    if sample.unanswered:
        warnings.append(
            f"{sample.unanswered} tool result(s) answer no call the telemetry shows (a call was "
            "made but could not be read): left out of the transcript"
        )
    return sample.out
