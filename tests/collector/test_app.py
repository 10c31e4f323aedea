"""The serve composition root: extension components and hooks, start-up errors."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest
from sqlalchemy import Connection, func, select

from toolscore.collector.app import App, StartupError
from toolscore.collector.components import AppContext, Extension
from toolscore.collector.ingest.writer import StoredBatch
from toolscore.collector.settings import Listen, Settings
from toolscore.storage.records import SpanRecord
from toolscore.storage.telemetry.spans import spans_table


def _settings(url: str, **kw: object) -> Settings:
    base = Settings(db_url=url, grpc=Listen("127.0.0.1", 0), http=Listen("127.0.0.1", 0))
    return dataclasses.replace(base, **kw)  # type: ignore[arg-type]


class Recorder:
    def __init__(self, name: str, log: list[str], ctx: AppContext) -> None:
        self.name, self.log, self.ctx = name, log, ctx

    async def start(self) -> None:
        # started after the database is migrated: the tables exist
        with self.ctx.engine.connect() as conn:
            conn.execute(select(func.count()).select_from(spans_table))
        self.log.append(f"start {self.name}")

    async def stop(self) -> None:
        self.log.append(f"stop {self.name}")

    def on_batch(self, conn: Connection, batch: StoredBatch) -> None:
        self.log.append(f"batch {self.name} {len(batch.spans)}")


def test_components_start_after_the_database_and_stop_in_reverse(sqlite_url: str) -> None:
    log: list[str] = []

    def ext(name: str):  # type: ignore[no-untyped-def]
        def factory(ctx: AppContext) -> Extension:
            rec = Recorder(name, log, ctx)
            return Extension(hooks=[rec], components=[rec])

        return factory

    async def main() -> None:
        app = App(_settings(sqlite_url), [ext("a"), ext("b")])
        await app.start()
        assert app.grpc_port and app.http_port
        span = SpanRecord("ab" * 16, "cd" * 8, None, "s", 1, 1, 2)
        assert app._writer is not None
        await app._writer.submit([span])
        await app.stop()

    asyncio.run(main())
    assert log == ["start a", "start b", "batch a 1", "batch b 1", "stop b", "stop a"]


def test_invalid_scoring_config_stops_start_up(sqlite_url: str, tmp_path: Path) -> None:
    bad = tmp_path / "scoring.yaml"
    bad.write_text("metrics: [this is not a mapping\n")

    async def main() -> None:
        app = App(_settings(sqlite_url, config_path=bad))
        await app.start()

    with pytest.raises(StartupError, match="--config"):
        asyncio.run(main())


def test_port_in_use_is_a_startup_error(sqlite_url: str) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]

        async def main() -> None:
            app = App(_settings(sqlite_url, grpc=None, http=Listen("127.0.0.1", port)))
            await app.start()

        with pytest.raises(StartupError, match="cannot listen"):
            asyncio.run(main())


def test_the_server_checkpoints_its_sqlite_log_itself_off_the_commit_path(
    sqlite_url: str,
) -> None:
    from toolscore.collector.pipeline.extension import pipeline_extension
    from toolscore.collector.pipeline.options import PipelineOptions
    from toolscore.collector.pipeline.worker import PipelineWorker

    found: dict[str, object] = {}

    async def main() -> None:
        options = PipelineOptions(separate_process=True, scoring_processes=1)
        app = App(_settings(sqlite_url), [pipeline_extension(options)])
        await app.start()
        with app.engine.connect() as conn:
            found["autocheckpoint"] = conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar()
            found["temp_store"] = conn.exec_driver_sql("PRAGMA temp_store").scalar()
        workers = [c for c in app._components if isinstance(c, PipelineWorker)]
        found["children"] = {w._process.autocheckpoint for w in workers}
        assert app._writer is not None
        spans = [SpanRecord(f"{i:032x}", "cd" * 8, None, "s", 1, 1, 2) for i in range(2000)]
        await app._writer.submit(spans)
        registry = app.metrics.registry
        for _ in range(50):  # one checkpoint a second
            await asyncio.sleep(0.1)
            if registry.get_sample_value("toolscore_sqlite_checkpointed_pages_total"):
                break
        found["pages"] = registry.get_sample_value("toolscore_sqlite_checkpointed_pages_total")
        await app.stop()

    asyncio.run(main())
    assert found["autocheckpoint"] == 0  # commits never copy the log into the file
    assert found["temp_store"] == 2  # statement journals in memory (storage/test_temp_files.py)
    assert found["children"] == {False}  # nor do the scoring processes'
    assert isinstance(found["pages"], float) and found["pages"] > 0
