"""``serve`` flags of the scoring pipeline (light: imported when the CLI parser is built)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass

from toolscore.collector.configuration import (
    Option,
    add_options,
    choice,
    positive_int,
    resolve,
    seconds,
)

ENV_HANDOFFS = "TOOLSCORE_HANDOFFS"
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
    include_handoffs: bool = True  # transfer_to_* calls (handoffs to other agents) count
    # More spans: the conversation is not loaded (status error, with the reason).
    max_conversation_spans: int = DEFAULT_MAX_CONVERSATION_SPANS


def _processes(text: str) -> int | None:
    if text.strip().lower() == "auto":
        return None
    try:
        return positive_int(text)
    except ValueError:
        raise ValueError("expected a whole number greater than 0 or auto") from None


HANDOFFS = Option(
    "--handoffs",
    "include_handoffs",
    "whether handoffs to other agents (OpenAI Agents transfer_to_* calls) count as tool calls",
    parse=lambda text: choice(*HANDOFF_CHOICES)(text) == "include",
    default=True,
    metavar="include|exclude",
    shown_default="include",
)
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
        "auto: 2 on PostgreSQL when the machine has 2 or more cores (one process's database "
        "waits overlap the other's work), else 1",
        parse=_processes,
        metavar="N|auto",
        shown_default="auto",
    ),
    HANDOFFS,
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


def options_from(args: argparse.Namespace | None, environ: Mapping[str, str]) -> PipelineOptions:
    """Flags beat environment variables beat defaults; raises ConfigError."""
    values = resolve(OPTIONS, args, environ)
    keys = tuple(key for key in values["conversation_keys"] or () if key)
    values.update(conversation_keys=keys or None, reference_key=values["reference_key"] or None)
    return PipelineOptions(**values)


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
