"""Framework control calls: tool calls a framework makes the model emit to steer the run (hand
over to another agent, end the run with its answer), not tools the user wrote.

Each kind is recognised by the names the framework's own source gives these tools
(docs/conventions.md, "Control calls"). The policy (``--control-calls``) leaves them out of the
scored calls by default; ``include`` keeps them all, and ``include=KIND`` / ``exclude=KIND``
override one kind.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache

__all__ = [
    "CONTROL_KINDS",
    "ControlCallError",
    "ControlCalls",
    "control_kind",
]

HANDOFF = "handoff"
SMOLAGENTS_FINAL_ANSWER = "smolagents.final_answer"
PYDANTIC_AI_FINAL_RESULT = "pydantic_ai.final_result"
CREWAI_DELEGATION = "crewai.delegation"
TURN_END = "turn_end"

# kind -> what it is (shown in errors and docs)
CONTROL_KINDS: Mapping[str, str] = {
    HANDOFF: "transfer_to_<agent> / transfer_back_to_<agent> calls (OpenAI Agents SDK, "
    "LangGraph supervisor and swarm, AutoGen, Google ADK's transfer_to_agent)",
    SMOLAGENTS_FINAL_ANSWER: "smolagents' final_answer call ending a run",
    PYDANTIC_AI_FINAL_RESULT: "Pydantic AI's output tool final_result / final_result_<Type>",
    CREWAI_DELEGATION: "CrewAI's 'Delegate work to coworker' / 'Ask question to coworker'",
    TURN_END: "a tool a framework adds to end a turn with its answer (final_answer, finish, "
    "final_result, final_result_<Type>), as the last call of its turn, in any framework",
}

_HANDOFF_NAME = re.compile(r"^transfer_(?:back_)?to_")
_CREWAI_NAMES = frozenset(
    {
        "delegate work to coworker",
        "ask question to coworker",
        "delegate_work_to_coworker",  # CrewAI's sanitised names for native function calling
        "ask_question_to_coworker",
    }
)
_FINAL_RESULT = re.compile(r"^final_result(?:_\w+)?$")
_TURN_END = re.compile(r"^(?:final_answer|finish|final_result(?:_\w+)?)$")


@lru_cache(maxsize=4096)  # asked for every call of every conversation; few names recur
def control_kind(name: str, convention: str, *, ends_turn: bool = False) -> str | None:
    """The control-call kind of a call named ``name`` read by ``convention``, or None;
    ``ends_turn``: no call follows it in its turn (what makes a ``final_answer`` or ``finish``
    outside the frameworks known by name a turn's end rather than a user's tool)."""
    if _HANDOFF_NAME.match(name):
        return HANDOFF
    if name == "final_answer" and convention == "smolagents":
        return SMOLAGENTS_FINAL_ANSWER
    if convention == "pydantic_ai" and _FINAL_RESULT.match(name):
        return PYDANTIC_AI_FINAL_RESULT
    if name.strip().lower() in _CREWAI_NAMES:
        return CREWAI_DELEGATION
    if ends_turn and _TURN_END.match(name):
        return TURN_END
    return None


class ControlCallError(ValueError):
    """A --control-calls value that cannot be read."""


_MODES = {"include": True, "exclude": False}


@dataclass(frozen=True, slots=True)
class ControlCalls:
    """Which control calls count as tool calls: a default and per-kind overrides."""

    include: bool = False
    overrides: tuple[tuple[str, bool], ...] = ()  # (kind, included), sorted by kind

    def includes(self, kind: str | None) -> bool:
        if kind is None:
            return True  # not a control call: always a tool call
        if not self.overrides:
            return self.include
        return dict(self.overrides).get(kind, self.include)

    def with_kind(self, kind: str, include: bool) -> ControlCalls:
        merged = dict(self.overrides)
        merged[kind] = include
        return ControlCalls(self.include, _normal(merged, self.include))

    def describe(self) -> str:
        """The canonical text (what ``parse`` reads back): ``exclude include=handoff``."""
        parts = ["include" if self.include else "exclude"]
        for mode in ("include", "exclude"):
            kinds = [k for k, v in self.overrides if v == (mode == "include")]
            if kinds:
                parts.append(f"{mode}={','.join(kinds)}")
        return " ".join(parts)

    @classmethod
    def parse(cls, texts: Iterable[str], source: str = "--control-calls") -> ControlCalls:
        """Read clauses ``include``, ``exclude``, ``include=KIND[,KIND]``, ``exclude=KIND[,KIND]``
        separated by spaces or semicolons (several values are read in order; later wins)."""
        default = False
        merged: dict[str, bool] = {}
        for text in texts:
            for clause in re.split(r"[\s;]+", text.strip()):
                if not clause:
                    continue
                mode, _, kinds = clause.partition("=")
                if mode.lower() not in _MODES:
                    which = f" (not {clause!r})" if source else ""  # else the caller quotes it
                    raise ControlCallError(
                        f"{source}: expected include, exclude, include=KIND or exclude=KIND "
                        f"clauses{which}"
                    )
                if not kinds:
                    default, merged = _MODES[mode.lower()], {}
                    continue
                for kind in (k.strip() for k in kinds.split(",")):
                    if kind not in CONTROL_KINDS:
                        known = ", ".join(CONTROL_KINDS)
                        raise ControlCallError(
                            f"{source}: unknown control-call kind {kind!r} (known: {known})"
                        )
                    merged[kind] = _MODES[mode.lower()]
        return cls(default, _normal(merged, default))


def _normal(merged: Mapping[str, bool], default: bool) -> tuple[tuple[str, bool], ...]:
    return tuple(sorted((k, v) for k, v in merged.items() if v != default))


DEFAULT = ControlCalls()
