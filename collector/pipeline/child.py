"""Rounds in a child process (:class:`ScoringProcess`): it has its own database connection, so
scoring does not compete with ingest for the server's GIL.

The pool's initializer (:func:`_child_init`) builds the child's :class:`RoundRunner`;
:func:`_child_round` and :func:`_child_big` are what the server submits to the pool.
"""

from __future__ import annotations

import gc
import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from toolscore.collector.pipeline.claim import Claimed, SizeLimits, Timing
from toolscore.collector.pipeline.rounds import DEFAULT_LIMITS, RoundResult, RoundRunner
from toolscore.collector.reconstruction.control_calls import DEFAULT as DEFAULT_CONTROL
from toolscore.collector.reconstruction.control_calls import ControlCalls


@dataclass(frozen=True, slots=True)
class ScoringProcess:
    """Run rounds in a child process: it connects to ``db_url`` and loads its scoring config
    from ``config_path`` (``None``: the default config), as the server did."""

    db_url: str
    config_path: Path | None = None
    control_calls: ControlCalls = DEFAULT_CONTROL
    log_level: str = "INFO"  # the child logs like the server (a spawned process starts bare)
    log_format: str = "text"
    autocheckpoint: bool = True  # False: the server checkpoints SQLite's log (checkpoints.py)


_child_runner: RoundRunner | None = None


def _child_init(
    spec: ScoringProcess,
    timing: Timing,
    batch_size: int,
    worker_id: str,
    server_pid: int,
    limits: SizeLimits = DEFAULT_LIMITS,
) -> None:
    global _child_runner
    # Ctrl-C / SIGTERM reach the whole process group: the server decides when scoring stops
    # (it finishes the round in progress, then shuts the pool down), not the signal.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # A server killed with SIGKILL cannot shut the pool down: exit when orphaned.
    threading.Thread(target=_exit_when_orphaned, args=(server_pid,), daemon=True).start()
    from toolscore.collector.logformat import configure as configure_logging
    from toolscore.scorer import default_config, load_config
    from toolscore.storage.database import open_database

    configure_logging(spec.log_level, spec.log_format)
    config = load_config(spec.config_path) if spec.config_path else default_config()
    _tune_gc()
    _child_runner = RoundRunner(
        open_database(spec.db_url, autocheckpoint=spec.autocheckpoint, temp_in_memory=True),
        config,
        timing=timing,
        batch_size=batch_size,
        worker_id=worker_id,
        control_calls=spec.control_calls,
        limits=limits,
    )


def _tune_gc() -> None:
    """A round allocates many short-lived objects (decoded spans, messages, rows) while keeping
    few: with the default thresholds the collector runs every 700 allocations and its full passes
    walk every live object. Freezing what start-up created and collecting young objects less
    often cuts about a tenth of the scoring CPU; memory stays bounded by the round's size."""
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)


def _exit_when_orphaned(server_pid: int, interval_s: float = 1.0) -> None:
    while os.getppid() == server_pid:
        time.sleep(interval_s)
    os._exit(0)  # mid-round work is lost safely: its claims expire, nothing half-written commits


def _child_round() -> RoundResult:
    assert _child_runner is not None, "scoring process not initialised"
    return _child_runner.run_once()


def _child_big(claimed: Claimed) -> RoundResult:
    assert _child_runner is not None, "scoring process not initialised"
    return _child_runner.score_big(claimed)
