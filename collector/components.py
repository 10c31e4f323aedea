"""What ``serve``'s parts plug into: components that run, extensions that add hooks and
components, the context they are built from, and the signal they share; :class:`Periodic`, the
one loop of the components that work every few seconds (checkpoints, retention, status, the
health watchdog, write-back).

Rooms implement these (pipeline, export, upkeep); :mod:`toolscore.collector.app` composes them.
May import: the ingest room (hooks, metrics), storage's database handles, the settings.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from toolscore.collector.ingest.metrics import Metrics
from toolscore.collector.ingest.writer import AckGate, IngestHook
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
    # held by the receiver after a request's items are committed, before it is acknowledged
    ack_gates: Sequence[AckGate] = ()


ExtensionFactory = Callable[[AppContext], Extension]


class Finished(Exception):
    """Raised by a :class:`Periodic` step: nothing more to do (the loop ends on its own)."""


class Periodic:
    """A step run every ``every_s`` seconds until :meth:`stop`, in a task named ``name``.

    The step is a coroutine (blocking work goes to a thread inside it); it returns how long to
    wait before the next step (None: ``every_s``) or raises :class:`Finished`. The first step
    runs after ``first_after_s``. A failed step is retried after ``every_s``, counted through
    ``on_failure`` and logged once per streak ("``what`` failed: ..."), with one line when a
    step works again. :meth:`wake` runs the next step at once. ``stop_grace_s``: how long
    :meth:`stop` waits for a step in progress (None: until it ends; 0: cancelled at once, for
    steps that may hang on a silent database)."""

    def __init__(
        self,
        name: str,
        step: Callable[[], Awaitable[float | None]],
        *,
        every_s: float,
        what: str,
        log: logging.Logger,
        first_after_s: float = 0.0,
        on_failure: Callable[[Exception], None] | None = None,
        stop_grace_s: float | None = None,
    ) -> None:
        self._name, self._step, self._every_s = name, step, every_s
        self._what, self._log = what, log
        self._first_after_s = first_after_s
        self._on_failure = on_failure
        self._stop_grace_s = stop_grace_s
        self._stopping = False
        self._failures = 0  # of the current streak
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def stopping(self) -> bool:
        return self._stopping

    @property
    def done(self) -> bool:
        """The loop has ended (stopped, or its step said :class:`Finished`)."""
        return self._task is not None and self._task.done()

    async def start(self) -> None:
        self._stopping = False
        self._wake = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.create_task(self._run(), name=self._name)

    def wake(self) -> None:
        """Run the next step now rather than at the end of the wait; from any thread. A wake
        during a step makes the next one follow it at once."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # the loop is closing
            loop.call_soon_threadsafe(self._wake.set)

    async def stop(self) -> bool:
        """End the loop; False when a step in progress had to be cancelled past its grace."""
        self._stopping = True
        self._wake.set()
        task = self._task
        if task is None:
            return True
        if self._stop_grace_s == 0:
            task.cancel()
        elif self._stop_grace_s is not None:
            done, _ = await asyncio.wait([task], timeout=self._stop_grace_s)
            if not done:
                task.cancel()
                await asyncio.wait([task])
                return False
        await asyncio.wait([task])  # a cancelled or ended task: no exception to re-raise
        return True

    async def _run(self) -> None:
        wait_s = self._first_after_s
        while not self._stopping:
            if wait_s > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), wait_s)
                if self._stopping:
                    return
                self._wake.clear()  # a wake during the step that follows counts for the next
            try:
                asked = await self._step()
            except Finished:
                return
            except Exception as exc:
                self._failed(exc)
                wait_s = self._every_s
                continue
            self._worked()
            wait_s = self._every_s if asked is None else asked

    def _failed(self, exc: Exception) -> None:
        if self._on_failure is not None:
            self._on_failure(exc)
        self._failures += 1
        if self._failures == 1:  # one line per streak, not one per try
            self._log.warning("%s failed: %s (retried every %g s)", self._what, exc, self._every_s)

    def _worked(self) -> None:
        if self._failures:
            self._log.info("%s works again after %d failures", self._what, self._failures)
        self._failures = 0
