"""``toolscore rescore [--expectation ID] [--since DATE] [--config FILE] [--resume RUN]``.

Re-scores stored conversations with the current expectations and scoring configuration (after
either changed), through the pipeline's own ``compute`` / ``write`` so a re-score equals what
``serve`` would record. Each changed conversation gets a new revision whose evaluation rows
record the expectation version and metric configuration that produced them.

Unchanged results write nothing: when the expectation version, every metric's configuration and
every result (score, error, details, call counts) equal the current revision's, the conversation
is recorded as ``unchanged`` in the run and keeps its revision (so re-running a rescore is
idempotent and does not re-export the same scores). ``--force`` writes a revision anyway.

Each chunk of conversations is written in one transaction together with the run's progress
rows, so Ctrl-C loses at most the chunk in flight; ``--resume RUN`` continues a run, skipping
what it already did.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import sys
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

from toolscore.collector.commands.common import add_db_argument, resolve_db_url
from toolscore.collector.commands.report import parse_date

CHUNK = 25
_COMPARED = (
    "metric_type",
    "metric_config",
    "score",
    "error",
    "details",
    "predicted_count",
    "expected_count",
)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "rescore",
        help="re-score stored conversations (after an expectation or the scoring config changed)",
    )
    add_db_argument(parser)
    parser.add_argument("--expectation", metavar="ID", help="only conversations of expectation ID")
    parser.add_argument(
        "--since", type=parse_date, metavar="DATE", help="only conversations active since DATE"
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="scoring configuration file (env TOOLSCORE_CONFIG; default: the metric instances "
        "the server recorded in the database, else the Ragas defaults)",
    )
    parser.add_argument("--resume", metavar="RUN", help="continue an interrupted run")
    parser.add_argument(
        "--force", action="store_true", help="write a new revision even when nothing changed"
    )
    parser.set_defaults(handler=run)


@dataclass(frozen=True, slots=True)
class RescoreSummary:
    run_id: str
    total: int  # conversations the run covers
    skipped: int  # already done by this run before (resume)
    counts: Mapping[str, int]  # outcome -> conversations handled now


def config_hash(config: Any) -> str:
    """A stable hash of the scoring configuration (instance names, types and options)."""
    described = [[name, inst.type, inst.options_dict()] for name, inst in config.instances.items()]
    blob = json.dumps(described, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def _normal(value: Any) -> Any:
    """JSON round trip: what the database gives back for what the scorer produced."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def unchanged(computed: Any, current: Sequence[Mapping[str, Any]]) -> bool:
    """True when ``computed`` would record exactly the current revision's results."""
    if not current:
        return not computed.evaluations and computed.expectation_id is None
    if any(
        (r["expectation_id"], r["expectation_version"])
        != (computed.expectation_id, computed.expectation_version)
        for r in current
    ):
        return False
    new = {e["metric"]: _normal({k: e.get(k) for k in _COMPARED}) for e in computed.evaluations}
    old = {r["metric"]: _normal({k: r[k] for k in _COMPARED}) for r in current}
    return new == old


def _current_rows(conn: Any, ids: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    from sqlalchemy import select

    from toolscore.storage.pipeline import evaluations as e

    rows: dict[str, list[dict[str, Any]]] = {i: [] for i in ids}
    query = select(e).where(e.c.conversation_id.in_(list(ids)), e.c.is_current.is_(True))
    for r in conn.execute(query).mappings():
        rows[r["conversation_id"]].append(dict(r))
    return rows


def rescore(
    engine: Any,
    config: Any,
    run: Any,
    *,
    force: bool = False,
    now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    progress: Callable[[int, int], None] | None = None,
) -> RescoreSummary:
    """Re-score what ``run`` covers and has not done yet; returns what happened."""
    from toolscore.collector.pipeline.score import compute, write
    from toolscore.storage import rescore as runs

    with engine.connect() as conn:
        every = runs.candidates(conn, run)
        done = runs.done_ids(conn, run.id)
    todo = [c for c in every if c not in done]
    counts: dict[str, int] = {}
    handled = 0
    if progress:
        progress(0, len(todo))
    for start in range(0, len(todo), CHUNK):
        chunk = todo[start : start + CHUNK]
        with engine.connect() as read:
            computed = compute(read, chunk, config)
            current = _current_rows(read, chunk)
            read.rollback()
        by_id = {c.conversation_id: c for c in computed}
        changed = [c for c in computed if force or not unchanged(c, current[c.conversation_id])]
        at = now()
        with engine.begin() as conn:
            outcomes = {o.conversation_id: o for o in write(conn, changed, now=at)}
            items: list[tuple[str, str, int | None]] = []
            for cid in chunk:
                if cid not in by_id:
                    items.append((cid, runs.OUTCOME_MISSING, None))
                elif cid in outcomes:
                    items.append((cid, runs.OUTCOME_RESCORED, outcomes[cid].revision))
                else:
                    items.append((cid, runs.OUTCOME_UNCHANGED, None))
            runs.record_items(conn, run.id, items, at)
        for _cid, outcome, _rev in items:
            counts[outcome] = counts.get(outcome, 0) + 1
        handled += len(chunk)
        if progress:
            progress(handled, len(todo))
    with engine.begin() as conn:
        runs.finish_run(conn, run.id, now())
    return RescoreSummary(run.id, len(every), len(done), counts)


class ProgressBar:
    """``[#####.....] 12/40`` redrawn in place on a terminal; silent when not a TTY."""

    def __init__(self, stream: IO[str], width: int = 30) -> None:
        self._stream = stream
        self._width = width
        self._on = stream.isatty()

    def __call__(self, done: int, total: int) -> None:
        if not self._on:
            return
        filled = self._width * done // total if total else self._width
        bar = "#" * filled + "." * (self._width - filled)
        self._stream.write(f"\rrescoring [{bar}] {done}/{total} conversations")
        if done >= total:
            self._stream.write("\n")
        self._stream.flush()


def resolve_config(
    flag: str | None, environ: Mapping[str, str], recorded: Callable[[], Mapping[str, Any]]
) -> tuple[Any, str]:
    """The scoring configuration and where it came from: ``--config``, then
    ``TOOLSCORE_CONFIG``, then the instances the server recorded, then the Ragas defaults."""
    from toolscore.scorer import default_config, load_config, parse_config

    if flag:
        return load_config(flag), f"--config {flag}"
    if environ.get("TOOLSCORE_CONFIG"):
        path = environ["TOOLSCORE_CONFIG"]
        return load_config(path), f"TOOLSCORE_CONFIG={path}"
    instances = recorded()
    if instances:
        config = parse_config({"metrics": dict(instances)})
        return config, f"the metric instances the server recorded ({', '.join(instances)})"
    return default_config(), "the Ragas defaults (no configuration given or recorded)"


def run(args: argparse.Namespace) -> int:
    from toolscore.storage import rescore as runs
    from toolscore.storage.engine import DatabaseUrlError, create_engine, redact

    url = resolve_db_url(args, os.environ)
    try:
        engine = create_engine(url)
    except DatabaseUrlError as exc:
        print(f"toolscore rescore: {exc}", file=sys.stderr)
        return 2

    def recorded() -> Mapping[str, Any]:
        with engine.connect() as conn:
            return runs.recorded_metric_configs(conn)

    try:
        config, source = resolve_config(args.config, os.environ, recorded)
    except Exception as exc:
        engine.dispose()
        print(f"toolscore rescore: scoring configuration: {exc}", file=sys.stderr)
        return 2
    print(f"scoring with {source}", file=sys.stderr)
    digest = config_hash(config)
    try:
        with engine.begin() as conn:
            if args.resume:
                the_run = runs.get_run(conn, args.resume)
                if the_run is None:
                    print(f"toolscore rescore: no run {args.resume!r}", file=sys.stderr)
                    return 2
                if the_run.config_hash != digest:
                    print(
                        f"toolscore rescore: run {the_run.id} used another scoring "
                        "configuration; pass the same --config, or start a new run",
                        file=sys.stderr,
                    )
                    return 2
            else:
                since = dt.datetime.combine(args.since, dt.time(), dt.UTC) if args.since else None
                the_run = runs.Run(
                    id=f"r-{dt.datetime.now(dt.UTC):%Y%m%d%H%M%S}-{uuid.uuid4().hex[:6]}",
                    started_at=dt.datetime.now(dt.UTC),
                    finished_at=None,
                    expectation_id=args.expectation,
                    since=since,
                    config_hash=digest,
                )
                runs.create_run(conn, the_run)
        print(f"rescore run {the_run.id}", file=sys.stderr)
        try:
            summary = rescore(
                engine, config, the_run, force=args.force, progress=ProgressBar(sys.stderr)
            )
        except KeyboardInterrupt:
            print(
                f"\ninterrupted; resume with: toolscore rescore --resume {the_run.id}",
                file=sys.stderr,
            )
            return 130
    except Exception as exc:
        print(f"toolscore rescore: {redact(url)}: {exc}", file=sys.stderr)
        return 1
    finally:
        engine.dispose()
    parts = [f"{n} {k}" for k, n in sorted(summary.counts.items())] or ["nothing to do"]
    skipped = f" ({summary.skipped} already done earlier in this run)" if summary.skipped else ""
    print(f"run {summary.run_id}: {summary.total} conversations: {', '.join(parts)}{skipped}")
    return 0
