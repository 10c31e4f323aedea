"""``serve`` flags of the scoring pipeline (light: imported when the CLI parser is built)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from dataclasses import dataclass

from toolscore.collector.configuration import (
    FileSection,
    Option,
    add_options,
    positive_int,
    resolve,
    seconds,
)
from toolscore.collector.reconstruction.control_calls import DEFAULT as DEFAULT_CONTROL
from toolscore.collector.reconstruction.control_calls import ControlCallError, ControlCalls

DEFAULT_SETTLE_S = 5.0
DEFAULT_ROOT_IDLE_S = 1.0
# claim.DEFAULT_MAX_SPANS, repeated: this module stays light (imported to build the CLI parser)
DEFAULT_MAX_CONVERSATION_SPANS = 500_000
# on: a stateless client's traces (no key at all, each replaying the last) make one conversation
DEFAULT_REPLAY_WINDOW_S = 3600.0
# pacing.py's defaults, repeated: this module stays light
DEFAULT_BACKPRESSURE_LAG_S = 0.5
DEFAULT_BACKPRESSURE_MAX_HOLD_S = 2.0


@dataclass(frozen=True, slots=True)
class PipelineOptions:
    enabled: bool = True
    settle_s: float = DEFAULT_SETTLE_S
    root_idle_s: float = DEFAULT_ROOT_IDLE_S
    conversation_keys: tuple[str, ...] | None = None  # None: the built-in list
    reference_key: str | None = None  # None: toolscore.reference.id
    # Score in a child process (its own GIL) rather than a thread of the server. ``serve``
    # defaults to True; embedding code (tests) defaults to the cheaper thread.
    separate_process: bool = False
    # With separate_process: how many child processes score; None: auto (see processes_for).
    scoring_processes: int | None = None
    # Which framework control calls (handoffs, final answers) count as tool calls.
    control_calls: ControlCalls = DEFAULT_CONTROL
    # More spans: the conversation is not loaded (status error, with the reason).
    max_conversation_spans: int = DEFAULT_MAX_CONVERSATION_SPANS
    # A keyless trace replaying a conversation left this recently joins it (0: never).
    replay_window_s: float = DEFAULT_REPLAY_WINDOW_S
    # Acknowledgements held while scoring is this far behind (0: never), each at most max_hold.
    backpressure_lag_s: float = DEFAULT_BACKPRESSURE_LAG_S
    backpressure_max_hold_s: float = DEFAULT_BACKPRESSURE_MAX_HOLD_S


def _processes(text: str) -> int | None:
    if text.strip().lower() == "auto":
        return None
    try:
        return positive_int(text)
    except ValueError:
        raise ValueError("expected a whole number greater than 0 or auto") from None


def _control_calls(text: str) -> ControlCalls:
    try:
        return ControlCalls.parse([text], "")
    except ControlCallError as exc:
        raise ValueError(str(exc).removeprefix(": ")) from None


# serve, show, evaluate and rescore read these alike (docs/conventions.md, "Control calls")
CONTROL_CALLS_OPTIONS: tuple[Option, ...] = (
    Option(
        "--control-calls",
        "control_calls",
        "whether framework control calls (handoffs to other agents, smolagents' final_answer, "
        "Pydantic AI's final_result, CrewAI delegation) count as tool calls: exclude or "
        "include, then per kind include=KIND[,KIND] / exclude=KIND, separated by spaces (kinds: "
        "handoff, smolagents.final_answer, pydantic_ai.final_result, crewai.delegation)",
        parse=_control_calls,
        default=DEFAULT_CONTROL,
        metavar="POLICY",
        shown_default="exclude",
    ),
)


def control_calls_from(args: argparse.Namespace | None, environ: Mapping[str, str]) -> ControlCalls:
    """The policy of ``--control-calls`` (flag > variable > exclude). Raises ConfigError."""
    policy: ControlCalls = resolve(CONTROL_CALLS_OPTIONS, args, environ)["control_calls"]
    return policy


OPTIONS: tuple[Option, ...] = (
    Option(
        "--settle",
        "settle_s",
        "a conversation is complete (and scored) when no span arrived for this long",
        parse=seconds,
        default=DEFAULT_SETTLE_S,
        metavar="SECONDS",
    ),
    Option(
        "--root-idle",
        "root_idle_s",
        "sooner for a single-trace conversation whose root span ended: this quiet time "
        "(capped by --settle)",
        parse=seconds,
        default=DEFAULT_ROOT_IDLE_S,
        metavar="SECONDS",
    ),
    Option(
        "--conversation-key",
        "conversation_keys",
        "attribute naming a conversation; repeat for several, first present wins; the "
        "variable is comma-separated",
        kind="list",
        env="TOOLSCORE_CONVERSATION_KEYS",
        metavar="ATTRIBUTE",
        shown_default="gen_ai.conversation.id, session.id, ...",
    ),
    Option(
        "--replay-window",
        "replay_window_s",
        "a trace with no conversation key whose model input replays the messages an earlier "
        "conversation was left with this recently joins it (stateless clients: one trace per "
        "model call); 0 turns the rule off",
        parse=seconds,
        default=DEFAULT_REPLAY_WINDOW_S,
        env="TOOLSCORE_REPLAY_WINDOW",
        metavar="SECONDS",
    ),
    Option(
        "--reference-key",
        "reference_key",
        "attribute naming the expected reference",
        metavar="ATTRIBUTE",
        shown_default="toolscore.reference.id",
    ),
    Option(
        "--scoring-in-process",
        "separate_process",
        "score in a thread of the server process instead of a child process (less memory, "
        "but scoring then competes with ingest for one CPU)",
        kind="switch",
        flag_value=False,
        default=True,
        shown_default="child processes",
    ),
    Option(
        "--scoring-processes",
        "scoring_processes",
        "child processes that score in parallel, each claiming its own conversations, or "
        "auto: one per core this process may run on, up to 4",
        parse=_processes,
        metavar="N|auto",
        shown_default="auto",
    ),
    *CONTROL_CALLS_OPTIONS,
    Option(
        "--max-conversation-spans",
        "max_conversation_spans",
        "a conversation with more spans is not scored (status error, with the reason) rather "
        "than loaded: memory grows with the spans of the biggest conversation",
        parse=positive_int,
        default=DEFAULT_MAX_CONVERSATION_SPANS,
        metavar="N",
    ),
    Option(
        "--backpressure-lag",
        "backpressure_lag_s",
        "while scoring is more than this far behind (its longest-waiting ready conversation), "
        "acknowledgements of committed requests are held so senders slow to the rate scoring "
        "keeps up with; 0 never holds them",
        parse=seconds,
        default=DEFAULT_BACKPRESSURE_LAG_S,
        metavar="SECONDS",
    ),
    Option(
        "--backpressure-max-hold",
        "backpressure_max_hold_s",
        "the longest one acknowledgement is held by --backpressure-lag (keep it well under "
        "your exporters' timeout)",
        parse=seconds,
        default=DEFAULT_BACKPRESSURE_MAX_HOLD_S,
        metavar="SECONDS",
    ),
    Option(
        "--no-scoring",
        "enabled",
        "only store telemetry; do not assemble or score conversations",
        kind="switch",
        flag_value=False,
        default=True,
        shown_default="scoring on",
    ),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_options(parser, OPTIONS)


def options_from(
    args: argparse.Namespace | None, environ: Mapping[str, str], file: FileSection | None = None
) -> PipelineOptions:
    """Flags beat environment variables beat ``file`` beats defaults; raises ConfigError."""
    values = resolve(OPTIONS, args, environ, file)
    keys = tuple(key for key in values["conversation_keys"] or () if key)
    values.update(conversation_keys=keys or None, reference_key=values["reference_key"] or None)
    return PipelineOptions(**values)


def available_cores() -> int:
    """The cores this process may run on, for defaults that scale with the host: its CPU
    affinity (what ``taskset`` or a container's cpuset allows) where the system reports one,
    else the machine's count; at least 1."""
    counter = getattr(os, "process_cpu_count", None)  # Python 3.13+
    if counter is not None:
        return max(1, counter() or 1)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no affinity on this system
        return max(1, os.cpu_count() or 1)


#: Most scoring processes ``auto`` starts: they share the database's writes (SQLite: one lock).
MAX_AUTO_SCORING_PROCESSES = 4


def processes_for(options: PipelineOptions, cores: int) -> int:
    """How many scoring processes to run: the configured number, or auto: one per core this
    process may run on (:func:`available_cores`), up to
    :data:`MAX_AUTO_SCORING_PROCESSES`. A scoring process waits for the database part of each
    round, so one per core uses the CPU the receiver leaves; more only take it from the
    receiver (docs/benchmarks.md, Burst)."""
    if options.scoring_processes is not None:
        return options.scoring_processes
    return max(1, min(cores, MAX_AUTO_SCORING_PROCESSES))
