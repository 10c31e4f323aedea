"""``serve`` flags of the scoring pipeline (light: imported when the CLI parser is built)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from toolscore.collector.control_calls import DEFAULT as DEFAULT_CONTROL
from toolscore.collector.control_calls import HANDOFF, ControlCallError, ControlCalls

ENV_SETTLE = "TOOLSCORE_SETTLE"
ENV_ROOT_IDLE = "TOOLSCORE_ROOT_IDLE"
ENV_CONVERSATION_KEYS = "TOOLSCORE_CONVERSATION_KEYS"
ENV_REFERENCE_KEY = "TOOLSCORE_REFERENCE_KEY"
ENV_SCORING_IN_PROCESS = "TOOLSCORE_SCORING_IN_PROCESS"
ENV_SCORING_PROCESSES = "TOOLSCORE_SCORING_PROCESSES"
ENV_HANDOFFS = "TOOLSCORE_HANDOFFS"  # deprecated: TOOLSCORE_CONTROL_CALLS
ENV_CONTROL_CALLS = "TOOLSCORE_CONTROL_CALLS"
ENV_MAX_CONVERSATION_SPANS = "TOOLSCORE_MAX_CONVERSATION_SPANS"
HANDOFF_CHOICES = ("include", "exclude")
DEFAULT_SETTLE_S = 5.0
DEFAULT_ROOT_IDLE_S = 1.0
# claim.DEFAULT_MAX_SPANS, repeated: this module stays light (imported to build the CLI parser)
DEFAULT_MAX_CONVERSATION_SPANS = 500_000


class PipelineOptionError(ValueError):
    """A pipeline flag or environment variable has an invalid value."""


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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add(
        "--settle",
        type=float,
        metavar="SECONDS",
        help="a conversation is complete (and scored) when no span arrived for this long "
        f"(env {ENV_SETTLE}; default {DEFAULT_SETTLE_S:g})",
    )
    add(
        "--root-idle",
        type=float,
        metavar="SECONDS",
        help="sooner for a single-trace conversation whose root span ended: this quiet time "
        f"(env {ENV_ROOT_IDLE}; default {DEFAULT_ROOT_IDLE_S:g}; capped by --settle)",
    )
    add(
        "--conversation-key",
        action="append",
        metavar="ATTRIBUTE",
        help="attribute naming a conversation; repeat for several, first present wins "
        f"(env {ENV_CONVERSATION_KEYS}, comma-separated; default: gen_ai.conversation.id, "
        "session.id and other common keys)",
    )
    add(
        "--reference-key",
        metavar="ATTRIBUTE",
        help="attribute naming the expected reference "
        f"(env {ENV_REFERENCE_KEY}; default toolscore.reference.id)",
    )
    add(
        "--scoring-in-process",
        action="store_true",
        help="score in a thread of the server process instead of a child process (less "
        "memory, but scoring then competes with ingest for one CPU) "
        f"(env {ENV_SCORING_IN_PROCESS})",
    )
    add(
        "--scoring-processes",
        metavar="N|auto",
        help="child processes that score in parallel, each claiming its own conversations, "
        "or auto: 2 on PostgreSQL when the machine has 2 or more cores (one process's database "
        f"waits overlap the other's work), else 1 (env {ENV_SCORING_PROCESSES}; default auto)",
    )
    add_control_calls_arguments(parser, "serve")
    add(
        "--max-conversation-spans",
        metavar="N",
        help="a conversation with more spans is not scored (status error, with the reason) "
        "rather than loaded: memory grows with the spans of the biggest conversation "
        f"(env {ENV_MAX_CONVERSATION_SPANS}; default {DEFAULT_MAX_CONVERSATION_SPANS})",
    )
    add(
        "--no-scoring",
        action="store_true",
        help="only store telemetry; do not assemble or score conversations",
    )


def add_control_calls_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """``--control-calls`` and its deprecated alias ``--handoffs`` (serve, show, evaluate,
    rescore read them alike: docs/conventions.md, "Control calls")."""
    parser.add_argument(
        "--control-calls",
        action="append",
        metavar="POLICY",
        help="whether framework control calls (handoffs to other agents, smolagents' "
        "final_answer, Pydantic AI's final_result, CrewAI delegation) count as tool calls: "
        "exclude|include, then per kind include=KIND[,KIND] or exclude=KIND (kinds: handoff, "
        "smolagents.final_answer, pydantic_ai.final_result, crewai.delegation); repeatable "
        f"(env {ENV_CONTROL_CALLS}; default exclude"
        + ("" if command == "serve" else ", as serve")
        + ")",
    )
    parser.add_argument(
        "--handoffs",
        choices=HANDOFF_CHOICES,
        help=f"deprecated: --control-calls include=handoff|exclude=handoff (env {ENV_HANDOFFS})",
    )


def control_calls_from(
    args: argparse.Namespace, environ: Mapping[str, str], warn: Callable[[str], None]
) -> ControlCalls:
    """Flags beat environment variables beat the default (exclude); the deprecated
    ``--handoffs`` / TOOLSCORE_HANDOFFS, when given, then set the handoff kind (``warn`` says
    it is deprecated). Raises :class:`PipelineOptionError`."""
    flag = getattr(args, "control_calls", None)
    try:
        if flag:
            policy = ControlCalls.parse(flag, "--control-calls")
        else:
            policy = ControlCalls.parse([environ.get(ENV_CONTROL_CALLS, "")], ENV_CONTROL_CALLS)
    except ControlCallError as exc:
        raise PipelineOptionError(str(exc)) from None
    handoffs, source = getattr(args, "handoffs", None), "--handoffs"
    if not handoffs:
        handoffs, source = environ.get(ENV_HANDOFFS, "").strip().lower(), ENV_HANDOFFS
    if not handoffs:
        return policy
    if handoffs not in HANDOFF_CHOICES:
        raise PipelineOptionError(f"{source}: expected include or exclude, got {handoffs!r}")
    warn(
        f"{source} is deprecated: use --control-calls {handoffs}={HANDOFF} "
        f"(env {ENV_CONTROL_CALLS})"
    )
    return policy.with_kind(HANDOFF, handoffs == "include")


def _seconds(
    value: object, env: str, environ: Mapping[str, str], flag: str, default: float
) -> float:
    source, text = flag, value
    if value is None:
        source, text = env, environ.get(env, "").strip() or None
    if text is None:
        return default
    try:
        seconds = float(str(text))
    except ValueError:
        raise PipelineOptionError(f"{source}: {text!r} is not a number of seconds") from None
    if not seconds >= 0:
        raise PipelineOptionError(f"{source}: must be 0 or more seconds, got {text}")
    return seconds


def _max_spans(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    text, source = getattr(args, "max_conversation_spans", None), "--max-conversation-spans"
    if text is None:
        text, source = (
            environ.get(ENV_MAX_CONVERSATION_SPANS, "").strip(),
            ENV_MAX_CONVERSATION_SPANS,
        )
    if not text:
        return DEFAULT_MAX_CONVERSATION_SPANS
    try:
        spans = int(str(text).replace("_", ""))
    except ValueError:
        raise PipelineOptionError(f"{source}: {text!r} is not a number of spans") from None
    if spans < 1:
        raise PipelineOptionError(f"{source}: must be at least 1, got {spans}")
    return spans


def options_from(args: argparse.Namespace, environ: Mapping[str, str]) -> PipelineOptions:
    """Flags beat environment variables beat defaults."""
    keys: tuple[str, ...] | None = None
    if getattr(args, "conversation_key", None):
        keys = tuple(k.strip() for k in args.conversation_key if k.strip())
    elif environ.get(ENV_CONVERSATION_KEYS, "").strip():
        keys = tuple(k.strip() for k in environ[ENV_CONVERSATION_KEYS].split(",") if k.strip())
    reference = getattr(args, "reference_key", None) or environ.get(ENV_REFERENCE_KEY, "").strip()
    processes_text = getattr(args, "scoring_processes", None)
    processes_src = "--scoring-processes"
    if processes_text is None:
        processes_text = environ.get(ENV_SCORING_PROCESSES, "").strip() or "auto"
        processes_src = ENV_SCORING_PROCESSES
    processes: int | None = None
    if str(processes_text).strip().lower() != "auto":
        try:
            processes = int(processes_text)
        except ValueError:
            raise PipelineOptionError(
                f"{processes_src}: {processes_text!r} is neither a number nor auto"
            ) from None
        if processes < 1:
            raise PipelineOptionError(f"{processes_src}: must be at least 1, got {processes}")
    return PipelineOptions(
        max_conversation_spans=_max_spans(args, environ),
        control_calls=control_calls_from(args, environ, warn_stderr),
        scoring_processes=processes,
        enabled=not getattr(args, "no_scoring", False),
        settle_s=_seconds(
            getattr(args, "settle", None), ENV_SETTLE, environ, "--settle", DEFAULT_SETTLE_S
        ),
        root_idle_s=_seconds(
            getattr(args, "root_idle", None),
            ENV_ROOT_IDLE,
            environ,
            "--root-idle",
            DEFAULT_ROOT_IDLE_S,
        ),
        conversation_keys=keys or None,
        reference_key=reference or None,
        separate_process=not (
            getattr(args, "scoring_in_process", False)
            or environ.get(ENV_SCORING_IN_PROCESS, "").strip().lower() in ("1", "true", "yes")
        ),
    )


def warn_stderr(message: str) -> None:
    print(f"toolscore: warning: {message}", file=sys.stderr)


def processes_for(options: PipelineOptions, backend: str, cpu_count: int | None) -> int:
    """How many scoring processes to run: the configured number, or auto.

    Auto: on PostgreSQL a scoring process waits for the server for about a third of a round
    (reads, COPY, commits), so a second process on a machine with a second core keeps scoring
    busy; on SQLite, one file has one writer at a time and a second process only adds lock
    contention with ingest.
    """
    if options.scoring_processes is not None:
        return options.scoring_processes
    return 2 if backend == "postgresql" and (cpu_count or 1) >= 2 else 1
