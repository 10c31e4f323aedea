"""``toolscore score [FILE|-] [--config FILE]``: score Ragas samples offline.

Reads JSON Lines of Ragas ``MultiTurnSample`` (or Ragas's exported dataset as one JSON array or a
``{"samples": [...]}`` document) and writes one JSON object per sample, in order, to stdout:
``{"id": ..., "<instance>": <float|null>, ..., "details": {...}}`` plus ``"errors"`` when a metric
could not score, or ``"error"`` (naming the input line) when the line itself is unusable. Blank
lines are skipped. Exit status: 0 all scored, 1 if any line failed, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import IO, Any

from toolscore.collector.errors import UsageError
from toolscore.collector.offline.engine import run
from toolscore.collector.offline.job import Job
from toolscore.collector.offline.progress import Progress
from toolscore.scorer import ConfigError, ScoringConfig, default_config, load_config

#: One process per core (up to 4) for regular files of 2 MiB or more.
_DEFAULT_JOBS = 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "score",
        help="score Ragas MultiTurnSample JSON Lines (ToolCallAccuracy, ToolCallF1, ...)",
        description=(
            "Score JSON Lines of Ragas MultiTurnSamples; writes one JSON line per sample to "
            "stdout. Exit status 1 if any line failed, 2 on usage errors."
        ),
    )
    parser.add_argument(
        "file",
        nargs="?",
        default="-",
        metavar="FILE|-",
        help="JSON Lines (or a Ragas dataset JSON document); '-' or nothing reads stdin",
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        default=None,
        help="metric instances (YAML or JSON); default: tool_call_accuracy and tool_call_f1",
    )
    parser.add_argument(
        "--no-details", action="store_true", help="omit the explanations (smaller, faster output)"
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=_DEFAULT_JOBS,
        metavar="N",
        help=(
            "processes scoring a regular file (default 0: one per core, up to 4; 1: this one "
            "only); each gets at least 1 MiB"
        ),
    )
    parser.add_argument(
        "--fail-under",
        action="append",
        default=[],
        metavar="METRIC=VALUE",
        help="exit status 1 when METRIC's mean over the scored samples is below VALUE; a "
        "summary per metric goes to stderr (repeatable; scores in one process)",
    )
    parser.add_argument(
        "--pass-threshold",
        action="append",
        default=[],
        metavar="METRIC=VALUE",
        help="score at or above which a sample passes METRIC (pass rate, JUnit; default 1.0)",
    )
    parser.add_argument(
        "--junit",
        metavar="PATH",
        help="write JUnit XML: a test case per sample and metric, failing below its threshold",
    )
    # a cut output is lost scores, not a reader that has all it wanted (cli.run)
    parser.set_defaults(handler=_handle, closed_stdout_status=1)


def _handle(args: argparse.Namespace) -> int:
    try:
        config = default_config() if args.config is None else load_config(args.config)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    try:
        source: IO[bytes] = sys.stdin.buffer if args.file == "-" else open(args.file, "rb")  # noqa: SIM115
    except OSError as exc:
        raise UsageError(f"cannot read {args.file}: {exc.strerror or exc}") from None
    try:
        gate = _gate(args, config)
    except ValueError as exc:
        source.close()
        raise UsageError(str(exc)) from None
    total = _size(source)
    jobs = args.jobs if args.jobs > 0 else _cores()
    progress = Progress(sys.stderr, total) if sys.stderr.isatty() else None
    job = Job(config, not args.no_details)
    try:
        if gate is not None:
            return _gated_run(job, source, progress, gate, args.junit)
        return run(job, source, sys.stdout.buffer, progress=progress, jobs=jobs)
    finally:
        if progress is not None:
            progress.close()
        if source is not sys.stdin.buffer:
            source.close()


def _gate(args: argparse.Namespace, config: ScoringConfig) -> Any:
    """The CI gate the flags ask for (``None`` without ``--fail-under`` / ``--junit``)."""
    if not args.fail_under and args.junit is None:
        return None
    from toolscore.collector.views.gate import gate_from_flags

    names = list(config.instances)
    junit = args.junit is not None
    return gate_from_flags(names, args.pass_threshold, args.fail_under, junit=junit)


def _gated_run(
    job: Job, source: IO[bytes], progress: Progress | None, gate: Any, junit: str | None
) -> int:
    """Score in this process, feeding every output row to ``gate``; then report on it."""
    from toolscore.collector.views.gate import GatedOutput, conclude

    out = GatedOutput(sys.stdout.buffer, gate)
    status = run(job, source, out, progress=progress, jobs=1)  # type: ignore[arg-type]
    conclude(gate, junit, "toolscore score", sys.stderr)
    return 1 if status or gate.failed() else 0


def _cores() -> int:
    """``--jobs 0``: one process per core this process may run on, up to 4. Not fewer when
    other programs keep the cores busy: a second process costs little then, and sampling the
    load at start chose one process too often where a second would have paid."""
    from toolscore.collector.pipeline.options import available_cores

    return min(4, available_cores())


def _size(source: IO[bytes]) -> int | None:
    try:
        return os.fstat(source.fileno()).st_size or None
    except (OSError, ValueError):
        return None
