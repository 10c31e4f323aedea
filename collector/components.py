"""What ``serve``'s parts plug into: components that run, extensions that add hooks and
components, the context they are built from, and the signal they share.

Rooms implement these (pipeline, export, upkeep); :mod:`toolscore.collector.app` composes them.
May import: the ingest room (hooks, metrics), storage's database handles, the settings.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from toolscore.collector.ingest.metrics import Metrics
from toolscore.collector.ingest.writer import IngestHook
from toolscore.collector.settings import Settings
from toolscore.storage.database import Engine

log = logging.getLogger("toolscore.serve")


class Component(Protocol):
    """A long-running part of the service (started after the database is ready)."""

    async def start(self) -> None: ...

    async def stop(self) -> None:
        """Finish or hand back in-progress work, then return."""
        ...


class Signal:
    """A "something happened" fan-out between extensions of one process.

    ``emit()`` may be called from any thread and calls every subscriber in the caller's thread,
    so subscribers must be thread-safe and quick (e.g. set a flag on their own event loop).
    """

    def __init__(self) -> None:
        self._subscribers: tuple[Callable[[], None], ...] = ()
        self._lock = threading.Lock()

    def subscribe(self, callback: Callable[[], None]) -> None:
        with self._lock:
            self._subscribers = (*self._subscribers, callback)

    def emit(self) -> None:
        for callback in self._subscribers:  # a tuple: subscribing meanwhile is safe
            try:
                callback()
            except Exception:  # one subscriber's bug must not break the emitter (the pipeline)
                log.exception("signal subscriber %r failed", callback)


@dataclass(frozen=True, slots=True)
class AppContext:
    settings: Settings
    engine: Engine
    metrics: Metrics
    scoring_config: Any | None  # scorer.ScoringConfig when --config was given, else None
    # Emitted after evaluation rows were committed by this process (the pipeline's rounds).
    evaluations_written: Signal = field(default_factory=Signal)
    # The server checkpoints SQLite's write-ahead log itself (collector.upkeep.checkpoints):
    # processes it starts open their engines with autocheckpoint off.
    server_checkpoints: bool = False


@dataclass(frozen=True, slots=True)
class Extension:
    hooks: Sequence[IngestHook] = ()
    components: Sequence[Component] = ()
    # span attributes the extension reads as ids (conversation keys): the decoder rejects spans
    # whose value the database could not hold as a key (NUL, too long), before the transaction
    key_attributes: Sequence[str] = ()
    # what the extension adds to the start-up line, by part (see :data:`SUMMARY_PARTS`)
    summary: Mapping[str, str] = field(default_factory=dict)


ExtensionFactory = Callable[[AppContext], Extension]
