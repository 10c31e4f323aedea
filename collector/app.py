"""Composition root of ``toolscore serve``: database, ingest writer, extensions, receivers.

Start order: migrate (unless disabled) -> engine (with the database deadlines) -> extensions
(their ingest hooks and components) -> ingest writer -> components -> receivers -> health
watchdog. Stop order (SIGINT/SIGTERM): watchdog -> receivers stop accepting and finish in-flight
requests -> the writer commits what is queued -> components stop in reverse order -> engine
disposed.

The stop is bounded whatever the database does: requests still waiting for a commit shortly
before ``--shutdown-grace`` ends are answered UNAVAILABLE (retryable), the writer and the
components then get ``shutdown.STOP_EXTRA_S`` more, and whatever is still stuck in a database
call is abandoned (``App.abandoned``; ``serve`` then exits without joining its threads).

Extensions plug in without touching this module's internals: an :data:`ExtensionFactory` gets the
:class:`AppContext` (settings, engine, metrics, scoring config) and returns an :class:`Extension`
with ingest hooks (run inside each ingest transaction) and async components (e.g. a worker).
Extensions talk to each other only through the context's :class:`Signal` s (the pipeline emits
``evaluations_written``; the write-back subscribes to it), so neither imports the other.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import logging
import signal
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any

from toolscore.collector.components import (
    AppContext,
    Component,
    Extension,
    ExtensionFactory,
)
from toolscore.collector.errors import Failure, UsageError
from toolscore.collector.ingest.guard import GuardedWriter
from toolscore.collector.ingest.metrics import Metrics
from toolscore.collector.ingest.writer import IngestConfig
from toolscore.collector.otlp.decode import DecodeLimits
from toolscore.collector.otlp.sanitize import DEFAULT_KEY_ATTRIBUTES
from toolscore.collector.receiver.core import OtlpCore
from toolscore.collector.receiver.listeners import (
    grpc_receiver,
    http_receiver,
    start_grpc,
    start_http,
)
from toolscore.collector.settings import CONFIG, Settings
from toolscore.collector.upkeep.checkpoints import CheckpointMetrics, WalCheckpointer
from toolscore.collector.upkeep.shutdown import (
    HARD_EXIT_EXTRA_S,
    STOP_EXTRA_S,
    ExitDeadline,
    exit_now,
)
from toolscore.collector.upkeep.watchdog import Watchdog
from toolscore.storage.database import Engine
from toolscore.storage.plumbing.engine import Deadlines

log = logging.getLogger("toolscore.serve")


# Parts of the start-up line extensions fill in, in the order shown, with what is said when no
# extension does. The retention extension reports "retention".
SUMMARY_PARTS: Mapping[str, str] = {
    "scoring": "scoring off",
    "retention": "spans kept forever",
    "write-back": "write-back off",
    "ui": "web UI off",
}


def _key_attributes(extensions: Sequence[Extension]) -> tuple[str, ...]:
    """The built-in id attributes and those the extensions read (custom conversation keys)."""
    keys = dict.fromkeys(DEFAULT_KEY_ATTRIBUTES)
    for extension in extensions:
        keys.update(dict.fromkeys(extension.key_attributes))
    return tuple(keys)


class StartupError(Failure, RuntimeError):
    """The service cannot start (database unreachable, port in use, bad config file...)."""


class ConfigFileError(StartupError, UsageError):
    """The scoring configuration file is invalid: a usage error (exit status 2)."""


class App:
    def __init__(self, settings: Settings, extensions: Sequence[ExtensionFactory] = ()) -> None:
        self.settings = settings
        self.metrics = Metrics()
        self._extension_factories = tuple(extensions)
        self._engine: Engine | None = None
        self._writer: GuardedWriter | None = None
        self._watchdog: Watchdog | None = None
        self._components: list[Component] = []
        self.abandoned: list[str] = []  # what was still stuck when stop() gave up on it
        self._grpc: Any = None
        self._http: Any = None
        self.grpc_port: int | None = None
        self.http_port: int | None = None
        self._summary: dict[str, str] = {}

    @property
    def engine(self) -> Engine:
        assert self._engine is not None, "App.start() first"
        return self._engine

    async def start(self) -> None:
        from toolscore.storage.database import open_database
        from toolscore.storage.migrate import upgrade
        from toolscore.storage.plumbing.engine import redact, url_with_deadlines

        s = self.settings
        scoring_config = _load_scoring_config(s)
        if s.upgrade:
            try:
                await asyncio.to_thread(upgrade, s.db_url)
            except Exception as exc:
                raise StartupError(f"cannot migrate database {redact(s.db_url)}: {exc}") from exc
        deadlines = _deadlines(s)
        self._engine = open_database(
            s.db_url,
            deadlines=deadlines,
            on_abandon=self.metrics.db_calls_abandoned.inc,
            autocheckpoint=False,  # WalCheckpointer below, off the commit path
            temp_in_memory=True,  # no temporary file per ingest transaction
        )
        # extensions that connect on their own (scoring processes) get the same deadlines
        ext_settings = dataclasses.replace(s, db_url=url_with_deadlines(s.db_url, deadlines))
        ctx = AppContext(
            ext_settings, self._engine, self.metrics, scoring_config, server_checkpoints=True
        )
        extensions = [factory(ctx) for factory in self._extension_factories]
        self._summary = {k: v for ext in extensions for k, v in ext.summary.items()}
        hooks = [h for ext in extensions for h in ext.hooks]
        self._writer = GuardedWriter(
            self._engine,
            IngestConfig(s.max_queued_spans, s.max_batch_spans, s.retry_after_s),
            hooks=hooks,
            metrics=self.metrics,
        )
        await self._writer.start()
        checkpoints = WalCheckpointer(self._engine, CheckpointMetrics(self.metrics.registry))
        await checkpoints.start()
        self._components.append(checkpoints)  # stopped last: after every writer
        for component in (c for ext in extensions for c in ext.components):
            await component.start()
            self._components.append(component)

        core = OtlpCore(
            self._writer,
            DecodeLimits(
                s.max_attribute_bytes,
                key_attributes=_key_attributes(extensions),
            ),
            self.metrics,
            s.auth_token,
            max_concurrent_requests=s.max_concurrent_requests,
            retry_after_s=s.retry_after_s,
            ack_gates=[g for ext in extensions for g in ext.ack_gates],
        )
        try:
            await self._listen(core)
        except OSError as exc:
            await self.stop()
            raise StartupError(f"cannot listen: {exc}") from exc
        self._watchdog = self._make_watchdog()
        await self._watchdog.start()
        text, fields = self.describe()
        log.info("%s", text, extra=fields)

    async def _listen(self, core: OtlpCore) -> None:
        s = self.settings
        if s.grpc is not None:
            self._grpc = grpc_receiver(core, self.metrics, s, s.grpc)
            self.grpc_port = await start_grpc(self._grpc, s.grpc)
        if s.http is not None:
            self._http = http_receiver(core, self.metrics, s, s.http, self._unhealthy)
            self.http_port = await start_http(self._http, s.http)

    def _make_watchdog(self) -> Watchdog:
        from toolscore.storage.plumbing.health import ping

        engine, writer = self.engine, self._writer
        assert writer is not None
        return Watchdog(
            lambda: ping(engine),
            writer,
            self.metrics,
            self.settings.health_stuck_after_s,
            on_change=self._health_changed,
        )

    async def _unhealthy(self) -> str | None:
        if self._watchdog is None:
            return "not started"
        return await self._watchdog.reason()

    async def _health_changed(self, serving: bool) -> None:
        if self._grpc is not None:
            await self._grpc.set_serving(serving)

    def describe(self) -> tuple[str, dict[str, str]]:
        """The start-up line and its parts as structured fields: listeners, database (password
        hidden), scoring processes, span retention, write-back, TLS and auth."""
        from toolscore.storage.plumbing.engine import redact

        s = self.settings
        scheme = "https" if s.tls else "http"
        listeners = []
        if s.grpc is not None:
            listeners.append(f"OTLP/gRPC on {s.grpc.host}:{self.grpc_port}")
        if s.http is not None:
            listeners.append(f"OTLP/HTTP on {scheme}://{s.http.host}:{self.http_port}")
        fields = {"listeners": ", ".join(listeners), "database": redact(s.db_url)}
        for part, default in SUMMARY_PARTS.items():
            fields[part] = self._summary.get(part, default)
        fields["tls"] = "on" if s.tls else "off"
        fields["auth"] = "on" if s.auth_token else "off"
        parts = [fields["listeners"], f"database {fields['database']}"]
        parts += [fields[part] for part in SUMMARY_PARTS]
        parts.append(f"TLS {fields['tls']}, auth {fields['auth']}")
        return f"toolscore serve: {'; '.join(parts)}", fields

    async def stop(self) -> None:
        """Graceful, bounded stop; safe to call on a partly started app."""
        loop = asyncio.get_running_loop()
        grace = self.settings.shutdown_grace_s
        deadline = loop.time() + grace + STOP_EXTRA_S
        if self._watchdog is not None:
            await self._watchdog.stop()
            self._watchdog = None
        writer = self._writer
        # shortly before the grace ends, requests still waiting for a commit get UNAVAILABLE
        shut_out = loop.call_later(grace * 0.8, writer.shut_out) if writer is not None else None
        stops = []
        if self._grpc is not None:
            stops.append(self._grpc.stop(grace))
        if self._http is not None:
            stops.append(self._http.stop())
        await asyncio.gather(*stops, return_exceptions=True)
        self._grpc = self._http = None
        if shut_out is not None:
            shut_out.cancel()
        if writer is not None:
            await self._bounded(writer.stop(), deadline, "the ingest writer")
            self._writer = None
        while self._components:
            component = self._components.pop()
            name = type(component).__name__
            await self._bounded(component.stop(), deadline, f"component {name}")
        if self._engine is not None:
            if not self.abandoned:  # a stuck call holds its connection: leave it to the exit
                self._engine.dispose()
            self._engine = None

    async def _bounded(self, stopping: Awaitable[None], deadline: float, what: str) -> None:
        """Await ``stopping`` until ``deadline`` (loop time); past it, record ``what`` as
        abandoned and go on (its threads stay blocked until the process exits)."""
        task = asyncio.ensure_future(stopping)
        timeout = max(0.1, deadline - asyncio.get_running_loop().time())
        done, _ = await asyncio.wait((task,), timeout=timeout)
        if not done:
            log.warning("toolscore serve: %s did not stop in time; abandoned", what)
            self.abandoned.append(what)
        elif task.exception() is not None:
            log.error("%s failed to stop", what, exc_info=task.exception())


def _deadlines(settings: Settings) -> Deadlines:
    return Deadlines(
        connect_s=settings.db_connect_timeout_s,
        statement_s=settings.db_statement_timeout_s,
        lock_s=settings.db_lock_timeout_s,
        idle_in_transaction_s=settings.db_idle_in_transaction_timeout_s,
        call_s=settings.db_call_deadline_s,
    )


def _load_scoring_config(settings: Settings) -> Any | None:
    if settings.config_path is None:
        return None
    try:
        from toolscore.scorer import load_config
    except ImportError:  # scorer without a config loader: the file was checked to exist
        return None
    try:
        return load_config(settings.config_path)
    except Exception as exc:
        raise ConfigFileError(f"{CONFIG.names()}: {settings.config_path}: {exc}") from exc


# Decoded telemetry is acyclic and freed by reference counting, yet every span allocates
# containers that count towards the cycle collector's generation-0 threshold (700): under load
# it ran about every request and cost ~3 us per span (benchmarks/bench_ingest.py). Start-up
# objects are frozen out of the scans and the collector runs ~30x less often; cyclic garbage
# is still collected, memory stays bounded by the thresholds.
GC_THRESHOLDS = (20_000, 20, 20)


def _tune_gc_for_ingest() -> None:
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


async def serve(settings: Settings, extensions: Sequence[ExtensionFactory] = ()) -> None:
    """Run until SIGINT or SIGTERM, then stop gracefully, within the shutdown budget."""
    app = App(settings, extensions)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal() -> None:
        if stop.is_set():  # a second signal: the operator will not wait
            exit_now("second stop signal")
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):  # not on every platform
            loop.add_signal_handler(sig, on_signal)
    exit_deadline = ExitDeadline()
    try:
        await app.start()
        _tune_gc_for_ingest()
        await stop.wait()
        log.info("toolscore serve: stopping (finishing in-flight requests)")
    finally:
        exit_deadline.arm(settings.shutdown_grace_s + STOP_EXTRA_S + HARD_EXIT_EXTRA_S)
        await app.stop()
    if app.abandoned:
        exit_now(f"stopped without waiting for {', '.join(app.abandoned)}")
    exit_deadline.disarm()
    log.info("toolscore serve: stopped")
