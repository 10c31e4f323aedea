"""Re-scoring stored conversations (``toolscore rescore``'s use case).

Re-scores through the pipeline's own ``compute`` / ``write`` so a re-score equals what ``serve``
would record. Unchanged results write nothing: when the expectation version, every metric's
configuration and every result (score, error, details, call counts) equal the current
revision's, the conversation is recorded as ``unchanged`` in the run and keeps its revision (so
re-running is idempotent and does not re-export the same scores); ``force`` writes anyway. Each
chunk of conversations is written in one transaction together with the run's progress rows, so
an interruption loses at most the chunk in flight and a resumed run skips what was done.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

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


def resolve_config(
    path: str | None, given_as: str, recorded: Callable[[], Mapping[str, Any]]
) -> tuple[Any, str]:
    """The scoring configuration and where it came from: the file ``path`` (from ``--config``
    or ``TOOLSCORE_CONFIG``, which ``given_as`` names), else the instances the server
    recorded, else the Ragas defaults."""
    from toolscore.scorer import default_config, load_config, parse_config

    if path:
        where = f"--config {path}" if given_as.startswith("--") else f"{given_as}={path}"
        return load_config(path), where
    instances = recorded()
    if instances:
        config = parse_config({"metrics": dict(instances)})
        return config, f"the metric instances the server recorded ({', '.join(instances)})"
    return default_config(), "the Ragas defaults (no configuration given or recorded)"


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
    new = {e.metric: _normal({k: getattr(e, k) for k in _COMPARED}) for e in computed.evaluations}
    old = {r["metric"]: _normal({k: r[k] for k in _COMPARED}) for r in current}
    return new == old


def rescore(
    engine: Any,
    config: Any,
    run: Any,
    *,
    force: bool = False,
    now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    progress: Callable[[int, int], None] | None = None,
    control_calls: Any = None,
) -> RescoreSummary:
    """Re-score what ``run`` covers and has not done yet; returns what happened.
    ``control_calls`` (a ``ControlCalls``; None: the default) as ``serve --control-calls``."""
    from toolscore.collector.pipeline.score import compute, write
    from toolscore.storage.history import rescore_runs as runs

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
            computed = (
                compute(read, chunk, config)
                if control_calls is None
                else compute(read, chunk, config, control_calls=control_calls)
            )
            current = runs.current_evaluations(read, chunk)
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


class RunError(ValueError):
    """``--resume`` names no run, or a run made with another scoring configuration."""


def start_run(
    conn: Any,
    config: Any,
    *,
    resume: str | None,
    expectation_id: str | None,
    since: dt.date | None,
) -> Any:
    """The run to do: ``resume``'s (same configuration only), else a new one recorded now."""
    import uuid

    from toolscore.storage.history import rescore_runs as runs

    digest = config_hash(config)
    if resume:
        the_run = runs.get_run(conn, resume)
        if the_run is None:
            raise RunError(f"no run {resume!r}")
        if the_run.config_hash != digest:
            raise RunError(
                f"run {the_run.id} used another scoring configuration; pass the same --config, "
                "or start a new run"
            )
        return the_run
    now = dt.datetime.now(dt.UTC)
    the_run = runs.Run(
        id=f"r-{now:%Y%m%d%H%M%S}-{uuid.uuid4().hex[:6]}",
        started_at=now,
        finished_at=None,
        expectation_id=expectation_id,
        since=dt.datetime.combine(since, dt.time(), dt.UTC) if since else None,
        config_hash=digest,
    )
    runs.create_run(conn, the_run)
    return the_run


def rescore_one(engine: Any, conversation_id: str, config: Any | None) -> str:
    """Score one conversation again now, as ``serve`` would (the web UI's re-score button): a
    new revision when anything changed. Returns what happened, in words."""
    from toolscore.collector.pipeline.score import compute, write
    from toolscore.scorer import default_config
    from toolscore.storage.history import rescore_runs as runs

    scoring = config if config is not None else default_config()
    with engine.connect() as read:
        computed = compute(read, [conversation_id], scoring)
        current = runs.current_evaluations(read, [conversation_id])
        read.rollback()
    if not computed:
        return "no such conversation"
    if unchanged(computed[0], current.get(conversation_id, [])):
        return "re-scored: nothing changed (same expectation version, configuration and scores)"
    with engine.begin() as conn:
        outcomes = write(conn, computed, now=dt.datetime.now(dt.UTC))
    if not outcomes:
        return "re-scored, but nothing was written"
    return f"re-scored: revision {outcomes[0].revision} written"
