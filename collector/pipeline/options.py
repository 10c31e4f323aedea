"""``serve`` flags of the scoring pipeline (light: imported when the CLI parser is built)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from toolscore.collector.configuration import (
    FileSection,
    Option,
    add_options,
    choice,
    positive_int,
    resolve,
    seconds,
)
from toolscore.collector.reconstruction.control_calls import DEFAULT as DEFAULT_CONTROL
from toolscore.collector.reconstruction.control_calls import HANDOFF, ControlCallError, ControlCalls

ENV_HANDOFFS = "TOOLSCORE_HANDOFFS"  # deprecated: TOOLSCORE_CONTROL_CALLS
HANDOFF_CHOICES = ("include", "exclude")
DEFAULT_SETTLE_S = 5.0
DEFAULT_ROOT_IDLE_S = 1.0
# claim.DEFAULT_MAX_SPANS, repeated: this module stays light (imported to build the CLI parser)
DEFAULT_MAX_CONVERSATION_SPANS = 500_000


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
    Option(
        "--handoffs",
        "handoffs",
        "deprecated: --control-calls include=handoff / exclude=handoff",
        parse=choice(*HANDOFF_CHOICES),
        metavar="include|exclude",
        shown_default="none (deprecated)",
    ),
)


def control_calls_from(
    args: argparse.Namespace | None,
    environ: Mapping[str, str],
    warn: Callable[[str], None] | None = None,
) -> ControlCalls:
    """The policy of ``--control-calls`` (flag > variable > exclude); the deprecated
    ``--handoffs`` / TOOLSCORE_HANDOFFS, when given, then sets the handoff kind and ``warn``
    (default: a line on stderr) says it is deprecated. Raises ConfigError."""
    values = resolve(CONTROL_CALLS_OPTIONS, args, environ)
    return _with_alias(values["control_calls"], values["handoffs"], warn or warn_stderr)


def _with_alias(
    policy: ControlCalls, handoffs: str | None, warn: Callable[[str], None]
) -> ControlCalls:
    if handoffs is None:
        return policy
    warn(
        f"--handoffs / {ENV_HANDOFFS} is deprecated: use --control-calls {handoffs}={HANDOFF} "
        "(env TOOLSCORE_CONTROL_CALLS)"
    )
    return policy.with_kind(HANDOFF, handoffs == "include")


def warn_stderr(message: str) -> None:
    print(f"toolscore: warning: {message}", file=sys.stderr)


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
        "auto: 2 when the machine has 2 or more cores (one process's database waits "
        "overlap the other's work), else 1",
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
    values["control_calls"] = _with_alias(
        values["control_calls"], values.pop("handoffs"), warn_stderr
    )
    return PipelineOptions(**values)


def processes_for(options: PipelineOptions, backend: str, cpu_count: int | None) -> int:
    """How many scoring processes to run: the configured number, or auto.

    Auto: 2 on a machine with a second core, whatever the database. A scoring process waits
    for the database part of each round (PostgreSQL: about a third; SQLite: its write lock and
    reads), and a second one takes the CPU the receiver leaves (docs/benchmarks.md, Burst).
    """
    del backend  # measured on both databases: the same answer (docs/benchmarks.md, Burst)
    if options.scoring_processes is not None:
        return options.scoring_processes
    return 2 if (cpu_count or 1) >= 2 else 1
