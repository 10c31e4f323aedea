"""``toolscore score [FILE|-] [--config FILE]``: score Ragas samples offline.

Reads JSON Lines of Ragas ``MultiTurnSample`` (or Ragas's exported dataset as one JSON array or a
``{"samples": [...]}`` document) and writes one JSON object per sample, in order, to stdout:
``{"id": ..., "<instance>": <float|null>, ..., "details": {...}}`` plus ``"errors"`` when a metric
could not score, or ``"error"`` (naming the input line) when the line itself is unusable. Blank
lines are skipped. Exit status: 0 all scored, 1 if any line failed, 2 on a usage error.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    import argparse
    from typing import IO, Any

    from toolscore.collector.offline.job import Job
    from toolscore.collector.offline.progress import Progress

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


def quick_args(argv: list[str]) -> argparse.Namespace | None:
    """``score``'s arguments in their plain forms, parsed without building the argparse parser.

    argparse and what it loads (gettext, locale, shutil) cost ~4 ms of start-up, a tenth of
    it. Anything else (help, ``--opt=value``, abbreviations, values starting with ``-``,
    mistakes) answers ``None``, and the caller hands the whole command line to argparse.
    """
    from types import SimpleNamespace

    file, config, no_details, jobs = None, None, False, _DEFAULT_JOBS
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--no-details":
            no_details = True
        elif arg in ("--config", "--jobs"):
            if i + 1 == len(argv) or argv[i + 1].startswith("-"):
                return None
            i += 1
            if arg == "--config":
                config = argv[i]
            elif argv[i].isascii() and argv[i].isdigit():
                jobs = int(argv[i])
            else:
                return None
        elif (arg == "-" or not arg.startswith("-")) and file is None:
            file = arg
        else:
            return None
        i += 1
    namespace = SimpleNamespace(
        command="score",
        file="-" if file is None else file,
        config=config,
        no_details=no_details,
        jobs=jobs,
        fail_under=[],
        pass_threshold=[],
        junit=None,
        handler=_handle,
        closed_stdout_status=1,
    )
    return namespace  # type: ignore[return-value]  # the attributes argparse would set


def _handle(args: argparse.Namespace) -> int:
    from toolscore.collector.errors import UsageError

    config = None  # the default configuration is only built if a sample needs the general path
    if args.config is not None:
        from toolscore.scorer import ConfigError, load_config

        try:
            config = load_config(args.config)
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
    from toolscore.collector.offline.engine import run
    from toolscore.collector.offline.job import Job
    from toolscore.collector.offline.progress import Progress

    total = _size(source)
    jobs = args.jobs if args.jobs > 0 else _cores()
    progress = Progress(sys.stderr, total) if sys.stderr.isatty() else None
    job = Job(config, not args.no_details)
    try:
        if gate is not None:
            return _gated_run(job, source, progress, gate, getattr(args, "junit", None))
        return run(job, source, sys.stdout.buffer, progress=progress, jobs=jobs)
    finally:
        if progress is not None:
            progress.close()
        if source is not sys.stdin.buffer:
            source.close()


def _gate(args: argparse.Namespace, config: Any) -> Any:
    """The CI gate the flags ask for (``None`` without ``--fail-under`` / ``--junit``)."""
    fail_under = getattr(args, "fail_under", None) or []
    junit = getattr(args, "junit", None)
    if not fail_under and junit is None:
        return None
    from toolscore.collector.views.gate import gate_from_flags
    from toolscore.scorer import default_config

    names = list((config or default_config()).instances)
    pass_threshold = getattr(args, "pass_threshold", None) or []
    return gate_from_flags(names, pass_threshold, fail_under, junit=junit is not None)


def _gated_run(
    job: Job, source: IO[bytes], progress: Progress | None, gate: Any, junit: str | None
) -> int:
    """Score in this process, feeding every output row to ``gate``; then report on it."""
    from toolscore.collector.offline.engine import run
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
