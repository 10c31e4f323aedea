"""``toolscore evaluate TRACES... --refs FILE``: score conversations from OTLP files, no server.

Writes one JSON line per conversation (``toolscore score``'s row shape, keyed by conversation
id, with its ``status`` and ``expectation``) to stdout; ``--fail-under`` and ``--junit`` gate on
them as ``toolscore score`` does. Exit status: 0; 1 when a gate failed or a matched conversation
could not be scored; 2 on a usage or input error.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from toolscore.collector.configuration import add_options, resolve
from toolscore.collector.errors import UsageError
from toolscore.collector.pipeline.options import CONTROL_CALLS_OPTIONS, control_calls_from
from toolscore.collector.pipeline.options import OPTIONS as PIPELINE
from toolscore.collector.reconstruction.conversation_keys import (
    DEFAULT_CONVERSATION_KEYS,
    DEFAULT_REFERENCE_KEY,
)
from toolscore.collector.settings import CONFIG

# The scoring configuration (not checked for existence here: loading it names a missing file)
# and the pipeline options that decide what a conversation is, read as serve reads them.
OPTIONS = (
    CONFIG,
    *(o for o in PIPELINE if o.flag in ("--conversation-key", "--reference-key")),
)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "evaluate",
        help="score conversations from OTLP/JSON files (an OpenTelemetry Collector file "
        "exporter's output) against expectations, without a server",
    )
    parser.add_argument("traces", nargs="+", type=Path, metavar="TRACES", help="OTLP/JSON lines")
    parser.add_argument("--refs", required=True, type=Path, metavar="FILE", help="expectations")
    add_options(parser, OPTIONS)  # --config and, as for serve, --conversation-key, ...
    add_options(parser, CONTROL_CALLS_OPTIONS)
    for flag, text in (
        ("--fail-under", "exit status 1 when METRIC's mean is below VALUE (repeatable)"),
        ("--pass-threshold", "score at or above which METRIC passes (default 1.0)"),
    ):
        parser.add_argument(flag, action="append", default=[], metavar="METRIC=VALUE", help=text)
    parser.add_argument("--junit", metavar="PATH", help="write JUnit XML (a case per conversation)")
    parser.set_defaults(handler=_handle)


def _handle(args: argparse.Namespace) -> int:
    from toolscore.collector.expectations.files import RefsFileError, load_refs_file
    from toolscore.collector.offline.evaluate import EvaluateError, EvaluateOptions, evaluate, load
    from toolscore.collector.views.gate import gate_from_flags
    from toolscore.scorer import ConfigError, default_config, load_config

    given = resolve(OPTIONS, args, os.environ)
    try:
        config = load_config(given["config_path"]) if given["config_path"] else default_config()
        names = list(config.instances)
        gate = gate_from_flags(
            names, args.pass_threshold, args.fail_under, junit=args.junit is not None
        )
        expectations = load_refs_file(args.refs, metric_names=names)
        loaded = load(args.traces)
        control = control_calls_from(args, os.environ)
    except (ConfigError, EvaluateError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    except RefsFileError as exc:
        problems = "\n".join(f"  {p}" for p in exc.problems)
        raise UsageError(f"{args.refs} rejected:\n{problems}") from None
    options = EvaluateOptions(
        config,
        given["conversation_keys"] or DEFAULT_CONVERSATION_KEYS,
        given["reference_key"] or DEFAULT_REFERENCE_KEY,
        control,
    )
    print(
        f"toolscore evaluate: {len(loaded.spans)} spans, {len(loaded.logs)} log records"
        + (f" ({loaded.rejected} rejected)" if loaded.rejected else ""),
        file=sys.stderr,
    )
    return _write(evaluate(loaded, expectations, options), names, gate, args.junit)


def _write(found: list[Any], names: list[str], gate: Any, junit: str | None) -> int:
    from toolscore.collector.offline.evaluate import outcome_row
    from toolscore.collector.views.gate import conclude
    from toolscore.collector.views.safe_text import json_safe

    failed = False
    for outcome in found:
        row = outcome_row(outcome, names)
        failed = failed or outcome.status == "error"  # unmatched ones are only reported
        # ids and arguments come from spans: no character a terminal would act on goes out raw
        sys.stdout.write(json_safe(row, separators=(",", ":")) + "\n")
        gate.add(row)
    sys.stdout.flush()
    statuses = {o.status for o in found}
    print(
        f"toolscore evaluate: {len(found)} conversations ({', '.join(sorted(statuses))})",
        file=sys.stderr,
    )
    conclude(gate, junit, "toolscore evaluate", sys.stderr)
    return 1 if failed or gate.failed() else 0
